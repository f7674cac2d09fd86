"""The HPO field's anchors replayed against the run table, at random search's compute.

    pip install -e '.[test,bench]'   # into its own venv: Optuna and Ray are ratiotune's;
                                     # SMAC3, Syne Tune, hpbandster are bench extras
    python bench/anchors.py --studies 200 --ray-studies 16 --cache /tmp/anchors   # docs/bench/anchors.md
    python bench/anchors.py --studies 20 --anchors optuna-tpe,smac-hb --table bench/table/smoke_table.csv

Each anchor is run as its documentation tells a user to run it on their own training function,
here a blackbox over bench/simulate.py's table and noise model:

- a study gets runs only through `simulate.Draws(table, study_seed).run(point, identity, world="search")`:
  one identity is one training run, and every run of a search is on the study's one search seed, as
  ratiotune's own search trials are (simulate.py's "Seed worlds"); the config's true value (what the
  study is judged on) comes from the other seeds;
- evaluating (config, epochs) reads the drawn run's eval curve up to that epoch, and reports
  ratiotune's search objective there (`objective.trailing_mean`, the last 4 epochs); a run that
  diverged by then reports the worst value, 0 (the metric is a fraction in [0, 1]);
- compute is counted in trial-epochs (one epoch of one run) against one budget, 240 per study, as
  random search's 20 full-length trials: an anchor stops before an evaluation that would pass it.
  A run asked for more epochs resumes from where it stopped (ratiotune checkpoints every epoch),
  so a promotion costs only its extra epochs;
- the anchor ships its own incumbent at the end; it is judged by `Table.true_value(Table.point(c))`.

The space is the table's three dimensions from the study file (learning_rate log-uniform,
num_generations and max_new_tokens categorical); smoke's fourth, reward_scale, is left out: the
table does not hold it (it cancels under advantage normalization).

Random search is simulate.py's `random` design for the same study seeds (20 full-length trials,
the best single epoch ships), so every difference is paired by study; `random-objective` (the same
search, the best trailing mean ships) separates an anchor's search from its ship rule.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import simulate  # noqa: E402  (bench/simulate.py: the table, the draws, the reporting)
from simulate import Draws, Table, nearest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "bench" / "anchors.md"
BUDGET = simulate.SMOKE_BUDGET  # 240 trial-epochs: random search's 20 full-length trials
WINDOW = 4  # smoke's search.objective_window
WORST = 0.0  # the metric (eval/in_range_fraction) is a fraction; a diverged run is worth nothing
NAMES = ("learning_rate", "num_generations", "max_new_tokens")  # the dimensions the table holds


# --------------------------------------------------------------------------- the blackbox


class Blackbox:
    """One study's table as an HPO library sees a training function: (config, epochs, identity) -> the
    search objective at that epoch, with the trial-epochs it cost counted against the budget."""

    def __init__(self, table: Table, study_seed: int, budget: int = BUDGET, window: int = WINDOW):
        self.table, self.budget, self.window = table, budget, window
        self.draws = Draws(table, study_seed)
        self.trained: dict[str, int] = {}  # identity -> epochs trained so far (a run resumes)
        self.spent = 0
        self.evaluations = 0
        self.sampled: set = set()  # grid points (nearest) ever trained

    def cost(self, identity: str, epochs: int) -> int:
        return max(0, epochs - self.trained.get(identity, 0))

    def affordable(self, identity: str, epochs: int) -> bool:
        return self.spent + self.cost(identity, epochs) <= self.budget

    def evaluate(self, config: dict[str, Any], epochs: int, identity: str) -> float:
        if not 1 <= epochs <= self.table.epochs:
            raise ValueError(f"epochs {epochs} outside 1..{self.table.epochs}")
        if not self.affordable(identity, epochs):
            raise RuntimeError(f"{identity} at {epochs} epochs would pass the budget ({self.spent} of {self.budget} spent)")
        key = self.table.point(config)
        run = self.draws.run(key, identity, world="search")  # a search's trials share train.seed
        self.spent += self.cost(identity, epochs)
        self.trained[identity] = max(epochs, self.trained.get(identity, 0))
        self.draws.epochs = self.spent
        self.evaluations += 1
        self.sampled.add(nearest(key))
        return objective_at(run, epochs, self.window)


def objective_at(run: simulate.Run, epochs: int, window: int = WINDOW) -> float:
    from ratiotune.core.objective import trailing_mean

    if run.diverged_epoch is not None and run.diverged_epoch <= epochs:
        return WORST
    value = trailing_mean(run.curve[:epochs], window)
    return value if math.isfinite(value) else WORST


def config_of(values: dict[str, Any]) -> dict[str, Any]:
    return {
        "learning_rate": float(values["learning_rate"]),
        "num_generations": int(values["num_generations"]),
        "max_new_tokens": int(values["max_new_tokens"]),
    }


def tag(config: dict[str, Any]) -> str:
    """A config's part of a run identity: the same config on the same seed is the same run."""
    c = config_of(config)
    return f"{c['learning_rate']:.9g}/{c['num_generations']}/{c['max_new_tokens']}"


