"""`ratiotune train` (one config, no search), the `default:` key of the space, and the tutorial example.

Real comlrl training on builtin:tiny in subprocesses; W&B offline under tmp_path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import yaml
from conftest import REPO, run_cli
from transformers import AutoModelForCausalLM, AutoTokenizer

from ratiotune.cli import main
from ratiotune.training.models import load_agents
from ratiotune.core.study import StudyError, load_study, validate_study
from ratiotune.core.metrics import MetricTable
from ratiotune.tasks.length_ratio import make_task
from ratiotune.training.one_run import resolve_study

# The numbers `ratiotune train` prints per epoch for length-ratio (the tiny study's task).
PROGRESS_METRICS = MetricTable(make_task()).progress


def changed_parameters(saved_dir) -> int:
    """How many tensors of the saved agent differ from builtin:tiny's initial weights."""
    (initial, _), _ = load_agents("builtin:tiny")
    trained = AutoModelForCausalLM.from_pretrained(saved_dir)
    before = dict(initial.named_parameters())
    return sum(not torch.equal(before[name], p) for name, p in trained.named_parameters())


def test_train_smoke_study_two_epochs(tmp_path):
    out = tmp_path / "run"
    # The smoke study with smaller groups and answers than its defaults (8 x 32 tokens), to stay quick.
    result = run_cli(
        "train",
        "studies/smoke.yaml",
        "--set",
        "learning_rate=1e-3",
        "--set",
        "train.epochs=2",
        "--set",
        "num_generations=2",
        "--set",
        "max_new_tokens=8",
        "--set",
        "task.eval_samples_per_prompt=1",
        "--output",
        str(out),
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in rows] == [1, 2]
    for row in rows:
        assert all(0.0 <= row[name] <= 1.0 for name in PROGRESS_METRICS)
    progress = [line for line in result.stdout.splitlines() if line.startswith("epoch ")]
    assert len(progress) == 2 and all(name in progress[0] for name in PROGRESS_METRICS)

    config = load_study(out / "config.yaml")  # the resolved study is itself a valid study
    assert config.train.learning_rate == 1e-3 and config.train.epochs == 2
    assert (config.train.num_generations, config.train.max_new_tokens, config.train.reward_scale) == (2, 8, 100.0)
    assert config.search.space == {}

    for agent in ("agent_0", "agent_1"):
        AutoTokenizer.from_pretrained(out / agent)
        assert changed_parameters(out / agent) > 0, f"{agent} was saved untrained"


def test_smoke_study_trains_from_its_defaults():
    study = resolve_study(REPO / "studies/smoke.yaml")
    assert study.hyperparameters({}) == {"learning_rate": 1e-3, "num_generations": 8, "max_new_tokens": 32, "reward_scale": 100.0}


def test_train_logs_one_wandb_offline_run(tiny_study, write_study, tmp_path):
    study = write_study({**tiny_study, "train": {**tiny_study["train"], "epochs": 1}})
    wandb_dir = tmp_path / "wandb"
    wandb_dir.mkdir()
    result = run_cli(
        "train",
        str(study),
        "--set",
        "learning_rate=1e-3",
        "--output",
        str(tmp_path / "run"),
        "--wandb",
        env={"WANDB_MODE": "offline", "WANDB_DIR": str(wandb_dir)},
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    runs = list((wandb_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, runs


def test_train_refuses_existing_output(tiny_study, write_study, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    assert main(["train", str(write_study(tiny_study)), "--set", "learning_rate=1e-3", "--output", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert list(out.iterdir()) == []


def test_the_epoch_line_shows_the_studys_search_metric(tiny_study, write_study, tmp_path, capsys):
    # A metric that is not the task's headline: the line shows what a search would judge the config by.
    tiny_study["train"]["epochs"] = 1
    tiny_study["search"].update(metric="eval/flat_group_fraction", mode="min")
    out = tmp_path / "run"
    assert main(["train", str(write_study(tiny_study)), "--set", "learning_rate=1e-3", "--output", str(out)]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch ")]
    assert "eval/flat_group_fraction" in line and "search/objective" in line


def test_searched_parameter_needs_set_or_default(tiny_study, write_study, capsys):
    # The tiny study searches learning_rate and declares no default for it.
    assert main(["train", str(write_study(tiny_study))]) == 2
    err = capsys.readouterr().err
    assert "search.space.learning_rate" in err and "--set learning_rate=" in err


def test_resolve_uses_default_then_set(tiny_study, write_study):
    space = {
        "learning_rate": {"type": "loguniform", "low": 1e-4, "high": 1e-2, "default": 2e-3},
        "num_generations": {"type": "choice", "values": [2, 4], "default": 4},
    }
    path = write_study({**tiny_study, "search": {**tiny_study["search"], "space": space}})

    study = resolve_study(path)
    assert (study.train.learning_rate, study.train.num_generations) == (2e-3, 4)
    assert study.search.space == {}

    study = resolve_study(path, ["learning_rate=5e-4", "num_generations=2", "train.epochs=3", "name=other"])
    assert (study.train.learning_rate, study.train.num_generations, study.train.epochs, study.name) == (5e-4, 2, 3, "other")
    # What config.yaml holds (core/study/folders.study_files) validates as a study and trains the same values.
    from ratiotune.core.study import study_files

    written = validate_study(yaml.safe_load(study_files(study, "config.yaml")["config.yaml"]))
    assert written.hyperparameters({}) == study.hyperparameters({})
    assert (written.train.epochs, written.name, written.search.space) == (3, "other", {})


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"type": "loguniform", "low": 1e-4, "high": 1e-2, "default": 0.1}, "lies outside"),
        ({"type": "choice", "values": [2, 4], "default": 3}, "is not one of values"),
        ({"type": "int", "low": 2, "high": 8, "default": 2.5}, "integer default"),
    ],
)
def test_default_must_lie_inside_its_space(tiny_study, write_study, spec, message):
    name = "num_generations" if spec["type"] != "loguniform" else "learning_rate"
    path = write_study({**tiny_study, "search": {**tiny_study["search"], "space": {name: spec}}})
    with pytest.raises(StudyError, match=message) as error:
        load_study(path)
    assert f"search.space.{name}" in str(error.value)


def test_tutorial_example_runs_offline_with_wandb(tmp_path):
    wandb_dir = tmp_path / "wandb"
    wandb_dir.mkdir()
    out = tmp_path / "agents"
    result = subprocess.run(
        [
            sys.executable,
            "examples/story-len-ratio.py",
            "--model",
            "builtin:tiny",
            "--epochs",
            "1",
            "--max-new-tokens",
            "8",
            "--output",
            str(out),
            "--wandb",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(wandb_dir)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(list((wandb_dir / "wandb").glob("offline-run-*"))) == 1
    for agent in ("agent_0", "agent_1"):
        AutoTokenizer.from_pretrained(out / agent)
        assert changed_parameters(out / agent) > 0, f"{agent} was saved untrained"
