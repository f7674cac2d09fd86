"""The race's selection (Intensifier), its plan and its gate: pure rules, no Ray, torch or files.

core/race_protocol.Race strings them into the whole race; race.py and bench/simulate.py both
drive that object, so the simulated studies that choose the RaceSpec defaults run these rules.

    policy = Intensifier(["baseline", "t1", "t2"], spec, seeds=[1, 2, ...], budget=24, worst=0.0)
    while not policy.done:
        for contender, seed in policy.next_runs():      # one batch: Ray runs it concurrently
            policy.record(contender, seed, value)       # value None = diverged or errored
    policy.winner, policy.survivors(), policy.trace

Intensification against the incumbent (SMAC3's intensifier, irace's F-race):

1. The incumbent starts as the first contender: the study's baseline when it has one (else
   the search's top config). The challengers are the search's top configs.
2. Paired seeds: every contender runs seeds[0], seeds[1], ... in that order, so each
   challenger is compared with the incumbent on the same seeds and the seed's luck
   (initialisation, prompt order, sampling) cancels in the differences.
3. Rounds: a round brings every contender still in the race to m seeds, as one batch;
   m = min_seeds first, then doubles, capped at max_seeds and by what the run budget can give
   every contender alike. Compute not spent on cut contenders buys more seeds for the rest.
4. After each round the incumbent is the contender with the best mean on the shared seeds (a
   challenger takes over only on the incumbent's own seeds, as in SMAC). Every other contender
   that the paired test finds worse than the incumbent at level `cut_level` is cut; no cut
   before `min_seeds` (>= 2) paired seeds.
5. The race ends when one contender is left, every one left has max_seeds seeds, or the budget
   cannot give each one more seed. The winner is the incumbent.

A diverged or errored run scores the metric's worst value (`worst`) and counts in n: leaving
it out would reward configs that sometimes do not train (survivorship).

Why an exact one-sided sign test on the paired differences. Outcomes are bimodal: a run learns
the ratio or collapses to 0 for good (the figures: docs/search-quality.md). A paired t test is
then driven by a single collapse (one difference of -0.6 among +0.05s) and assumes a normality
that 2-8 seeds cannot check; a paired bootstrap has too few distinct resamples at n <= 8 to
hold its level. The sign test counts only which config won each seed, so a collapse weighs one
loss, no more, and its level is exact at any n (a binomial tail; ties, e.g. both collapsed,
are dropped). Its price is power: p >= 1/2**n, so a cut at level 0.1 needs 4 of 4 seeds lost
(p = 0.0625), at 0.05 5 of 5. Cutting only saves compute for the survivors: the winner is
still the best mean, and the gate below decides whether it ships.

The gate (`gate`), after selection: the winner and the baseline train on further fresh seeds
(paired) and are scored on the test prompts at the final epoch. The winner is recommended
only if (a) the one-sided lower bound of the mean paired improvement over the baseline,
mean(d) - t(c, n-1)·sd(d)/sqrt(n) with d = winner - baseline per seed (baseline - winner for a
metric to minimise), is above 0, and (b) its collapse share on those seeds is at most
`max_collapse_share`. The level c is the look's: core/race_protocol.py spends the race's error
over every look it may take (first, second look, fallbacks), so the whole race holds its stated
level. A t bound, not the sign test: a sign test on 6 seeds needs 6 of 6 wins; the per-seed
values are printed beside the bound. The figures behind these choices are in
docs/search-quality.md (bench/simulate.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ratiotune.core.stats import describe, lower_bound, sign_test_p, wilson


class RaceSettings(Protocol):
    """What the policy and the plan read of a RaceSpec (core/study/sections.py, where each field is described);
    any object with these attributes will do (the simulator may pass a RaceSpec or its own)."""

    top_k: int  # challengers
    min_seeds: int  # paired seeds before any cut (>= 2)
    max_seeds: int  # most seeds per contender in the selection
    cut_level: float  # level of the one-sided paired sign test
    confirm_seeds: int  # paired seeds of the confirmation
    max_collapse_share: float  # the gate's bound on the winner's collapse share (passed to gate())
    max_share: float  # the race's share of the study's trial-epochs
    second_look_seeds: int  # paired seeds added when the gate's first look falls short (0: one look)
    fallbacks: int  # configs that take a winner's place when it is refused for its collapses
    confidence: float  # the whole race's one-sided confidence, spent over its looks (race_protocol.py)


@dataclass
class _Contender:
    name: str
    values: dict[int, float]  # seed -> value (a diverged run already scored as `worst`)
    diverged: set[int]
    alive: bool = True
    cut_in_round: int | None = None


# What the selection hands on. race/summary.json's "selection" is a SelectionSummary as plain JSON
# (core/race_protocol.as_json: dataclasses.asdict), so the field names and their order are the file's keys.


@dataclass(frozen=True)
class SelectionStanding:
    """One contender after a round (or at the end): its seeds, values, mean, and how it fares."""

    contender: str
    seeds: list[int]
    values: list[float]  # per seed, a diverged run scored as `worst`
    diverged: list[int]  # the seeds it diverged or errored on
    mean: float | None
    status: str  # incumbent, alive or cut
    # The paired sign test against the incumbent (Intensifier.paired); None for the incumbent itself,
    # whose row in summary.json has no such key.
    vs_incumbent: dict[str, Any] | None = None


@dataclass(frozen=True)
class Round:
    """One round of the selection: who was incumbent after it, who was cut, every standing."""

    round: int
    seeds: list[int]  # the seeds every contender left had after it
    runs: int  # runs spent so far
    incumbent: str
    incumbent_changed: bool
    cut: list[str]
    standings: list[SelectionStanding]


@dataclass(frozen=True)
class SelectionSummary:
    """The finished selection: the winner, survivors, runs spent, why it stopped, and every round."""

    winner: str
    survivors: list[str]
    runs: int
    budget: int
    stop_reason: str | None
    rounds: list[Round]
    final: list[SelectionStanding]  # every contender that ran, in the contenders' order


class Intensifier:
    """The race's selection. Contenders are names; the first is the incumbent to start with."""

    def __init__(
        self,
        contenders: list[str],
        settings: RaceSettings,
        seeds: list[int],
        *,
        budget: int,
        worst: float,
        mode: str = "max",
    ):
        if len(set(contenders)) != len(contenders) or not contenders:
            raise ValueError(f"contenders must be distinct names, at least one; got {contenders}")
        if settings.min_seeds < 2:
            raise ValueError(f"min_seeds must be >= 2 (no cut on one seed); got {settings.min_seeds}")
        if len(seeds) < settings.max_seeds:
            raise ValueError(f"need max_seeds ({settings.max_seeds}) seeds; got {len(seeds)}")
        if budget < selection_cost(len(contenders), settings):
            raise ValueError(
                f"budget {budget} runs cannot give {len(contenders)} contenders min_seeds ({settings.min_seeds}) "
                f"each ({selection_cost(len(contenders), settings)} runs): race fewer contenders (race.py plans this)"
            )
        self.settings = settings
        self.seeds = list(seeds)
        self.budget = budget
        self.worst = worst
        self.sign = 1 if mode == "max" else -1
        self._order = list(contenders)
        self._c = {name: _Contender(name, {}, set()) for name in contenders}
        self.incumbent = contenders[0]
        self.spent = 0
        self.trace: list[Round] = []
        self._pending: set[tuple[str, int]] = set()
        self._round_target: int | None = None
        # A single contender has nothing to race: it goes straight to the gate.
        self.done = len(contenders) == 1
        self._stop_reason = "one contender: nothing to race" if self.done else None

    # ----------------------------------------------------------------- the loop

    def next_runs(self) -> list[tuple[str, int]]:
        """The next batch of (contender, seed) runs; [] when the race is done or a batch is still out."""
        if self.done or self._pending:
            return []
        have, target = self._next_target()
        self._round_target = target
        self._pending = {(name, seed) for name in self.alive() for seed in self.seeds[have:target]}
        return [(name, seed) for seed in self.seeds[have:target] for name in self.alive()]

    def _next_target(self) -> tuple[int, int]:
        """(seeds every alive contender has, seeds the next round brings them to); equal when none can be added."""
        alive = self.alive()
        have = len(self._c[alive[0]].values)  # every alive contender has the same seeds
        target = self.settings.min_seeds if have == 0 else min(self.settings.max_seeds, 2 * have)
        # The budget gives every contender alike: fewer seeds this round rather than unpaired ones.
        affordable = have + (self.budget - self.spent) // len(alive)
        return have, max(have, min(target, affordable))

    def record(self, contender: str, seed: int, value: float | None) -> None:
        """One run's result: its value, or None when it diverged or errored (scored as `worst`, counted)."""
        if (contender, seed) not in self._pending:
            raise ValueError(f"({contender!r}, seed {seed}) was not asked for (pending: {sorted(self._pending)})")
        self._pending.discard((contender, seed))
        entry = self._c[contender]
        if value is None:
            entry.diverged.add(seed)
            value = self.worst
        entry.values[seed] = float(value)
        self.spent += 1
        if not self._pending:
            self._decide()

    # ----------------------------------------------------------------- decisions

    def alive(self) -> list[str]:
        return [name for name in self._order if self._c[name].alive]

    def mean(self, name: str) -> float | None:
        values = list(self._c[name].values.values())
        return sum(values) / len(values) if values else None

    def paired(self, challenger: str, incumbent: str) -> dict[str, Any]:
        """Wins, losses and ties of `challenger` against `incumbent` on their shared seeds; the sign test's p."""
        a, b = self._c[challenger].values, self._c[incumbent].values
        diffs = [self.sign * (a[s] - b[s]) for s in a if s in b]
        wins, losses = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
        return {
            "seeds": len(diffs),
            "wins": wins,
            "losses": losses,
            "ties": len(diffs) - wins - losses,
            "p_worse": sign_test_p(wins, losses),
        }

    def _decide(self) -> None:
        alive = self.alive()
        number = len(self.trace)
        # The incumbent: best mean on the shared seeds; on a tie the current one keeps it.
        best = max(alive, key=lambda name: (self.sign * self.mean(name), name == self.incumbent))
        previous, self.incumbent = self.incumbent, best
        cut = []
        for name in alive:
            if name == self.incumbent:
                continue
            test = self.paired(name, self.incumbent)
            if test["seeds"] >= self.settings.min_seeds and test["p_worse"] <= self.settings.cut_level:
                self._c[name].alive = False
                self._c[name].cut_in_round = number
                cut.append(name)
        self.trace.append(
            Round(
                round=number,
                seeds=self.seeds[: self._round_target],
                runs=self.spent,
                incumbent=self.incumbent,
                incumbent_changed=previous != self.incumbent,
                cut=cut,
                standings=[self.standing(name) for name in alive],
            )
        )
        if len(self.alive()) == 1:
            self._finish("one contender left")
            return
        have, target = self._next_target()
        if target <= have:
            self._finish(
                f"every contender left has max_seeds ({self.settings.max_seeds})"
                if have >= self.settings.max_seeds
                else "the run budget cannot give every contender left one more seed"
            )

    def standing(self, name: str) -> SelectionStanding:
        entry = self._c[name]
        seeds = sorted(entry.values)
        return SelectionStanding(
            contender=name,
            seeds=seeds,
            values=[entry.values[s] for s in seeds],
            diverged=sorted(entry.diverged),
            mean=self.mean(name),
            status="incumbent" if name == self.incumbent else ("cut" if not entry.alive else "alive"),
            vs_incumbent=None if name == self.incumbent else self.paired(name, self.incumbent),
        )

    def _finish(self, reason: str) -> None:
        self.done = True
        self._stop_reason = reason

    # ----------------------------------------------------------------- results

    @property
    def winner(self) -> str:
        if not self.done:
            raise RuntimeError("the race has not finished")
        return self.incumbent

    @property
    def stop_reason(self) -> str | None:
        return self._stop_reason

    def survivors(self) -> list[str]:
        """Contenders never cut, best mean first (the incumbent first): `retrain`'s top-k."""
        alive = self.alive()
        return sorted(alive, key=lambda n: (n != self.incumbent, -self.sign * (self.mean(n) or 0.0)))

    def summary(self) -> SelectionSummary:
        return SelectionSummary(
            winner=self.incumbent,
            survivors=self.survivors(),
            runs=self.spent,
            budget=self.budget,
            stop_reason=self._stop_reason,
            rounds=list(self.trace),
            final=[self.standing(name) for name in self._order if self._c[name].values],
        )


