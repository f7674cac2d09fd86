"""A tabulated benchmark of the smoke task: every config of a grid over smoke's space, many seeds.

    .venv/bin/python bench/smoke_table.py                       # the full grid (~1 h on 2 cores)
    .venv/bin/python bench/smoke_table.py --seeds 2 --lrs 3     # a small slice (minutes)
    .venv/bin/python bench/smoke_table.py --seeds 20 --lr-min 1e-3   # more seeds where the designs ship

The HPO field compares search designs on tables like this one (HPOBench, YAHPO Gym, LCBench;
Syne Tune's simulated back end): train the grid once, then replay hundreds of studies against
it in seconds (bench/simulate.py). Each row is one real training run of studies/smoke.yaml's
task through `trainable.Trial` (the code path of every search trial, race run and `train`):
its eval figure per epoch (the search's signal), its final-epoch test figure (what `best`
reports: builtin:test, 4x the eval pairs) and whether it collapsed or diverged.

Not on the grid: reward_scale. Under advantage normalization (smoke's setting) it cancels:
tests/test_smoke_table.py trains the same seed at scale 1 and 100 and finds the metrics equal to
the bit, so the table holds scale 100 only.

Resumable: every finished run is appended to RUN_FILE at once; a rerun skips those. Runs go
seed-major (every config on seed 0, then seed 1, ...), so a table cut short is still balanced.
Two worker processes, one torch thread each (as a Ray trial with resources.cpu 1 trains).
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "studies" / "smoke.yaml"
OUT = REPO / "bench" / "table"
RUN_FILE = "runs.jsonl"  # one JSON line per finished run (the resumable log)
TABLE_FILE = "smoke_table.csv"  # the compact table the simulator reads
META_FILE = "smoke_table.json"  # command, code version, grid, wall time
LR_LOW, LR_HIGH = 3.0e-5, 1.0e-2
GENERATIONS = (2, 4, 8)
TOKENS = (16, 32)
REWARD_SCALE = 100.0


def grid(lr_points: int) -> list[dict]:
    lrs = [float(f"{v:.3g}") for v in np.geomspace(LR_LOW, LR_HIGH, lr_points)]
    return [
        {"learning_rate": lr, "num_generations": g, "max_new_tokens": t, "reward_scale": REWARD_SCALE}
        for lr in lrs
        for g in GENERATIONS
        for t in TOKENS
    ]


def key(config: dict, seed: int) -> str:
    return f"{config['learning_rate']:.3g}/{config['num_generations']}/{config['max_new_tokens']}/{seed}"


def smoke_study():
    from ratiotune.core.study import validate_study

    raw = yaml.safe_load(SMOKE.read_text())
    raw["search"]["space"] = {}
    raw["search"].pop("baseline", None)
    return validate_study(raw, source=str(SMOKE))


def run_one(job: tuple[dict, int]) -> dict:
    """Train one config on one seed for smoke's epochs; the figures the simulator needs."""
    config, seed = job
    import torch

    torch.set_num_threads(1)
    from ratiotune.training.trainable import Trial

    study = smoke_study()
    start = time.perf_counter()
    trial = Trial(study, config, seed=seed)
    curve, rewards, diverged_at = [], [], None
    for _ in range(study.train.epochs):
        metrics = trial.run_epoch()
        if metrics["infeasible"]:
            diverged_at = metrics["epoch"]
            break
        curve.append(metrics["eval/in_range_fraction"])
        rewards.append(metrics["eval/mean_reward"])
    test = {}
    if diverged_at is None:
        test = trial.test(study.race.test_samples_factor * study.task.eval_samples_per_prompt)
    return {
        **config,
        "seed": seed,
        "eval_in_range": curve,
        "eval_mean_reward": rewards,
        "diverged_epoch": diverged_at,
        "test_in_range": test.get("test/in_range_fraction"),
        "test_mean_reward": test.get("test/mean_reward"),
        "seconds": time.perf_counter() - start,
    }


