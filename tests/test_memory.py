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
    parallel = estimate(QWEN25_05B, dtype="bfloat16", num_generations=8, max_new_tokens=128, prompt_tokens=32, on_gpu=True, parallel=True)
    assert parallel.gradients == bf16.weights  # one GPU per agent: both update at once
    more = estimate(QWEN25_05B, dtype="bfloat16", num_generations=16, max_new_tokens=128, prompt_tokens=32, on_gpu=True)
    copy = QWEN25_05B.parameters() * 2  # autocast's bf16 copy of one agent's weights: not per token
    assert more.update_activations - copy > 1.9 * (bf16.update_activations - copy)


def test_packing_warns_when_trials_per_gpu_overflow_it():
    per_trial = estimate(QWEN25_05B, dtype="bfloat16", num_generations=8, max_new_tokens=128, prompt_tokens=32, on_gpu=True)
    line, warn = packing_report(per_trial, 0.125, 80 * GIB, "A100")
    assert "8 trial(s) per GPU" in line and warn and "warning" in line
    line, warn = packing_report(per_trial, 0.25, 80 * GIB, "A100")
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
