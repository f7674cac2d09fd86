"""A real study through the CLI: Ray Tune + Optuna + comlrl on builtin:tiny, W&B offline."""

import json
import re

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import run_cli

METRICS = ("train/mean_reward", "train/in_range_fraction", "eval/mean_reward", "eval/in_range_fraction")


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """3 trials x 2 epochs, searched learning rate, --wandb in offline mode."""
    from conftest import tiny_study_dict
    import yaml

    root = tmp_path_factory.mktemp("search")
    study = tiny_study_dict(root / "prompts", search={"num_samples": 3, "max_concurrent_trials": 2})
    (root / "study.yaml").write_text(yaml.safe_dump(study))
    wandb_dir = root / "wandb"
    wandb_dir.mkdir()
    result = run_cli(
        "search", str(root / "study.yaml"), "--storage", str(root / "results"), "--name", "exp",
        "--wandb", "--wandb-project", "ratiotune-tests",
        env={"WANDB_MODE": "offline", "WANDB_DIR": str(wandb_dir)},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {"dir": root / "results" / "exp", "stdout": result.stdout, "wandb": wandb_dir, "study": root / "study.yaml"}


def trial_dirs(experiment_dir):
    return sorted(d for d in experiment_dir.iterdir() if (d / "params.json").is_file())


def rows(trial_dir):
    return [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]


def test_every_trial_reports_the_four_metrics_every_epoch(experiment):
    trials = trial_dirs(experiment["dir"])
    assert len(trials) == 3
    for trial in trials:
        results = rows(trial)
        assert [r["epoch"] for r in results] == [1, 2]
        for result in results:
            for name in METRICS:
                assert 0.0 <= result[name] <= 1.0, (trial.name, name, result[name])


def test_ray_reads_the_experiment(experiment):
    from ray.tune import ExperimentAnalysis

    analysis = ExperimentAnalysis(str(experiment["dir"]))
    assert len(analysis.trials) == 3
    assert all("eval/in_range_fraction" in df.columns for df in analysis.trial_dataframes.values())


def test_each_trial_keeps_at_most_num_to_keep_checkpoints(experiment):
    for trial in trial_dirs(experiment["dir"]):
        kept = [p for p in trial.iterdir() if p.name.startswith("checkpoint_")]
        assert 1 <= len(kept) <= 1, (trial.name, kept)


def test_best_names_the_trial_with_the_highest_metric(experiment):
    best_of = {t.name: max(r["eval/in_range_fraction"] for r in rows(t)) for t in trial_dirs(experiment["dir"])}
    result = run_cli("best", str(experiment["dir"]))
    assert result.returncode == 0, result.stderr
    named = re.search(r"# best trial: (\S+)", result.stdout).group(1)
    assert best_of[named] == max(best_of.values())  # ties may name any of the tied trials
    assert f"{max(best_of.values()):.4f}" in result.stdout
    assert "learning_rate:" in result.stdout

    checkpoint = re.search(r"# checkpoint: (\S+)", result.stdout).group(1)
    for agent in ("agent_0", "agent_1"):
        model = AutoModelForCausalLM.from_pretrained(f"{checkpoint}/{agent}")
        tokenizer = AutoTokenizer.from_pretrained(f"{checkpoint}/{agent}")
        prompt = tokenizer(["Tell a joke about penguins:"], return_tensors="pt")
        out = model.generate(**prompt, max_new_tokens=5, do_sample=False)
        assert out.shape[1] > prompt.input_ids.shape[1]


def test_search_prints_the_best_trials_and_checkpoint(experiment):
    assert "best checkpoint:" in experiment["stdout"]
    assert "trial_" in experiment["stdout"]


def test_wandb_offline_writes_one_run_per_trial_with_the_metric(experiment):
    runs = sorted(experiment["wandb"].rglob("offline-run-*"))
    assert len(runs) == 3, runs
    for run in runs:
        payload = b"".join(p.read_bytes() for p in run.glob("*.wandb"))
        assert b"eval/in_range_fraction" in payload


def test_an_existing_experiment_is_never_overwritten(experiment):
    before = sorted(p.name for p in experiment["dir"].iterdir())
    result = run_cli(
        "search", str(experiment["study"]), "--storage", str(experiment["dir"].parent), "--name", "exp", timeout=60
    )
    assert result.returncode == 2
    assert "already exists" in result.stderr and "--name" in result.stderr
    assert sorted(p.name for p in experiment["dir"].iterdir()) == before


def test_best_on_a_folder_that_is_not_an_experiment(tmp_path):
    result = run_cli("best", str(tmp_path), timeout=60)
    assert result.returncode == 2 and "not a ratiotune experiment" in result.stderr
    assert "Traceback" not in result.stderr
