"""Replay whole studies against the tabulated smoke benchmark: the real sampler, ASHA, objective, race and gate, no training.

    python bench/simulate.py --studies 600            # the compared designs, 600 studies each (~6 min, one core)
    python bench/simulate.py --studies 20 --designs shipped,random
    python bench/simulate.py --table bench/table/smoke_table.csv --out docs/bench/simulate

bench/smoke_table.py trained every config of a grid over smoke's space on many seeds and kept
each run's eval curve (the search's signal) and its final test figure (what `best` reports).
A simulated study runs the pipeline's own pieces against that table instead of training:

- the sampler: `search.make_sampler(study)` asked and told through Optuna's ask/tell, with the
  distributions Ray's OptunaSearch builds from `search.param_space(study)`, the baseline enqueued
  first (OptunaSearch's points_to_evaluate);
- the scheduler: `search.make_scheduler(study)` itself (Ray's AsyncHyperBandScheduler; it needs
  only a trial id, so it runs outside a Tune run unchanged), fed `search/objective` every epoch;
- the objective: `objective.trailing_mean` over the study's window; a diverged epoch reports NaN
  and ends the trial, as the trainable does;
- max_concurrent_trials: an event loop in trial-epochs; a trial is asked for when a slot frees;
- the race and the gate (race_policy below).

A trial at config c with seed s reads the row of the nearest grid point (log learning rate) for
that seed, epoch by epoch. Each simulated study k seeds its sampler with k (train.seed = k) and
draws its own permutation of the table's seeds: the search trials train on the first one (every
real search trial trains with train.seed), the race's fresh seeds are the next ones.

A config's true value is the table's mean over all its seeds of the final test figure, a
collapsed or diverged run counted as 0; a study is judged by the true value of what it ships.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import csv
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "studies" / "smoke.yaml"
TABLE = REPO / "bench" / "table" / "smoke_table.csv"
OUT = REPO / "docs" / "bench" / "simulate"
PLOT = REPO / "docs" / "img" / "simulate_designs.png"
# The smoke study's total compute as issue 24 measured it before this change: 80 trial-epochs of
# search (8 trials, ASHA) + 168 of race (14 runs x 12 epochs). Designs are compared at this budget.
SMOKE_BUDGET = 248


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Run:
    """One training run of the table: a config on one seed."""

    curve: tuple[float, ...]  # eval/in_range_fraction per epoch, up to (not including) divergence
    diverged_epoch: int | None  # the epoch that reported NaN, or None
    test: float  # final-epoch builtin:test in-range fraction; 0 when collapsed or diverged
    collapsed: bool


Key = tuple[float, int, int]  # (learning_rate, num_generations, max_new_tokens) of a grid point


class Table:
    """The grid's runs by (grid point, seed); seeds are the ones every grid point has (a table still
    being built is used only where it is complete)."""

    def __init__(self, runs: dict[Key, dict[int, Run]]):
        self.runs = runs
        self.keys = sorted(runs)
        self.learning_rates = sorted({k[0] for k in self.keys})
        self.seeds = sorted(set.intersection(*(set(by_seed) for by_seed in runs.values())))
        if not self.seeds:
            raise ValueError("the table has no seed that every grid point was trained on")
        self.epochs = max(len(r.curve) + (r.diverged_epoch is not None) for by in runs.values() for r in by.values())
        self._true = {k: statistics.fmean(runs[k][s].test for s in self.seeds) for k in self.keys}
        self.best_value = max(self._true.values())
        self.best_key = max(self._true, key=self._true.get)

    def point(self, config: dict[str, Any]) -> Key:
        """The grid point nearest to a config: learning rate by log distance, the choices exactly."""
        lr = min(self.learning_rates, key=lambda v: abs(math.log(v) - math.log(config["learning_rate"])))
        key = (lr, int(config["num_generations"]), int(config["max_new_tokens"]))
        if key not in self.runs:
            raise KeyError(f"config {config} maps to {key}, which the table does not hold")
        return key

    def run(self, key: Key, seed: int) -> Run:
        return self.runs[key][seed]

    def true_value(self, key: Key) -> float:
        return self._true[key]


def load_table(path: Path = TABLE) -> Table:
    """Read bench/smoke_table.py's CSV (columns learning_rate, num_generations, max_new_tokens, seed,
    e1..eN, test_in_range, collapsed, diverged_epoch, seconds)."""
    runs: dict[Key, dict[int, Run]] = {}
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            epochs = sorted((k for k in row if k[:1] == "e" and k[1:].isdigit()), key=lambda k: int(k[1:]))
            curve = tuple(float(row[k]) for k in epochs if row[k] != "")
            diverged = int(row["diverged_epoch"]) if row["diverged_epoch"] else None
            # Collapsed as race.py counts it: diverged, silent (every test reward 0), or the final test
            # figure at the worst end of its range (in-range fraction 0), what a user sees as "0.000".
            test = 0.0 if row["collapsed"] == "1" or row["test_in_range"] == "" else float(row["test_in_range"])
            collapsed = row["collapsed"] == "1" or test == 0.0
            key = (float(row["learning_rate"]), int(row["num_generations"]), int(row["max_new_tokens"]))
            runs.setdefault(key, {})[int(row["seed"])] = Run(curve, diverged, test, collapsed)
    return Table(runs)


# --------------------------------------------------------------------------- one search


@dataclass
class SimTrial:
    number: int
    config: dict[str, Any]
    key: Key
    seed: int
    optuna_trial: Any
    history: list[float] = field(default_factory=list)
    epoch: int = 0
    objective: float = float("nan")
    best_epoch_value: float = float("nan")  # today's practice ranks by the best single epoch
    diverged: bool = False
    done: bool = False

    @property
    def ray_trial(self) -> SimpleNamespace:
        return SimpleNamespace(trial_id=f"trial_{self.number:05d}")  # all ASHA reads of a trial


def simulate_search(study, table: Table, trial_seed) -> list[SimTrial]:
    """One search, as build_tuner wires it: the study's sampler, scheduler, objective and concurrency.

    trial_seed(number) is the table seed trial `number` trains on. Time advances in epochs: every
    running trial reports once per step (in trial order), then freed slots are filled.
    """
    import optuna
    from ray.tune.schedulers import TrialScheduler
    from ray.tune.search.optuna import OptunaSearch

    from ratiotune.core.objective import OBJECTIVE, trailing_mean
    from ratiotune.search.launch import make_sampler, make_scheduler, param_space

    search, epochs = study.search, study.train.epochs
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    ot = optuna.create_study(sampler=make_sampler(study), direction="maximize" if search.mode == "max" else "minimize")
    baseline = study.baseline()
    if baseline:
        ot.enqueue_trial(baseline)  # OptunaSearch's points_to_evaluate
    distributions = OptunaSearch.convert_search_space(param_space(study))
    scheduler = make_scheduler(study)
    scheduler.set_search_properties(OBJECTIVE, search.mode)  # what TuneConfig(metric=, mode=) does
    trials: list[SimTrial] = []
    running: list[SimTrial] = []
    while True:
        while len(running) < search.max_concurrent_trials and len(trials) < search.num_samples:
            ot_trial = ot.ask(fixed_distributions=distributions)
            config = study.hyperparameters(ot_trial.params)
            trial = SimTrial(len(trials), config, table.point(config), trial_seed(len(trials)), ot_trial)
            scheduler.on_trial_add(None, trial.ray_trial)
            trials.append(trial)
            running.append(trial)
        if not running:
            return trials
        for trial in running:
            run = table.run(trial.key, trial.seed)
            trial.epoch += 1
            if run.diverged_epoch == trial.epoch:
                trial.diverged, trial.objective, stop = True, float("nan"), True
            else:
                trial.history.append(run.curve[trial.epoch - 1])
                trial.objective = trailing_mean(trial.history, search.objective_window)
                trial.best_epoch_value = max(trial.history)
            result = {"training_iteration": trial.epoch, OBJECTIVE: trial.objective}
            action = scheduler.on_trial_result(None, trial.ray_trial, result)
            if trial.diverged or action == TrialScheduler.STOP or trial.epoch >= epochs:
                scheduler.on_trial_complete(None, trial.ray_trial, result)
                try:
                    ot.tell(trial.optuna_trial, trial.objective)  # NaN: Optuna records a failed trial
                except (ValueError, RuntimeError):
                    pass
                trial.done = True
        running = [t for t in running if not t.done]


# --------------------------------------------------------------------------- the race


def run_race(study, ranked: list[SimTrial], baseline: dict | None, table: Table, fresh_seed, search_epochs: int,
             rule: str | None = None, extend: int | None = None, fallback: int | None = None) -> dict[str, Any]:
    """The race as race.py runs it, on the table: intensify.plan fits it to race.max_share of the
    study's trial-epochs (the search counted as it really ran), intensify.Intensifier picks the
    winner against the baseline on paired fresh seeds (the objective at the final epoch, a diverged
    run scored 0 and counted), and intensify.gate decides on further paired seeds (final-epoch test
    figure) whether the winner ships or the baseline stands.

    ranked: the search's clean trials, best objective first; baseline: its four values (None: none).
    fresh_seed(j): the j-th fresh seed. rule: a candidate gate (gate_rule) instead of intensify.gate;
    extend: paired seeds added for a second look when the first refused a winner ahead on the mean
    (None: race.second_look_seeds, as race.py does). fallback: when the gate refuses a winner for the
    collapse bound, up to this many next-best search configs are confirmed on the same paired seeds
    (the baseline's runs reused) and gated in turn (None: race.fallbacks, as race.py does).
    """
    from ratiotune.core.intensify import Intensifier, PlanError, gate
    from ratiotune.core.objective import trailing_mean

    epochs, window, spec = study.train.epochs, study.search.objective_window, study.race
    baseline_key = table.point(baseline) if baseline else None
    challengers: list[Key] = []
    configs: list[dict] = [baseline] if baseline else []
    for t in ranked:  # race.contenders: distinct configs, best first; the baseline races as itself
        if t.config not in configs:
            configs.append(t.config)
            challengers.append(t.key)
    try:
        plan = study.race_plan(search_epochs=search_epochs, available=len(challengers))
    except PlanError:
        # race.py refuses the race (numbers set in the study that cannot fit): nothing is recommended.
        return {"refused": True}
    runners_up = challengers[plan.challengers:]  # the fallback's candidates, best objective first
    challengers = challengers[: plan.challengers]
    # Names: one per contender; two search configs may share a grid point (they are raced apart).
    keys = {f"c{i}": key for i, key in enumerate(challengers)}
    names = list(keys)
    if baseline_key is not None:
        keys["baseline"] = baseline_key
        names = ["baseline", *names]

    def objective(key: Key, seed: int) -> float | None:
        run = table.run(key, seed)
        return None if run.diverged_epoch is not None else trailing_mean(run.curve[:epochs], window)

    runs, used, winner = 0, 0, names[1] if baseline_key is not None and len(names) > 1 else names[0]
    policy = None
    if plan.select and len(names) > 1:
        policy = Intensifier(names, spec, [fresh_seed(j) for j in range(spec.max_seeds)], budget=plan.budget,
                             worst=0.0, mode=study.search.mode)
        while not policy.done:
            batch = policy.next_runs()
            if not batch:
                break
            for name, seed in batch:
                policy.record(name, seed, objective(keys[name], seed))
        winner, runs = policy.winner, policy.spent
        used = max(len(row["seeds"]) for row in policy.summary()["final"])
    seeds = [fresh_seed(j) for j in range(used, used + plan.confirm_seeds)]
    collapsed: list[bool] = []
    values: list[float] = []
    base: list[float] | None = [] if baseline_key is not None else None

    def confirm(more: list[int]) -> None:
        nonlocal runs
        winner_runs = [table.run(keys[winner], s) for s in more]
        values.extend(r.test for r in winner_runs)
        collapsed.extend(r.collapsed for r in winner_runs)
        if base is not None:
            base.extend(table.run(baseline_key, s).test for s in more)
        # race.py confirms two configs whenever there is a baseline: when the race kept it, the best
        # challenger runs beside it, so both are shown.
        runs += len(more) * (1 if base is None or len(names) == 1 else 2)

    def decide() -> tuple[bool, bool]:
        """(recommend, a second look may change it)."""
        if rule is None:  # the shipped gate, intensify.gate itself
            decision = gate(values, base, collapsed=collapsed, worst=0.0, max_collapse_share=spec.max_collapse_share,
                            mode=study.search.mode, winner_is_baseline=winner == "baseline")
            return decision["recommend"], decision["second_look"]
        recommend = winner != "baseline" and gate_rule(rule, values, base, collapsed, spec.max_collapse_share)
        return recommend, (not recommend and winner != "baseline" and base is not None and sum(values) > sum(base))

    confirm(seeds)
    recommend, second_look = decide()
    extend = spec.second_look_seeds if extend is None else extend
    extended = False
    if extend and second_look:
        # A second look (race.py's confirm-2): the first fell short but the winner leads on the mean.
        more = [fresh_seed(j) for j in range(used + len(seeds), used + len(seeds) + extend)]
        seeds = seeds + more
        confirm(more)
        (recommend, _), extended = decide(), True
    tried = {keys[winner]}
    for k in range(spec.fallbacks if fallback is None else fallback):
        collapse = sum(collapsed) / len(collapsed) if collapsed else 0.0
        if recommend or base is None or winner == "baseline" or collapse <= spec.max_collapse_share:
            break
        candidates = [key for key in runners_up if key not in tried]
        if not candidates:
            break
        winner = f"f{k}"
        keys[winner] = candidates[0]
        tried.add(candidates[0])
        fallback_runs = [table.run(keys[winner], s) for s in seeds]  # the same paired seeds; the baseline's reused
        values[:] = [r.test for r in fallback_runs]
        collapsed[:] = [r.collapsed for r in fallback_runs]
        runs += len(seeds)
        recommend, _ = decide()
    return {"winner": keys[winner], "values": values, "baseline_values": base, "seeds": seeds, "runs": runs,
            "seeds_used": used + len(seeds), "recommend": recommend, "plan": plan, "extended": extended,
            "collapse_share": sum(collapsed) / len(collapsed) if collapsed else 0.0}


def gate_rule(rule: str, values: list[float], base: list[float] | None, collapsed: list[bool], max_collapse_share: float) -> bool:
    """Candidate gates (bench-only; the shipped one is intensify.gate). All see the same paired
    final-epoch test values; each recommends the winner or keeps the baseline."""
    from scipy import stats as st

    from ratiotune.core.stats import signflip_p

    n = len(values)
    collapse_ok = sum(collapsed) / n <= max_collapse_share
    if base is None:
        return collapse_ok
    d = np.array(values) - np.array(base)
    mean, sd = float(d.mean()), float(d.std(ddof=1))

    def t_bound(x: np.ndarray, level: float) -> float:
        if len(x) < 2:
            return -math.inf
        return float(x.mean() - st.t.ppf(level, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))

    if rule == "t95":
        return t_bound(d, 0.95) > 0 and collapse_ok
    if rule == "t90":
        return t_bound(d, 0.90) > 0 and collapse_ok
    if rule == "signflip":
        return signflip_p(list(d)) <= 0.05 and collapse_ok
    if rule == "signflip10":
        return signflip_p(list(d)) <= 0.10 and collapse_ok
    if rule == "signflip-nocollapse":
        return signflip_p(list(d)) <= 0.05
    if rule == "two-part":
        # Collapse (a zero on the test prompts) tested apart: at most a third of the seeds, and
        # where the winner learned, its margin's one-sided 95% t bound above 0.
        learned = np.array(values) > 0
        return learned.mean() >= 2 / 3 and t_bound(d[learned], 0.95) > 0
    if rule == "bootstrap":
        rng = np.random.default_rng(0)
        means = d[rng.integers(0, n, size=(2000, n))].mean(axis=1)
        return float(np.quantile(means, 0.05)) > 0 and collapse_ok
    if rule == "mean":
        return mean > 0  # no test at all: what the gate's protection costs, the other way round
    if rule == "mean-collapse":
        return mean > 0 and collapse_ok  # ahead on the mean, and the shipped collapse bound
    raise ValueError(f"unknown gate rule {rule!r}")


# --------------------------------------------------------------------------- one study, one design


@dataclass(frozen=True)
class Design:
    """A pipeline to compare: smoke.yaml with `--set`-style overrides, plus what the simulator varies
    that has no study field (yet)."""

    name: str
    overrides: tuple[str, ...] = ()
    # race (race + gate), objective (best search objective), best-epoch (today's practice), or oracle:
    # the sampled config with the best true value (no real pipeline can: the bound on what the
    # search's samples hold).
    pick: str = "race"
    search_seeds: int = 1  # >1: search trial i trains on seed i mod search_seeds (seeds as instances)
    # race: values applied as if they were RaceSpec's defaults (not set in the study file), so the
    # plan may lower them to fit max_share (intensify.plan never lowers what a study file sets).
    race_defaults: tuple[tuple[str, Any], ...] = ()
    as_shipped: bool = False  # smoke.yaml exactly as it is in the repository (its search settings included)
    gate: str | None = None  # a candidate gate rule (gate_rule); None: intensify.gate as shipped
    extend: int = 0  # confirmation seeds added for a second look (0: one look)
    # Runner-ups confirmed when the winner is refused for the collapse bound (run_race); None: the
    # study's race.fallbacks with the shipped gate, 0 with a candidate gate (as they were measured).
    fallback: int | None = None
    note: str = ""


def design_study(design: Design, study_seed: int):
    from ratiotune.core.study import apply_override, validate_study

    raw = yaml.safe_load(SMOKE.read_text())
    raw["train"]["seed"] = study_seed
    if not design.as_shipped:
        # Every other design starts from smoke as it was before this choice: Optuna's sampler defaults.
        for name in ("startup_trials", "multivariate"):
            raw["search"].pop(name, None)
    for override in design.overrides:
        apply_override(raw, override)
    study = validate_study(raw, source=f"design {design.name}")
    if design.race_defaults:
        race = study.race.model_copy(update=dict(design.race_defaults))
        race.__pydantic_fields_set__.difference_update(dict(design.race_defaults))
        study.race = race
    return study


def simulate_study(design: Design, table: Table, study_seed: int) -> dict[str, Any]:
    """One simulated study: search, then the design's pick; what it ships and what that is worth."""
    from ratiotune.core.stats import describe

    study = design_study(design, study_seed)
    perm = [int(s) for s in np.random.default_rng(study_seed).permutation(table.seeds)]

    def seed_at(index: int) -> int:
        return perm[index % len(perm)]  # beyond the table's seeds a seed repeats (counted in `reused`)

    trials = simulate_search(study, table, lambda n: seed_at(n % design.search_seeds))
    search_epochs = sum(t.epoch for t in trials)
    baseline = study.baseline()
    baseline_key = table.point(study.hyperparameters(baseline)) if baseline else None
    clean = [t for t in trials if not t.diverged and math.isfinite(t.objective)]
    record: dict[str, Any] = {"design": design.name, "study": study_seed, "search_epochs": search_epochs,
                              "race_epochs": 0, "passed_gate": None, "reported": None, "pi_low": None, "pi_high": None}
    if design.pick == "best-epoch":
        shipped = max(clean, key=lambda t: t.best_epoch_value).key
        record["reported"] = max(clean, key=lambda t: t.best_epoch_value).best_epoch_value
    elif design.pick == "oracle":
        shipped = max({t.key for t in trials}, key=table.true_value)
    elif design.pick == "objective" or not study.race.enabled:
        shipped = max(clean, key=lambda t: t.objective).key
        record["reported"] = max(t.objective for t in clean)
    else:
        first_fresh = design.search_seeds
        ranked = sorted(clean, key=lambda t: -t.objective)
        result = run_race(study, ranked, study.hyperparameters(baseline) if baseline else None, table,
                          lambda j: seed_at(first_fresh + j), search_epochs, rule=design.gate,
                          extend=design.extend if design.gate else None,
                          fallback=design.fallback if design.fallback is not None or not design.gate else 0)
        if result.get("refused"):
            record["refused"] = True
            result = {"recommend": False, "winner": baseline_key, "values": [], "baseline_values": [], "runs": 0,
                      "seeds": [], "seeds_used": 0}
        record["race_epochs"] = result["runs"] * study.train.epochs
        record["reused_seeds"] = max(0, first_fresh + result["seeds_used"] - len(perm))
        passed = result["recommend"] or baseline_key is None
        record["passed_gate"] = passed
        shipped = result["winner"] if passed else baseline_key
        shipped_values = result["values"] if passed else result["baseline_values"]
        record["reported"] = statistics.fmean(shipped_values) if shipped_values else None
        stats = describe(shipped_values, value_range=(0.0, 1.0))
        interval = stats["pi95"]
        if stats["ci95"]:
            record["ci_low"], record["ci_high"] = stats["ci95"]
        if interval:
            record["pi_low"], record["pi_high"] = interval
            # A new run's value: every table seed this study never trained the shipped config on.
            used = set(perm[: first_fresh + result["seeds_used"]])
            unused = [s for s in table.seeds if s not in used]
            news = [table.run(shipped, s).test for s in unused]
            record["pi_covers_new_run"] = statistics.fmean(interval[0] <= v <= interval[1] for v in news) if news else None
        record["raced_winner"] = result["winner"]
        if not passed and not record.get("refused"):
            # Why the gate kept the baseline: the winner collapsed too often, or its margin fell short.
            record["refused_for"] = "collapse" if result["collapse_share"] > study.race.max_collapse_share else "margin"
            record["refused_winner_true"] = table.true_value(result["winner"])
        record["extended"] = result.get("extended", False)
    true = table.true_value(shipped)
    record.update({
        "shipped": shipped, "true": true, "ratio": true / table.best_value,
        "trial_epochs": search_epochs + record["race_epochs"],
        "worse_than_baseline": baseline_key is not None and shipped != baseline_key and true < table.true_value(baseline_key),
    })
    if record["pi_low"] is not None:
        record["pi_covers_true"] = record["pi_low"] <= true <= record["pi_high"]
        record["ci_covers_true"] = record["ci_low"] <= true <= record["ci_high"]
    return record


def simulate_design(design: Design, table: Table, studies: int, first: int = 0) -> list[dict[str, Any]]:
    return [simulate_study(design, table, first + k) for k in range(studies)]


# --------------------------------------------------------------------------- the designs


def designs(budget: int) -> list[Design]:
    """The pipelines compared, all from smoke.yaml. `budget` (trial-epochs): the random searches get
    that many (FIFO: budget // epochs full-length trials); the other designs are sized to stay at or
    under it in the median (their compute is in the output, to check)."""
    random_trials = max(1, budget // 12)
    random = (f"search.num_samples={random_trials}", "search.sampler=random", "search.scheduler.type=fifo", "race.enabled=false")
    return [
        Design("shipped", as_shipped=True, note="studies/smoke.yaml as it is in the repository"),
        Design("smoke-before", note="smoke.yaml before this choice (issue 23's race): TPE with Optuna's 10 random "
               "start-up trials (so its 8 samples are random search's draws), ASHA grace 4 / factor 2, the race "
               "with 4 confirmation seeds, share 0.7, the 95% gate on one look", gate="t95",
               race_defaults=(("confirm_seeds", 4), ("max_share", 0.7))),
        Design("random", (*random, "search.start_with_baseline=false"), pick="best-epoch",
               note=f"today's practice (bench/search_quality.py's random): {random_trials} random full-length trials, "
               "the best single epoch wins, no race"),
        Design("random-objective", random, pick="objective",
               note=f"{random_trials} random full-length trials, the best trailing-mean objective wins, no race"),
        Design("random-race", ("search.sampler=random",), note="the smoke pipeline with a random sampler"),
        # Leaving the start-up phase within 8 samples.
        Design("tpe-start3", ("search.startup_trials=3",)),
        Design("tpe-start5", ("search.startup_trials=5",)),
        Design("tpe-start3-mv", ("search.startup_trials=3", "search.multivariate=true")),
        Design("gp-start3", ("search.sampler=gp", "search.startup_trials=3")),
        Design("qmc", ("search.sampler=qmc",)),
        # ASHA.
        Design("tpe-start3-grace2", ("search.startup_trials=3", "search.scheduler.grace_period=2")),
        Design("tpe-start3-grace6-rf3", ("search.startup_trials=3", "search.scheduler.grace_period=6",
                                         "search.scheduler.reduction_factor=3")),
        Design("tpe-start3-fifo", ("search.startup_trials=3", "search.scheduler.type=fifo"), race_defaults=(("max_share", 0.65),)),
        # More samples, a smaller race (same total).
        Design("tpe-12-start4-share60", ("search.num_samples=12", "search.startup_trials=4"), race_defaults=(("max_share", 0.6),)),
        Design("tpe-16-start5-share50", ("search.num_samples=16", "search.startup_trials=5"), race_defaults=(("max_share", 0.5),)),
        # The race's knobs.
        Design("tpe-start3-top2", ("search.startup_trials=3", "race.top_k=2")),
        Design("tpe-start3-cut25", ("search.startup_trials=3", "race.cut_level=0.25")),
        Design("tpe-start3-confirm6", ("search.startup_trials=3", "race.confirm_seeds=6")),
        # A stronger gate: 6 confirmation seeds as the default (the plan lowers it, then the selection, to fit).
        Design("tpe-start3-mv-confirm6", ("search.startup_trials=3", "search.multivariate=true"),
               race_defaults=(("confirm_seeds", 6),)),
        Design("tpe-8-start3-mv-confirm6-race75", ("search.startup_trials=3", "search.multivariate=true"),
               race_defaults=(("confirm_seeds", 6), ("max_share", 0.75))),
        Design("tpe-12-start4-mv-confirm6", ("search.num_samples=12", "search.startup_trials=4", "search.multivariate=true"),
               race_defaults=(("confirm_seeds", 6), ("max_share", 0.6))),
        Design("tpe-16-start5-mv-confirm6", ("search.num_samples=16", "search.startup_trials=5", "search.multivariate=true"),
               race_defaults=(("confirm_seeds", 6), ("max_share", 0.5))),
        Design("tpe-12-start4-mv", ("search.num_samples=12", "search.startup_trials=4", "search.multivariate=true"), race_defaults=(("max_share", 0.6),)),
        Design("tpe-16-start5-mv", ("search.num_samples=16", "search.startup_trials=5", "search.multivariate=true"), race_defaults=(("max_share", 0.5),)),
        # More of the budget to the race's selection: more challengers on paired seeds.
        Design("tpe-8-start3-mv-race75", ("search.startup_trials=3", "search.multivariate=true"),
               race_defaults=(("max_share", 0.75),)),
        Design("tpe-8-start3-mv-race75-top3", ("search.startup_trials=3", "search.multivariate=true"),
               race_defaults=(("max_share", 0.75), ("top_k", 3))),
        Design("tpe-6-start3-mv-race80", ("search.num_samples=6", "search.startup_trials=3", "search.multivariate=true"),
               race_defaults=(("max_share", 0.8),)),
        Design("tpe-8-start3-mv-grace2-race80", ("search.startup_trials=3", "search.multivariate=true",
                                                 "search.scheduler.grace_period=2"), race_defaults=(("max_share", 0.8),)),
        Design("tpe-12-start4-mv-grace2-race75", ("search.num_samples=12", "search.startup_trials=4",
                                                  "search.multivariate=true", "search.scheduler.grace_period=2"),
               race_defaults=(("max_share", 0.75),)),
        # Bounds: what the sampled configs hold (perfect selection, no compute for it).
        Design("random-oracle", random, pick="oracle",
               note=f"{random_trials} random configs, the one with the best true value ships (an upper bound, not a method)"),
        Design("tpe-16-start5-mv-oracle", ("search.num_samples=16", "search.startup_trials=5", "search.multivariate=true",
                                           "race.enabled=false"), pick="oracle",
               note="the 16-sample multivariate TPE search's configs, the best true value ships (an upper bound)"),
        *gate_designs(),
        # Seeds as instances during the search: trial i trains on seed i mod k.
        Design("tpe-start3-seeds2", ("search.startup_trials=3",), search_seeds=2),
        # More of the budget to the search, the shipped race and gate on the rest.
        *[Design(f"shipped-{n}-share{round(share * 100)}", (f"search.num_samples={n}", f"search.startup_trials={start}"),
                 as_shipped=True, race_defaults=(("max_share", share),),
                 note=f"the shipped pipeline with {n} samples (TPE start-up {start}) and the race's share {share:g}")
          for n, start, share in ((12, 4, 0.55), (12, 4, 0.5), (16, 5, 0.45), (16, 5, 0.4), (20, 5, 0.35), (24, 6, 0.3))],
        # Ahead on the mean (and the collapse bound) ships: the budget split again under that gate.
        *[Design(f"mean-{n}-share{round(share * 100)}{tag}", (f"search.num_samples={n}", f"search.startup_trials={start}", *extra),
                 as_shipped=True, gate="mean-collapse", race_defaults=(("max_share", share),),
                 note=f"{n} samples (TPE start-up {start}), the race's share {share:g}; the winner ships when it is ahead of the "
                 f"baseline on the mean of the paired seeds and collapsed on at most a third{note}")
          for n, start, share in ((8, 3, 0.65), (12, 4, 0.5), (16, 5, 0.4), (20, 5, 0.35))
          for tag, extra, note in (("", (), ""), ("@mid", MID_BASELINE, "; baseline lr 4e-4 / 4 / 16 (0.268)"))],
        # When the winner collapses, the runner-up (by search objective) is confirmed on the same seeds.
        *[Design(f"shipped-fallback{k}{tag}", extra, as_shipped=True, fallback=k,
                 note=f"the shipped pipeline; a winner refused for the collapse bound hands over to up to {k} runner-up(s), "
                 f"confirmed on the same paired seeds{note}")
          for k in (0, 1, 2, 3) for tag, extra, note in (("", (), ""), ("@mid", MID_BASELINE, "; baseline lr 4e-4 / 4 / 16 (0.268)"))],
        # Everything to the search.
        Design("tpe-20-start5-norace", ("search.num_samples=20", "search.startup_trials=5", "race.enabled=false"),
               pick="objective", note="20 samples, no race: the best objective ships"),
    ]


# The gate's stress test: a baseline that searches often do not beat. lr 4e-4 / 4 gens / 16 tokens
# (grid point 3.97e-4) is worth 0.268 over the table's 10 seeds and never scores 0, while many
# configs a search finds are bimodal with a true value below it: what a gate must not ship.
MID_BASELINE = ("search.baseline.learning_rate=4.0e-4", "search.baseline.num_generations=4",
                "search.baseline.max_new_tokens=16")


def gate_designs() -> list[Design]:
    """The shipped pipeline with each candidate gate, twice: with smoke's baseline (the tutorial's
    config, 0.097) and with MID_BASELINE (`@mid`), where shipping a worse config is easy."""
    gates = [
        Design("gate-t95", gate="t95", note="one-sided 95% t bound of the paired margin > 0, collapse share <= 0.25, 6 seeds (before this change)"),
        Design("gate-t90", gate="t90", note="one-sided 90% t bound > 0, collapse share <= 0.25, 6 seeds"),
        Design("gate-signflip", gate="signflip", note="exact one-sided sign-flip test of the paired margin, p <= 0.05, collapse share <= 0.25, 6 seeds"),
        Design("gate-signflip10", gate="signflip10", note="sign-flip test at p <= 0.10, collapse share <= 0.25, 6 seeds"),
        Design("gate-two-part", gate="two-part", note="two parts: the winner scores 0 on at most 1/3 of the seeds, and where it learned its margin's 95% t bound > 0"),
        Design("gate-bootstrap", gate="bootstrap", note="percentile bootstrap 5% quantile of the mean margin > 0 (2,000 resamples), collapse share <= 0.25"),
        Design("gate-mean", gate="mean", note="the winner ships when its mean beats the baseline's on the 6 seeds: no test"),
        Design("gate-t90-extend4", gate="t90", extend=4, note="t90; refused but ahead on the mean: 4 more paired seeds, t90 on all 10"),
        Design("gate-t90-extend2", gate="t90", extend=2, note="t90; refused but ahead on the mean: 2 more paired seeds, t90 on all 8"),
        Design("gate-t90-extend4-share65", gate="t90", extend=4, race_defaults=(("max_share", 0.65),),
               note="t90 with a 4-seed second look, the race's share 0.65 (pays for the second look)"),
        Design("gate-t90-extend4-share60", gate="t90", extend=4, race_defaults=(("max_share", 0.6),),
               note="t90 with a 4-seed second look, the race's share 0.6"),
        Design("gate-signflip10-extend4", gate="signflip10", extend=4, note="sign-flip at 0.10; refused but ahead on the mean: 4 more paired seeds"),
        Design("gate-two-part-extend4", gate="two-part", extend=4, note="two-part; refused but ahead on the mean: 4 more paired seeds, two-part on all 10"),
        Design("gate-t95-extend4", gate="t95", extend=4, note="t95; refused but ahead on the mean: 4 more paired seeds, t95 on all 10"),
        Design("gate-signflip-extend4", gate="signflip", extend=4, note="sign-flip; refused but ahead on the mean: 4 more paired seeds, sign-flip on all 10"),
        Design("gate-c4-signflip-extend4", gate="signflip", extend=4, race_defaults=(("confirm_seeds", 4),),
               note="4 confirmation seeds, sign-flip; refused but ahead on the mean: 4 more, sign-flip on all 8"),
        Design("gate-c4-t95-extend4", gate="t95", extend=4, race_defaults=(("confirm_seeds", 4),),
               note="4 confirmation seeds, t95; refused but ahead on the mean: 4 more, t95 on all 8"),
    ]
    out = []
    for d in gates:
        if not any(k == "max_share" for k, _ in d.race_defaults):  # the race's share before this choice
            d = dataclasses.replace(d, race_defaults=(*d.race_defaults, ("max_share", 0.7)))
        out.append(dataclasses.replace(d, as_shipped=True))
        out.append(dataclasses.replace(d, name=d.name + "@mid", as_shipped=True, overrides=d.overrides + MID_BASELINE,
                                       note=d.note + "; baseline lr 4e-4 / 4 / 16 (0.268)"))
    out.append(Design("shipped@mid", as_shipped=True, overrides=MID_BASELINE, note="the shipped pipeline, baseline lr 4e-4 / 4 / 16 (0.268)"))
    # The table has 10 seeds: search 1 + confirmation 6 + second look 4 = 11, so a second look's last
    # seed repeats the search's seed (the same table runs). A 3-seed second look repeats none.
    # The gate's collapse bound: what it costs now that a final figure of 0 counts as a collapse.
    for share in (0.25, 1.0):
        out.append(Design(f"shipped-collapse{share:g}", as_shipped=True, race_defaults=(("max_collapse_share", share),),
                          note=f"the shipped pipeline with race.max_collapse_share {share:g}"))
        out.append(Design(f"shipped-collapse{share:g}@mid", as_shipped=True, overrides=MID_BASELINE,
                          race_defaults=(("max_collapse_share", share),),
                          note=f"the shipped pipeline with race.max_collapse_share {share:g}, baseline lr 4e-4 / 4 / 16 (0.268)"))
    out.append(Design("shipped-look3", as_shipped=True, race_defaults=(("second_look_seeds", 3),),
                      note="the shipped pipeline with a 3-seed second look: no seed repeats on the 10-seed table"))
    out.append(Design("shipped-look3@mid", as_shipped=True, overrides=MID_BASELINE, race_defaults=(("second_look_seeds", 3),),
                      note="shipped-look3, baseline lr 4e-4 / 4 / 16 (0.268)"))
    return out


# What `bench/simulate.py` compares by default (docs/search-quality.md); the rest of the catalogue
# (and gp-start3: ~2 s a study for the GP fit) with --designs.
COMPARED = (
    # The fallback (race.fallbacks, shipped 2): 0 is the pipeline before it.
    "shipped", "shipped-fallback0", "shipped-fallback1", "shipped-fallback3", "shipped@mid", "shipped-fallback0@mid",
    # Budget split and gate, again (2026-12-05): more search / smaller race; ahead on the mean ships.
    "shipped-12-share55", "shipped-16-share40", "shipped-20-share35", "mean-20-share35",
    "shipped-look3", "shipped-collapse0.25", "shipped-collapse1", "gate-t95", "smoke-before", "random", "random-objective",
    # Gates at the previous compute (race share 0.7, one look).
    "gate-t90", "gate-signflip", "gate-signflip10", "gate-two-part", "gate-bootstrap", "gate-mean",
    # A second look (4 more paired seeds when the first falls short but the winner leads on the mean).
    "gate-t95-extend4", "gate-t90-extend4", "gate-t90-extend2", "gate-signflip10-extend4", "gate-two-part-extend4",
    "gate-c4-t95-extend4", "gate-t90-extend4-share60",
    # The gate's stress test: a baseline worth 0.268 that is easy to lose to.
    "shipped-look3@mid", "gate-t95@mid", "gate-t90@mid", "gate-signflip10@mid", "gate-two-part@mid", "gate-bootstrap@mid",
    "gate-mean@mid", "gate-t90-extend4@mid", "shipped-collapse0.25@mid", "shipped-collapse1@mid",
    # Samplers under the shipped race, and the bounds.
    "random-race", "qmc", "tpe-16-start5-mv", "tpe-20-start5-norace", "random-oracle", "tpe-16-start5-mv-oracle",
)


# --------------------------------------------------------------------------- reporting


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    from ratiotune.core.stats import wilson

    ratios = np.array([r["ratio"] for r in records])
    trues = np.array([r["true"] for r in records])
    q1, med, q3 = np.percentile(trues, [25, 50, 75])
    covered = [r["pi_covers_true"] for r in records if "pi_covers_true" in r]
    new_run = [r["pi_covers_new_run"] for r in records if r.get("pi_covers_new_run") is not None]
    ci = [r["ci_covers_true"] for r in records if "ci_covers_true" in r]
    gated = [r for r in records if r["passed_gate"] is not None]
    return {
        "studies": len(records),
        "median": med, "q1": q1, "q3": q3, "iqr": q3 - q1,
        "ratio_median": float(np.median(ratios)),
        "share_85": float(np.mean(ratios >= 0.85)),
        "trial_epochs": float(np.median([r["trial_epochs"] for r in records])),
        "trial_epochs_max": max(r["trial_epochs"] for r in records),
        "pi_covers_true": statistics.fmean(covered) if covered else None,
        "pi_covers_new_run": statistics.fmean(new_run) if new_run else None,
        "ci_covers_true": statistics.fmean(ci) if ci else None,
        "worse_than_baseline": statistics.fmean(r["worse_than_baseline"] for r in records),
        "worse_count": sum(r["worse_than_baseline"] for r in records),
        "worse_wilson": wilson(sum(r["worse_than_baseline"] for r in records), len(records)),
        "trial_epochs_mean": statistics.fmean(r["trial_epochs"] for r in records),
        "second_look": statistics.fmean(bool(r.get("extended")) for r in records),
        "not_confirmed": statistics.fmean(not r["passed_gate"] for r in gated) if gated else None,
        "refused": statistics.fmean(bool(r.get("refused")) for r in records),
        "reused": statistics.fmean(bool(r.get("reused_seeds")) for r in records),
    }


def refusal_line(name: str, records: list[dict[str, Any]], baseline_value: float | None) -> str:
    """Why a design's gate kept the baseline, and what the refused winners were worth."""
    refused = [r for r in records if r.get("refused_for")]
    if not refused:
        return f"{name}: the gate kept the baseline in 0 of {len(records)} studies"
    worth = [r["refused_winner_true"] for r in refused]
    above = "" if baseline_value is None else f", above the baseline's {baseline_value:.3f} in {np.mean(np.array(worth) > baseline_value):.0%}"
    return (f"{name}: the gate kept the baseline in {len(refused)} of {len(records)} studies: "
            f"{sum(r['refused_for'] == 'collapse' for r in refused)} for the collapse bound, "
            f"{sum(r['refused_for'] == 'margin' for r in refused)} for the margin's bound; "
            f"the refused winners' true value median {statistics.median(worth):.3f}{above}")


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def markdown(table: Table, results: dict[str, list[dict[str, Any]]], catalogue: dict[str, Design]) -> str:
    lines = [
        f"Table: {len(table.keys)} grid points x {len(table.seeds)} seeds; best grid config "
        f"{table.best_key} true value {table.best_value:.3f}.",
        "",
        "| design | studies | true value median [IQR] | share >= 85% of best | trial-epochs mean / median (max) | "
        "PI holds a new run | PI holds true value | not confirmed (second look) | worse than baseline [95% Wilson] |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, records in results.items():
        s = summarize(records)
        refused = f" ({pct(s['refused'])} refused)" if s["refused"] else ""
        second = f" ({pct(s['second_look'])})" if s["second_look"] else ""
        low, high = s["worse_wilson"]
        lines.append(
            f"| {name} | {s['studies']} | {s['median']:.3f} [{s['q1']:.3f}, {s['q3']:.3f}] | {pct(s['share_85'])} | "
            f"{s['trial_epochs_mean']:.0f} / {s['trial_epochs']:.0f} ({s['trial_epochs_max']}) | {pct(s['pi_covers_new_run'])} | "
            f"{pct(s['pi_covers_true'])} | {pct(s['not_confirmed'])}{second}{refused} | "
            f"{s['worse_count']} ({pct(s['worse_than_baseline'])}) [{low:.1%}, {high:.1%}] |"
        )
    reused = max(summarize(records)["reused"] for records in results.values())
    lines += ["", f"A study needs 1 search seed + the race's seeds; where the table has fewer, seeds repeat "
              f"(the values of a repeated seed are the same runs): up to {reused:.0%} of a design's studies did.",
              "", "Designs:", ""]
    for name in results:
        d = catalogue[name]
        what = d.note or ", ".join(d.overrides) or "as shipped"
        extra = f"; search trials rotate over {d.search_seeds} seeds" if d.search_seeds > 1 else ""
        if d.race_defaults:
            extra += "; race defaults " + ", ".join(f"{k} {v}" for k, v in d.race_defaults)
        lines.append(f"- **{name}**: {what}{extra}")
    return "\n".join(lines) + "\n"


ECDF_DESIGNS = ("shipped", "shipped-fallback0", "shipped-12-share55", "random", "random-objective", "tpe-20-start5-norace",
                "random-oracle")


def plot(table: Table, results: dict[str, list[dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 0.45 * len(names) + 2.5))
    data = [[r["ratio"] for r in results[n]] for n in names]
    left.boxplot(data, orientation="horizontal", tick_labels=names, whis=(5, 95), showmeans=True)
    left.axvline(0.85, color="tab:red", linestyle="--", linewidth=1, label="85% of the best grid config")
    left.set_xlabel("shipped config's true value / best grid config's")
    left.set_title(f"{len(results[names[0]])} simulated studies per design")
    left.legend(loc="lower left", fontsize=8)
    left.invert_yaxis()
    # The distribution plot names a few designs only: forty lines read as none.
    picked = [n for n in ECDF_DESIGNS if n in results] or names[:6]
    for name in picked:
        ratios = np.sort([r["ratio"] for r in results[name]])
        right.step(ratios, np.arange(1, len(ratios) + 1) / len(ratios), where="post", label=name)
    right.axvline(0.85, color="tab:red", linestyle="--", linewidth=1)
    right.set_xlabel("shipped / best grid config")
    right.set_ylabel("share of studies at or below")
    right.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_csv(path: Path, results: dict[str, list[dict[str, Any]]]) -> None:
    fields = ["design", "study", "shipped", "true", "ratio", "trial_epochs", "search_epochs", "race_epochs",
              "passed_gate", "reported", "pi_low", "pi_high", "pi_covers_true", "pi_covers_new_run", "ci_covers_true",
              "worse_than_baseline", "reused_seeds"]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for records in results.values():
            for r in records:
                writer.writerow({k: ("/".join(map(str, v)) if isinstance(v, tuple) else v) for k, v in r.items()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--studies", type=int, default=200, help="simulated studies per design (default 200)")
    parser.add_argument("--designs", help="comma-separated design names, or 'all' (default: COMPARED)")
    parser.add_argument("--out", type=Path, default=OUT, help="output prefix: .md and .csv")
    parser.add_argument("--plot", type=Path, default=PLOT)
    parser.add_argument("--refusals", action="store_true",
                        help="only print why each design's gate kept the baseline (no files written)")
    args = parser.parse_args(argv)
    table = load_table(args.table)
    started = time.perf_counter()
    budget = SMOKE_BUDGET
    catalogue = {d.name: d for d in designs(budget)}
    chosen = list(COMPARED) if not args.designs else list(catalogue) if args.designs == "all" else args.designs.split(",")
    unknown = [n for n in chosen if n not in catalogue]
    if unknown:
        parser.error(f"--designs: unknown {', '.join(unknown)}; allowed: {', '.join(catalogue)}")
    if args.refusals:
        for name in chosen:
            study = design_study(catalogue[name], 0)
            baseline = study.baseline()
            value = table.true_value(table.point(study.hyperparameters(baseline))) if baseline else None
            print(refusal_line(name, simulate_design(catalogue[name], table, args.studies), value), flush=True)
        return 0
    results = {}
    for name in chosen:
        t0 = time.perf_counter()
        results[name] = simulate_design(catalogue[name], table, args.studies)
        s = summarize(results[name])
        print(f"{name}: median {s['median']:.3f} IQR {s['iqr']:.3f} share>=85% {s['share_85']:.0%} "
              f"trial-epochs {s['trial_epochs']:.0f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = "python bench/simulate.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = (f"`{command.strip()}` ({(time.perf_counter() - started) / 60:.1f} min; budget {budget} trial-epochs: "
            "random search gets it, every other design's median stays at or under it)\n\n" + markdown(table, results, catalogue))
    args.out.with_suffix(".md").write_text(text)
    write_csv(args.out.with_suffix(".csv"), results)
    plot(table, results, args.plot)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
