"""What does Ray Tune cost on top of training? One config, trained directly and as a Tune trial, interleaved.

    .venv/bin/python bench/overhead.py                 # 3 pairs x 4 epochs
    .venv/bin/python bench/overhead.py --repeats 1 --epochs 2

Direct: ratiotune.training.trainable.Trial in this process (one torch thread, like a 1-CPU Ray trial),
timing each epoch's training, the fixed eval and the checkpoint save (Trial.save, what the
trainable writes every epoch) separately. Ray: the same study as a one-trial Tune run (FIFO,
no search), whose per-epoch time is Ray's time_this_iter_s (train + eval + save + report);
its start-up is the fit's wall time minus the sum of its epochs. Pairs alternate direct/Ray so
that load drift hits both; figures are medians over all epochs of all pairs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import yaml

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")

from ratiotune.core.experiment import STUDY_FILE, load_experiment  # noqa: E402
from ratiotune.search.launch import build_tuner  # noqa: E402
from ratiotune.core.study import validate_study  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

# A config from the region the smoke search finds good (it learns, so checkpoints are real).
CONFIG = {"learning_rate": 3e-3, "num_generations": 4, "max_new_tokens": 32, "reward_scale": 1.0}


def make_study(epochs: int, name: str):
    raw = yaml.safe_load((REPO / "studies" / "smoke.yaml").read_text())
    raw["name"] = name
    raw["train"].update(CONFIG, epochs=epochs)
    raw["search"].update(space={}, num_samples=1, max_concurrent_trials=1, scheduler={"type": "fifo"})
    return validate_study(raw, source=name)


def run_direct(study) -> dict:
    import torch

    from ratiotune.training.trainable import Trial

    start = time.perf_counter()
    trial = Trial(study, {})
    setup = time.perf_counter() - start
    epochs = []
    with tempfile.TemporaryDirectory(prefix="ratiotune-overhead-") as tmp:
        for _ in range(study.train.epochs):
            t0 = time.perf_counter()
            metrics = trial.run_epoch()
            t1 = time.perf_counter()
            trial.save(Path(tmp) / f"epoch-{trial.epoch}", metrics)
            t2 = time.perf_counter()
            epochs.append(
                {
                    "train": metrics["system/epoch_seconds"],
                    "eval": metrics["system/eval_seconds"],
                    "run_epoch": t1 - t0,
                    "save": t2 - t1,
                    "total": t2 - t0,
                }
            )
    del trial, torch
    return {"setup": setup, "epochs": epochs}


def run_ray(study, storage: Path) -> dict:
    experiment_dir = storage / study.name
    experiment_dir.mkdir(parents=True)
    (experiment_dir / STUDY_FILE).write_text(yaml.safe_dump(study.model_dump(mode="json", exclude_none=True), sort_keys=False))
    start = time.perf_counter()
    build_tuner(study, experiment_dir).fit()
    wall = time.perf_counter() - start
    (trial,) = load_experiment(experiment_dir).trials
    epochs = [
        {"train": row["system/epoch_seconds"], "eval": row["system/eval_seconds"], "total": row["time_this_iter_s"]}
        for row in trial.rows
    ]
    return {"setup": wall - sum(e["total"] for e in epochs), "epochs": epochs}


def median(runs: list[dict], key: str) -> float:
    return statistics.median(e[key] for run in runs for e in run["epochs"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="direct/Ray pairs")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per run")
    args = parser.parse_args()

    import ray
    import torch

    # A 1-CPU Ray trial gets OMP_NUM_THREADS=1; give the direct run the same single thread.
    torch.set_num_threads(1)
    # address="local": always our own instance, never a cluster someone else started on this machine.
    ray.init(address="local", num_cpus=2, include_dashboard=False, configure_logging=True, logging_level="WARNING")
    direct, tuned = [], []
    with tempfile.TemporaryDirectory(prefix="ratiotune-overhead-") as storage:
        for i in range(args.repeats):
            # Alternate which goes first so neither always runs on a warmer (or busier) machine.
            order = ["direct", "ray"] if i % 2 == 0 else ["ray", "direct"]
            for kind in order:
                study = make_study(args.epochs, f"overhead-{kind}-{i}")
                if kind == "direct":
                    direct.append(run_direct(study))
                else:
                    tuned.append(run_ray(study, Path(storage)))
                print(f"[overhead] pair {i} {kind} done", flush=True)
    ray.shutdown()

    d_train, d_eval, d_save = median(direct, "train"), median(direct, "eval"), median(direct, "save")
    d_epoch, d_total = median(direct, "run_epoch"), median(direct, "total")
    r_train, r_eval, r_total = median(tuned, "train"), median(tuned, "eval"), median(tuned, "total")
    r_rest = statistics.median(e["total"] - e["train"] - e["eval"] for run in tuned for e in run["epochs"])
    d_setup = statistics.median(run["setup"] for run in direct)
    r_setup = statistics.median(run["setup"] for run in tuned)
    n = args.epochs
    print(
        f"\nmedian seconds per epoch over {args.repeats} interleaved pairs x {n} epochs "
        f"(config {CONFIG}, smoke task, builtin:tiny):"
    )
    print("| | direct (Trial in-process) | Ray Tune trial |")
    print("|---|---|---|")
    print(f"| training (trainer.run_epoch) | {d_train:.2f} | {r_train:.2f} |")
    print(f"| fixed eval (48 answer pairs per agent) | {d_eval:.2f} | {r_eval:.2f} |")
    print(f"| checkpoint save (direct) / save + tune.report + Ray bookkeeping (Ray) | {d_save:.2f} | {r_rest:.2f} |")
    print(f"| **epoch total** | {d_total:.2f} | {r_total:.2f} |")
    print(f"| start-up per trial (model build; Ray: + actor start, teardown) | {d_setup:.2f} | {r_setup:.2f} |")
    print(f"\nper-epoch ratio, Ray trial / direct training+eval+save: {r_total / d_total:.3f}")
    print(f"per-epoch ratio, Ray trial / direct training+eval (no checkpoint): {r_total / d_epoch:.3f}")
    print(f"per-epoch ratio, Ray trial / direct training only: {r_total / d_train:.3f}")
    whole_d, whole_r = d_setup + n * d_total, r_setup + n * r_total
    print(f"whole {n}-epoch trial incl. start-up, Ray / direct+save: {whole_r / whole_d:.3f}")


if __name__ == "__main__":
    main()
