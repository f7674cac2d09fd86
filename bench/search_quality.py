"""Does the default search pay? Four ways to spend the same budget of trial-epochs on the smoke task.

    .venv/bin/python bench/search_quality.py --quick          # 2 search seeds x 32 trial-epochs
    .venv/bin/python bench/search_quality.py                  # 3 search seeds x 64 trial-epochs

Methods, all on builtin:tiny with studies/smoke.yaml's task, eval protocol and space:
  seed-config  the original tutorial's hand-picked config (lr 5e-5, 8 generations, scale 100);
               its 128 new tokens scaled to the tiny setup's largest, smoke's max_new_tokens 32.
               It gets the whole budget as *longer training*: one trial of B epochs instead of
               3 (more generous than 3-epoch repeats, since lr 5e-5 learns slowly).
  random       Optuna RandomSampler + FIFO: every trial runs smoke's train.epochs.
  default      smoke.yaml's search as shipped (sampler + scheduler).
  qmc          Optuna QMCSampler (scrambled Sobol) + the default's ASHA.

The budget B counts epochs that trials actually ran (ASHA stops some early). Each search asks
for a few more trials than B needs; every result row is one trial-epoch, rows are ordered by
the time they were reported, and the headline is the best eval/in_range_fraction seen within
the first B of them. A search seed s sets train.seed = s (it seeds the sampler and the trials).
A search stops once B trial-epochs have been reported (a Tune Stopper); "s to B" is the wall
time from the fit's start to the B-th trial-epoch's report, "wall" includes Ray's teardown.

Retrain (--retrain-seeds N, default 2; 0 skips it): the config that was best within the budget
is trained again from scratch with N fresh seeds through ratiotune.retrain (its 4x larger eval
protocol, the method's own epochs), and its mean final eval/in_range_fraction is reported: the
search's best is a maximum over noisy evaluations, the retrained value is what a user gets.

Writes docs/bench/search_quality[_quick].{md,csv,png}; the last line printed is
`default best X vs random Y vs seed-config Z at B trial-epochs` (means over search seeds).
"""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")

from ratiotune.results import STUDY_FILE, load_experiment  # noqa: E402
from ratiotune.retrain import plan_retrain, retrain, search_figures  # noqa: E402
from ratiotune.search import build_tuner  # noqa: E402
from ratiotune.study import validate_study  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "studies" / "smoke.yaml"
METRIC = "eval/in_range_fraction"
METHODS = ("seed-config", "random", "default", "qmc")

# The tutorial's hand-picked values; max_new_tokens 128 -> the largest value smoke searches.
SEED_CONFIG = {"learning_rate": 5e-5, "num_generations": 8, "reward_scale": 100.0}


def method_study(method: str, seed: int, budget: int, epochs: int | None) -> dict:
    """The smoke study, changed only where the method differs; num_samples sized to the budget."""
    raw = yaml.safe_load(SMOKE.read_text())
    raw["name"] = f"{method}-seed{seed}"
    raw["train"]["seed"] = seed
    if epochs is not None:
        raw["train"]["epochs"] = epochs
    epochs = raw["train"]["epochs"]
    search = raw["search"]
    if method == "seed-config":
        tokens = max(search["space"]["max_new_tokens"]["values"])
        raw["train"].update(SEED_CONFIG, max_new_tokens=tokens, epochs=budget)
        search.update(space={}, num_samples=1, max_concurrent_trials=1, scheduler={"type": "fifo"})
    elif method == "random":
        search.update(sampler="random", scheduler={"type": "fifo"}, num_samples=math.ceil(budget / epochs))
    else:
        if method == "qmc":
            search["sampler"] = "qmc"
        # ASHA (grace g, factor 2) runs trials about 2g epochs on average; ask for more than B
        # needs so the budget is spent (the budget stopper ends the search at B trial-epochs).
        grace = search["scheduler"].get("grace_period", 2) if search["scheduler"]["type"] == "asha" else epochs
        search["num_samples"] = math.ceil(budget / min(epochs, 2 * grace)) + search["max_concurrent_trials"]
    return raw


def budget_stopper(budget: int):
    """Ends the whole search once `budget` trial-epochs have been reported (little compute past B).

    The trials running when the search stops can lose their last row (measured: 3 of 4 rows
    kept), so the caller asks for B + max_concurrent_trials; the curve is cut at B anyway.
    """
    from ray import tune

    class TrialEpochBudget(tune.Stopper):
        def __init__(self) -> None:
            self.reported = 0

        def __call__(self, trial_id: str, result: dict) -> bool:
            self.reported += 1
            return False

        def stop_all(self) -> bool:
            return self.reported >= budget

    return TrialEpochBudget()