def selection_cost(contenders: int, settings: RaceSettings) -> int:
    """Runs the selection needs before its first possible cut (every contender on min_seeds seeds)."""
    return 0 if contenders <= 1 else contenders * settings.min_seeds


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class RacePlan:
    """What the race will train, fitted to race.max_share of the study's trial-epochs."""

    challengers: int  # the search's top configs that race (>= 1)
    select: bool  # run the selection; False: the search's top config goes straight to the gate
    budget: int  # selection runs at most
    confirm_seeds: int
    runs: int  # selection budget + first confirmation: what race.max_share bounds
    share: float  # those runs' share of (search + race) trial-epochs, at most
    fitted: str | None  # one line saying what was lowered to fit, else None
    ceiling: int = 0  # the most the race can train: runs + a second look + every fallback
    run_epochs: int = 0

    def line(self) -> str:
        """The plan in one line, its ceiling included (what a user budgets for)."""
        return (
            f"race plan: {self.challengers} challenger(s), selection up to {self.budget} runs, confirmation "
            f"{self.confirm_seeds} paired seeds; at most {self.ceiling} runs ({self.ceiling * self.run_epochs} "
            f"trial-epochs) with a second look and fallbacks"
        )


class PlanError(ValueError):
    """Numbers the user set explicitly that cannot fit race.max_share. The message names them."""