def space(table: Table) -> dict[str, dict[str, Any]]:
    """The table's three dimensions as the study file declares them."""
    declared = yaml.safe_load(Path(table.study).read_text())["search"]["space"]
    out = {name: declared[name] for name in NAMES}
    if out["learning_rate"].get("type") != "loguniform":
        raise ValueError(f"{table.study}: learning_rate is {out['learning_rate']}; anchors expect loguniform")
    return out


# --------------------------------------------------------------------------- (a) Optuna


def config_space(table: Table, seed: int):
    """The study's space as ConfigSpace writes it (SMAC3 and Ray's BOHB both take one)."""
    from ConfigSpace import Categorical, ConfigurationSpace, Float

    s = space(table)
    cs = ConfigurationSpace(seed=seed)
    cs.add(
        [
            Float("learning_rate", (s["learning_rate"]["low"], s["learning_rate"]["high"]), log=True),
            Categorical("num_generations", list(s["num_generations"]["values"])),
            Categorical("max_new_tokens", list(s["max_new_tokens"]["values"])),
        ]
    )
    return cs


def optuna_anchor(sampler_name: str) -> Callable[[Table, int, Blackbox], dict[str, Any]]:
    """Optuna's sampler at its defaults, ask/tell, full-length trials until the budget is spent; the
    best trial's params ship."""

    def run(table: Table, seed: int, box: Blackbox) -> dict[str, Any]:
        import optuna
        from optuna.distributions import CategoricalDistribution, FloatDistribution

        optuna.logging.set_verbosity(optuna.logging.ERROR)
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        s = space(table)
        distributions = {
            "learning_rate": FloatDistribution(s["learning_rate"]["low"], s["learning_rate"]["high"], log=True),
            "num_generations": CategoricalDistribution(s["num_generations"]["values"]),
            "max_new_tokens": CategoricalDistribution(s["max_new_tokens"]["values"]),
        }
        sampler = optuna.samplers.TPESampler(seed=seed) if sampler_name == "tpe" else optuna.samplers.GPSampler(seed=seed)
        study = optuna.create_study(direction="maximize", sampler=sampler)
        epochs = table.epochs
        while box.affordable(f"{sampler_name}/{len(study.trials)}", epochs):
            trial = study.ask(distributions)
            study.tell(trial, box.evaluate(trial.params, epochs, f"{sampler_name}/{trial.number}"))
        return config_of(study.best_params)

    return run


# --------------------------------------------------------------------------- (b) SMAC3


