"""Replay whole studies against a table of real runs: the shipping sampler, ASHA, objective and race, no training.

    python bench/simulate.py --studies 600                  # the compared designs (docs/search-quality.md)
    python bench/simulate.py --studies 600 --error-rates    # the race's error rates against its stated level
    python bench/simulate.py --studies 20 --designs shipped,random --table bench/table/smoke_table.csv

bench/table.py trained every config of a grid over smoke's space on many seeds and kept
each run's eval curve (the search's signal), its final test figure (what `best` reports) and
its seconds. A simulated study runs the shipping code against that table instead of training:

- the sampler: `search.make_sampler(study)` through Optuna's ask/tell, with the distributions
  Ray's OptunaSearch builds from `search.param_space(study)`, the baseline enqueued first;
- the scheduler: `search.make_scheduler(study)` itself (Ray's AsyncHyperBandScheduler), fed the
  objective (`objective.trailing_mean`) every epoch, in the order epochs finish: an event queue
  over each run's recorded seconds, `max_concurrent_trials` at a time, so trials end out of order
  as they do under Ray;
- the race: core/race_protocol.Race itself, asked and told; the plan is `study.race_plan`, the
  contenders `race_protocol.pick_contenders`. Nothing of the race is copied here.

Honest noise. Each study splits the table's seeds in two at random (half of the seeds every config
has, half of the rest): one half defines each config's true value for that study (the mean final
test figure, a collapsed or diverged run counted as 0) and the study never draws from it; every
run the study needs (a search trial, a race run) comes from the other half. The split is redrawn
per study because seeds have effects common to all configs (seeds 1 and 11 are bad for every top
config of the smoke table): a fixed split would tilt truth against draws for good.

Seed worlds. A real study trains every search trial on train.seed and every contender of race
seed j on seed j, so the runs it compares share a seed, and a seed acts on every config alike (its
sampling stream). The simulator keeps that: each study deals the draw seeds every config has out
to its worlds, one per world (`search`, then each race seed as the race first asks for it), and a
run in a world is that config's run on the world's table seed. Before, every run was an independent
draw, which averaged the seed effects a real study sees whole; real studies shipped less than the
simulator predicted (docs/search-quality.md, "Real runs"). Past the dealt seeds (more race seeds
than the table has draw seeds) a run is an independent draw. Two search configs with different learning rates
are different contenders even when they map to one grid point, and a learning rate between two
grid points draws its runs from both neighbours.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import math
import statistics
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import yaml

if TYPE_CHECKING:
    from ratiotune.core.intensify import RacePlan
    from ratiotune.core.race_protocol import RaceResult

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "studies" / "smoke.yaml"
TABLE = REPO / "bench" / "table" / "smoke_table.csv"
OUT = REPO / "docs" / "bench" / "simulate"
PLOT = REPO / "docs" / "img" / "simulate_designs.png"
CURVE = REPO / "docs" / "img" / "simulate_compute.png"
# Random search's budget in trial-epochs (its full-length trials) on the smoke table: the shipped design's median
# compute there (main() measures it per table; bench/anchors.py uses this figure).
SMOKE_BUDGET = 240


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Run:
    """One training run of the table: a config on one seed."""

    curve: tuple[float, ...]  # eval figure per epoch, up to (not including) divergence
    diverged_epoch: int | None  # the epoch that reported NaN, or None
    test: float  # final-epoch test figure; 0 when collapsed or diverged
    collapsed: bool
    seconds: float

    @property
    def epochs(self) -> int:
        return len(self.curve) + (self.diverged_epoch is not None)


Key = tuple[float, int, int]  # (learning_rate, num_generations, max_new_tokens) of a grid point
# A config between two grid learning rates: each neighbour with its weight (linear in log lr).
Mix = tuple[tuple[Key, float], ...]


class Table:
    """The grid's runs by (grid point, seed), each config's seeds split into truth and draws."""

    def __init__(self, runs: dict[Key, dict[int, Run]], study: Path = SMOKE, split: int | None = None):
        self.runs, self.study = runs, study  # study: the file whose space the grid covers
        self.keys = sorted(runs)
        self.learning_rates = sorted({k[0] for k in self.keys})
        # Which seeds define the truth: half of the seeds every config has, and half of the rest, drawn
        # per study (`split`). Seeds have effects common to all configs (on the smoke table seeds 1 and 11
        # are bad for every config), so a fixed split would tilt the truth against the draws for good.
        common = sorted(set.intersection(*(set(by) for by in runs.values())))
        extra = sorted(set().union(*runs.values()) - set(common))
        rng = np.random.default_rng([0 if split is None else split, 11])
        held = set(rng.permutation(common)[: (len(common) + 1) // 2].tolist())
        held |= set(rng.permutation(extra)[: (len(extra) + 1) // 2].tolist()) if extra else set()
        self.truth_seeds = {k: [s for s in sorted(by) if s in held] for k, by in runs.items()}
        self.world_seeds = [s for s in common if s not in held]  # seeds a world can be dealt: every config has them
        self.draw_seeds = {k: [s for s in sorted(by) if s not in held] for k, by in runs.items()}
        self._true = {k: statistics.fmean(runs[k][s].test for s in self.truth_seeds[k]) for k in self.keys}
        # The mean of what studies draw: the truth of the simulated world the race decides in.
        self._pool = {k: statistics.fmean(runs[k][s].test for s in self.draw_seeds[k]) for k in self.keys}
        self.ranked = sorted(self.keys, key=lambda k: -self._true[k])
        self.pool_ranked = sorted(self.keys, key=lambda k: -self._pool[k])
        self.best_key = self.ranked[0]
        self.best_value = self._true[self.best_key]
        self.epochs = max(r.epochs for by in runs.values() for r in by.values())

    def split(self, study_seed: int) -> "Table":
        """The same runs with study `study_seed`'s own truth/draw split of the seeds."""
        return Table(self.runs, self.study, split=study_seed)

    def mean(self, key: Key) -> float:
        """A config's mean over all its seeds (for a reader; no study is judged on it)."""
        return statistics.fmean(r.test for r in self.runs[key].values())

    def mean_value(self, where: Key | Mix) -> float:
        """`mean` of a grid point, or of a mix's neighbours weighted (bench/search_quality.py values real
        studies' configs this way)."""
        if isinstance(where[0], tuple):
            return sum(w * self.mean(k) for k, w in where)
        return self.mean(where)

    def point(self, config: dict[str, Any]) -> Mix:
        """Where a config sits on the grid: its two neighbouring learning rates, weighted linearly in
        log lr (one point when it lies on the grid or outside it), the choices exactly. A run of the
        config is a run of one neighbour, drawn by weight: a sampler that lands between grid points is
        neither rewarded nor punished for missing the table's own learning rates."""
        lrs, x = self.learning_rates, math.log(config["learning_rate"])
        choices = (int(config["num_generations"]), int(config["max_new_tokens"]))
        above = next((i for i, v in enumerate(lrs) if math.log(v) >= x - 1e-12), len(lrs) - 1)
        if above == 0 or math.log(lrs[above]) <= x + 1e-12 or x > math.log(lrs[-1]):
            parts = (((lrs[above], *choices), 1.0),)
        else:
            low, high = math.log(lrs[above - 1]), math.log(lrs[above])
            w = (x - low) / (high - low)
            parts = (((lrs[above - 1], *choices), 1 - w), ((lrs[above], *choices), w))
        for key, _ in parts:
            if key not in self.runs:
                raise KeyError(f"config {config} maps to {key}, which the table does not hold")
        return parts

    def true_value(self, where: Key | Mix) -> float:
        return self._weighted(self._true, where)

    def pool_value(self, where: Key | Mix) -> float:
        return self._weighted(self._pool, where)

    @staticmethod
    def _weighted(values: dict[Key, float], where: Key | Mix) -> float:
        if isinstance(where[0], tuple):
            return sum(w * values[k] for k, w in where)
        return values[where]

    def truth_runs(self, where: Key | Mix) -> list[Run]:
        """The truth runs of a grid point, or of a mix's nearer neighbour."""
        key = nearest(where) if isinstance(where[0], tuple) else where
        return [self.runs[key][s] for s in self.truth_seeds[key]]

    def draw(self, where: Key | Mix, rng: np.random.Generator, seed: int | None = None) -> Run:
        """A run of the grid point (of a mix's neighbour, drawn by weight): the one on `seed` (a world's),
        else one of its draw seeds at random."""
        if isinstance(where[0], tuple):
            u, key = rng.random(), where[-1][0]
            for k, w in where:
                if u < w:
                    key = k
                    break
                u -= w
        else:
            key = where
        if seed is not None:
            return self.runs[key][seed]
        seeds = self.draw_seeds[key]
        return self.runs[key][seeds[int(rng.integers(len(seeds)))]]


