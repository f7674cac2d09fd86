"""Disk per checkpoint: measured for builtin:tiny, by formula for two Qwen2.5-0.5B agents.

A ratiotune checkpoint holds each tensor once: per agent the HF export (agent_i/,
safetensors, the float32 master weights) and AdamW's state (optimizer_i.pt: exp_avg and
exp_avg_sq, float32), plus comlrl's trainer_state/ (RNG, config fingerprints, epoch; no
weights). So per agent ~ 3 x params x 4 bytes, whatever model.dtype (the compute dtype) is.

    .venv/bin/python bench/checkpoint_size.py            # the tiny measurement + the estimate
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from ratiotune.core.model_names import BUILTIN_MODELS
from ratiotune.core.study import validate_study
from ratiotune.training.trainable import Trial


def tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def measure_tiny() -> dict[str, int]:
    study = validate_study({"name": "size", "train": {"epochs": 1, "num_generations": 2, "max_new_tokens": 8}})
    trial = Trial(study, {})
    trial.trainer.run_epoch()  # AdamW only has its state after a step
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        trial.save(directory, {})
        parts = {p.name: tree_bytes(p) if p.is_dir() else p.stat().st_size for p in directory.iterdir()}
        parts["total"] = tree_bytes(directory)
    parts["params_per_agent"] = sum(p.numel() for p in trial.trainer.agents[0].parameters())
    return parts


def qwen05b_params() -> int:
    shape = BUILTIN_MODELS["builtin:qwen2.5-0.5b-shape"]  # Qwen2.5-0.5B's dimensions
    config = Qwen2Config(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads,
        tie_word_embeddings=True,
    )
    with torch.device("meta"):  # shapes only: no memory, no download
        model = Qwen2ForCausalLM(config)
    return sum(p.numel() for p in model.parameters())  # parameters() counts the tied embedding once


def main() -> None:
    tiny = measure_tiny()
    print(f"builtin:tiny: {tiny['params_per_agent']:,} params/agent; one checkpoint = {tiny['total']:,} bytes")
    for name, size in sorted(tiny.items()):
        if name not in ("total", "params_per_agent"):
            print(f"  {name:14s} {size:>12,} bytes")
    params = qwen05b_params()
    print(f"Qwen2.5-0.5B: {params:,} params/agent")
    # per agent: float32 weights + AdamW exp_avg + exp_avg_sq (any model.dtype: it is the compute dtype)
    per_checkpoint = 2 * 3 * params * 4
    print(f"  2 agents x 3 x {params:,} x 4 B = {per_checkpoint:,} bytes ({per_checkpoint / 1e9:.1f} GB) per checkpoint")


if __name__ == "__main__":
    main()