def smac_anchor(kind: str) -> Callable[[Table, int, Blackbox], dict[str, Any]]:
    """SMAC3 through ask/tell, non-deterministic (each trial carries a seed; seed = a draw identity).

    hb: the multi-fidelity facade with its Hyperband intensifier over epochs (min budget: smoke's ASHA
    grace period, 4; eta 3, so rungs at 4 and 12 epochs). bo: the hyperparameter-optimization facade
    with its intensifier, full-length runs: a challenger must match the incumbent on the incumbent's
    seeds, and the incumbent gains seeds (up to max_config_calls = 3) as it is challenged. Both ship
    the intensifier's incumbent."""

    def run(table: Table, seed: int, box: Blackbox) -> dict[str, Any]:
        import logging

        from smac import HyperparameterOptimizationFacade, MultiFidelityFacade, Scenario
        from smac.intensifier.hyperband import Hyperband
        from smac.runhistory.dataclasses import TrialValue

        logging.getLogger("smac").setLevel(logging.ERROR)
        cs = config_space(table, seed)

        def target(config, seed: int = 0, budget: float = float(table.epochs)) -> float:  # never called: ask/tell
            raise RuntimeError("anchors drives SMAC through ask/tell")

        with tempfile.TemporaryDirectory() as out:
            if kind == "hb":
                scenario = Scenario(
                    cs,
                    deterministic=False,
                    n_trials=box.budget // 4,
                    min_budget=4,
                    max_budget=table.epochs,
                    seed=seed,
                    output_directory=Path(out) / "smac",
                )
                smac = MultiFidelityFacade(
                    scenario, target, intensifier=Hyperband(scenario, eta=3), overwrite=True, logging_level=logging.ERROR
                )
            else:
                scenario = Scenario(
                    cs, deterministic=False, n_trials=box.budget // table.epochs, seed=seed, output_directory=Path(out) / "smac"
                )
                smac = HyperparameterOptimizationFacade(scenario, target, overwrite=True, logging_level=logging.ERROR)
            while True:
                info = smac.ask()
                config = config_of(dict(info.config))
                epochs = table.epochs if info.budget is None else int(round(info.budget))
                identity = f"smac-{kind}/{tag(config)}/{info.seed}"
                if not box.affordable(identity, epochs):
                    break
                value = box.evaluate(config, epochs, identity)
                smac.tell(info, TrialValue(cost=-value), save=False)  # SMAC minimizes
            incumbent = smac.intensifier.get_incumbent()
        return config_of(dict(incumbent))

    return run


# --------------------------------------------------------------------------- (c) Syne Tune


