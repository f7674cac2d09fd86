"""A study that travels: run from another folder, read from a copy, retrained on a cluster.

Real Ray, comlrl and builtin:tiny (saved as a local model folder, loaded through
from_pretrained like a hub model). Ray runs every trial in its own working directory,
so a relative path that were resolved again in the trial would not be found there.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from conftest import EVAL_PROMPTS, TRAIN_PROMPTS, run_cli, tiny_study_dict
from ratiotune.cli import main
from ratiotune.core.experiment import load_experiment
from test_cluster import new_cluster

LOCAL_RAY = {"RAY_ADDRESS": "local"}  # never join a cluster another process runs on this machine


def save_tiny_model(folder, tokenizer_too: bool = True) -> None:
    from ratiotune.training.models import load_agents

    (agent, _), tokenizer = load_agents("builtin:tiny")
    agent.save_pretrained(folder)
    if tokenizer_too:
        tokenizer.save_pretrained(folder)


@pytest.fixture(scope="module")
def travelled(tmp_path_factory):
    """A project folder (study, prompts, model, all relative) searched from another working directory."""
    root = tmp_path_factory.mktemp("travel")
    project, shell = root / "project", root / "shell"
    study = tiny_study_dict(project / "prompts", search={"num_samples": 2})
    study["model"]["name"] = "./my-qwen"
    study["task"].update(train_prompts="prompts/train.txt", eval_prompts="prompts/eval.txt")
    save_tiny_model(project / "my-qwen")
    (project / "study.yaml").write_text(yaml.safe_dump(study))
    # A --set path is the shell's: relative to the working directory, not to the study file.
    (shell / "extra").mkdir(parents=True)
    (shell / "extra" / "eval.txt").write_text("\n".join(EVAL_PROMPTS[::-1]) + "\n")
    result = run_cli(
        "search",
        "../project/study.yaml",
        "--storage",
        "results",
        "--name",
        "travel",
        "--set",
        "task.eval_prompts=extra/eval.txt",
        cwd=shell,
        env=LOCAL_RAY,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {"root": root, "project": project, "shell": shell, "experiment": shell / "results" / "travel", "stdout": result.stdout}


def test_relative_paths_work_from_another_folder_and_the_folder_keeps_the_prompts(travelled):
    experiment = travelled["experiment"]
    loaded = load_experiment(experiment)
    assert len(loaded.trials) == 2
    assert all(t.error is None and t.epochs == 2 for t in loaded.trials), [t.error for t in loaded.trials]
    kept = yaml.safe_load((experiment / "study.yaml").read_text())
    assert kept["model"]["name"] == str(travelled["project"] / "my-qwen")
    assert (kept["task"]["train_prompts"], kept["task"]["eval_prompts"]) == ("prompts/train.txt", "prompts/eval.txt")
    assert (experiment / "prompts" / "train.txt").read_text().splitlines() == TRAIN_PROMPTS
    assert (experiment / "prompts" / "eval.txt").read_text().splitlines() == EVAL_PROMPTS[::-1]
    # The summary names the top trial's objective, its best value and the epoch it was reached at.
    best = loaded.ranked()[0]
    metric = "eval/in_range_fraction"
    window = loaded.study.search.objective_window
    line = (
        f"search's top by objective: {best.name}, objective {best.score(metric, window):.4f}; "
        f"best {metric}: {best.best(metric, 'max'):.4f} at epoch {best.best_epoch(metric, 'max')} (optimistic)"
    )
    assert line in travelled["stdout"]


def test_a_copied_experiment_without_its_original_prompts_reads_and_retrains_on_a_cluster(travelled, capsys):
    """best, report and retrain --address on a copy; the original prompt files are gone."""
    copy = travelled["root"] / "elsewhere" / "travel-copy"
    shutil.copytree(travelled["experiment"], copy)
    shutil.rmtree(travelled["project"] / "prompts")
    shutil.rmtree(travelled["shell"] / "extra")

    assert main(["best", str(copy)]) == 0
    assert "# best trial: trial_" in capsys.readouterr().out
    assert main(["report", str(copy)]) == 0
    assert (copy / "report" / "report.md").is_file()

    cluster, _ = new_cluster(2)
    try:
        # 1 config x 2 seeds x 2 epochs, one run per node (one CPU each).
        result = run_cli(
            "retrain",
            str(copy),
            "--seeds",
            "2",
            "--epochs",
            "2",
            "--address",
            cluster.address,
            cwd=travelled["root"],
        )
    finally:
        cluster.shutdown()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "joined Ray cluster" in result.stdout and "2 node(s)" in result.stdout
    summary = json.loads((copy / "retrain" / "summary.json").read_text())
    (config,) = summary["configs"]
    assert [(r["seed"], r["epoch"], r["error"]) for r in config["runs"]] == [(1, 2, None), (2, 2, None)]
    # The runs used the copy's own prompts (the originals are deleted), and keep them in turn.
    assert summary["eval_protocol"]["prompts"] == str(copy / "prompts" / "eval.txt")
    runs = copy / "retrain" / "runs"
    assert yaml.safe_load((runs / "study.yaml").read_text())["task"]["train_prompts"] == "prompts/train.txt"
    assert (runs / "prompts" / "eval.txt").read_text().splitlines() == EVAL_PROMPTS[::-1]
    final = yaml.safe_load((copy / "retrain" / "final" / "config.yaml").read_text())
    assert final["task"]["eval_prompts"] == "prompts/eval.txt"
    assert (copy / "retrain" / "final" / "prompts" / "train.txt").read_text().splitlines() == TRAIN_PROMPTS


def test_search_exits_1_when_every_trial_errored(tmp_path, write_study):
    """A model folder with weights but no tokenizer passes the launch check and fails in every trial."""
    save_tiny_model(tmp_path / "no-tokenizer", tokenizer_too=False)
    study = tiny_study_dict(tmp_path / "prompts", search={"num_samples": 1, "max_failures": 0, "space": {}})
    study["model"]["name"] = str(tmp_path / "no-tokenizer")
    result = run_cli("search", str(write_study(study)), "--storage", str(tmp_path / "results"), env=LOCAL_RAY)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "errored trials: 1" in result.stdout
    assert "ratiotune: error: every trial errored (1 of 1)" in result.stderr


def test_summary_says_when_no_trial_reported_the_metric(travelled, tmp_path):
    from ratiotune.results.tables import print_summary

    copy = tmp_path / "silent"
    shutil.copytree(travelled["experiment"], copy, ignore=shutil.ignore_patterns("checkpoint_*", "report", "retrain"))
    for result in copy.glob("trial_*/result.json"):
        result.write_text("")
    assert print_summary(load_experiment(copy)).startswith("no trial reported eval/in_range_fraction")
