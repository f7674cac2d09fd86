"""A tabulated benchmark of any study: every config of a grid over its space, many seeds, real runs.

    .venv/bin/python bench/table.py studies/headline-expansion.yaml --lrs 8 --seeds 10
    .venv/bin/python bench/table.py studies/smoke.yaml --lrs 10 --seeds 20 --lr-min 1e-3   # more seeds where designs ship
    .venv/bin/python bench/table.py studies/smoke.yaml --lrs 10 --first-seed 1000 --seeds 8  # a second seed range

The HPO field compares search designs on tables like this (HPOBench, YAHPO Gym, LCBench; Syne
Tune's simulated back end): train the grid once, then replay hundreds of studies against it
(bench/simulate.py --table). Each row is one real run of the study's task through
`trainable.Trial` (the code path of every search trial, race run and `train`): the study's
metric per epoch (the search's signal), its test twin at the final epoch (what `best` reports,
race.test_samples_factor x the eval pairs), whether it collapsed (race.ended_collapsed: the one
rule) or diverged, and its seconds.

The grid: learning_rate at --lrs log-spaced points over the space's range, every value of each
other choice parameter, the product. reward_scale is held at its default under advantage
normalization (it cancels to the bit there: tests/test_table.py), so it has no axis.

Resumable: every finished run is appended to <name>_runs.jsonl at once; a rerun skips those
(`--write-only` writes the CSV and .json from the runs so far, training nothing).
Runs go seed-major, so a table cut short is balanced. --workers processes, one torch thread each
(as a Ray trial with resources.cpu 1 trains). Writes <name>_table.csv and <name>_table.json
(command, study, code version, grid, seeds per learning rate, wall time) under bench/table/.

The smoke table's runs (smoke_runs.jsonl) were trained by bench/smoke_table.py, this script's
smoke-only twin since removed; they were converted once to this format (each record's
`converted_from` says how; collapsed by race_summary.ended_collapsed, as here) and keep that
script's per-run mean rewards (eval_mean_reward, test_mean_reward) beside.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "table"
SEARCHED_AXES = ("num_generations", "max_new_tokens")  # the choice axes a table spans (the simulator's keys)


def load(study_path: Path):
    """The study with an empty space (each run fixes its values) and no baseline."""
    import yaml

    from ratiotune.core.study import validate_study
    from ratiotune.core.study.overrides import resolve_paths

    raw = yaml.safe_load(Path(study_path).read_text())
    resolve_paths(raw, Path(study_path).parent)  # prompt files named relative to the study file
    raw["search"]["space"] = {}
    raw["search"].pop("baseline", None)
    return validate_study(raw, source=str(study_path))


def grid(study_path: Path, lr_points: int) -> list[dict]:
    import yaml

    from ratiotune.core.study import validate_study

    study = validate_study(yaml.safe_load(Path(study_path).read_text()), source=str(study_path))
    space, fixed = study.search.space, study.hyperparameters({})
    lr = space["learning_rate"]
    lrs = [float(f"{v:.3g}") for v in np.geomspace(lr.low, lr.high, lr_points)]
    axes = [[int(v) for v in space[name].values] if name in space else [int(fixed[name])] for name in SEARCHED_AXES]
    scale = space["reward_scale"].default if "reward_scale" in space and space["reward_scale"].default else fixed["reward_scale"]
    if "reward_scale" in space and not study.train.advantage_normalization:
        raise SystemExit("table: reward_scale is searched without advantage normalization; it would need an axis of its own")
    return [
        {"learning_rate": v, "num_generations": g, "max_new_tokens": t, "reward_scale": float(scale)}
        for v in lrs
        for g, t in itertools.product(*axes)
    ]


def key(config: dict, seed: int) -> str:
    return f"{config['learning_rate']:.3g}/{config['num_generations']}/{config['max_new_tokens']}/{seed}"


def run_one(job: tuple[str, dict, int]) -> dict:
    """Train one config on one seed for the study's epochs; the figures the simulator needs."""
    study_path, config, seed = job
    import torch

    torch.set_num_threads(1)
    from ratiotune.core.race_summary import ended_collapsed, honest_metric
    from ratiotune.training.trainable import Trial

    study = load(Path(study_path))
    metric = study.search.metric
    start = time.perf_counter()
    trial = Trial(study, config, seed=seed)
    curve, evals, diverged_at = [], [], None
    for _ in range(study.train.epochs):
        metrics = trial.run_epoch()
        if metrics["infeasible"]:
            diverged_at = metrics["epoch"]
            break
        curve.append(metrics[metric])
        evals.append({k: round(float(v), 4) for k, v in metrics.items() if k.startswith("eval/")})  # answer lengths too
    test, collapsed = None, True
    if diverged_at is None:
        figures = trial.test(study.race.test_samples_factor * study.task.eval_samples_per_prompt)
        test = figures[honest_metric(metric)]
        collapsed = ended_collapsed(study, test, figures.get("test/mean_reward"))
    return {
        **config,
        "seed": seed,
        "curve": curve,
        "eval": evals,
        "diverged_epoch": diverged_at,
        "test": test,
        "collapsed": collapsed,
        "seconds": time.perf_counter() - start,
    }


