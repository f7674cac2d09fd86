"""Does the default pipeline ship a better config? Real studies, held against the simulator's prediction.

    .venv/bin/python bench/search_quality.py --quick          # 2 search seeds, values from the table (< 25 min, 2 cores)
    .venv/bin/python bench/search_quality.py                  # 4 search seeds, each winner also retrained on 6 fresh seeds

Methods, all on builtin:tiny with studies/smoke.yaml's task, space, epochs and eval protocol:
  default      smoke.yaml as shipped: its sampler, scheduler and objective, then the race and
               its gate (race.py). It ships the race's recommendation (the winner if the gate
               confirmed it, else the baseline); its reported figure is that config's
               confirmation mean. Each study's race/summary.json is kept beside the CSV
               (OUT_race/seed<S>.json), so every reported figure can be traced.
  random       today's practice: Optuna RandomSampler + FIFO, the winner is the trial with the
               best single epoch (ExperimentAnalysis' scope="all"), reported at that epoch's value.
               It gets as many trial-epochs as the default spent on the same search seed
               (search + race): equal total compute.
  seed-config  the tutorial's hand-picked config (smoke's baseline: lr 5e-5, 8 generations,
               32 tokens), no search. Nothing is reported for it.

What a user ships, measured two ways:
- the table (both modes): the shipped config's value in bench/table/smoke_table.csv, the mean final
  test figure over all the table's seeds of that grid point (a learning rate between two grid points:
  both neighbours, weighted as bench/simulate.py weighs them). bench/simulate.py predicts the
  distribution of exactly this figure for the shipped design (`--studies 600`, study seeds 1000-1599),
  so each real study's value is placed in it (its percentile) and the real share >= 85% of the table's
  best is held against the simulated one. This is the real-run check of docs/search-quality.md.
- retrained (full mode only): the winner trained again from scratch on R fresh seeds (never used by
  any search or race), each run's final epoch scored on the test prompts with 4x the search's eval pairs
  (a diverged run scores 0 and counts); a config shipped by two methods is retrained once (`shared`).
Reported minus shipped is the method's optimism. A search seed s sets train.seed = 100 s (trials use
it; the race and retrains use s's own fresh seeds above it).

Writes docs/bench/search_quality[_quick].{md,csv}; the last line printed is
`default shipped X vs random Y vs seed-config Z at B trial-epochs (default optimism D)` (shipped: the
retrained mean in full mode, the table value with --quick).
"""

from __future__ import annotations

import argparse
import copy
import csv
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")

from ratiotune.core import race_summary  # noqa: E402
from ratiotune.search import race  # noqa: E402
from ratiotune.core.experiment import load_experiment  # noqa: E402
from ratiotune.search.launch import build_tuner  # noqa: E402
from ratiotune.core.study import Study, validate_study, write_study  # noqa: E402
from ratiotune.core.study import SEED_KEY, TEST_KEY  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "studies" / "smoke.yaml"
METHODS = ("default", "random", "seed-config")
SEED_STRIDE = 100  # search seed s trains with seed 100 s; its race and retrains use 100 s + 1 ...
RETRAIN_OFFSET = 50  # retrain seeds: 100 s + 50 + i, above any race seed (a race uses < 50)


def smoke_study(seed: int, epochs: int | None, defaults: tuple[str, ...] = ()) -> dict:
    """smoke.yaml for search seed `seed`; `defaults`: `--set`-style overrides of the space's defaults
    (bench/simulate.py's default_combinations), the user's other starting points."""
    from ratiotune.core.study import apply_override

    raw = yaml.safe_load(SMOKE.read_text())
    for override in defaults:
        apply_override(raw, override)
    raw["train"]["seed"] = seed * SEED_STRIDE
    if epochs is not None:
        raw["train"]["epochs"] = epochs
    return raw


