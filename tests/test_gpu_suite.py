"""bench/gpu_suite.py's own machinery, on CPU: the deadline skips what will not fit, every
section's line is written the moment it ends, a kill half-way keeps them, and no section's
process outlives the suite. (bench/gpu_rehearsal.sh runs the whole --dry-run in a clean venv
with transformers 5.17 and no Ray; it takes ~5 minutes and is not part of this suite.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import gpu_suite  # noqa: E402


def suite(out: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.Popen([sys.executable, str(REPO / "bench" / "gpu_suite.py"), "--dry-run", "--out", str(out), *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip


def lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_the_deadline_skips_what_will_not_fit_and_every_line_is_streamed(tmp_path):
    out = tmp_path / "suite.jsonl"
    # env runs (10-55 s here, with other engineers' loads); decode and epoch_compiled are said to
    # need 500 s, more than the deadline leaves: skipped.
    process = suite(out, "--only", "env,decode,epoch_compiled", "--deadline", "150", "--need", "decode=500,epoch_compiled=500")
    stdout, _ = process.communicate(timeout=240)
    assert process.returncode == 0
    rows = lines(out)
    assert [r["section"] for r in rows] == ["suite", "env", "decode", "epoch_compiled", "suite"]
    env = rows[1]
    assert env.get("done") and env["trainable_imports"] == "ok" and env["ray_loaded_by_trainable"] is False
    assert "needs ~500 s" in rows[2]["skipped"] and "needs ~500 s" in rows[3]["skipped"]
    assert "total_s" in rows[-1]
    table = [line for line in stdout.splitlines() if line.startswith("| env") or line.startswith("| decode")]
    assert len(table) == 2 and "torch" in table[0] and "skipped" in table[1]


def test_a_kill_half_way_keeps_the_finished_lines_and_leaves_no_section_running(tmp_path):
    out = tmp_path / "killed.jsonl"
    process = suite(out, "--only", "env,decode", "--deadline", "600")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out.exists() and '"section": "env"' in out.read_text()):
        time.sleep(0.5)
    time.sleep(1)  # decode's process is running now
    process.send_signal(signal.SIGKILL)
    process.wait()
    rows = lines(out)  # whole lines only
    assert [r["section"] for r in rows] == ["suite", "env"] and rows[1].get("done")
    time.sleep(2)  # the section's process notices its parent is gone within 0.5 s
    left = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True).stdout.split()
    assert not left


def test_a_failed_or_partial_section_still_describes_itself():
    rows = [
        {"section": "decode", "seconds": 3.0, "error": "killed at its deadline (90 s)", "eager_call1_s": 1.0},
        {"section": "epoch_compiled", "seconds": 1.0, "error": "RuntimeError: CUDA error: device-side assert triggered"},
        {"section": "steps", "seconds": 1.0},  # a row with none of its figures
        {"section": "packing", "seconds": 0, "skipped": "Ray is not installed here"},
    ]
    described = [gpu_suite.describe(r) for r in rows]
    assert "FAILED (killed at its deadline" in described[0] and "eager_call1_s" in described[0]
    assert "device-side assert" in described[1]
    assert described[2].startswith("| steps |") and "skipped: Ray" in described[3]


@pytest.mark.parametrize("name", gpu_suite.ORDER)
def test_every_section_has_a_deadline_and_an_order(name):
    assert name in gpu_suite.SECTIONS and all(n > 0 for n in gpu_suite.NEED[name])
