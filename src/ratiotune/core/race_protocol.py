"""The whole race as one ask/tell object: selection, confirmation, second look, fallbacks, gate, verdict.

Pure: no Ray, no torch, no files. search/race.py trains what it asks for with Ray Tune and
tells it each run's figure; bench/simulate.py looks the same requests up in a table of runs.
Both drive this object, so there is one copy of every rule (SMAC3's intensifier has this shape:
it asks for (config, seed) runs, is told their figures, and ends in a decision).

    race = Race(["baseline", "t3", "t7"], runners_up=["t1"], settings=spec, plan=plan,
                baseline="baseline", seed=lambda j: 100 + j, worst=0.0)
    while (stage := race.ask()) is not None:
        for request in stage.requests:
            race.tell(request, value, collapsed=...)     # value None: diverged or errored
    race.result()                                        # a RaceResult; as_json(it) for race/summary.json

The stages, in order (the names are the round folders under EXPERIMENT/race/):
1. `round-0`, `round-1`, ...: the selection (intensify.Intensifier) on seeds seed(0..max_seeds-1):
   the search's objective at the final epoch. Skipped when the plan has no room for it.
2. `confirm`: the winner and the baseline on `confirm_seeds` further paired seeds, each scored at
   its final epoch on the test prompts. When the selection kept the baseline, the best challenger
   runs beside it so its figures can be shown; nothing is recommended then.
3. `confirm-2`: the second look, when the first fell short but the winner leads on the mean:
   `second_look_seeds` more paired seeds, and the gate decides on all of them.
4. `fallback-1`, ...: a winner refused for its collapses hands over to the search's next config
   (one that did not race), trained on the same paired seeds, the baseline's runs reused.

Every look (the first, the second, each fallback) is another chance to confirm by luck, so the
race's stated error is spent over all the looks it may take (Bonferroni): with `confidence`
0.90 and up to 4 looks each look uses a one-sided 97.5% bound, and the chance that the whole
race confirms a challenger no better than the baseline stays at most 10%.
bench/simulate.py --error-rates measures it on the table (docs/search-quality.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from ratiotune.core.intensify import Gate, Intensifier, RacePlan, RaceSettings, SelectionSummary, gate


@dataclass(frozen=True)
class Request:
    """One run the race needs: a contender on a seed, scored on the test prompts or not."""

    stage: str  # round-0, round-1, ..., confirm, confirm-2, fallback-1, ...
    contender: str
    seed: int
    test: bool  # confirmation (final-epoch test figure) rather than selection (search objective)


@dataclass(frozen=True)
class Stage:
    name: str
    requests: list[Request]


@dataclass
class _Confirmation:
    """The per-seed final test figures of one confirmed contender (None = diverged, scored `worst`)."""

    values: dict[int, float | None] = field(default_factory=dict)
    collapsed: dict[int, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class Standing:
    """A confirmed contender's final test figures on the confirmation seeds (None = diverged, scored `worst`)."""

    contender: str
    seeds: list[int]
    values: list[float | None]
    collapsed: list[bool]


@dataclass(frozen=True)
class PassedOver(Standing):
    """A winner refused for its collapses, on the seeds it was gated on, and the gate's reason."""

    reason: str


@dataclass(frozen=True)
class RaceResult:
    """What the race decided and every figure it used. core/race_summary.py builds race/summary.json
    from it, through as_json: the field names are the file's keys."""

    selection: SelectionSummary
    selection_winner: str
    kept_baseline: bool
    shown: str  # the challenger gated (or, beside a kept baseline, only shown)
    confirm_seeds: list[int]
    confirmed: dict[str, Standing]  # every contender confirmed, by name
    gate: Gate  # the last look's decision
    passed_over: list[PassedOver]  # in the order they were refused
    recommend: bool
    recommended: str | None  # shown if recommended, else the baseline (None: no baseline)
    which: str | None  # "winner", "baseline", or None (nothing passed, no baseline)
    runs: int


def as_json(value: Any) -> Any:
    """A typed result (RaceResult, Gate, SelectionSummary, ...) as plain JSON values: dataclasses.asdict,
    except that an incumbent's selection standing has no vs_incumbent key (race/summary.json never had one)."""
    return dataclasses.asdict(value, dict_factory=_without_absent_vs_incumbent)