def nearest(where: Mix) -> Key:
    return max(where, key=lambda part: part[1])[0]


def load_table(path: Path = TABLE) -> Table:
    """Read a table CSV (columns learning_rate, num_generations, max_new_tokens, seed, e1..eN,
    test_value (test_in_range in the first smoke table), collapsed, diverged_epoch, seconds); its study
    file is the one its .json names (bench/table.py writes it), else studies/smoke.yaml."""
    import json

    meta = Path(path).with_suffix(".json")
    study = REPO / json.loads(meta.read_text()).get("study", SMOKE) if meta.is_file() else SMOKE
    runs: dict[Key, dict[int, Run]] = {}
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            epochs = sorted((k for k in row if k[:1] == "e" and k[1:].isdigit()), key=lambda k: int(k[1:]))
            curve = tuple(float(row[k]) for k in epochs if row[k] != "")
            diverged = int(row["diverged_epoch"]) if row["diverged_epoch"] else None
            # `collapsed` is race_summary.ended_collapsed's verdict, which bench/table.py wrote (the one
            # collapse rule); a collapsed or diverged run's test figure counts as 0.
            figure = row.get("test_value", row.get("test_in_range"))
            collapsed = row["collapsed"] == "1"
            test = 0.0 if collapsed or figure == "" else float(figure)
            key = (float(row["learning_rate"]), int(row["num_generations"]), int(row["max_new_tokens"]))
            runs.setdefault(key, {})[int(row["seed"])] = Run(curve, diverged, test, collapsed, float(row["seconds"]))
    return Table(runs, study)


class Draws:
    """One study's runs: (grid point, identity, world) -> a run from the point's draw seeds. The same
    identity always gets the same run; runs in one world share its table seed (the module's "Seed
    worlds"); runs with no world are independent draws."""

    def __init__(self, table: Table, study_seed: int, point: Callable[[dict[str, Any]], Mix] | None = None, worlds: bool = True):
        self.table, self.study_seed = table, study_seed
        self.point = point or table.point
        self.worlds = worlds  # False: every run an independent draw (the null study's contenders)
        self.epochs = 0  # trial-epochs trained through this object
        # This study's order of dealing the world seeds; a world gets the next one when first seen.
        order = np.random.default_rng([study_seed, 29]).permutation(table.world_seeds).tolist()
        self._deck, self._worlds = order, {}

    def world_seed(self, world: str) -> int | None:
        if world not in self._worlds:
            n = len(self._worlds)
            self._worlds[world] = self._deck[n] if n < len(self._deck) else None
        return self._worlds[world]

    def run(self, key: Mix, identity: str, world: str | None = None) -> Run:
        rng = np.random.default_rng([self.study_seed, zlib.crc32(identity.encode())])
        return self.table.draw(key, rng, None if world is None or not self.worlds else self.world_seed(world))


# --------------------------------------------------------------------------- one search


@dataclass
class SimTrial:
    number: int
    config: dict[str, Any]  # the four hyperparameters
    searched: dict[str, Any]  # the searched values (what the race compares)
    key: Mix
    run: Run
    optuna_trial: Any
    history: list[float] = field(default_factory=list)
    epoch: int = 0
    objective: float = float("nan")
    best_epoch_value: float = float("nan")  # today's practice ranks by the best single epoch
    diverged: bool = False
    done: bool = False
    started_at: float = 0.0  # simulated seconds
    ended_at: float | None = None

    @property
    def name(self) -> str:
        return f"t{self.number}"

    @property
    def ray_trial(self) -> SimpleNamespace:
        return SimpleNamespace(trial_id=f"trial_{self.number:05d}")  # all ASHA reads of a trial

    @property
    def epoch_seconds(self) -> float:
        return self.run.seconds / max(1, self.run.epochs)