def run_study(raw: dict, storage: Path, budget: int) -> tuple[Path, float, float]:
    """Runs the study until B trial-epochs; returns its folder, its wall seconds and its start (Unix time)."""
    study = validate_study(copy.deepcopy(raw), source=raw["name"])
    experiment_dir = storage / study.name
    experiment_dir.mkdir(parents=True)
    (experiment_dir / STUDY_FILE).write_text(study.to_yaml())
    started_at = time.time()
    start = time.perf_counter()
    build_tuner(study, experiment_dir, stop=budget_stopper(budget + study.search.max_concurrent_trials)).fit()
    return experiment_dir, time.perf_counter() - start, started_at


def best_so_far(experiment_dir: Path, budget: int, started_at: float) -> tuple[list[float], dict]:
    """best-so-far[k] = best metric within the first k+1 trial-epochs (rows in report order)."""
    experiment = load_experiment(experiment_dir)
    rows = []
    for trial in experiment.trials:
        for row in trial.rows:
            if METRIC in row:
                # timestamp has 1 s resolution; time_total_s orders rows of one trial within it.
                rows.append((row.get("timestamp", 0), row.get("time_total_s", 0.0), float(row[METRIC]), trial))
    rows.sort(key=lambda r: (r[0], r[1]))
    curve, best, best_trial, budget_trial = [], -math.inf, None, None
    for k, (_, _, value, trial) in enumerate(rows):
        if value > best:
            best, best_trial = value, trial
        if k < budget:
            budget_trial = best_trial  # the winner a search stopped at B would have returned
        curve.append(best)
    at_budget = rows[min(budget, len(rows)) - 1][0] if rows else started_at
    info = {
        "trials": len(experiment.trials),
        "budget_trial": budget_trial,
        "best_config": experiment.study.hyperparameters(budget_trial.config) if budget_trial else {},
        "seconds_to_budget": at_budget - started_at,
    }
    return curve, info


def retrain_winner(experiment_dir: Path, trial, seeds: int) -> float:
    """Mean final eval/in_range_fraction of `trial`'s config retrained from scratch over `seeds` seeds."""
    plan = plan_retrain(experiment_dir, top_k=1, seeds=seeds, output=experiment_dir.parent / f"{experiment_dir.name}-retrain")
    # plan_retrain picks the search's overall best; the bench retrains the winner at the budget.
    (candidate,) = plan.candidates
    study = plan.experiment.study
    winner = dataclasses.replace(
        candidate,
        trial=trial,
        config={k: v for k, v in trial.config.items() if k in candidate.config},
        search_figures=search_figures(trial, study.search.metric, study.search.mode),
    )
    summary = retrain(dataclasses.replace(plan, candidates=[winner]))
    return summary["configs"][0]["stats"][METRIC]["mean"]


def value_at(curve: list[float], budget: int) -> float:
    return curve[min(budget, len(curve)) - 1] if curve else float("nan")


def mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def describe_methods(smoke: dict) -> dict[str, str]:
    s = smoke["search"]
    sched = s["scheduler"]
    asha = f"ASHA grace {sched.get('grace_period', 2)}" if sched["type"] == "asha" else "FIFO"
    return {
        "seed-config": "tutorial config (lr 5e-5, 8 gen, 32 tok, scale 100), one run of B epochs",
        "random": "RandomSampler + FIFO",
        "default": f"smoke.yaml as shipped: {s['sampler']} + {asha}",
        "qmc": f"QMCSampler + {asha}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 search seeds x 32 trial-epochs (about 20 min on 2 cores)")
    parser.add_argument("--seeds", type=int, help="search seeds per method (default 3; 2 with --quick)")
    parser.add_argument("--budget", type=int, help="trial-epochs per method and seed (default 64; 32 with --quick)")
    parser.add_argument("--epochs", type=int, help="override smoke's train.epochs (max epochs per trial); for plumbing checks")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    parser.add_argument("--out", type=Path, help="output prefix (default docs/bench/search_quality[_quick])")
    parser.add_argument("--retrain-seeds", type=int, default=2, help="retrain each winner over N fresh seeds (0: skip)")
    parser.add_argument("--num-cpus", type=int, default=os.cpu_count())
    args = parser.parse_args()
    seeds = args.seeds or (2 if args.quick else 3)
    budget = args.budget or (32 if args.quick else 64)
    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(METHODS)
    if unknown:
        parser.error(f"--methods: unknown {sorted(unknown)}; allowed: {', '.join(METHODS)}")
    out = args.out or REPO / "docs" / "bench" / ("search_quality_quick" if args.quick else "search_quality")
    out.parent.mkdir(parents=True, exist_ok=True)

    import ray

    # address="local": always our own instance, never a cluster someone else started on this machine.
    ray.init(address="local", num_cpus=args.num_cpus, include_dashboard=False, configure_logging=True, logging_level="WARNING")
    records, curves = [], {m: [] for m in methods}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ratiotune-bench-") as storage:
        # Seeds outermost, methods innermost: machine load drifts, and this spreads it evenly.
        for seed in range(seeds):
            for method in methods:
                raw = method_study(method, seed, budget, args.epochs)
                experiment_dir, wall, started_at = run_study(raw, Path(storage), budget)
                curve, info = best_so_far(experiment_dir, budget, started_at)
                curves[method].append(curve)
                retrained = float("nan")
                if args.retrain_seeds and info["budget_trial"] is not None:
                    retrained = retrain_winner(experiment_dir, info["budget_trial"], args.retrain_seeds)
                records.append(
                    {
                        "method": method,
                        "seed": seed,
                        "best_at_budget": value_at(curve, budget),
                        "best_overall": max(curve) if curve else float("nan"),
                        "trial_epochs": len(curve),
                        "trials": info["trials"],
                        "retrained": retrained,
                        "s_to_budget": info["seconds_to_budget"],
                        "wall_s": wall,
                        "best_config": info["best_config"],
                    }
                )
                # Rewritten after every run so a crash or a kill keeps what was measured.
                write_csv(out.with_suffix(".csv"), records)
                print(f"[bench] {method} seed {seed}: best@{budget} {records[-1]['best_at_budget']:.3f} "
                      f"retrained {retrained:.3f} ({len(curve)} trial-epochs, {info['trials']} trials, "
                      f"{info['seconds_to_budget']:.0f} s to B, {wall:.0f} s)", flush=True)
    ray.shutdown()
    total = time.perf_counter() - started

    smoke = yaml.safe_load(SMOKE.read_text())
    labels = describe_methods(smoke)
    write_csv(out.with_suffix(".csv"), records)
    table = markdown_table(records, methods, labels, budget, seeds, args.retrain_seeds)
    command = "bench/search_quality.py " + " ".join(sys.argv[1:])
    out.with_suffix(".md").write_text(f"`{command.strip()}` ({total / 60:.1f} min)\n\n{table}\n")
    plot(out.with_suffix(".png"), curves, budget, labels)
    print(table)
    print(f"wrote {out}.md, .csv, .png  ({total / 60:.1f} min total)")

    def headline(method: str) -> str:
        values = [r["best_at_budget"] for r in records if r["method"] == method]
        return f"{statistics.fmean(values):.3f}" if values else "n/a"

    print(f"default best {headline('default')} vs random {headline('random')} vs seed-config {headline('seed-config')} at {budget} trial-epochs")


def write_csv(path: Path, records: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        for record in records:
            writer.writerow({**record, "best_config": yaml.safe_dump(record["best_config"], default_flow_style=True).strip()})


def markdown_table(records: list[dict], methods: list[str], labels: dict, budget: int, seeds: int, retrain_seeds: int) -> str:
    retrain_head = f"winner retrained ({retrain_seeds} seeds, mean ± sd over search seeds)" if retrain_seeds else "winner retrained (skipped)"
    lines = [
        f"| method | best {METRIC} at {budget} trial-epochs (mean ± sd, {seeds} seeds) | {retrain_head} "
        "| trial-epochs run | trials | s to B (mean) | wall s (mean) |",
        "|---|---|---|---|---|---|---|",
    ]
    for method in methods:
        rs = [r for r in records if r["method"] == method]
        m, sd = mean_sd([r["best_at_budget"] for r in rs])
        retrained = [r["retrained"] for r in rs if not math.isnan(r["retrained"])]
        rm, rsd = mean_sd(retrained) if retrained else (float("nan"), float("nan"))
        used = "/".join(str(r["trial_epochs"]) for r in rs)
        trials = "/".join(str(r["trials"]) for r in rs)
        to_budget = statistics.fmean(r["s_to_budget"] for r in rs)
        wall = statistics.fmean(r["wall_s"] for r in rs)
        lines.append(
            f"| {method}: {labels[method]} | {m:.3f} ± {sd:.3f} | {rm:.3f} ± {rsd:.3f} | {used} | {trials} "
            f"| {to_budget:.0f} | {wall:.0f} |"
        )
    return "\n".join(lines)


def plot(path: Path, curves: dict[str, list[list[float]]], budget: int, labels: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for method, runs in curves.items():
        runs = [c[:budget] for c in runs if c]
        if not runs:
            continue
        # Pad a run that spent less than B with its final value (it found nothing more).
        padded = [c + [c[-1]] * (budget - len(c)) for c in runs]
        mean = [statistics.fmean(col) for col in zip(*padded)]
        x = range(1, budget + 1)
        (line,) = ax.step(x, mean, where="post", label=f"{method} (mean of {len(runs)})", linewidth=2)
        for c in padded:
            ax.step(x, c, where="post", color=line.get_color(), alpha=0.25, linewidth=1)
    ax.set_xlabel("trial-epochs spent")
    ax.set_ylabel(f"best {METRIC} so far")
    ax.set_title("smoke task on builtin:tiny: best-so-far at equal compute")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
