"""The per-trial memory estimate, the packing line and its warning, and the resources/storage edges."""

from __future__ import annotations

import pytest

from ratiotune.training.memory import GIB, ModelShape, estimate, packing_report, study_estimate, study_shape
from ratiotune.core.storage import experiment_location, split_location
from ratiotune.core.study import StudyError, validate_study

QWEN25_05B = ModelShape(151_936, 896, 4864, 24, 14, 2)


def test_parameter_count_matches_the_models():
    from ratiotune.training.models import load_agents

    agents, _ = load_agents("builtin:tiny")
    assert study_shape("builtin:tiny").parameters() == sum(p.numel() for p in agents[0].parameters())
    assert QWEN25_05B.parameters() == 494_032_768  # Qwen2.5-0.5B's published 0.49B


def test_estimate_counts_float32_masters_and_adamw_whatever_the_compute_dtype():
    bf16 = estimate(QWEN25_05B, dtype="bfloat16", num_generations=8, max_new_tokens=128, prompt_tokens=32, on_gpu=True)
    fp32 = estimate(QWEN25_05B, dtype="float32", num_generations=8, max_new_tokens=128, prompt_tokens=32, on_gpu=True)
    assert bf16.weights == fp32.weights == 2 * 4 * QWEN25_05B.parameters()  # two agents' float32 masters
    assert bf16.optimizer == 2 * bf16.weights  # two float32 moments per parameter
    assert bf16.gradients == bf16.weights / 2  # freed after each agent's step: one agent's at a time
    parallel = estimate(
        QWEN25_05B, dtype="bfloat16", num_generations=8, max_new_tokens=128, prompt_tokens=32, on_gpu=True, parallel=True
    )
    assert parallel.gradients == bf16.weights  # one GPU per agent: both update at once
    more = estimate(QWEN25_05B, dtype="bfloat16", num_generations=16, max_new_tokens=128, prompt_tokens=32, on_gpu=True)
    copy = QWEN25_05B.parameters() * 2  # autocast's bf16 copy of one agent's weights: not per token
    assert more.update_activations - copy > 1.9 * (bf16.update_activations - copy)


def test_packing_warns_when_trials_per_gpu_overflow_it():
    per_trial = estimate(QWEN25_05B, dtype="bfloat16", num_generations=8, max_new_tokens=128, prompt_tokens=32, on_gpu=True)
    line, warn = packing_report(per_trial, 0.125, 80 * GIB, "A100")
    assert "8 trial(s) per GPU" in line and warn and "warning" in line
    # 4 per 80 GiB GPU no longer fit: the H200 measured ~19 GiB reserved + context per eager trial.
    line, warn = packing_report(per_trial, 0.25, 80 * GIB, "A100")
    assert warn and "4 trial(s) per GPU" in line
    line, warn = packing_report(per_trial, 0.5, 80 * GIB, "A100")
    assert not warn
    line, warn = packing_report(per_trial, 0.125, None)
    assert not warn and "not compared" in line


def test_study_estimate_uses_the_largest_values_in_the_space(tiny_study):
    tiny_study["search"]["space"]["num_generations"] = {"type": "choice", "values": [2, 6]}
    _, header = study_estimate(validate_study(tiny_study))
    assert "num_generations 6" in header and "max_new_tokens 8" in header


@pytest.mark.parametrize("gpu", [1.5, 3])
def test_gpu_must_be_a_fraction_one_or_two(tiny_study, gpu):
    tiny_study["resources"]["gpu"] = gpu
    with pytest.raises(StudyError, match=f"resources: gpu: {gpu:g} is not allowed"):
        validate_study(tiny_study)


def test_storage_accepts_paths_and_uris(tmp_path):
    assert split_location(experiment_location("s3://bucket/results/", "smoke")) == ("s3://bucket/results", "smoke")
    assert split_location(experiment_location(str(tmp_path), "smoke")) == (str(tmp_path), "smoke")


def test_on_a_gpu_the_estimate_adds_the_allocators_reserve_and_the_context_off_it_neither():
    from ratiotune.training.memory import ALLOCATOR_MARGIN, CUDA_CONTEXT_BYTES

    kwargs = dict(dtype="bfloat16", num_generations=8, max_new_tokens=128, prompt_tokens=32)
    gpu, cpu = estimate(QWEN25_05B, on_gpu=True, **kwargs), estimate(QWEN25_05B, on_gpu=False, **kwargs)
    assert gpu.tensors == cpu.tensors == cpu.total  # the same arithmetic; on CPU nothing on top
    assert gpu.total == gpu.tensors + int(gpu.tensors * ALLOCATOR_MARGIN) + CUDA_CONTEXT_BYTES
    assert "allocator reserve (20%)" in gpu.describe() and "CUDA context 1 GiB" in gpu.describe()
    assert "reserve" not in cpu.describe() and "CUDA" not in cpu.describe()
    # The packing check multiplies what a whole process holds: 6 per GPU of this trial need 125 GiB.
    line, warn = packing_report(gpu, 1 / 6, 140 * GIB, "H200")
    assert f"x {gpu.total / GIB:.2f} GiB" in line and not warn
    line, warn = packing_report(gpu, 1 / 6, 120 * GIB, "H200")
    assert warn
    # One agent per GPU: half of the tensors and of their reserve on each, the whole context on each.
    line, _ = packing_report(gpu, 2, 140 * GIB)
    assert f"~{((gpu.tensors + gpu.reserve) / 2 + CUDA_CONTEXT_BYTES) / GIB:.2f} GiB on each" in line


def test_the_margins_cover_what_the_h200_measured_reserved_plus_a_context():
    """The one GPU measurement (docs/bench/gpu_suite_h200.jsonl): its arithmetic ran 11-12% under
    reserved memory plus a bare 0.5 GiB context; the estimate must now sit above both epochs."""
    import json
    from pathlib import Path

    from ratiotune.training.memory import ALLOCATOR_MARGIN, CUDA_CONTEXT_BYTES

    rows = [json.loads(line) for line in (Path(__file__).parents[1] / "docs/bench/gpu_suite_h200.jsonl").open()]
    epochs = [r for r in rows if r["section"] in ("epoch_eager", "epoch_compiled")]
    assert len(epochs) == 2
    for row in epochs:
        tensors = row["estimate_gib"] - row["estimate_cuda_context_gib"]  # that run's estimate without its context
        assert row["peak_reserved_gib"] + 0.5 > tensors + 0.5  # the old estimate was under (why this changed)
        now = tensors * (1 + ALLOCATOR_MARGIN) + CUDA_CONTEXT_BYTES / GIB
        assert now > row["peak_reserved_gib"] + 0.5, (row["mode"], now, row["peak_reserved_gib"])
        assert now < 1.25 * (row["peak_reserved_gib"] + 0.5)  # safe, not absurd: 9-10% above here