def method_study(method: str, seed: int, epochs: int | None, budget: int | None = None, defaults: tuple[str, ...] = ()) -> dict:
    """The smoke study, changed only where the method differs."""
    raw = smoke_study(seed, epochs, defaults)
    raw["name"] = f"{method}-seed{seed}"
    if method == "random":
        epochs = raw["train"]["epochs"]
        raw["search"].update(sampler="random", scheduler={"type": "fifo"}, num_samples=max(1, (budget or epochs) // epochs))
        for tpe_only in ("startup_trials", "multivariate", "lr_points"):  # the random sampler has neither phase nor grid
            raw["search"].pop(tpe_only, None)
        raw["search"]["start_with_baseline"] = False
        raw["race"] = {"enabled": False}
    return raw


def run_search(raw: dict, storage: Path) -> tuple[Path, float]:
    study = validate_study(copy.deepcopy(raw), source=raw["name"])
    experiment_dir = storage / study.name
    experiment_dir.mkdir(parents=True)
    write_study(experiment_dir, study)
    start = time.perf_counter()
    build_tuner(study, experiment_dir).fit()
    return experiment_dir, time.perf_counter() - start


def run_default(seed: int, storage: Path, epochs: int | None, keep: Path, defaults: tuple[str, ...] = ()) -> dict:
    """The default pipeline on one search seed; its race summary is copied to keep/seed<S>.json."""
    experiment_dir, search_s = run_search(method_study("default", seed, epochs, defaults=defaults), storage)
    start = time.perf_counter()
    summary = race.race(load_experiment(experiment_dir), log=lambda line: print(f"[bench] {line}", flush=True))
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(race_summary.race_dir(experiment_dir) / race_summary.SUMMARY_FILE, keep / f"seed{seed}.json")
    which = summary["recommended"]["which"] or "winner"  # no baseline: the unconfirmed winner is all there is
    shipped = summary[which]
    return {
        "config": shipped["hyperparameters"],
        "reported": shipped["stats"]["mean"],
        "recommended": which,
        "selection": summary["winner"]["search_score"],
        "trial_epochs": summary["compute"]["search_trial_epochs"] + summary["compute"]["race_trial_epochs"],
        "wall_s": search_s + time.perf_counter() - start,
    }


def run_random(seed: int, storage: Path, epochs: int | None, budget: int) -> dict:
    raw = method_study("random", seed, epochs, budget)
    experiment_dir, wall = run_search(raw, storage)
    experiment = load_experiment(experiment_dir)
    metric, mode = experiment.study.search.metric, experiment.study.search.mode
    # Today's practice: the trial with the best single epoch, reported at that value.
    scored = [t for t in experiment.trials if t.infeasible_reason is None and t.best(metric, mode) is not None]
    best = max(scored, key=lambda t: t.best(metric, mode))
    return {
        "config": experiment.study.hyperparameters(best.config),
        "reported": best.best(metric, mode),
        "selection": best.best(metric, mode),
        "recommended": "winner",
        "trial_epochs": sum(t.epochs for t in experiment.trials),
        "wall_s": wall,
    }


def shipped_value(study: Study, config: dict, seeds: list[int], folder: Path) -> tuple[float, list[float | None]]:
    """Mean final-epoch test figure of `config` trained from scratch on `seeds` (race.run_round);
    a diverged or errored run scores the worst value and counts (per-seed None marks it)."""
    searched = {name: config[name] for name in study.search.space}
    pairs = study.race.test_samples_factor * study.task.eval_samples_per_prompt
    runs = [{race_summary.CONTENDER_KEY: 0, SEED_KEY: s, TEST_KEY: pairs} for s in seeds]
    experiment = race.run_round(study, folder, runs, [race_summary.Contender("retrain", searched, None)])
    worst = race_summary.worst_value(study, study.search.metric)
    confirmed = race_summary.confirmed(study, experiment.trials, 0, worst)
    values = [s["value"] for s in confirmed["per_seed"]]
    mean = confirmed["stats"]["mean"]  # over every seed, diverged ones scored `worst`
    return (float("nan") if mean is None else mean), values


def simulate_module():
    """bench/simulate.py, imported by path (bench/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("simulate", REPO / "bench" / "simulate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["simulate"] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def table_value(sim, table, config: dict) -> float:
    """A config's value in the table: the mean final test figure over all seeds of its grid point (of both
    neighbouring learning rates, weighted, between two grid points)."""
    return table.mean_value(table.point(config))


def predicted(sim, table, studies: int = 600, first: int = 1000) -> dict:
    """The simulator's prediction for the shipped design: each simulated study's shipped table value and compute."""
    records = sim.simulate_design(sim.Design("shipped"), table, studies, first)
    values = [table.mean_value(r["shipped"]) for r in records]
    best = max(table.mean(k) for k in table.keys)
    return {
        "values": values,
        "best": best,
        "share_85": statistics.fmean(v >= 0.85 * best for v in values),
        "trial_epochs": statistics.median(r["trial_epochs"] for r in records),
        "studies": studies,
        "first": first,
    }


def held_against(real: list[dict], prediction: dict) -> str:
    """Where the real default studies' shipped table values fall in the simulated distribution."""
    from ratiotune.core.stats import wilson

    values = sorted(prediction["values"])
    n = len(values)
    placed = [f"{r['table']:.3f} (percentile {100 * sum(v <= r['table'] for v in values) / n:.0f})" for r in real]
    hits = sum(r["table"] >= 0.85 * prediction["best"] for r in real)
    lo, hi = wilson(hits, len(real))
    # Calibrated means as often below the simulated median as above: a two-sided sign test.
    median = statistics.median(values)
    below = sum(r["table"] < median for r in real)
    above = sum(r["table"] > median for r in real)
    sign_p = sign_test(below, above)
    return (
        f"real vs simulated: the default shipped {', '.join(placed)} of the simulator's {n} studies "
        f"(median {statistics.median(values):.3f}); >= 85% of the table's best ({prediction['best']:.3f}) in {hits} of "
        f"{len(real)} real studies ({lo:.0%}-{hi:.0%}) vs {prediction['share_85']:.0%} simulated; trial-epochs "
        f"{', '.join(str(r['trial_epochs']) for r in real)} vs a simulated median of {prediction['trial_epochs']:.0f}; "
        f"below / above the simulated median {below} / {above} (two-sided sign test p = {sign_p:.2f})"
    )


def place(sim, table, prediction: dict, calibration: Path, out: Path | None) -> None:
    """`--place`: the real studies' shipped configs (fixed by their runs), valued in `table` and placed
    in its prediction; written to <calibration>_placed.md beside the CSV."""
    with calibration.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["method"] == "default"]
    real = [{"table": table_value(sim, table, yaml.safe_load(r["config"])), "trial_epochs": int(r["trial_epochs"])} for r in rows]
    check = held_against(real, prediction)
    command = "bench/search_quality.py " + " ".join(sys.argv[1:])
    target = out or calibration.with_name(calibration.stem + "_placed.md")
    seeds = min(len(by) for by in table.runs.values())
    target.write_text(f"`{command.strip()}` ({len(table.keys)} configs, {seeds}+ seeds each)\n\n{check}\n")
    print(check)
    print(f"wrote {target}")


