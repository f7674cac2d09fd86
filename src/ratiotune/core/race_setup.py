"""The race's inputs, built once: search/race.py and bench/simulate.py both start a race here.

From the search's clean trials, ranked best first by their objective pooled over neighbouring
configs (core/pooled.py: one seed's figure alone ranks badly), this picks the challengers (distinct configs,
the baseline's left out), the runners-up a fallback may confirm, the race fitted to what the
search spent, and the protocol object with the baseline first and the metric's worst value. The
two callers differ only in how they train a run (Ray Tune, or a draw from a table) and in the seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ratiotune.core.intensify import RacePlan
from ratiotune.core.pooled import pooled_values
from ratiotune.core.study import LR_POINTS
from ratiotune.core.race_protocol import Race, pick_contenders
from ratiotune.core.race_summary import BASELINE, searched_values
from ratiotune.core.study import Study


@dataclass(frozen=True)
class RaceSetup:
    """Who races and how: names only; the callers keep the configs behind them."""

    plan: RacePlan
    challengers: tuple[str, ...]
    runners_up: tuple[str, ...]  # the search's next configs, confirmed in a refused winner's place
    baseline: str | None  # BASELINE when the study names a baseline, else None

    @property
    def entrants(self) -> list[str]:
        """The contenders that race from the start: the baseline first, then the challengers."""
        return ([self.baseline] if self.baseline is not None else []) + list(self.challengers)


def rank_trials(study: Study, trials: list[tuple[str, dict[str, Any], float]]) -> list[tuple[str, dict[str, Any]]]:
    """The clean trials (name, config, objective) best first by their pooled objective (ties: their own)."""
    steps = (study.search.lr_points or LR_POINTS) - 1  # the staged sampler's grid step, whatever the sampler
    pooled = pooled_values(study.search.space, [c for _, c, _ in trials], [v for _, _, v in trials], steps=steps)
    sign = 1 if study.search.mode == "max" else -1
    order = sorted(range(len(trials)), key=lambda i: (-sign * pooled[i], -sign * trials[i][2]))
    return [(trials[i][0], trials[i][1]) for i in order]


def race_setup(
    study: Study,
    trials: list[tuple[str, dict[str, Any], float]],
    *,
    search_epochs: int,
    explicit: frozenset[str] = frozenset(),
) -> RaceSetup:
    """The race for a search whose clean trials are `trials` (name, config, objective), in any order.

    Raises intensify.PlanError where the study's race cannot be fitted to `search_epochs`.
    """
    ranked = rank_trials(study, trials)
    baseline_values = study.baseline()
    baseline = searched_values(study, baseline_values) if baseline_values is not None else None
    searched = [(name, searched_values(study, config)) for name, config in ranked]
    available = pick_contenders(searched, baseline, study.race.top_k)
    plan = study.race_plan(search_epochs=search_epochs, available=len(available), explicit=explicit)
    challengers = available[: plan.challengers]
    runners_up = [n for n in pick_contenders(searched, baseline, len(challengers) + study.race.fallbacks) if n not in challengers]
    return RaceSetup(plan, tuple(challengers), tuple(runners_up), BASELINE if baseline_values is not None else None)


def start_race(study: Study, setup: RaceSetup, *, worst: float, seed: Callable[[int], int]) -> Race:
    """The protocol object for `setup`: every rule of the race lives in core/race_protocol.Race."""
    return Race(
        setup.entrants,
        runners_up=list(setup.runners_up),
        settings=study.race,
        plan=setup.plan,
        baseline=setup.baseline,
        seed=seed,
        worst=worst,
        mode=study.search.mode,
    )