def syne_anchor(kind: str) -> Callable[[Table, int, Blackbox], dict[str, Any]]:
    """A Syne Tune scheduler on its simulated back end (UserBlackboxBackend, SimulatorCallback), the
    table as a user-defined blackbox with fidelity `epoch`; 2 workers (smoke's max_concurrent_trials).
    asha: ASHA (random search, stopping type); bohb: its BOHB (ASHA with the KDE searcher). Both with
    their default reduction factor 3 and grace period 4 (smoke's; rungs at 4 and 12 epochs). The
    tuner stops when the trials' reports (one per epoch) reach the budget; reports past it (a worker
    finishing an epoch in the same simulated instant) are not counted and never ship. Ships what
    Syne Tune's ExperimentResult.best_config() would: the config of the best report of any trial."""

    def run(table: Table, seed: int, box: Blackbox) -> dict[str, Any]:
        import logging
        import os

        import numpy as np
        import syne_tune.config_space as sp
        from syne_tune import Tuner
        from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback
        from syne_tune.blackbox_repository import UserBlackboxBackend
        from syne_tune.blackbox_repository.blackbox import Blackbox as SyneBlackbox
        from syne_tune.optimizer.baselines import ASHA, BOHB
        from syne_tune.tuner_callback import TunerCallback

        for name in ("syne_tune", "syne_tune.tuner", "syne_tune.backend"):
            logging.getLogger(name).setLevel(logging.ERROR)
        s, epochs = space(table), table.epochs
        config_space = {
            "learning_rate": sp.loguniform(s["learning_rate"]["low"], s["learning_rate"]["high"]),
            "num_generations": sp.choice(list(s["num_generations"]["values"])),
            "max_new_tokens": sp.choice(list(s["max_new_tokens"]["values"])),
        }

        class TableBlackbox(SyneBlackbox):
            """Every epoch's objective and cumulative seconds of the run drawn for the current trial."""

            identity = ""

            def __init__(self):
                super().__init__(config_space, {"epoch": sp.randint(1, epochs)}, ["objective", "elapsed"])

            @property
            def fidelity_values(self):
                return np.arange(1, epochs + 1)

            def _objective_function(self, configuration, fidelity=None, seed=None):
                config = config_of(configuration)
                run_ = box.draws.run(table.point(config), self.identity, world="search")
                per_epoch = run_.seconds / max(1, run_.epochs)
                return np.array([[objective_at(run_, e), e * per_epoch] for e in range(1, epochs + 1)])

        class Backend(UserBlackboxBackend):
            """One trial = one drawn run: its identity is the trial id (a resumed trial keeps its run)."""

            def _run_job_and_collect_results(self, trial_id, config=None):
                self.blackbox.identity = f"syne-{kind}/{trial_id}"
                return super()._run_job_and_collect_results(trial_id, config)

        class Ledger(TunerCallback):
            """Counts trial-epochs (one report = one epoch trained) and keeps the reports within budget."""

            def __init__(self):
                self.reports: list[tuple[float, dict[str, Any]]] = []

            def on_trial_result(self, trial, status, result, decision):
                if box.spent < box.budget:
                    box.spent += 1
                    box.evaluations += 1
                    box.sampled.add(nearest(table.point(config_of(trial.config))))
                    self.reports.append((float(result["objective"]), config_of(trial.config)))

        blackbox = TableBlackbox()
        backend = Backend(blackbox=blackbox, elapsed_time_attr="elapsed")
        common = dict(
            config_space=config_space,
            metric="objective",
            time_attr="epoch",
            max_t=epochs,
            do_minimize=False,
            random_seed=seed,
            grace_period=4,
            reduction_factor=3,
        )
        scheduler = ASHA(**common) if kind == "asha" else BOHB(**common)
        ledger = Ledger()
        with tempfile.TemporaryDirectory() as out:
            os.environ["SYNETUNE_FOLDER"] = out
            tuner = Tuner(
                trial_backend=backend,
                scheduler=scheduler,
                stop_criterion=lambda status: box.spent >= box.budget,
                n_workers=2,
                sleep_time=0,
                callbacks=[SimulatorCallback(), ledger],
                save_tuner=False,
                results_update_interval=1e9,
                print_update_interval=1e9,
                tuner_name=f"anchor-{kind}-{seed}",
            )
            with contextlib.redirect_stdout(io.StringIO()):  # the tuner prints its status table
                tuner.run()
        return max(ledger.reports, key=lambda r: r[0])[1]

    return run


# --------------------------------------------------------------------------- (d) Ray Tune