def simulate_search(study, draws: Draws, trial_seeds: str = "one") -> list[SimTrial]:
    """One search as launch.build_tuner wires it, in an event queue over the runs' recorded seconds."""
    import optuna
    from ray.tune.schedulers import TrialScheduler
    from ray.tune.search.optuna import OptunaSearch

    from ratiotune.core.objective import OBJECTIVE, trailing_mean
    from ratiotune.search.launch import baseline_point, make_sampler, make_scheduler, param_space

    search, epochs = study.search, study.train.epochs
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    ot = optuna.create_study(sampler=make_sampler(study), direction="maximize" if search.mode == "max" else "minimize")
    baseline = baseline_point(study)
    if baseline:
        ot.enqueue_trial(baseline)  # OptunaSearch's points_to_evaluate
    distributions = OptunaSearch.convert_search_space(param_space(study))
    scheduler = make_scheduler(study)
    scheduler.set_search_properties(OBJECTIVE, search.mode)  # what TuneConfig(metric=, mode=) does
    trials: list[SimTrial] = []
    events: list[tuple[float, int, SimTrial]] = []  # (time an epoch ends, trial number, trial)
    now, running = 0.0, 0

    def start() -> None:
        nonlocal running
        while running < search.max_concurrent_trials and len(trials) < search.num_samples:
            ot_trial = ot.ask(fixed_distributions=distributions)
            config = study.hyperparameters(ot_trial.params)
            key = draws.point(config)
            trial = SimTrial(
                len(trials),
                config,
                {n: config[n] for n in study.searched()},
                key,
                # Every trial trains on train.seed; trial_seeds "each": an independent draw per trial (no
                # world, so the race's worlds are dealt as in the shipped design).
                draws.run(key, f"search/{len(trials)}", world="search" if trial_seeds == "one" else None),
                ot_trial,
                started_at=now,
            )
            scheduler.on_trial_add(None, trial.ray_trial)
            trials.append(trial)
            running += 1
            heapq.heappush(events, (now + trial.epoch_seconds, trial.number, trial))

    start()
    while events:
        now, _, trial = heapq.heappop(events)
        trial.epoch += 1
        draws.epochs += 1
        if trial.run.diverged_epoch == trial.epoch:
            trial.diverged, trial.objective = True, float("nan")
        else:
            trial.history.append(trial.run.curve[trial.epoch - 1])
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
            trial.done, trial.ended_at = True, now
            running -= 1
            start()
        else:
            heapq.heappush(events, (now + trial.epoch_seconds, trial.number, trial))
    return trials


# --------------------------------------------------------------------------- the race


def simulate_race(study, trials: list[SimTrial], draws: Draws) -> tuple[RaceResult, RacePlan, dict[str, Key]] | None:
    """race.py's race with table draws for Ray runs: the same plan, contenders and Race object.
    Its result, its plan and each contender's grid point; None when the plan refuses the race."""
    from ratiotune.core.intensify import PlanError
    from ratiotune.core.objective import trailing_mean
    from ratiotune.core.race_setup import race_setup, start_race
    from ratiotune.core.race_summary import worst_value

    epochs, window = study.train.epochs, study.search.objective_window
    clean = [t for t in trials if not t.diverged and math.isfinite(t.objective)]
    try:
        setup = race_setup(study, [(t.name, t.config, t.objective) for t in clean], search_epochs=sum(t.epoch for t in trials))
    except PlanError:
        return None
    keys = {t.name: t.key for t in clean}
    if setup.baseline is not None:
        keys[setup.baseline] = draws.point(study.hyperparameters(study.baseline()))
    # race.py's rules with the table's draws for Ray runs; seeds are draw labels here.
    race = start_race(study, setup, worst=worst_value(study, study.search.metric), seed=lambda j: j)
    while (stage := race.ask()) is not None:
        for request in stage.requests:
            run = draws.run(keys[request.contender], f"race/{request.contender}/{request.seed}", world=f"race/{request.seed}")
            draws.epochs += run.epochs
            if request.test:
                race.tell(request, None if run.diverged_epoch is not None else run.test, run.collapsed)
            else:
                race.tell(request, None if run.diverged_epoch is not None else trailing_mean(run.curve[:epochs], window))
    return race.result(), setup.plan, keys


# --------------------------------------------------------------------------- one study, one design


@dataclass(frozen=True)
class Design:
    """A pipeline to compare: smoke.yaml with `--set`-style overrides (fields a user can set)."""

    name: str
    overrides: tuple[str, ...] = ()
    # race: the shipping race decides; objective: the best search objective ships; best-epoch: the
    # best single epoch ships (today's practice by hand); oracle: the sampled config with the best
    # true value (no pipeline can: the bound on what the search's samples hold).
    pick: str = "race"
    unsearched: tuple[str, ...] = ()  # space entries removed (and from the baseline): fixed at train:'s value
    # one: every search trial on train.seed (what ships); each: trial n on a seed of its own (a lever
    # the seed worlds can measure, not a setting a user has).
    trial_seeds: str = "one"
    note: str = ""


def design_study(design: Design, study_seed: int, extra: tuple[str, ...] = (), study_file: Path = SMOKE):
    from ratiotune.core.study import apply_override, validate_study

    raw = yaml.safe_load(Path(study_file).read_text())
    raw["train"]["seed"] = study_seed
    if any(o.startswith("search.sampler=") for o in design.overrides):
        for name in ("startup_trials", "multivariate", "lr_points"):  # smoke's sampler settings: another starts from its defaults
            raw["search"].pop(name, None)
    for name in design.unsearched:
        raw["search"]["space"].pop(name, None)
        (raw["search"].get("baseline") or {}).pop(name, None)
    for override in (*design.overrides, *extra):
        apply_override(raw, override)
    study = validate_study(raw, source=f"design {design.name}")
    # A design's race.* values are candidate defaults (RaceSpec's), not numbers a user set: the plan
    # may lower them to fit the budget, as it does for a study that leaves them out.
    study.race.__pydantic_fields_set__.difference_update(
        o.split("=")[0].split(".")[1] for o in design.overrides if o.startswith("race.")
    )
    return study