def sign_test(below: int, above: int) -> float:
    """Two-sided exact binomial p-value of `below` vs `above` under 1/2 each (ties left out)."""
    n = below + above
    if n == 0:
        return 1.0
    k = min(below, above)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # --quick is the real-run confirmation of docs/search-quality.md's simulated choice: a check that real
    # studies behave as the simulated ones, not the comparison itself (that needs hundreds of studies).
    parser.add_argument(
        "--quick", action="store_true", help="2 search seeds, shipped values from the table, no retrains (< 25 min on 2 cores)"
    )
    parser.add_argument("--seeds", type=int, help="search seeds per method (default 4; 2 with --quick)")
    parser.add_argument("--first-seed", type=int, default=0, help="the first search seed (more studies beside an earlier run)")
    parser.add_argument("--retrain-seeds", type=int, help="fresh seeds each winner is retrained on (default 6; 0 with --quick)")
    parser.add_argument("--epochs", type=int, help="epochs per trial (default smoke's, the table's: the simulated design)")
    parser.add_argument("--table", type=Path, default=REPO / "bench" / "table" / "smoke_table.csv")
    parser.add_argument("--out", type=Path, help="output prefix (default docs/bench/search_quality[_quick])")
    parser.add_argument("--num-cpus", type=int, default=os.cpu_count())
    parser.add_argument(
        "--default-only",
        action="store_true",
        help="the calibration check alone: real default studies placed in the simulated distribution (no random search, "
        "no seed-config, values from the table)",
    )
    parser.add_argument(
        "--vary-defaults",
        action="store_true",
        help="search seed s > 0 starts from gens/tokens default combination s (cycling over all of them; seed 0: smoke's own)",
    )
    parser.add_argument(
        "--place",
        type=Path,
        metavar="CSV",
        help="train nothing: value the configs a calibration CSV's real default studies shipped in --table and place "
        "them in that table's simulated distribution (a table widened after the runs, the same real choices)",
    )
    args = parser.parse_args()
    retrain_seeds = args.retrain_seeds if args.retrain_seeds is not None else (0 if args.quick or args.default_only else 6)
    search_seeds = args.seeds or (2 if args.quick else 4)
    epochs = args.epochs
    sim = simulate_module()
    table = sim.load_table(args.table)
    prediction = predicted(sim, table)
    if args.place:
        place(sim, table, prediction, args.place, args.out)
        return
    name = "search_quality_calibration" if args.default_only else "search_quality_quick" if args.quick else "search_quality"
    out = args.out or REPO / "docs" / "bench" / name
    study0 = validate_study(smoke_study(0, epochs))
    out.parent.mkdir(parents=True, exist_ok=True)

    import ray

    # address="local": always our own instance, never a cluster someone else started on this machine.
    ray.init(address="local", num_cpus=args.num_cpus, include_dashboard=False, configure_logging=True, logging_level="WARNING")
    records: list[dict] = []
    retrained: dict[tuple, tuple[float, list[float | None]]] = {}  # a config's retrain, shared by methods that ship it
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ratiotune-bench-") as tmp:
        storage = Path(tmp)
        combinations = sim.default_combinations(SMOKE)
        own = next(i for i, c in enumerate(combinations) if validate_study(smoke_study(0, epochs, c)).search == study0.search)
        for seed in range(args.first_seed, args.first_seed + search_seeds):
            defaults = combinations[(own + seed) % len(combinations)] if args.vary_defaults else ()
            study = validate_study(smoke_study(seed, epochs, defaults))
            fresh = [seed * SEED_STRIDE + RETRAIN_OFFSET + i for i in range(retrain_seeds)]
            default = run_default(seed, storage, epochs, keep=out.parent / f"{out.name}_race", defaults=defaults)
            default["defaults"] = " ".join(o.split(".")[2] + "=" + o.split("=")[1] for o in defaults) or "smoke's"
            methods = {"default": default}
            if not args.default_only:
                methods["random"] = run_random(seed, storage, epochs, budget=default["trial_epochs"])
            if seed == 0 and not args.default_only:
                methods["seed-config"] = {
                    "config": study.baseline(),
                    "reported": None,
                    "selection": None,
                    "recommended": None,
                    "trial_epochs": 0,
                    "wall_s": 0.0,
                }
            if "seed-config" in methods:  # first, so a default that keeps the baseline shares its runs
                methods = {"seed-config": methods.pop("seed-config"), **methods}
            for method, result in methods.items():
                key = tuple(sorted((k, result["config"][k]) for k in study.search.space))
                shared = key in retrained
                if not shared and retrain_seeds:
                    retrained[key] = shipped_value(study, result["config"], fresh, storage / f"retrain-{method}-{seed}")
                looked_up = table_value(sim, table, result["config"])
                value, per_seed = retrained[key] if retrain_seeds else (looked_up, [])
                reported = result["reported"]
                records.append(
                    {
                        "method": method,
                        "seed": seed,
                        "shipped": value,
                        "table": looked_up,
                        "shipped_per_seed": per_seed,
                        "retrain": ("shared" if shared else "own") if retrain_seeds else "none",
                        "reported": reported,
                        "optimism": None if reported is None else reported - value,
                        "recommended": result["recommended"],
                        "trial_epochs": result["trial_epochs"],
                        "wall_s": round(result["wall_s"]),
                        "config": {k: result["config"][k] for k in study.search.space},
                        "defaults": result.get("defaults", ""),
                    }
                )
                write_csv(out.with_suffix(".csv"), records)  # after every run: a kill keeps what was measured
                print(
                    f"[bench] {method} seed {seed}: shipped {value:.3f} reported "
                    f"{'n/a' if reported is None else f'{reported:.3f}'} ({result['trial_epochs']} trial-epochs, "
                    f"{result['wall_s']:.0f} s) config {records[-1]['config']}",
                    flush=True,
                )
    ray.shutdown()
    total = time.perf_counter() - started

    text = markdown_table(records, retrain_seeds)
    check = held_against([r for r in records if r["method"] == "default"], prediction)
    command = "bench/search_quality.py " + " ".join(sys.argv[1:])
    out.with_suffix(".md").write_text(f"`{command.strip()}` ({total / 60:.1f} min)\n\n{text}\n\n{check}\n")
    print(text)
    print(check)
    print(f"wrote {out}.md, .csv  ({total / 60:.1f} min total)")
    budget = statistics.fmean(r["trial_epochs"] for r in records if r["method"] == "default")
    print(
        f"default shipped {mean_of(records, 'default', 'shipped'):.3f} vs random {mean_of(records, 'random', 'shipped'):.3f} "
        f"vs seed-config {mean_of(records, 'seed-config', 'shipped'):.3f} at {budget:.0f} trial-epochs "
        f"(default optimism {mean_of(records, 'default', 'optimism'):+.3f})"
    )


