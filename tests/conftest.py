"""Shared fixtures: a tiny, fast study on builtin:tiny and one Ray instance per test session.

Everything is real (Ray, comlrl, transformers); only the sizes are small.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

# No hub, no W&B network, Ray's classic table: set before anything imports them.
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

REPO = Path(__file__).resolve().parents[1]

TRAIN_PROMPTS = ["Tell a joke about dinosaurs:", "Invent a new type of fruit:", "Design a playground on Mars:"]
EVAL_PROMPTS = ["Describe a village on the back of a whale:", "Tell a joke about penguins:"]


# The smallest real race after a 3-trial search: the baseline and 2 challengers on seeds 1-2 (round-0,
# 6 runs), then 2 configs on seeds 3-4 (confirm, 4 runs); one look, so the seeds tests assert stay fixed.
SMALL_RACE = {
    "enabled": True,
    "top_k": 2,
    "min_seeds": 2,
    "max_seeds": 2,
    "confirm_seeds": 2,
    "max_share": 0.8,
    "second_look_seeds": 0,
}


def tiny_study_dict(prompt_dir: Path, **sections) -> dict:
    """A study that trains in about a second per epoch on one core."""
    prompt_dir.mkdir(parents=True, exist_ok=True)
    (prompt_dir / "train.txt").write_text("\n".join(TRAIN_PROMPTS) + "\n")
    (prompt_dir / "eval.txt").write_text("\n".join(EVAL_PROMPTS) + "\n")
    study = {
        "name": "tiny",
        "model": {"name": "builtin:tiny"},
        "task": {
            "train_prompts": str(prompt_dir / "train.txt"),
            "eval_prompts": str(prompt_dir / "eval.txt"),
            "eval_samples_per_prompt": 2,
        },
        "train": {"epochs": 2, "seed": 0, "learning_rate": 1e-3, "num_generations": 2, "max_new_tokens": 8},
        "search": {
            "metric": "eval/in_range_fraction",
            "mode": "max",
            "num_samples": 2,
            "max_concurrent_trials": 2,
            "sampler": "tpe",
            "scheduler": {"type": "fifo"},
            "space": {"learning_rate": {"type": "loguniform", "low": 1e-4, "high": 1e-2}},
        },
        "resources": {"cpu": 1, "gpu": 0},
        "checkpoint": {"num_to_keep": 1},
        # Off unless a test races: a race trains several more runs per study (tests/test_race.py).
        "race": {"enabled": False},
    }
    for key, value in sections.items():
        study[key] = {**study.get(key, {}), **value} if isinstance(value, dict) else value
    return study


@pytest.fixture
def tiny_study(tmp_path) -> dict:
    return tiny_study_dict(tmp_path / "prompts")


@pytest.fixture
def write_study(tmp_path):
    """Write a study dict to a YAML file and return its path."""

    def write(study: dict, name: str = "study.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(study, sort_keys=False))
        return path

    return write


def per_prompt_rollouts(trainer, items: list, agent_idx: int = 0) -> list[dict]:
    """comlrl's own path: one generate() call per prompt, through the trial's trainer (its decode
    copy and generation mode included), in comlrl's output format; what a batched window must match."""
    args = trainer.args
    return [
        trainer._generate_completions(trainer.agents[agent_idx], [item], agent_idx=agent_idx,
                                      num_return_sequences=args.num_generations, max_new_tokens=args.max_new_tokens)
        for item in items
    ]  # fmt: skip


def run_cli(*args: str, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    """`ratiotune ARGS...` in a fresh process (its own Ray instance), output captured."""
    return subprocess.run(
        [sys.executable, "-m", "ratiotune", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=kwargs.pop("cwd", REPO),
        env={**os.environ, **kwargs.pop("env", {})},
        **kwargs,
    )


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance for the in-process tests of a session."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()