def simulate_study(
    design: Design,
    table: Table,
    study_seed: int,
    extra: tuple[str, ...] = (),
    point: Callable[[dict[str, Any]], Mix] | None = None,
    worlds: bool = True,
) -> dict[str, Any]:
    """One simulated study: search, then the design's pick; what it ships and what that is worth.
    extra: overrides on top of the design's (a baseline for --error-rates); point: another map from
    configs to grid points (the null study maps every config to one); worlds: False draws every run
    independently (the null study: one config on one seed is one run, so paired contenders would tie)."""
    study = design_study(design, study_seed, extra, table.study)
    table = table.split(study_seed)
    draws = Draws(table, study_seed, point, worlds)
    trials = simulate_search(study, draws, design.trial_seeds)
    baseline = study.baseline()
    baseline_key = draws.point(study.hyperparameters(baseline)) if baseline else None
    clean = [t for t in trials if not t.diverged and math.isfinite(t.objective)]
    record: dict[str, Any] = {
        "design": design.name,
        "study": study_seed,
        "passed_gate": None,
        "looks": 0,
        "fallbacks": 0,
        "sampled_best": any(nearest(t.key) == table.best_key for t in trials),
    }
    shipped_values: list[float] | None = None
    if design.pick == "best-epoch":
        shipped = max(clean, key=lambda t: t.best_epoch_value).key
    elif design.pick == "oracle":
        shipped = max({t.key for t in trials}, key=table.true_value)
    elif design.pick == "objective" or not study.race.enabled:
        shipped = max(clean, key=lambda t: t.objective).key
    else:
        raced = simulate_race(study, trials, draws)
        if raced is None:
            record["refused"] = True
            shipped = baseline_key
        else:
            result, plan, keys = raced
            record["passed_gate"] = result.recommend
            record["looks"] = result.gate.look
            record["fallbacks"] = len(result.passed_over)
            record["ceiling_epochs"] = plan.ceiling * study.train.epochs
            name = result.recommended or result.shown
            shipped = keys[name]
            confirmed = result.confirmed[name]
            shipped_values, collapsed = confirmed.values, confirmed.collapsed
            record.update(prediction_check(table, shipped, shipped_values, collapsed))
    true = table.true_value(shipped)
    record.update(
        {
            "shipped": shipped,
            "true": true,
            "ratio": true / table.best_value,
            "trial_epochs": draws.epochs,
            "search_epochs": sum(t.epoch for t in trials),
            "worse_than_baseline": baseline_key is not None and shipped != baseline_key and true < table.true_value(baseline_key),
            # In the world the race decides in (the draws' own means): what its error rate is about.
            "worse_in_draws": baseline_key is not None
            and shipped != baseline_key
            and table.pool_value(shipped) < table.pool_value(baseline_key),
            "confirmed_challenger": record["passed_gate"] is True and baseline_key is not None,
        }
    )
    return record


def prediction_check(table: Table, key: Key, values: list[float | None], collapsed: list[bool]) -> dict[str, Any]:
    """What `best` states of one new run (stats.predict_run), held against the config's truth runs."""
    from ratiotune.core.stats import predict_run

    p = predict_run(values, collapsed)
    truth = table.truth_runs(key)
    true_collapse = statistics.fmean(r.collapsed for r in truth)
    out = {"collapse_covered": p["collapse_wilson95"][0] <= true_collapse <= p["collapse_wilson95"][1]}
    learned = [r.test for r in truth if not r.collapsed]
    if p["landing"] is not None and learned:
        out["landing_stated"] = p["landing_chance"]
        out["landing_held"] = statistics.fmean(p["landing"][0] <= v <= p["landing"][1] for v in learned)
    return out


# --------------------------------------------------------------------------- the designs


