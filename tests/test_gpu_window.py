"""bench/gpu_window.py --dry-run on CPU: every section but `search` runs on tiny shapes and says what it should.

(`search` runs a whole `ratiotune search` + race, ~2 minutes here: bench/gpu_rehearsal.sh runs it, and the
window's whole --dry-run, from the wheels that travel; tests/test_search.py covers the search itself.)
The figures on CPU say nothing about GPUs; the checks are that each section's check is wired right.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import gpu_window  # noqa: E402


def test_the_dry_run_streams_every_section_in_the_issues_order_and_each_check_holds(tmp_path):
    out = tmp_path / "window.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "RAY_ADDRESS": "local"}
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu_window.py"), "--dry-run", "--skip", "search", "--deadline", "540",
         "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["section"] for r in rows] == ["window"] + [s for s in gpu_window.ORDER if s != "search"] + ["window"]
    sections = {r["section"]: r for r in rows[1:-1]}
    assert all(r.get("done") for r in sections.values()), {k: r.get("error") or r.get("skipped") for k, r in sections.items()}

    two = sections["two_agents"]
    assert two["verdict"] == "each agent decodes its own weights"
    for agent in ("agent0", "agent1"):  # compiled = its own eager copy, far from the other agent
        assert two[agent]["max_logit_diff_vs_own_eager"] < 0.1 < two[agent]["max_logit_diff_vs_other_agent"]
    assert two["dynamo_compiles_after_warmup"] == 0

    (packing,) = sections["packing"]["rows"]
    assert packing["packing"] == 1 and packing["at_once"] == 1 and "error" not in packing

    checkpoint = sections["checkpoint"]
    assert checkpoint["verdict"] == "bit-equal" and checkpoint["weights_differed_before_restore"]
    assert checkpoint["adamw_tensors_checked"] > 0 and checkpoint["adamw_tensors_unequal"] == 0
    assert checkpoint["decode_copies_equal"] and checkpoint["compiled_greedy_equal"] and checkpoint["epoch_restored"] == 1

    profile = sections["profile"]
    assert profile["gpu_busy_ms_per_step"] is None and profile["wall_ms_per_step"] > 0 and profile["host_top"]
    assert Path(profile["trace"]).exists() and Path(profile["trace"]).parent == tmp_path

    loop = sections["decode_loop"]  # our decode loop: generate()'s greedy tokens on the same bf16 copy
    assert loop["greedy_equal"] and loop["loop_ms_per_step"] > 0 and loop["generate_ms_per_step"] > 0

    gap = sections["logprob_gap"]
    assert gap["tokens"] == 2 * 16
    # On CPU the sampler's bf16 copy and the trainer's autocast differ by bf16 rounding only.
    assert 0 <= gap["mean_abs_gap_sampler_vs_trainer"] < 0.05 and 0.99 < gap["grad_cosine_bf16_vs_fp32"] <= 1.0001
    # Under autocast the matmuls see bf16 weights either way: a copy that keeps its embeddings and norms
    # in float32 scores exactly as the trainer does (on CPU: 0), the all-bf16 copy does not.
    assert gap["mean_abs_gap_fp32_embed_norm_copy_vs_trainer"] < gap["mean_abs_gap_bf16_copy_eager_vs_trainer"]

    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + len(sections) and not any("FAILED" in line for line in table)


def test_describe_keeps_failed_and_partial_rows_readable():
    rows = [
        {
            "section": "packing",
            "seconds": 9.0,
            "rows": [{"packing": 4, "error": "SystemExit: packing 4: 1 trial(s) failed: CUDA out of memory"}],
        },
        {"section": "checkpoint", "seconds": 3.0, "error": "killed at its deadline (180 s)", "save_s": 40.0},
        {"section": "search", "seconds": 0, "skipped": "needs ~120 s, 50 s left of --deadline 450"},
    ]
    described = [gpu_window.describe(r) for r in rows]
    assert "4/GPU: SystemExit: packing 4" in described[0] and "out of memory" in described[0]
    assert "FAILED (killed at its deadline" in described[1] and "save_s" in described[1]
    assert described[2].startswith("| search | 0 s | skipped: needs ~120 s")