def mean_of(records: list[dict], method: str, key: str) -> float:
    values = [r[key] for r in records if r["method"] == method and r[key] is not None and not math.isnan(r[key])]
    return statistics.fmean(values) if values else float("nan")


def sd_of(records: list[dict], method: str, key: str) -> float:
    values = [r[key] for r in records if r["method"] == method and r[key] is not None and not math.isnan(r[key])]
    return statistics.stdev(values) if len(values) > 1 else float("nan")


def write_csv(path: Path, records: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        for record in records:
            writer.writerow(
                {
                    k: yaml.safe_dump(v, default_flow_style=True).strip() if isinstance(v, (dict, list)) else v
                    for k, v in record.items()
                }
            )


def markdown_table(records: list[dict], retrain_seeds: int) -> str:
    shipped = (
        f"winner retrained on {retrain_seeds} fresh seeds, test prompts, final epoch"
        if retrain_seeds
        else "the winner's value in the table (mean final test figure over all its seeds)"
    )
    lines = [
        f"| method | shipped: {shipped} (mean ± sd over search seeds) | per search seed | reported | "
        "optimism (reported − shipped) | trial-epochs |",
        "|---|---|---|---|---|---|",
    ]
    for method in METHODS:
        rs = [r for r in records if r["method"] == method]
        if not rs:
            continue
        per_seed = " / ".join(f"{r['shipped']:.3f}" for r in rs)
        reported = "n/a" if rs[0]["reported"] is None else f"{mean_of(records, method, 'reported'):.3f}"
        optimism = (
            "n/a"
            if rs[0]["optimism"] is None
            else (f"{mean_of(records, method, 'optimism'):+.3f} ± {sd_of(records, method, 'optimism'):.3f}")
        )
        epochs = "/".join(str(r["trial_epochs"]) for r in rs)
        lines.append(
            f"| {method} | {mean_of(records, method, 'shipped'):.3f} ± {sd_of(records, method, 'shipped'):.3f} "
            f"| {per_seed} | {reported} | {optimism} | {epochs} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