def ray_bohb(table: Table, seed: int, box: Blackbox) -> dict[str, Any]:
    """Ray Tune's HyperBandForBOHB with TuneBOHB (hpbandster's KDE) as its documentation pairs them:
    a class trainable (one step = one epoch, a checkpoint holds the epoch so a paused trial resumes),
    max_t 12, reduction factor 3; 2 concurrent trials. The driver counts trial-epochs in a callback and
    stops every trial once the budget is reached (reports past it are not counted and never ship).
    Ships the config of the best report within budget (ResultGrid.get_best_result(scope="all"))."""
    import json
    import os

    import ray
    from ray import tune
    from ray.tune import Callback, Stopper
    from ray.tune.schedulers import HyperBandForBOHB
    from ray.tune.search.bohb import TuneBOHB

    if not ray.is_initialized():
        # Trial actors unpickle the trainable, which refers to this module and simulate.py: both in bench/.
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            logging_level="ERROR",
            runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parent)}},
        )
    cs = config_space(table, seed)

    class TableTrainable(tune.Trainable):
        def setup(self, config, table=None, study_seed=0):
            self.run_ = Draws(table, study_seed).run(table.point(config_of(config)), f"ray-bohb/{self.trial_id}", world="search")
            self.epoch = 0

        def step(self):
            self.epoch += 1
            return {"objective": objective_at(self.run_, self.epoch), "done": self.epoch >= table.epochs}

        def save_checkpoint(self, checkpoint_dir):
            Path(checkpoint_dir, "epoch.json").write_text(json.dumps(self.epoch))

        def load_checkpoint(self, checkpoint_dir):
            self.epoch = json.loads(Path(checkpoint_dir, "epoch.json").read_text())

    reports: list[tuple[float, dict[str, Any]]] = []

    class Ledger(Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            if box.spent < box.budget:
                box.spent += 1
                box.evaluations += 1
                config = config_of(trial.config)
                box.sampled.add(nearest(table.point(config)))
                reports.append((float(result["objective"]), config))

    class Budget(Stopper):
        def __call__(self, trial_id, result):
            return box.spent >= box.budget

        def stop_all(self):
            return box.spent >= box.budget

    with tempfile.TemporaryDirectory() as out:
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
        tuner = tune.Tuner(
            tune.with_parameters(TableTrainable, table=table, study_seed=seed),
            tune_config=tune.TuneConfig(
                metric="objective",
                mode="max",
                num_samples=box.budget,  # the budget, not num_samples, ends the study
                search_alg=TuneBOHB(space=cs, metric="objective", mode="max", seed=seed),
                scheduler=HyperBandForBOHB(time_attr="training_iteration", max_t=table.epochs, reduction_factor=3),
                max_concurrent_trials=2,
            ),
            run_config=tune.RunConfig(
                storage_path=out,
                name=f"bohb-{seed}",
                stop=Budget(),
                callbacks=[Ledger()],
                verbose=0,
                checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=0),
            ),
        )
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            tuner.fit()
    return max(reports, key=lambda r: r[0])[1]


# --------------------------------------------------------------------------- studies and report


ANCHORS: dict[str, tuple[Callable[[Table, int, Blackbox], dict[str, Any]], str]] = {
    "optuna-tpe": (
        optuna_anchor("tpe"),
        "Optuna TPESampler at its defaults (10 random start-up trials), 20 full-length trials, ask/tell; best trial ships",
    ),
    "optuna-gp": (
        optuna_anchor("gp"),
        "Optuna GPSampler at its defaults (10 random start-up trials), 20 full-length trials, ask/tell; best trial ships",
    ),
    "smac-hb": (
        smac_anchor("hb"),
        "SMAC3 MultiFidelityFacade + Hyperband (eta 3, budgets 4 and 12 epochs), non-deterministic; its incumbent ships",
    ),
    "smac-bo": (
        smac_anchor("bo"),
        "SMAC3 HyperparameterOptimizationFacade + its Intensifier (incumbent gains seeds, up to 3), "
        "full-length runs; its incumbent ships",
    ),
    "syne-asha": (syne_anchor("asha"), "Syne Tune ASHA (grace 4, reduction 3), simulated back end, 2 workers; best report ships"),
    "syne-bohb": (
        syne_anchor("bohb"),
        "Syne Tune BOHB (ASHA + KDE searcher, grace 4, reduction 3), simulated back end, 2 workers; best report ships",
    ),
    "ray-bohb": (
        ray_bohb,
        "Ray Tune HyperBandForBOHB + TuneBOHB (max_t 12, reduction 3), 2 concurrent trials; best report ships",
    ),
}
# bench/simulate.py's designs every anchor is held against, for the same study seeds.
REFERENCES = ("random", "random-objective")
# Not run: Syne Tune 0.16 has no DEHB (its optimizer.baselines offer ASHA, BOHB, ...; DEHB left with
# the 0.14 refactor of the schedulers).


