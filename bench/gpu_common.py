"""The parent process of both GPU scripts (bench/gpu_suite.py, bench/gpu_window.py): their flags, the
environment each section's process gets, and the run of the sections under the deadline.

Each section runs as `python SCRIPT --section NAME ...` in its own process group (clean memory
peaks; a crash or a device-side assert poisons nothing after it) under what is left of
`--deadline`; a section that will not fit is skipped, one that overruns is killed and reports what
it had measured. Each section's figures are appended to `--out` as one JSON line (flushed and
fsynced) and printed as a table row the moment it ends, so a run killed half-way keeps every
finished section. What runs inside a section's process (child, Partial) is in bench/gpu_suite.py.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable


def parse_args(description: str, order: list[str], deadline: float, out: str, dry_run: str) -> argparse.Namespace:
    """The flags both scripts take; `dry_run` says what --dry-run runs."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--dry-run", action="store_true", help=f"{dry_run}: checks the script, says nothing about GPUs")
    parser.add_argument("--deadline", type=float, default=deadline, help=f"seconds for the whole run (default {deadline:g})")
    parser.add_argument("--out", default=out, help="JSON lines, one per section, appended as each ends")
    parser.add_argument("--only", default="", help=f"comma-separated sections to run ({','.join(order)})")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip")
    parser.add_argument("--need", default="", help="NAME=SECONDS,...: override the seconds a section needs to be started")
    parser.add_argument("--section", help=argparse.SUPPRESS)  # internal: run one section in this process
    parser.add_argument("--sizes", help=argparse.SUPPRESS)
    parser.add_argument("--device", help=argparse.SUPPRESS)
    parser.add_argument("--partial", help=argparse.SUPPRESS)
    parser.add_argument("--of", help=argparse.SUPPRESS)  # the run's --out: names a section's process in ps
    return parser.parse_args()


def section_env(out: Path, dry_run: bool, prefix: str, pythonpath: tuple[str, ...] = ()) -> dict:
    """The environment of every section's process; `pythonpath` goes after PYTHONPATH's own entries (the wheels first)."""
    env = dict(os.environ)
    if "TORCHINDUCTOR_CACHE_DIR" not in env:
        # One inductor cache for all sections: a graph compiled in one process loads from disk in the next.
        env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"{prefix}-inductor-")
    env["PYTHONUNBUFFERED"] = "1"
    env["GPU_SUITE_OUT"] = str(Path(out).resolve())
    if pythonpath:
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([*paths, *pythonpath])
    if dry_run:  # one thread per process: the dry run is for shared, busy CPUs
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_section(name: str, sizes: dict, device: str, budget: float, env: dict, script: Path) -> dict:
    """`name` in a subprocess of `script`, killed after `budget` seconds; its figures, partial ones on a failure."""
    with tempfile.TemporaryDirectory(prefix=f"gpu-suite-{name}-") as tmp:
        partial = Path(tmp) / "partial.json"
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, str(script), "--section", name, "--sizes", json.dumps(sizes),
             "--device", device, "--partial", str(partial), "--of", str(env["GPU_SUITE_OUT"])],
            env=env, process_group=0, stdout=sys.stderr, stderr=sys.stderr,  # its own group (not session): killed as one
        )  # fmt: skip
        try:
            code = process.wait(timeout=max(1.0, budget))
            error = None if code == 0 else f"exit {code}" + (f" (signal {-code})" if code < 0 else "")
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            error = f"killed at its deadline ({budget:.0f} s)"
        seconds = time.perf_counter() - start
        try:
            figures = json.loads(partial.read_text())
        except (OSError, ValueError):
            figures = {}
    if error and "error" not in figures:
        figures["error"] = error
    return {"section": name, "seconds": seconds, **figures}


def run_sections(
    script: Path,
    label: str,
    args: argparse.Namespace,
    need: dict[str, tuple[float, float]],
    sizes: dict,
    device: str,
    env: dict,
    describe: Callable[[dict], str],
    began: float,
    header: dict | None = None,
    why_skip: Callable[[str], str | None] = lambda name: None,
) -> None:
    """Every section of `need` (seconds on the GPU, in the dry run), in its order, under what is left of
    --deadline since `began`; a `label` line (the run's settings, `header` too) opens and closes --out."""
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    only, skip = set(filter(None, args.only.split(","))), set(filter(None, args.skip.split(",")))
    needs = {k: float(v) for k, v in (item.split("=") for item in filter(None, args.need.split(",")))}

    def emit(row: dict) -> None:
        with out.open("a") as handle:
            handle.write(json.dumps(row, default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        print(describe(row) if row["section"] != label else f"{label}: {json.dumps(row, default=str)}", flush=True)

    emit({"section": label, "dry_run": args.dry_run, "deadline_s": args.deadline, "sizes": sizes, **(header or {}),
          "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")})  # fmt: skip
    print("| section | seconds | figures |\n|---|---|---|", flush=True)
    for name in need:
        if (only and name not in only) or name in skip:
            continue
        reason = why_skip(name)
        if reason:
            emit({"section": name, "skipped": reason})
            continue
        left = args.deadline - (time.monotonic() - began)
        seconds = needs.get(name, need[name][1 if args.dry_run else 0])
        if left < min(seconds, 0.5 * seconds + 20):
            emit({"section": name, "skipped": f"needs ~{seconds:.0f} s, {left:.0f} s left of --deadline {args.deadline:g}"})
            continue
        # On a GPU a section also stops at twice what it is expected to need: one slow compile
        # cannot take the later sections' time (the dry run's timings are the host's load).
        budget = left - 2 if args.dry_run else min(left - 2, 2 * seconds)
        emit(run_section(name, sizes, device, budget, env, script))
    emit({"section": label, "total_s": time.monotonic() - began, "out": str(out)})


def table_row(row: dict, section_text: Callable[[str, dict], str | None]) -> str:
    """The table row of a section's JSON line: a skipped or failed section, or one whose figures do not
    fit its words, still reads as a row (its figures as JSON). section_text(name, row) words a finished
    section, or returns None for one it does not know."""
    name = row["section"]
    lead = f"| {name} | {row.get('seconds', 0):.0f} s | "
    if "skipped" in row:
        return lead + f"skipped: {row['skipped']} |"
    prefix = f"FAILED ({row['error']}); so far: " if "error" in row else ""
    figures = {k: v for k, v in row.items() if k not in ("section", "seconds", "error", "done")}
    text = None
    try:
        if "error" not in row:
            text = section_text(name, row)
    except (KeyError, TypeError, ValueError, IndexError):
        pass
    if text is None:
        text = json.dumps(figures, default=str)[:400]
    return lead + prefix + text + " |"