def write_table(runs: list[dict], epochs: int, path: Path) -> None:
    """One row per run: config, seed, the metric per epoch (e1..eN, empty after divergence), test, collapse."""
    fields = [
        "learning_rate",
        "num_generations",
        "max_new_tokens",
        "seed",
        *[f"e{i}" for i in range(1, epochs + 1)],
        "test_value",
        "collapsed",
        "diverged_epoch",
        "seconds",
    ]
    rows = sorted(runs, key=lambda r: (r["learning_rate"], r["num_generations"], r["max_new_tokens"], r["seed"]))
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(fields)
        for r in rows:
            curve = [f"{v:.4f}" for v in r["curve"]] + [""] * (epochs - len(r["curve"]))
            test = "" if r["test"] is None else f"{r['test']:.4f}"
            writer.writerow(
                [
                    f"{r['learning_rate']:.3g}",
                    r["num_generations"],
                    r["max_new_tokens"],
                    r["seed"],
                    *curve,
                    test,
                    int(r["collapsed"]),
                    r["diverged_epoch"] or "",
                    f"{r['seconds']:.1f}",
                ]
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("study", type=Path, help="the study file whose space the grid covers")
    parser.add_argument("--lrs", type=int, default=10, help="learning-rate grid points, log-spaced over the space's range")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per config (first-seed .. first-seed+N-1)")
    # Seeds act on every config alike (a seed's sampling stream is shared), so a table's seeds are one
    # sample of "seed worlds" for all its configs at once: a second range widens that sample.
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed of the range")
    parser.add_argument("--lr-min", type=float, default=0.0, help="train only grid points at or above this learning rate")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--write-only",
        action="store_true",
        help="train nothing: write the CSV and .json from the runs so far (a table cut short)",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    study = load(args.study)
    name = study.name
    args.out.mkdir(parents=True, exist_ok=True)
    log_path = args.out / f"{name}_runs.jsonl"
    done = {}
    if log_path.exists():
        for line in log_path.read_text().splitlines():
            if line.strip():
                run = json.loads(line)
                done[key(run, run["seed"])] = run
    configs = grid(args.study, args.lrs)
    jobs = [
        (str(args.study), c, s)
        for s in range(args.first_seed, args.first_seed + args.seeds)
        for c in configs
        if key(c, s) not in done and c["learning_rate"] >= args.lr_min and not args.write_only
    ]
    print(f"{name}: {len(configs)} configs x {args.seeds} seeds: {len(done)} runs done, {len(jobs)} to go", flush=True)
    start = time.time()
    with (
        open(log_path, "a") as log,
        # One run a process: a worker's memory is not handed back between runs (two SmolLM2 trials in one
        # process held 7.5 GB), and a fresh process costs seconds against minutes a run.
        multiprocessing.get_context("spawn").Pool(max(1, min(args.workers, len(jobs))), maxtasksperchild=1) as pool,
    ):
        for n, run in enumerate(pool.imap_unordered(run_one, jobs), 1):
            log.write(json.dumps(run) + "\n")
            log.flush()
            done[key(run, run["seed"])] = run
            elapsed = time.time() - start
            print(
                f"[{n}/{len(jobs)}] {key(run, run['seed'])}: test {run['test']} ({run['seconds']:.0f} s; "
                f"{elapsed / n * (len(jobs) - n) / 60:.0f} min left)",
                flush=True,
            )
    write_table(list(done.values()), study.train.epochs, args.out / f"{name}_table.csv")
    version = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    meta_path = args.out / f"{name}_table.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"wall_seconds": 0.0}
    lrs = sorted({c["learning_rate"] for c in configs})
    meta.update(
        {
            "command": "python bench/table.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "study": str(Path(args.study).resolve().relative_to(REPO))
            if Path(args.study).resolve().is_relative_to(REPO)
            else str(args.study),
            "metric": study.search.metric,
            # The commit the runs trained with: a rewrite that trains nothing keeps the one recorded.
            "code_version": version if jobs else meta.get("code_version", version),
            "grid": {
                "learning_rate": lrs,
                **{a: sorted({c[a] for c in configs}) for a in SEARCHED_AXES},
                "reward_scale": configs[0]["reward_scale"],
                "seeds_by_learning_rate": {
                    f"{lr:.3g}": sorted({r["seed"] for r in done.values() if r["learning_rate"] == lr}) for lr in lrs
                },
            },
            "epochs": study.train.epochs,
            "runs": len(done),
            "run_seconds_total": round(sum(r["seconds"] for r in done.values()), 1),
            "wall_seconds": round(meta["wall_seconds"] + time.time() - start, 1),
            "workers": args.workers,
        }
    )
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out / f'{name}_table.csv'} ({len(done)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