def plan(
    settings: RaceSettings,
    *,
    search_epochs: int,
    run_epochs: int,
    available: int,
    baseline: bool,
    explicit: frozenset[str] | set[str] = frozenset(),
) -> RacePlan:
    """Fit the race to `max_share` of the study's trial-epochs, the search counted as it really ran.

    settings: a RaceSpec; available: distinct challengers the search offers; explicit: the
    RaceSpec fields the user set (those are never lowered: if they cannot fit, PlanError).
    What is lowered, in order: top_k (down to 1), then the selection is skipped (the search's
    top config goes straight to the gate), then confirm_seeds (down to 2). If the smallest such
    race still does not fit and the user set none of these numbers, it runs anyway and the
    line says by how much it exceeds max_share: a small study should run, not be refused.
    """
    share = settings.max_share
    allowed = int(search_epochs * share / (1 - share) / run_epochs + 1e-9)  # race runs within the share
    k, select, confirm = max(1, min(settings.top_k, available)), True, settings.confirm_seeds
    pairs = 2 if baseline else 1

    def selection(k: int, select: bool) -> int:
        # A selection needs two challengers: one challenger beside the baseline has nothing to be
        # chosen from, and the confirmation compares it with the baseline on fresh seeds anyway.
        contenders = k + (1 if baseline else 0)
        return contenders * settings.min_seeds if select and k > 1 else 0

    def need(k: int, select: bool, confirm: int) -> int:
        return selection(k, select) + confirm * pairs

    while need(k, select, confirm) > allowed and k > 1 and "top_k" not in explicit:
        k -= 1
    if need(k, select, confirm) > allowed and select and ("top_k" not in explicit or k == 1) and "min_seeds" not in explicit:
        select = False
    while need(k, select, confirm) > allowed and confirm > 2 and "confirm_seeds" not in explicit:
        confirm -= 1
    set_here = [f for f in ("top_k", "min_seeds", "confirm_seeds", "max_share") if f in explicit]
    total = need(k, select, confirm)
    over = total > allowed
    if over and set_here:
        values = ", ".join(f"race.{f} {getattr(settings, f):g}" for f in set_here)
        raise PlanError(
            f"race: {values} (set in the study) cannot fit: the smallest race they allow trains {total} runs "
            f"({total * run_epochs} trial-epochs), {total * run_epochs / (total * run_epochs + search_epochs):.0%} of the "
            f"study's, above race.max_share {share:g} (the search spends at most {search_epochs} trial-epochs); "
            f"raise search.num_samples, or lower or unset {', '.join('race.' + f for f in set_here)}"
        )
    contenders = k + (1 if baseline else 0)
    select = select and k > 1
    budget = 0
    if select:
        budget = min(max(allowed - confirm * pairs, selection(k, select)), contenders * settings.max_seeds)
    runs = budget + confirm * pairs
    # A second look adds seeds for the winner and the baseline; each fallback trains one config on them all.
    ceiling = (
        runs
        + settings.second_look_seeds * pairs
        + (settings.fallbacks * (confirm + settings.second_look_seeds) if baseline else 0)
    )
    race_share = runs * run_epochs / (runs * run_epochs + search_epochs) if search_epochs or runs else 0.0
    changes = []
    if k < min(settings.top_k, available):
        changes.append(f"top_k {settings.top_k} -> {k}")
    if not select and selection(k, True) > 0:
        changes.append("no selection (the search's top config goes straight to the confirmation)")
    if confirm < settings.confirm_seeds:
        changes.append(f"confirm_seeds {settings.confirm_seeds} -> {confirm}")
    fitted = None
    if changes or over:
        fitted = (
            f"race fitted to the budget: {', '.join(changes) or 'the smallest race'}: {runs} runs, {race_share:.0%} of the "
            f"study's trial-epochs (race.max_share {share:g}; the search spent {search_epochs})"
            + ("; above max_share: a study this small cannot afford less" if over else "")
        )
    return RacePlan(k, select, budget, confirm, runs, race_share, fitted, ceiling, run_epochs)


