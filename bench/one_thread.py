"""What bench/step_speed.py and bench/epoch_speed.py share: children on one thread, medians, the floor.

Each benchmark runs every measured path in a child process of its own (so no path inherits another's
caches, allocator or compiled kernels), alternating between paths, and prints the median. The floor
is what this CPU allows on one thread, measured in the same run as the timings it is held against:
this machine's read bandwidth ranged from 6.4 to 13.6 GB/s over 2026-12-07, so a floor from another run
says little.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_child(script: str | Path, arguments: list[str]) -> dict:
    """`python script --child ...` on one thread (as a trial runs); its last stdout line, parsed as JSON."""
    command = [sys.executable, str(script), "--child", *arguments]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "WANDB_MODE": "offline"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    if done.returncode != 0:
        sys.exit(f"child {' '.join(arguments)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def median(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def machine_floor(read_elements: int) -> dict:
    """This CPU on one thread, now: the FLOP rate of a 2048^2 matmul in float32 and bfloat16, and the
    read bandwidth of summing `read_elements` float32 values (512 MB at least, so that the read comes
    from memory, not from the caches). Call it in a child (run_child) so that it runs on one thread."""
    import torch

    rates = {}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(2048, 2048).to(dtype), torch.randn(2048, 2048).to(dtype)
        a @ b
        start = time.perf_counter()
        for _ in range(10):
            a @ b
        rates[str(dtype).removeprefix("torch.")] = 10 * 2 * 2048**3 / (time.perf_counter() - start)
    weights = torch.ones(max(read_elements, 2**27))
    weights.sum()
    start = time.perf_counter()
    for _ in range(5):
        weights.sum()
    return {"flops": rates, "bandwidth": 5 * weights.numel() * 4 / (time.perf_counter() - start)}
