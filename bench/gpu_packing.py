"""How many trials to pack on one GPU: 1, 2, 4 and 8 concurrent trials, side by side.

Each packing N runs N identical trials at resources.gpu = 1/N through Ray Tune, with the
package's own training code path (trainable.Trial on the GPU Ray assigned), and prints:
trials per GPU, median epoch time per trial, trials per GPU-hour (from the packing's wall
time, model building and eval included) and peak GPU memory per trial (torch's
max_memory_allocated / max_memory_reserved inside each trial) beside what the driver sees (NVML
or nvidia-smi for the trial's process: reserved memory + its CUDA context; where neither lists
the process, the GPU's used memory over the trials at once) and the estimate. The model is
builtin:qwen2.5-0.5b-shape: the real Qwen2.5-0.5B dimensions and vocabulary with random weights
and the character tokenizer, so nothing is downloaded.

    python bench/gpu_packing.py               # on a GPU machine (sized for < 8 min on one H200)
    python bench/gpu_packing.py --dry-run     # anywhere: builtin:tiny on CPU, one logical GPU

--dry-run checks the bench itself and Ray's packing (the trials ask for GPU fractions of a
logical GPU and must run at once) without CUDA; its times and memory say nothing about GPUs.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ratiotune.training.memory import GIB, study_estimate
from ratiotune.core.study import Study, validate_study

PROMPTS = [
    "Tell a joke about dinosaurs:",
    "Invent a new type of fruit:",
    "Design a playground on Mars:",
    "Describe a village on the back of a whale:",
]


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at one time: how many trials ran at once, from their (start, end) times."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = best = 0
    for _, step in events:
        running += step
        best = max(best, running)
    return best


def bench_study(args: argparse.Namespace, packing: int, prompt_dir: Path, gpu: float | None = None) -> Study:
    """`packing` trials at resources.gpu = 1/packing (or `gpu`: 2 = one trial, one agent per GPU)."""
    prompt_dir.mkdir(parents=True, exist_ok=True)
    (prompt_dir / "train.txt").write_text("\n".join(PROMPTS[: args.prompts]) + "\n")
    (prompt_dir / "eval.txt").write_text(PROMPTS[-1] + "\n")
    cpus = os.cpu_count() or 2
    return validate_study(
        {
            "name": f"pack{packing}" + (f"-gpu{gpu:g}" if gpu else ""),
            "model": {"name": args.model},
            "task": {
                "train_prompts": str(prompt_dir / "train.txt"),
                "eval_prompts": str(prompt_dir / "eval.txt"),
                "eval_samples_per_prompt": 2,
            },
            "train": {
                "epochs": args.epochs,
                "num_generations": args.num_generations,
                "max_new_tokens": args.max_new_tokens,
                "learning_rate": 1e-5,
            },
            "search": {
                "num_samples": packing,
                "max_concurrent_trials": packing,
                "scheduler": {"type": "fifo"},
                "max_failures": 0,
            },
            # Ray packs 1/gpu trials per GPU; the CPUs are split so CPU never limits the packing.
            "resources": {
                "cpu": min(1.0, cpus / packing) if args.dry_run else max(1, cpus // packing),
                "gpu": gpu or 1 / packing,
            },
        }
    )


def process_gpu_gib() -> float | None:
    """This process's memory on the GPU as the driver sees it (reserved memory + CUDA context), or None.

    NVML (pynvml, where installed), else nvidia-smi; None where neither lists this process (in a
    container the driver may list host PIDs): the device-wide figure (device_used_gib) stands in.
    """
    pid = os.getpid()
    try:
        import pynvml

        pynvml.nvmlInit()
        used = [proc.usedGpuMemory for i in range(pynvml.nvmlDeviceGetCount())
                for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(i))
                if proc.pid == pid and proc.usedGpuMemory is not None]  # fmt: skip
        if used:
            return sum(used) / GIB
    except Exception:  # noqa: BLE001  (no pynvml, no driver: try the next way)
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout  # fmt: skip
        mib = [float(used) for line in out.splitlines() if line.count(",") == 1
               for owner, used in [line.split(",")] if owner.strip() == str(pid)]  # fmt: skip
        return sum(mib) / 1024 if mib else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def bench_trainable(config: dict, study: Study, dry_run: bool) -> None:
    """One packed trial: the package's Trial on Ray's GPU, timing each epoch and recording peak memory."""
    import torch
    from ray import tune

    from ratiotune.training.placement import trial_devices
    from ratiotune.training.trainable import Trial

    # Dry run: Ray still assigns a share of a logical GPU; the agents stay on CPU (two CPU
    # device names for a 2-GPU trial, so that comlrl's "mp" path runs).
    if dry_run:
        devices = ["cpu", "cpu:0"] if study.resources.gpu >= 2 else ["cpu", "cpu"]
    else:
        devices = trial_devices()
    start = time.time()
    trial = Trial(study, config, seed=config["seed"], devices=devices)
    while trial.epoch < study.train.epochs:
        metrics = trial.run_epoch()
        if devices[0].startswith("cuda"):
            # The busiest of the trial's GPUs (two with resources.gpu: 2).
            indices = range(torch.cuda.device_count())
            allocated = max(torch.cuda.max_memory_allocated(i) for i in indices) / GIB
            reserved = max(torch.cuda.max_memory_reserved(i) for i in indices) / GIB
            # What the driver sees: this process (reserved + context), and the whole GPU (every trial on it).
            process = process_gpu_gib()
            free, total = torch.cuda.mem_get_info()
            device_used = (total - free) / GIB
        else:  # host peak RSS (kB on Linux), only so the dry run's column is not empty
            allocated = reserved = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
            process, device_used = None, None
        tune.report(
            {
                "epoch": trial.epoch,
                "epoch_seconds": metrics["system/epoch_seconds"],
                "eval_seconds": metrics["system/eval_seconds"],
                "peak_allocated_gib": allocated,
                "peak_reserved_gib": reserved,
                "process_gib": process,
                "device_used_gib": device_used,
                "start": start,
                "end": time.time(),
            }
        )


def run_packing(args: argparse.Namespace, packing: int, workdir: Path, gpu: float | None = None) -> dict:
    from ray import tune

    study = bench_study(args, packing, workdir / f"prompts{packing}-{gpu or 0:g}", gpu)
    trainable = tune.with_resources(
        tune.with_parameters(bench_trainable, study=study, dry_run=args.dry_run),
        {"cpu": study.resources.cpu, "gpu": study.resources.gpu},
    )
    tuner = tune.Tuner(
        trainable,
        param_space={"seed": tune.grid_search(list(range(packing)))},
        tune_config=tune.TuneConfig(max_concurrent_trials=packing),
        run_config=tune.RunConfig(
            name=study.name, storage_path=str(workdir / "ray"), verbose=0, failure_config=tune.FailureConfig(max_failures=0)
        ),
    )
    grid = tuner.fit()
    if grid.errors:
        raise SystemExit(f"packing {packing}: {len(grid.errors)} trial(s) failed: {grid.errors[0]}")
    frames = [r.metrics_dataframe for r in grid]
    # Skip each trial's first epoch (CUDA kernels warm up) when there is a later one.
    later = [f[f["epoch"] > 1] if len(f) > 1 else f for f in frames]
    starts, ends = [f["start"].iloc[0] for f in frames], [f["end"].iloc[-1] for f in frames]
    wall = max(ends) - min(starts)

    def largest(column: str) -> float | None:
        values = [v for f in frames if column in f for v in f[column] if v is not None and v == v]
        return max(values) if values else None

    return {
        "packing": packing,
        "at_once": max_overlap(list(zip(starts, ends))),
        "epoch_s": statistics.median(s for f in later for s in f["epoch_seconds"]),
        "trials_per_gpu_hour": packing * 3600 / wall,
        "wall_s": wall,
        "allocated_gib": max(f["peak_allocated_gib"].max() for f in frames),
        "reserved_gib": max(f["peak_reserved_gib"].max() for f in frames),
        "process_gib": largest("process_gib"),  # NVML/nvidia-smi per process, None where it cannot tell
        "device_used_gib": largest("device_used_gib"),  # the whole GPU: all packed trials + their contexts
        "estimate_gib": study_estimate(study)[0].total / GIB,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dry-run", action="store_true", help="builtin:tiny on CPU with one logical GPU: checks the bench, not the GPU"
    )
    parser.add_argument("--packings", default="1,2,4,8", help="trials per GPU to compare (default: 1,2,4,8)")
    parser.add_argument("--model", help="default: builtin:qwen2.5-0.5b-shape (builtin:tiny with --dry-run)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per trial; the first is not timed when there are more")
    parser.add_argument("--prompts", type=int, default=2, choices=range(1, len(PROMPTS)), help="training prompts per epoch")
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args()
    args.model = args.model or ("builtin:tiny" if args.dry_run else "builtin:qwen2.5-0.5b-shape")
    packings = [int(p) for p in args.packings.split(",")]

    import ray
    import torch

    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    if args.dry_run:
        ray.init(address="local", num_cpus=os.cpu_count() or 2, num_gpus=1, include_dashboard=False, logging_level="WARNING")
        gpu = "one logical GPU (dry run: agents on CPU, memory column = host peak RSS)"
    else:
        if not torch.cuda.is_available():
            sys.exit("gpu_packing: no CUDA device here; run with --dry-run to check the bench on CPU")
        ray.init(address="local", include_dashboard=False, logging_level="WARNING")
        props = torch.cuda.get_device_properties(0)
        gpu = f"{props.name}, {props.total_memory / GIB:.0f} GiB"
    print(
        f"{args.model}, {args.epochs} epochs x {args.prompts} prompts, num_generations {args.num_generations}, "
        f"max_new_tokens {args.max_new_tokens}, on {gpu}",
        flush=True,
    )

    began = time.time()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpu-packing-") as tmp:
        for packing in packings:
            rows.append(run_packing(args, packing, Path(tmp)))
            print(f"  packing {packing} done ({rows[-1]['wall_s']:.0f} s)", flush=True)
    base = rows[0]["trials_per_gpu_hour"]
    print(
        "\n| trials/GPU | ran at once | epoch s/trial (median) | trials/GPU-hour | vs 1st row | "
        "peak alloc GiB/trial | peak reserved GiB/trial | driver GiB/trial | estimate GiB/trial |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        # The driver's figure: this trial's process (NVML / nvidia-smi), else the whole GPU / trials at once.
        driver = r["process_gib"] or (r["device_used_gib"] / r["at_once"] if r["device_used_gib"] else None)
        print(
            f"| {r['packing']} | {r['at_once']} | {r['epoch_s']:.1f} | {r['trials_per_gpu_hour']:.0f} | "
            f"{r['trials_per_gpu_hour'] / base:.2f}x | {r['allocated_gib']:.2f} | {r['reserved_gib']:.2f} | "
            f"{'n/a' if driver is None else f'{driver:.2f}'} | {r['estimate_gib']:.2f} |"
        )
    print(f"\ntotal {time.time() - began:.0f} s")
    ray.shutdown()


if __name__ == "__main__":
    main()