def designs(budget: int, study: Path = SMOKE) -> list[Design]:
    """The pipelines compared, all from `study` (the table's study file). Random search gets `budget`
    trial-epochs of full-length trials (main() passes the shipped design's median: equal compute); the
    other designs' compute is in the output, to compare. The designs around smoke's (its grid, its race's
    numbers, the designs it replaced) are in the catalogue of the smoke table only."""
    raw = yaml.safe_load(Path(study).read_text())
    epochs, samples = raw["train"]["epochs"], raw["search"]["num_samples"]
    random_trials = max(1, budget // epochs)
    random = (f"search.num_samples={random_trials}", "search.sampler=random", "search.scheduler.type=fifo", "race.enabled=false")
    # The shipped race, as many trials, another sampler: the field's samplers at their defaults.
    anchor = (f"search.num_samples={samples}",)
    name = Path(study).name
    generic = [
        Design("shipped", note=f"studies/{name} as it is in the repository"),
        Design(
            "random",
            (*random, "search.start_with_baseline=false"),
            pick="best-epoch",
            note=f"today's practice: {random_trials} random full-length trials, the best single epoch ships, no race",
        ),
        Design(
            "random-objective",
            random,
            pick="objective",
            note=f"{random_trials} random full-length trials, the best trailing-mean objective ships, no race",
        ),
        Design("shipped-seed-each", trial_seeds="each", note="shipped, each search trial on a seed of its own"),
        Design("shipped-oracle", pick="oracle", note="the shipped search, then the best config it sampled (a bound)"),
        Design("shipped-objective", pick="objective", note="the shipped search, then its best objective ships, no race"),
        Design(
            "tpe",
            ("search.sampler=tpe", *anchor),
            note=f"Optuna's TPESampler at its defaults (10 random start-up "
            f"trials), {samples} trials, the shipped scheduler and race",
        ),
        Design(
            "gp", ("search.sampler=gp", *anchor), note=f"Optuna's GPSampler at its defaults, {samples} trials, the shipped race"
        ),
        Design("qmc", ("search.sampler=qmc", *anchor), note=f"scrambled Sobol, {samples} trials, the shipped race"),
        Design("random-sampler", ("search.sampler=random", *anchor), note=f"random sampler, {samples} trials, the shipped race"),
    ]
    if Path(study).resolve() != SMOKE.resolve():
        return generic
    # The design shipped before issue 32 (smoke.yaml and RaceSpec's defaults of 2026-12-05 morning).
    before = (
        "search.sampler=tpe",
        "search.startup_trials=3",
        "search.multivariate=true",
        "search.num_samples=8",
        "search.scheduler.grace_period=4",
        "search.space.reward_scale={type: choice, values: [1, 10, 100], default: 100}",
        "search.baseline.reward_scale=100",
        "race.max_share=0.65",
        "race.fallbacks=2",
        "race.confirm_seeds=6",
        "race.second_look_seeds=4",
    )
    # The first staged design (issue 32's first pass): the grid, then the other choices at the best learning rate
    # (13 trials) under ASHA from epoch 2, the race's confirmation on 6 seeds and a second look on 4.
    staged_asha = (
        "search.num_samples=13",
        "search.scheduler={type: asha, grace_period: 2}",
        "race.confirm_seeds=6",
        "race.second_look_seeds=4",
    )
    return generic + [
        Design(
            "before",
            before,
            note="the design shipped before issue 32: TPE (3 start-up trials, multivariate), 8 trials, "
            "ASHA grace 4, reward_scale searched, race share 0.65, 2 fallbacks",
        ),
        Design(
            "staged-asha",
            staged_asha,
            note="issue 32's staged design's numbers on today's sampler: 13 trials, ASHA from epoch 2, "
            "confirmation on 6 seeds, second look on 4",
        ),
        # Around the shipped design: fewer or more trials, the grid's size, ASHA, the race's numbers.
        Design("staged-16", ("search.num_samples=16",), note="shipped with 16 trials (the grid, then 6 by pooled value)"),
        Design("staged-24", ("search.num_samples=24",), note="shipped with 24 trials (the grid, then 14 by pooled value)"),
        Design(
            "staged-asha-6",
            ("search.scheduler={type: asha, grace_period: 6, reduction_factor: 4}",),
            note="shipped under ASHA from epoch 6 (reduction factor 4)",
        ),
        Design(
            "staged-8",
            ("search.lr_points=8", "search.num_samples=16"),
            note="shipped with 8 learning rates (a grid off the table's), twice that many trials",
        ),
        Design(
            "staged-12",
            ("search.lr_points=12", "search.num_samples=24"),
            note="shipped with 12 learning rates (a grid off the table's), twice that many trials",
        ),
        # The race's selection (issue 41): how many challengers race, on how many seeds at most. On study
        # seeds 0-299, 3 x 4 led the shipped 4 x 8 (mean ratio 0.69 vs 0.65, best of a 2-4 x 4-8 x 90/95%
        # grid); on seeds 1000-1599 every one of these is level with the shipped race (docs/search-quality.md).
        Design("race-3x4", ("race.top_k=3", "race.max_seeds=4"), note="shipped with race.top_k 3, max_seeds 4"),
        Design("race-2x8", ("race.top_k=2",), note="shipped with race.top_k 2 (max_seeds 8)"),
        Design("race-4x4", ("race.max_seeds=4",), note="shipped with race.max_seeds 4 (top_k 4)"),
        Design("race-3x8", ("race.top_k=3",), note="shipped with race.top_k 3 (max_seeds 8)"),
        Design("confirm-6", ("race.confirm_seeds=6",), note="shipped with race.confirm_seeds 6"),
        Design("share-45", ("race.max_share=0.45",), note="shipped with race.max_share 0.45"),
        Design("fallbacks-0", ("race.fallbacks=0",), note="shipped without a fallback (2 looks: 97.5% each)"),
        Design("no-second-look", ("race.second_look_seeds=0",), note="shipped without the second look (2 looks: 97.5% each)"),
        Design("collapse-50", ("race.max_collapse_share=0.5",), note="shipped with race.max_collapse_share 0.5"),
        Design("confidence-90", ("race.confidence=0.9",), note="shipped with the race's confidence at 90% (3 looks: 96.7% each)"),
    ]


# gp is in the catalogue, not here: Optuna's GP fit takes ~2 s a study (--designs gp). The designs after
# tpe are the smoke table's own (designs()); on another table the list stops there.
COMPARED = (
    "shipped",
    "random",
    "random-objective",
    "shipped-oracle",
    "shipped-objective",
    "shipped-seed-each",
    "tpe",
    "qmc",
    "random-sampler",
    "before",
    "staged-asha",
    "staged-16",
    "staged-24",
    "staged-asha-6",
    "staged-8",
    "staged-12",
    "race-3x4",
    "race-2x8",
    "race-4x4",
    "race-3x8",
    "confirm-6",
    "share-45",
    "fallbacks-0",
    "no-second-look",
    "collapse-50",
    "confidence-90",
)


def simulate_design(design: Design, table: Table, studies: int, first: int = 0) -> list[dict[str, Any]]:
    return [simulate_study(design, table, first + k) for k in range(studies)]


# --------------------------------------------------------------------------- robustness to the defaults


def default_combinations(study_file: Path) -> list[tuple[str, ...]]:
    """Every combination of the defaults a user might write for the searched choices other than the
    learning rate (a held value, hyperparameters.held_values, is not searched), as `--set` overrides;
    the baseline stays as the file has it."""
    import itertools

    from ratiotune.core.hyperparameters import held_values
    from ratiotune.core.study import load_study

    study = load_study(study_file)
    space = study.search.space
    names = [n for n, spec in space.items() if n != "learning_rate" and spec.type == "choice" and n not in held_values(study)]
    return [
        tuple(f"search.space.{n}.default={v}" for n, v in zip(names, values))
        for values in itertools.product(*(space[n].values for n in names))
    ]


def across_defaults(design: Design, table: Table, studies: int, first: int) -> tuple[list[dict[str, Any]], str]:
    """The design from every combination of defaults, each against random search at its own median
    compute (full-length trials, the best trailing-mean objective ships), paired by study seed. Returns
    one row per combination and the summary line (issue 41's form)."""
    rows, pooled_diffs, all_records = [], [], []  # pooled_diffs: combination-major, study-minor
    references: dict[int, list[dict[str, Any]]] = {}  # random search by budget: it has no defaults to vary
    for extra in default_combinations(table.study):
        records = [simulate_study(design, table, first + k, extra) for k in range(studies)]
        budget = int(np.median([r["trial_epochs"] for r in records]))
        if budget not in references:
            random = {d.name: d for d in designs(budget, table.study)}["random-objective"]
            references[budget] = simulate_design(random, table, studies, first)
        reference = references[budget]
        d, lo, hi = paired_difference(records, reference)
        by_study = {r["study"]: r["true"] for r in reference}
        pooled_diffs += [r["true"] - by_study[r["study"]] for r in records]
        all_records += records
        s = summarize(records)
        rows.append(
            {
                "defaults": " ".join(o.split(".")[2] + "=" + o.split("=")[1] for o in extra),
                "ratio": statistics.fmean(r["ratio"] for r in records),
                "random_ratio": statistics.fmean(r["ratio"] for r in reference),
                "share_85": s["share_85"],
                "diff": (d, lo, hi),
                "trial_epochs": s["trial_epochs"],
            }
        )
    # The pooled interval resamples studies (each study's difference averaged over the combinations):
    # one study seed's cells share its table split and draws, so they are not independent samples.
    diffs = np.array(pooled_diffs).reshape(len(rows), studies).mean(axis=0)
    means = diffs[np.random.default_rng(0).integers(0, studies, size=(4000, studies))].mean(axis=1)
    ratio = statistics.fmean(r["ratio"] for r in all_records)
    share = statistics.fmean(r["ratio"] >= 0.85 for r in all_records)
    line = (
        f"across defaults: mean ratio {ratio:.2f} (worst {min(r['ratio'] for r in rows):.2f}), "
        f">= 85% of best in {share:.0%} (worst {min(r['share_85'] for r in rows):.0%}), "
        f"vs random {diffs.mean():+.3f} [{np.quantile(means, 0.025):+.3f}, {np.quantile(means, 0.975):+.3f}] "
        f"(worst cell lo {min(r['diff'][1] for r in rows):+.3f}) "
        f"at {np.median([r['trial_epochs'] for r in all_records]):.0f} trial-epochs"
    )
    return rows, line


def defaults_row(row: dict[str, Any]) -> str:
    d, lo, hi = row["diff"]
    return (
        f"{row['defaults']}: mean ratio {row['ratio']:.2f} (random's {row['random_ratio']:.2f}), "
        f">= 85% of best in {row['share_85']:.0%}, vs random {d:+.3f} [{lo:+.3f}, {hi:+.3f}] "
        f"at {row['trial_epochs']:.0f} trial-epochs"
    )


# --------------------------------------------------------------------------- the race's error rates


def baseline_overrides(key: Key) -> tuple[str, ...]:
    lr, gens, tokens = key
    return (
        f"search.baseline.learning_rate={lr}",
        f"search.baseline.num_generations={gens}",
        f"search.baseline.max_new_tokens={tokens}",
    )


def error_rates(
    design: Design, table: Table, studies: int, first: int = 0, null_pool: int = 20, strong: tuple[int, ...] = (2, 4, 10)
) -> dict[str, Any]:
    """The race's stated error against what it does on the table.

    null: every config of the study is one config (drawn per study from the `null_pool` best),
    each contender's runs drawn independently, so any confirmed challenger is a false one.
    strong: the study's baseline is the 2nd-, 4th- or 10th-best config; a study errs when it ships
    a config worse than that baseline. Ranks and "worse" are the draws' own means: the world the
    race decides in. Judged on the held-out half instead, two halves of a config's seeds that
    differ by their own sampling noise (sd ~0.1 at 5 seeds) would count as the race's errors;
    that figure is printed too (`held out`).
    """
    from ratiotune.core.stats import wilson

    null = []
    for k in range(studies):
        pool = table.split(first + k).pool_ranked[:null_pool]
        key = pool[int(np.random.default_rng([first + k, 7]).integers(len(pool)))]
        record = simulate_study(
            design, table, first + k, baseline_overrides(key), point=lambda config, key=key: ((key, 1.0),), worlds=False
        )
        null.append(record["passed_gate"] is True)
    ranks, strong = strong, {}
    for rank in ranks:
        # The baseline: the rank-th best config of each study's own draws.
        keys = [table.split(first + k).pool_ranked[rank - 1] for k in range(studies)]
        records = [simulate_study(design, table, first + k, baseline_overrides(keys[k])) for k in range(studies)]
        key = max(set(keys), key=keys.count)
        strong[rank] = {
            "key": key,
            "value": table.mean(key),
            "worse": sum(r["worse_in_draws"] for r in records),
            "held_out": sum(r["worse_than_baseline"] for r in records),
            "confirmed": sum(r["confirmed_challenger"] for r in records),
        }
    worst_rank = max(strong, key=lambda r: strong[r]["worse"]) if strong else None
    level = 1 - design_study(design, 0, study_file=table.study).race.confidence
    return {
        "studies": studies,
        "null": sum(null),
        "null_wilson": wilson(sum(null), studies),
        "strong": strong,
        "worst_rank": worst_rank,
        "worst_wilson": wilson(strong[worst_rank]["worse"], studies) if strong else None,
        "level": level,
    }


def error_line(rates: dict[str, Any]) -> str:
    n = rates["studies"]
    lo, hi = rates["null_wilson"]
    wlo, whi = rates["worst_wilson"]
    worse = rates["strong"][rates["worst_rank"]]["worse"]
    return (
        f"gate error: null confirms {rates['null'] / n:.1%} [{lo:.1%}, {hi:.1%}]; worse than a strong baseline "
        f"{worse / n:.1%} [{wlo:.1%}, {whi:.1%}] (stated level {rates['level']:.0%})"
    )


# --------------------------------------------------------------------------- what more compute buys


def compute_curve(
    design: Design,
    table: Table,
    studies: int,
    first: int = 0,
    sizes: tuple[int, ...] = (4, 6, 8, 10, 13, 16, 20, 26),
    budgets: tuple[int, ...] = (96, 144, 192, 240, 336, 480, 600),
) -> dict[str, list[dict[str, float]]]:
    """Shipped true value against trial-epochs: `design` at several search sizes (search.num_samples; the
    race sized by its own rules), random search (the best single epoch of full-length trials) at several
    budgets. Each point: median trial-epochs, median true value and its quartiles, share >= 85% of best."""

    def point(records: list[dict[str, Any]]) -> dict[str, float]:
        s = summarize(records)
        return {"trial_epochs": s["trial_epochs"], "median": s["median"], "q1": s["q1"], "q3": s["q3"], "share_85": s["share_85"]}

    curve: dict[str, list[dict[str, float]]] = {design.name: [], "random": []}
    for n in sizes:
        sized = Design(f"{design.name}-n{n}", (*design.overrides, f"search.num_samples={n}"), unsearched=design.unsearched)
        curve[design.name].append(point(simulate_design(sized, table, studies, first)))
    scale = design_study(design, 0, study_file=table.study).train.epochs / 12  # the budgets are smoke's 12-epoch trials
    for budget in budgets:
        random = {d.name: d for d in designs(int(budget * scale), table.study)}["random"]
        curve["random"].append(point(simulate_design(random, table, studies, first)))
    return curve


def plot_curve(table: Table, curve: dict[str, list[dict[str, float]]], path: Path, studies: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in curve.items():
        x = [p["trial_epochs"] for p in points]
        y = [p["median"] for p in points]
        err = [[p["median"] - p["q1"] for p in points], [p["q3"] - p["median"] for p in points]]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=f"{name} (median, quartiles)")
    best = max(table.mean(k) for k in table.keys)
    ax.axhline(best, color="gray", linestyle=":", label="best grid config (mean over all its seeds)")
    ax.axhline(0.85 * best, color="tab:red", linestyle="--", linewidth=1, label="85% of it")
    ax.set_xlabel("trial-epochs per study (median)")
    ax.set_ylabel("shipped config's true value")
    ax.set_title(f"What more compute buys ({studies} simulated studies per point)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- reporting


def paired_difference(
    records: list[dict[str, Any]], reference: list[dict[str, Any]], resamples: int = 4000
) -> tuple[float, float, float]:
    """Mean difference of true value (design - reference) over studies with the same seed, and its
    95% bootstrap interval (percentile, studies resampled)."""
    by_study = {r["study"]: r["true"] for r in reference}
    d = np.array([r["true"] - by_study[r["study"]] for r in records if r["study"] in by_study])
    rng = np.random.default_rng(0)
    means = d[rng.integers(0, len(d), size=(resamples, len(d)))].mean(axis=1)
    return float(d.mean()), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    trues = np.array([r["true"] for r in records])
    ratios = np.array([r["ratio"] for r in records])
    gated = [r for r in records if r["passed_gate"] is not None]
    q1, med, q3 = np.percentile(trues, [25, 50, 75])
    collapse = [r["collapse_covered"] for r in records if "collapse_covered" in r]
    landing = [r for r in records if "landing_held" in r]
    return {
        "studies": len(records),
        "median": med,
        "q1": q1,
        "q3": q3,
        "mean": float(trues.mean()),
        "share_85": float(np.mean(ratios >= 0.85)),
        "sampled_best": statistics.fmean(r["sampled_best"] for r in records),
        "trial_epochs": float(np.median([r["trial_epochs"] for r in records])),
        "trial_epochs_mean": statistics.fmean(r["trial_epochs"] for r in records),
        "trial_epochs_max": max(r["trial_epochs"] for r in records),
        "not_confirmed": statistics.fmean(not r["passed_gate"] for r in gated) if gated else None,
        "second_look": statistics.fmean(r["looks"] >= 2 and r["fallbacks"] == 0 for r in gated) if gated else None,
        "fallback": statistics.fmean(r["fallbacks"] > 0 for r in gated) if gated else None,
        "collapse_covered": statistics.fmean(collapse) if collapse else None,
        "landing_stated": statistics.fmean(r["landing_stated"] for r in landing) if landing else None,
        "landing_held": statistics.fmean(r["landing_held"] for r in landing) if landing else None,
    }


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def markdown(table: Table, results: dict[str, list[dict[str, Any]]], catalogue: dict[str, Design]) -> str:
    seeds = sorted({len(by) for by in table.runs.values()})
    lines = [
        f"Table: {len(table.keys)} grid points, {seeds[0]}-{seeds[-1]} seeds each (per study, half define the truth and "
        f"the study draws from the other half); best grid config over all seeds {max(table.keys, key=table.mean)}, "
        f"{max(table.mean(k) for k in table.keys):.3f}; true values and the 85% line are each study's own.",
        "",
        "| design | studies | true value median [IQR] | mean - random's [95% CI] | mean - shipped's [95% CI] | >= 85% of best | "
        "sampled the best | trial-epochs median / mean (max) | not confirmed | second look / fallback | collapse chance covers | "
        "new run in range (stated) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    reference, shipped = results.get("random"), results.get("shipped")

    def versus(records: list[dict[str, Any]], other: list[dict[str, Any]] | None, same: bool) -> str:
        if other is None or same:
            return "-"
        d, lo, hi = paired_difference(records, other)
        return f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]"

    for name, records in results.items():
        s = summarize(records)
        diff = versus(records, reference, name == "random") + " | " + versus(records, shipped, name == "shipped")
        landing = "n/a" if s["landing_held"] is None else f"{s['landing_held']:.0%} ({s['landing_stated']:.0%})"
        looks = "-" if s["second_look"] is None else f"{pct(s['second_look'])} / {pct(s['fallback'])}"
        lines.append(
            f"| {name} | {s['studies']} | {s['median']:.3f} [{s['q1']:.3f}, {s['q3']:.3f}] | {diff} | {pct(s['share_85'])} | "
            f"{pct(s['sampled_best'])} | {s['trial_epochs']:.0f} / {s['trial_epochs_mean']:.0f} ({s['trial_epochs_max']}) | "
            f"{pct(s['not_confirmed'])} | {looks} | {pct(s['collapse_covered'])} | {landing} |"
        )
    lines += ["", "Designs:", ""]
    for name in results:
        d = catalogue[name]
        lines.append(f"- **{name}**: {d.note or ', '.join(d.overrides) or 'as shipped'}")
    return "\n".join(lines) + "\n"


def plot(table: Table, results: dict[str, list[dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 0.45 * len(names) + 2.5))
    left.boxplot(
        [[r["ratio"] for r in results[n]] for n in names],
        orientation="horizontal",
        tick_labels=names,
        whis=(5, 95),
        showmeans=True,
    )
    left.axvline(0.85, color="tab:red", linestyle="--", linewidth=1, label="85% of the best grid config")
    left.set_xlabel("shipped config's true value / best grid config's")
    left.set_title(f"{len(results[names[0]])} simulated studies per design")
    left.legend(loc="lower left", fontsize=8)
    left.invert_yaxis()
    for name in names[:7]:
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
    fields = [
        "design",
        "study",
        "shipped",
        "true",
        "ratio",
        "trial_epochs",
        "search_epochs",
        "passed_gate",
        "looks",
        "fallbacks",
        "worse_than_baseline",
        "sampled_best",
    ]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for records in results.values():
            for r in records:
                row = {**r, "shipped": "/".join(map(str, nearest(r["shipped"])))}
                writer.writerow(row)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--studies", type=int, default=200, help="simulated studies per design (default 200)")
    parser.add_argument(
        "--first", type=int, default=1000, help="the first study's seed (default 1000: the designs were chosen on studies 0-299)"
    )
    parser.add_argument("--designs", help="comma-separated design names, or 'all' (default: COMPARED)")
    parser.add_argument("--out", type=Path, default=OUT, help="output prefix: .md and .csv")
    parser.add_argument("--plot", type=Path, default=PLOT)
    parser.add_argument(
        "--curve",
        action="store_true",
        help="the compute curve of the first chosen design (default: shipped) and random search; writes --curve-plot",
    )
    parser.add_argument("--curve-plot", type=Path, default=CURVE)
    parser.add_argument(
        "--error-rates",
        action="store_true",
        help="the race's error rates for each chosen design (default: shipped); no files written",
    )
    parser.add_argument(
        "--defaults",
        choices=["all"],
        help="replay each chosen design (default: shipped) from every combination of the other searched values' "
        "defaults, against random search at equal compute; one line per combination, then the pooled line",
    )
    args = parser.parse_args(argv)
    table = load_table(args.table)
    if args.defaults:
        started = time.perf_counter()
        catalogue = {d.name: d for d in designs(SMOKE_BUDGET, table.study)}
        chosen = args.designs.split(",") if args.designs else ["shipped"]
        unknown = [n for n in chosen if n not in catalogue]
        if unknown:
            print(f"simulate: --designs: unknown {', '.join(unknown)}; allowed: {', '.join(catalogue)}", file=sys.stderr)
            return 2
        lines = []
        for name in chosen:
            rows, line = across_defaults(catalogue[name], table, args.studies, args.first)
            lines += [f"{name}: {defaults_row(row)}" for row in rows] + ([f"{name}: {line}"] if len(chosen) > 1 else [])
            print("\n".join(lines[-len(rows) - (len(chosen) > 1) :]), flush=True)
            print(f"{name}: ({(time.perf_counter() - started) / 60:.1f} min)", flush=True)
        print(line)  # the last design's (the shipped one's when none is named)
        # Kept beside the other outputs (docs/search-quality.md quotes it): the command, the rows, the line.
        command = "python bench/simulate.py " + " ".join(argv if argv is not None else sys.argv[1:])
        out = args.out.with_name(args.out.name + "_defaults.md")
        body = "\n".join([*lines, line] if len(chosen) == 1 else lines)
        out.write_text(f"# Across defaults: {table.study.name}\n\n```text\n$ {command}\n{body}\n```\n")
        return 0
    started = time.perf_counter()
    # Equal compute: random search gets the shipped design's median trial-epochs (in full-length trials).
    shipped = simulate_design(Design("shipped"), table, args.studies, first=args.first)
    budget = int(np.median([r["trial_epochs"] for r in shipped]))
    catalogue = {d.name: d for d in designs(budget, table.study)}
    default = ("shipped",) if args.error_rates or args.curve else tuple(n for n in COMPARED if n in catalogue)
    chosen = list(default) if not args.designs else list(catalogue) if args.designs == "all" else args.designs.split(",")
    unknown = [n for n in chosen if n not in catalogue]
    if unknown:
        print(f"simulate: --designs: unknown {', '.join(unknown)}; allowed: {', '.join(catalogue)}", file=sys.stderr)
        return 2
    if args.curve:
        curve = compute_curve(catalogue[chosen[0]], table, args.studies, first=args.first)
        for name, points in curve.items():
            for p in points:
                print(
                    f"{name}: {p['trial_epochs']:.0f} trial-epochs: median {p['median']:.3f} [{p['q1']:.3f}, {p['q3']:.3f}], "
                    f">= 85% of best in {p['share_85']:.0%}",
                    flush=True,
                )
        plot_curve(table, curve, args.curve_plot, args.studies)
        return 0
    if args.error_rates:
        line = ""
        for name in chosen:
            rates = error_rates(catalogue[name], table, args.studies, first=args.first)
            for rank, s in rates["strong"].items():
                print(
                    f"{name}: baseline = each study's {rank}th-best config (most often {s['key']}, {s['value']:.3f}): "
                    f"ships a worse one in {s['worse']} of {rates['studies']} studies "
                    f"({s['held_out']} judged on the held-out half); "
                    f"confirms a challenger in {s['confirmed']}",
                    flush=True,
                )
            line = error_line(rates)
            print(f"{name}: {line} ({(time.perf_counter() - started) / 60:.1f} min)", flush=True)
        print(line)
        return 0
    results = {}
    for name in chosen:
        t0 = time.perf_counter()
        results[name] = shipped if name == "shipped" else simulate_design(catalogue[name], table, args.studies, first=args.first)
        s = summarize(results[name])
        print(
            f"{name}: median {s['median']:.3f} share>=85% {s['share_85']:.0%} trial-epochs {s['trial_epochs']:.0f} "
            f"({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = "python bench/simulate.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = f"`{command.strip()}` ({(time.perf_counter() - started) / 60:.1f} min)\n\n" + markdown(table, results, catalogue)
    args.out.with_suffix(".md").write_text(text)
    write_csv(args.out.with_suffix(".csv"), results)
    plot(table, results, args.plot)
    print(text)
    s = summarize(results["shipped"]) if "shipped" in results else None
    if s is not None and "random" in results:
        d, lo, hi = paired_difference(results["shipped"], results["random"])
        print(
            f"shipped design: median {s['median']:.3f}, >= 85% of best in {s['share_85']:.0%} of studies, "
            f"vs random {d:+.3f} [{lo:+.3f}, {hi:+.3f}] at {s['trial_epochs']:.0f} trial-epochs"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
