"""Whether the study races its search's winners, and the race fitted to its budget (intensify.plan)."""

from __future__ import annotations

from ratiotune.core.study.search_section import SearchSpec
from ratiotune.core.study.searched import baseline_values
from ratiotune.core.study.sections import RaceSpec, TrainSpec


def race_skip_reason(race: RaceSpec, search: SearchSpec) -> str | None:
    """Why this study runs no confirmation race, or None when it runs one."""
    if not race.enabled:
        return "race.enabled: false"
    if not search.space:
        return "nothing is searched (search.space is empty)"
    if search.scheduler.type == "pbt":
        return "a PBT winner is a schedule of values, not one config that can be re-run from scratch"
    return None


def plan_race(
    race: RaceSpec,
    search: SearchSpec,
    train: TrainSpec,
    search_epochs: int | None = None,
    available: int | None = None,
    explicit: frozenset[str] | None = None,
):
    """The race fitted to race.max_share (intensify.plan); by default the search counted at its most
    (num_samples x epochs), as at load time. Raises intensify.PlanError for explicit numbers that cannot fit."""
    from ratiotune.core.intensify import plan

    return plan(
        race,
        search_epochs=search.num_samples * train.epochs if search_epochs is None else search_epochs,
        run_epochs=train.epochs,
        available=min(race.top_k, search.num_samples) if available is None else available,
        baseline=baseline_values(search, train) is not None,
        explicit=frozenset(race.model_fields_set) if explicit is None else explicit,
    )