def _without_absent_vs_incumbent(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {k: v for k, v in pairs if not (k == "vs_incumbent" and v is None)}


def looks(settings: RaceSettings) -> int:
    """The most gate decisions a race may take: the first, a second look, each fallback."""
    return 1 + (1 if settings.second_look_seeds > 0 else 0) + settings.fallbacks


def look_confidence(settings: RaceSettings) -> float:
    """Each look's one-sided confidence: the race's error 1 - confidence split evenly over its looks."""
    return 1 - (1 - settings.confidence) / looks(settings)


class Race:
    """The race's protocol. Contenders are names; `baseline` (if any) must be the first of them."""

    def __init__(
        self,
        contenders: list[str],
        *,
        runners_up: list[str],
        settings: RaceSettings,
        plan: RacePlan,
        baseline: str | None,
        seed: Callable[[int], int],
        worst: float,
        mode: str = "max",
    ):
        if baseline is not None and contenders[0] != baseline:
            raise ValueError(f"the baseline ({baseline!r}) must be the first contender; got {contenders}")
        if not [c for c in contenders if c != baseline]:
            raise ValueError("a race needs at least one challenger beside the baseline")
        self.settings, self.plan, self.baseline = settings, plan, baseline
        self.seed, self.worst, self.mode = seed, worst, mode
        self.sign = 1 if mode == "max" else -1
        self.contenders = list(contenders)
        self.runners_up = [r for r in runners_up if r not in contenders]
        self.look_confidence = look_confidence(settings)
        challengers = [c for c in contenders if c != baseline]
        selection_seeds = [seed(j) for j in range(settings.max_seeds)]
        if plan.select and len(contenders) > 1:
            self.selection = Intensifier(contenders, settings, selection_seeds, budget=plan.budget, worst=worst, mode=mode)
        else:  # no room for a selection: the search's top config goes straight to the confirmation
            self.selection = Intensifier([challengers[0]], settings, selection_seeds, budget=0, worst=worst, mode=mode)
        self._rounds = 0
        self._pending: set[Request] = set()
        self._stage: Stage | None = None
        self._confirmed: dict[str, _Confirmation] = {}
        self.confirm_seeds: list[int] = []
        self.shown: str | None = None  # the challenger whose confirmation is gated (or shown beside a kept baseline)
        self.kept_baseline = False
        self.decision: Gate | None = None
        self.passed_over: list[PassedOver] = []  # winners refused for their collapses, in order
        self.looks_taken = 0
        self.runs = 0
        self.done = False

    # ----------------------------------------------------------------- ask / tell

    def ask(self) -> Stage | None:
        """The next stage's runs (one batch: they may run at once), or None when the race is over.
        Asking again before every run of a stage was told returns the same stage."""
        if self._pending:
            return self._stage
        if self.done:
            return None
        self._stage = self._next_stage()
        if self._stage is None:
            self.done = True
            return None
        self._pending = set(self._stage.requests)
        return self._stage

    def tell(self, request: Request, value: float | None, collapsed: bool = False) -> None:
        """One run's figure: the objective (selection) or the final test figure (confirmation);
        None when it diverged or errored (scored as `worst`, counted, and a collapse)."""
        if request not in self._pending:
            raise ValueError(f"{request} was not asked for")
        self._pending.discard(request)
        self.runs += 1
        if not request.test:
            self.selection.record(request.contender, request.seed, value)
            return
        entry = self._confirmed.setdefault(request.contender, _Confirmation())
        entry.values[request.seed] = value
        entry.collapsed[request.seed] = collapsed or value is None
        if not self._pending:
            self._decide()

    # ----------------------------------------------------------------- the stages

    def _next_stage(self) -> Stage | None:
        batch = self.selection.next_runs()
        if batch:
            name = f"round-{self._rounds}"
            self._rounds += 1
            return Stage(name, [Request(name, c, s, False) for c, s in batch])
        if self.shown is None:  # the selection is over: confirm its winner beside the baseline
            return self._confirmation_stage()
        if self.decision is None or self.decision.recommend or self.kept_baseline:
            return None
        if self.decision.second_look and self.looks_taken == 1 and self.settings.second_look_seeds > 0:
            start = self.settings.max_seeds + len(self.confirm_seeds)
            more = [self.seed(start + j) for j in range(self.settings.second_look_seeds)]
            self.confirm_seeds += more
            return Stage("confirm-2", [Request("confirm-2", c, s, True) for c in self._gated() for s in more])
        if self._refused_for_collapse() and self.baseline is not None and len(self.passed_over) < self.settings.fallbacks:
            candidates = [r for r in self.runners_up if r not in self._confirmed]
            if candidates:
                self.passed_over.append(PassedOver(**vars(self._standing(self.shown)), reason=self.decision.reason))
                self.shown = candidates[0]
                name = f"fallback-{len(self.passed_over)}"
                return Stage(name, [Request(name, self.shown, s, True) for s in self.confirm_seeds])
        return None

    def _confirmation_stage(self) -> Stage:
        winner = self.selection.winner
        self.kept_baseline = winner == self.baseline
        if self.kept_baseline:
            # The best challenger that raced runs beside the baseline, so its figures can be shown.
            raced = [r for r in self.selection.summary().final if r.contender != self.baseline]
            self.shown = max(raced, key=lambda r: self.sign * r.mean).contender
        else:
            self.shown = winner
        self.confirm_seeds = [self.seed(self.settings.max_seeds + j) for j in range(self.plan.confirm_seeds)]
        return Stage("confirm", [Request("confirm", c, s, True) for c in self._gated() for s in self.confirm_seeds])

    def _gated(self) -> list[str]:
        return [self.shown] + ([self.baseline] if self.baseline is not None else [])

    # ----------------------------------------------------------------- the gate

    def _decide(self) -> None:
        """The gate on every confirmation seed so far (one look)."""
        self.looks_taken += 1
        winner = self._confirmed[self.shown]
        seeds = self.confirm_seeds
        base = self._confirmed.get(self.baseline) if self.baseline is not None else None
        decision = gate(
            [winner.values[s] for s in seeds],
            None if base is None else [self.worst if base.values[s] is None else base.values[s] for s in seeds],
            collapsed=[winner.collapsed[s] for s in seeds],
            worst=self.worst,
            max_collapse_share=self.settings.max_collapse_share,
            mode=self.mode,
            winner_is_baseline=self.kept_baseline,
            confidence=self.look_confidence,
        )
        self.decision = dataclasses.replace(
            decision, look=self.looks_taken, max_looks=looks(self.settings), race_confidence=self.settings.confidence
        )

    def _refused_for_collapse(self) -> bool:
        share = self.decision.collapse.share
        return not self.decision.recommend and share is not None and share > self.settings.max_collapse_share

    # ----------------------------------------------------------------- the result

    def _standing(self, name: str) -> Standing:
        entry = self._confirmed[name]
        return Standing(
            contender=name,
            seeds=list(self.confirm_seeds),
            values=[entry.values[s] for s in self.confirm_seeds],
            collapsed=[entry.collapsed[s] for s in self.confirm_seeds],
        )

    def result(self) -> RaceResult:
        """What the race decided: the verdict and every figure it used."""
        if not self.done:
            raise RuntimeError("the race has not finished: ask() until it returns None")
        recommend = self.decision.recommend
        return RaceResult(
            selection=self.selection.summary(),
            selection_winner=self.selection.winner,
            kept_baseline=self.kept_baseline,
            shown=self.shown,
            confirm_seeds=list(self.confirm_seeds),
            confirmed={name: self._standing(name) for name in self._confirmed},
            gate=self.decision,
            passed_over=list(self.passed_over),
            recommend=recommend,
            recommended=self.shown if recommend else self.baseline,
            which="winner" if recommend else ("baseline" if self.baseline is not None else None),
            runs=self.runs,
        )


def pick_contenders(ranked: list[tuple[str, dict[str, Any]]], baseline: dict[str, Any] | None, count: int) -> list[str]:
    """The names of the first `count` distinct configs of a ranking (name, searched values), best first.
    The baseline's config is left out: the sampler may draw it too, and it races once, as itself."""
    seen = [baseline] if baseline is not None else []
    picked = []
    for name, config in ranked:
        if config in seen:
            continue
        seen.append(config)
        picked.append(name)
        if len(picked) == count:
            break
    return picked