def study_record(name: str, table: Table, study_seed: int, budget: int = BUDGET) -> dict[str, Any]:
    table = table.split(study_seed)  # the study's own truth/draw split, as simulate.simulate_study draws it
    box = Blackbox(table, study_seed, budget)
    config = ANCHORS[name][0](table, study_seed, box)
    key = table.point(config)
    true = table.true_value(key)
    return {
        "design": name,
        "study": study_seed,
        "shipped": key,
        "config": config,
        "true": true,
        "ratio": true / table.best_value,
        "trial_epochs": box.spent,
        "evaluations": box.evaluations,
        "passed_gate": None,
        "looks": 0,
        "fallbacks": 0,
        "sampled_best": table.best_key in box.sampled,
    }


def _job(args: tuple[str, Path, int, int]) -> tuple[str, list[dict[str, Any]], float]:
    name, table_path, first, count = args
    t0 = time.perf_counter()
    table = _table(table_path)
    if name in REFERENCES:
        design = {d.name: d for d in simulate.designs(BUDGET)}[name]
        records = simulate.simulate_design(design, table, count, first)
    else:
        # By module name, not the worker's __main__: Ray's trial actors unpickle the trainable's
        # references (config_of, objective_at) and can import `anchors`, never a __main__ of ours.
        import anchors

        records = [anchors.study_record(name, table, first + k) for k in range(count)]
    return name, records, time.perf_counter() - t0


_TABLES: dict[Path, Table] = {}


def _table(path: Path) -> Table:
    if path not in _TABLES:
        _TABLES[path] = simulate.load_table(path)
    return _TABLES[path]


def _quiet_worker() -> None:
    import logging

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    try:
        import torch

        torch.set_num_threads(1)  # two workers on two cores: GPSampler's torch must not oversubscribe
    except ImportError:
        pass


def run_all(
    names: list[str],
    table_path: Path,
    studies: dict[str, int],
    jobs: int,
    chunk: int = 10,
    cache: Path | None = None,
    offset: int = 1000,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, float], list[str]]:
    """Every anchor's studies (study seeds offset..offset+n-1, the same seeds as random's), in chunks over `jobs`
    processes. cache: a folder where each finished anchor's records are kept (a rerun reads them)."""
    import multiprocessing
    import pickle

    results: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    seconds: dict[str, float] = {n: 0.0 for n in names}
    cached: list[str] = []
    todo = []
    for name in names:
        path = cache / f"{name}-{offset}-{studies[name]}-{table_path.stem}.pkl" if cache else None
        if path is not None and path.is_file():
            results[name], seconds[name] = pickle.loads(path.read_bytes())
            cached.append(name)
            continue
        size = 1 if name == "ray-bohb" else chunk  # minutes per study: spread them over the processes
        todo += [(name, table_path, offset + first, min(size, studies[name] - first)) for first in range(0, studies[name], size)]
    if not todo:
        return results, seconds, cached
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(jobs, initializer=_quiet_worker, maxtasksperchild=None) as pool:
        for name, records, spent in pool.imap_unordered(_job, todo):
            results[name] += records
            seconds[name] += spent
            if len(results[name]) == studies[name]:
                results[name].sort(key=lambda r: r["study"])
                print(f"  {name}: {studies[name]} studies, {seconds[name]:.0f} process-seconds", flush=True)
                if cache is not None:
                    cache.mkdir(parents=True, exist_ok=True)
                    path = cache / f"{name}-{studies[name]}-{table_path.stem}.pkl"
                    path.write_bytes(pickle.dumps((results[name], seconds[name])))
    return results, seconds, cached


def anchor_line(name: str, records: list[dict[str, Any]], reference: list[dict[str, Any]]) -> str:
    s = simulate.summarize(records)
    d, lo, hi = simulate.paired_difference(records, reference)
    return (
        f"anchor {name}: median {s['median']:.3f} [{s['q1']:.3f}, {s['q3']:.3f}], >= 85% of best in {s['share_85']:.0%}, "
        f"vs random {d:+.3f} [{lo:+.3f}, {hi:+.3f}] at {s['trial_epochs']:.0f} trial-epochs"
    )