def write_table(runs: list[dict], epochs: int, path: Path) -> None:
    """One row per run: config, seed, eval per epoch (e1..eN, empty after divergence), test, collapse."""
    fields = [
        "learning_rate",
        "num_generations",
        "max_new_tokens",
        "seed",
        *[f"e{i}" for i in range(1, epochs + 1)],
        "test_in_range",
        "collapsed",
        "diverged_epoch",
        "seconds",
    ]
    rows = sorted(runs, key=lambda r: (r["learning_rate"], r["num_generations"], r["max_new_tokens"], r["seed"]))
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(fields)
        for r in rows:
            curve = [f"{v:.4f}" for v in r["eval_in_range"]] + [""] * (epochs - len(r["eval_in_range"]))
            # Collapsed: every test reward is 0 (agent 1 answers empty) or the run diverged.
            collapsed = r["diverged_epoch"] is not None or r["test_mean_reward"] == 0
            test = "" if r["test_in_range"] is None else f"{r['test_in_range']:.4f}"
            writer.writerow(
                [
                    f"{r['learning_rate']:.3g}",
                    r["num_generations"],
                    r["max_new_tokens"],
                    r["seed"],
                    *curve,
                    test,
                    int(collapsed),
                    r["diverged_epoch"] or "",
                    f"{r['seconds']:.1f}",
                ]
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lrs", type=int, default=10, help="learning-rate grid points, log-spaced over 3e-5..1e-2")
    parser.add_argument("--seeds", type=int, default=8, help="seeds per config (0..N-1)")
    parser.add_argument(
        "--lr-min",
        type=float,
        default=0.0,
        help="train only grid points at or above this learning rate (extend the seeds where designs ship)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--write-only",
        action="store_true",
        help="rewrite the table and its .json from the runs file as it stands (a table cut short), no training",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.out.mkdir(parents=True, exist_ok=True)
    log_path = args.out / RUN_FILE
    done = {}
    if log_path.exists():
        for line in log_path.read_text().splitlines():
            if line.strip():
                run = json.loads(line)
                done[key(run, run["seed"])] = run
    configs = grid(args.lrs)
    jobs = [(c, s) for s in range(args.seeds) for c in configs if key(c, s) not in done and c["learning_rate"] >= args.lr_min]
    if args.write_only:
        jobs = []
    print(f"{len(configs)} configs x {args.seeds} seeds: {len(done)} runs done, {len(jobs)} to go", flush=True)
    start = time.time()
    with open(log_path, "a") as log, multiprocessing.get_context("spawn").Pool(args.workers, maxtasksperchild=20) as pool:
        for n, run in enumerate(pool.imap_unordered(run_one, jobs), 1):
            log.write(json.dumps(run) + "\n")
            log.flush()
            done[key(run, run["seed"])] = run
            elapsed = time.time() - start
            print(
                f"[{n}/{len(jobs)}] {key(run, run['seed'])}: test {run['test_in_range']} "
                f"({run['seconds']:.0f} s; {elapsed / n * (len(jobs) - n) / 60:.0f} min left)",
                flush=True,
            )
    epochs = smoke_study().train.epochs
    write_table(list(done.values()), epochs, args.out / TABLE_FILE)
    version = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    meta_path = args.out / META_FILE
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"wall_seconds": 0.0}
    meta.update(
        {
            "command": "python bench/smoke_table.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "code_version": version,
            "grid": {
                "learning_rate": sorted({c["learning_rate"] for c in configs}),
                "num_generations": list(GENERATIONS),
                "max_new_tokens": list(TOKENS),
                "reward_scale": REWARD_SCALE,
                # Seeds differ by learning rate once a run of --lr-min extended some of them.
                "seeds_by_learning_rate": {
                    f"{lr:.3g}": sorted({r["seed"] for r in done.values() if r["learning_rate"] == lr})
                    for lr in sorted({c["learning_rate"] for c in configs})
                },
            },
            "epochs": epochs,
            "runs": len(done),
            "run_seconds_total": round(sum(r["seconds"] for r in done.values()), 1),
            "wall_seconds": round(meta["wall_seconds"] + time.time() - start, 1),
            "workers": args.workers,
        }
    )
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out / TABLE_FILE} ({len(done)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