# --------------------------------------------------------------------------- the gate


@dataclass(frozen=True)
class Collapse:
    """The winner's collapses on the gated seeds."""

    collapsed: int
    n: int
    share: float | None  # None without seeds
    wilson95: list[float] | None  # stats.wilson's 95% interval of the share


@dataclass(frozen=True)
class Gate:
    """The gate's decision on one look, with every figure it used (summary.json's "gate", in this order)."""

    rule: str  # the rule in words, with its level
    confidence: float  # this look's one-sided confidence
    collapse: Collapse
    margin: dict[str, Any] | None  # stats.describe of the paired differences; None without a baseline
    margin_lower: float | None  # their one-sided `confidence` lower bound; None without a baseline or below 2 seeds
    second_look: bool  # fell short, but ahead on the mean: more paired seeds may change the verdict
    recommend: bool
    reason: str
    # Which look this was, of how many the race may take, and the race's own confidence:
    # core/race_protocol.Race sets them (dataclasses.replace); gate() alone leaves them unset.
    look: int | None = None
    max_looks: int | None = None
    race_confidence: float | None = None


def gate(
    winner: list[float | None],
    baseline: list[float | None] | None,
    *,
    collapsed: list[bool],
    worst: float,
    max_collapse_share: float,
    mode: str = "max",
    winner_is_baseline: bool = False,
    confidence: float,
) -> Gate:
    """Recommend the winner only if it beats the baseline on paired seeds and rarely collapses.

    winner[i] and baseline[i] are the same seed's final-epoch test values (None = diverged or
    errored: scored `worst`, counted in n). collapsed[i]: the winner's run i collapsed.
    Rule: the one-sided `confidence` lower bound of mean(d) > 0 and collapse share <= max_collapse_share
    (race_protocol.py sets `confidence` per look, so that the whole race holds its stated level).
    `second_look` in the result: it fell short but the winner is ahead of the baseline on the
    mean, so more paired seeds may change the verdict (the race then runs them and asks again).
    """
    w = [worst if v is None else v for v in winner]
    n_collapsed = sum(collapsed)
    share = n_collapsed / len(collapsed) if collapsed else None
    level = f"{confidence:.1%}".replace(".0%", "%")
    rule = (
        f"recommend if the one-sided {level} lower bound of the mean paired improvement over the baseline "
        f"is > 0 and the collapse share is <= {max_collapse_share:g}"
    )
    collapse = Collapse(n_collapsed, len(collapsed), share, wilson(n_collapsed, len(collapsed)))
    collapse_ok = share is not None and share <= max_collapse_share
    if baseline is None:
        reason = "no baseline to compare with; " + (
            "collapse share within bound" if collapse_ok else f"collapse share {share:.0%} above {max_collapse_share:g}"
        )
        return Gate(
            rule,
            confidence,
            collapse,
            margin=None,
            margin_lower=None,
            second_look=False,
            recommend=collapse_ok and not winner_is_baseline,
            reason=reason,
        )
    b = [worst if v is None else v for v in baseline]
    sign = 1 if mode == "max" else -1
    diffs = [sign * (x - y) for x, y in zip(w, b)]
    margin = describe(diffs)
    bound = lower_bound(diffs, confidence)
    if winner_is_baseline:
        # The figures of the best challenger beside it are shown; the selection already said no.
        reason = "the race kept the baseline: no challenger beat it on paired seeds"
        return Gate(rule, confidence, collapse, margin, margin_lower=bound, second_look=False, recommend=False, reason=reason)
    beats = bound is not None and bound > 0
    recommend = beats and collapse_ok
    reasons = []
    if not beats:
        reasons.append(
            f"the margin over the baseline is not shown: its {level} lower bound is "
            + ("n/a (fewer than 2 seeds)" if bound is None else f"{bound:.3f} <= 0")
        )
    if not collapse_ok:
        reasons.append(f"it collapsed on {n_collapsed} of {len(collapsed)} seeds (share above {max_collapse_share:g})")
    return Gate(
        rule,
        confidence,
        collapse,
        margin=margin,
        margin_lower=bound,
        second_look=not recommend and bool(diffs) and sum(diffs) > 0,
        recommend=recommend,
        reason="it beats the baseline on paired fresh seeds" if recommend else "; ".join(reasons),
    )