def markdown(table: Table, results: dict[str, list[dict[str, Any]]], seconds: dict[str, float]) -> str:
    seeds = sorted({len(by) for by in table.runs.values()})
    lines = [
        f"Table: {len(table.keys)} grid points, {seeds[0]}-{seeds[-1]} seeds each (per study, half define the truth and the "
        f"study draws from the other half, as bench/simulate.py); best grid config over all seeds "
        f"{max(table.keys, key=table.mean)}, {max(table.mean(k) for k in table.keys):.3f}. Budget {BUDGET} "
        "trial-epochs per study.",
        "",
        "| anchor | studies | true value median [IQR] | mean - random's [95% CI] | >= 85% of best | sampled the best | "
        "trial-epochs median / mean (max) | evaluations (median) | process-seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    reference = results["random"]
    for name, records in results.items():
        s = simulate.summarize(records)
        diff = "-"
        if name != "random":
            d, lo, hi = simulate.paired_difference(records, reference)
            diff = f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        evaluations = "20" if name in REFERENCES else f"{statistics.median(r['evaluations'] for r in records):.0f}"
        lines.append(
            f"| {name} | {s['studies']} | {s['median']:.3f} [{s['q1']:.3f}, {s['q3']:.3f}] | {diff} | "
            f"{simulate.pct(s['share_85'])} | {simulate.pct(s['sampled_best'])} | "
            f"{s['trial_epochs']:.0f} / {s['trial_epochs_mean']:.0f} ({s['trial_epochs_max']}) | "
            f"{evaluations} | {seconds[name]:.0f} |"
        )
    lines += [
        "",
        "Anchors:",
        "",
        "- **random**: bench/simulate.py's `random` design, the reference: 20 random full-length trials, "
        "the best single epoch ships",
        "- **random-objective**: its `random-objective` design: 20 full-length trials, smoke's baseline first and 19 random, "
        "the best trailing-mean objective ships (the rule the anchors ship by: an anchor's gain over this row is its search's)",
    ]
    for name in results:
        if name not in REFERENCES:
            lines.append(f"- **{name}**: {ANCHORS[name][1]}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--table", type=Path, default=simulate.TABLE)
    parser.add_argument("--studies", type=int, default=200, help="simulated studies per anchor (default 200)")
    parser.add_argument(
        "--ray-studies", type=int, help="studies for ray-bohb (a real Ray Tune run per study: slow); default --studies"
    )
    parser.add_argument("--anchors", help=f"comma-separated, default all: {', '.join(ANCHORS)}")
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--cache", type=Path, help="folder keeping each finished anchor's records (a rerun reads them)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--first", type=int, default=1000, help="the first study's seed (default 1000, as bench/simulate.py)")
    args = parser.parse_args(argv)
    names = list(ANCHORS) if not args.anchors else args.anchors.split(",")
    unknown = [n for n in names if n not in ANCHORS]
    if unknown:
        print(f"anchors: --anchors: unknown {', '.join(unknown)}; allowed: {', '.join(ANCHORS)}", file=sys.stderr)
        return 2
    studies = {n: args.studies for n in names}
    if "ray-bohb" in studies and args.ray_studies:
        studies["ray-bohb"] = args.ray_studies
    studies = {**{n: max(studies.values()) for n in REFERENCES}, **studies}
    started = time.perf_counter()
    results, seconds, cached = run_all(list(studies), args.table, studies, args.jobs, cache=args.cache, offset=args.first)
    table = _table(args.table)
    lines = [anchor_line(n, results[n], results["random"]) for n in names]
    wall = (time.perf_counter() - started) / 60
    command = "python bench/anchors.py " + " ".join(argv if argv is not None else sys.argv[1:])
    reused = f"; {', '.join(cached)} read from --cache, computed by an earlier run" if cached else ""
    text = (
        f"`{command.strip()}` ({wall:.1f} min wall on 2 shared cores{reused}; process-seconds per anchor in the table)\n\n"
        + markdown(table, results, seconds)
        + "\n```\n"
        + "\n".join(lines)
        + "\n```\n"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
