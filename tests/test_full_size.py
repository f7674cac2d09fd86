"""The full-size model on CPU: Qwen2.5-0.5B's shape trains, saves, restores and evaluates.

Marked `full_size` and run by `make test-full-size` (CI runs it after `make test`): ~16 GB of RAM
per run (float32 master weights + AdamW moments of two 494M-parameter agents), one run at a
time, ~4.5 minutes for both on a 2-core machine.
Each dtype runs in its own process so that its peak RSS (getrusage maxrss) is its own;
the figure is printed beside ratiotune.training.memory's estimate and must stay within 25% of it.

bfloat16 runs `builtin:qwen2.5-0.5b-shape` itself; float32 loads the same weights from a
local folder written with save_pretrained, with pad = eos as Qwen's base tokenizer has it
(the path a downloaded Qwen takes).

    make test-full-size         # prints the figures
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MODEL = "builtin:qwen2.5-0.5b-shape"
PROMPT = "Tell a joke about dinosaurs:"


def study_dict(model: str, dtype: str, workdir: Path) -> dict:
    (workdir / "prompts.txt").write_text(PROMPT + "\n")
    (workdir / "eval.txt").write_text("Tell a joke about penguins:\n")  # disjoint from train: study.check_prompt_overlap
    return {
        "name": "full-size",
        "model": {"name": model, "dtype": dtype},
        "task": {
            "train_prompts": str(workdir / "prompts.txt"),
            "eval_prompts": str(workdir / "eval.txt"),
            "eval_samples_per_prompt": 2,
        },
        "train": {"epochs": 1, "seed": 0, "learning_rate": 1e-6, "num_generations": 2, "max_new_tokens": 8},
        "resources": {"cpu": 2, "gpu": 0},
    }


def child(model: str, dtype: str, workdir: Path) -> dict:
    """One epoch, save, restore into a fresh trial, evaluate; returns timings, checks and peak RSS."""
    import gc

    import torch

    from ratiotune.training.memory import GIB, study_estimate
    from ratiotune.core.study import validate_study
    from ratiotune.training.trainable import Trial

    study = validate_study(study_dict(model, dtype, workdir))
    times = {}
    start = time.perf_counter()
    trial = Trial(study, {})
    times["build_s"] = time.perf_counter() - start
    print(f"built {times}", file=sys.stderr, flush=True)
    assert all(p.dtype == torch.float32 for a in trial.trainer.agents for p in a.parameters())
    pad_is_eos = trial.trainer.tokenizers[0].pad_token_id == trial.trainer.tokenizers[0].eos_token_id
    start = time.perf_counter()
    metrics = trial.run_epoch()
    times["epoch_s"] = time.perf_counter() - start
    print(f"epoch {times}", file=sys.stderr, flush=True)
    # One AdamW step per agent (whether lr 1e-6 moves the weights depends on the sampled
    # rewards differing; tests/test_gpu_path.py checks that part on a model that learns).
    stepped = [sorted({int(s["step"]) for s in o.state.values()}) for o in trial.trainer.optimizers] == [[1], [1]]
    digest = [float(p.detach().double().sum()) for a in trial.trainer.agents for p in a.parameters()]
    start = time.perf_counter()
    trial.save(workdir / "ckpt", metrics)
    times["save_s"] = time.perf_counter() - start
    print(f"saved {times}", file=sys.stderr, flush=True)
    del trial
    gc.collect()

    start = time.perf_counter()
    restored = Trial(study, {})
    restored.restore(workdir / "ckpt")
    times["restore_s"] = time.perf_counter() - start
    print(f"restored {times}", file=sys.stderr, flush=True)
    same = digest == [float(p.detach().double().sum()) for a in restored.trainer.agents for p in a.parameters()]
    start = time.perf_counter()
    evaluation = restored.evaluate()
    times["eval_s"] = time.perf_counter() - start
    estimate = study_estimate(study)[0]
    checkpoint_gb = sum(f.stat().st_size for f in (workdir / "ckpt").rglob("*") if f.is_file()) / 1e9
    # ~8 GB per checkpoint: gone as soon as it is measured, so that repeated runs (pytest keeps
    # earlier tmp folders) cannot fill the disk that CI shares with them.
    shutil.rmtree(workdir / "ckpt")
    return {
        "dtype": dtype,
        "model": model,
        **times,
        "infeasible": metrics["infeasible"],
        "stepped": stepped,
        "restored_exactly": same,
        "restored_epoch": restored.epoch,
        "eval_in_range": evaluation["in_range_fraction"],
        "pad_is_eos": pad_is_eos,
        "checkpoint_gb": checkpoint_gb,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB,
        "estimate_gib": estimate.total / GIB,
        "estimate": estimate.describe(),
    }


def save_local_copy(directory: Path) -> None:
    """The builtin model as a downloaded Qwen looks: save_pretrained folder, pad token = eos token."""
    from ratiotune.training.models import builtin_model, char_tokenizer

    tokenizer = char_tokenizer(151_936)
    model = builtin_model(MODEL, tokenizer)
    tokenizer.pad_token = tokenizer.eos_token
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def run_child(model: str, dtype: str, workdir: Path) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, __file__, model, dtype, str(workdir)],
        capture_output=True, text=True, timeout=1200, cwd=REPO,
        env={**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.full_size
def test_full_size_model_trains_saves_restores_and_evaluates_on_cpu(tmp_path):
    local = tmp_path / "qwen-local"
    started = time.perf_counter()
    try:
        save_local_copy(local)
        rows = [run_child(MODEL, "bfloat16", tmp_path / "bf16"), run_child(str(local), "float32", tmp_path / "fp32")]
    finally:  # ~2 GB of weights; also removed when a run fails (see child() for the checkpoints)
        shutil.rmtree(local, ignore_errors=True)
        for leftover in tmp_path.glob("*/ckpt"):
            shutil.rmtree(leftover, ignore_errors=True)
    (tmp_path / "figures.json").write_text(json.dumps(rows, indent=2))  # the figures, also without -s
    print(
        f"\nfull-size model on CPU, 1 prompt x 2 generations x 8 tokens, 1 epoch ({time.perf_counter() - started:.0f} s in all):"
    )
    for row in rows:
        print(
            f"  {row['dtype']:8s} {row['model'] if row['model'] == MODEL else 'local save_pretrained folder (pad = eos)'}: "
            f"peak RSS {row['peak_rss_gib']:.2f} GiB vs estimate {row['estimate_gib']:.2f} GiB "
            f"({row['peak_rss_gib'] / row['estimate_gib'] - 1:+.0%}); build {row['build_s']:.0f} s, "
            f"epoch {row['epoch_s']:.0f} s, save {row['save_s']:.0f} s ({row['checkpoint_gb']:.1f} GB), "
            f"restore {row['restore_s']:.0f} s, eval {row['eval_s']:.0f} s"
        )
        print(f"           estimate: {row['estimate']}")
    for row in rows:
        assert row["infeasible"] == 0 and row["stepped"] and row["restored_exactly"] and row["restored_epoch"] == 1, row
        assert 0.0 <= row["eval_in_range"] <= 1.0
        assert abs(row["peak_rss_gib"] / row["estimate_gib"] - 1) <= 0.25, row
    assert rows[1]["pad_is_eos"]


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1], sys.argv[2], Path(sys.argv[3]))))
