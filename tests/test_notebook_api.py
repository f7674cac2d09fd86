"""`ratiotune.read_experiment` answers what a notebook asks, on a real experiment with a race and a retrain.

One real search (4 trials x 2 epochs, learning rate and num_generations searched, then the race),
then `ratiotune retrain`: the API's figures are checked against the folder's own records (the
race's summary.json, `ratiotune best`'s text, Optuna's journal), and the analysis scripts run on it.
"""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, SMALL_RACE, run_cli, tiny_study_dict


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    root = tmp_path_factory.mktemp("notebook")
    study = tiny_study_dict(
        root / "prompts",
        search={
            "num_samples": 3,
            "max_concurrent_trials": 2,
            "objective_window": 2,
            "space": {
                "learning_rate": {"type": "loguniform", "low": 1e-4, "high": 1e-2},
                "num_generations": {"type": "choice", "values": [2, 4]},
            },
        },
        race=SMALL_RACE,
    )
    (root / "study.yaml").write_text(yaml.safe_dump(study))
    done = run_cli("search", str(root / "study.yaml"), "--storage", str(root / "results"), "--name", "nb")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    directory = root / "results" / "nb"
    retrained = run_cli("retrain", str(directory), "--seeds", "2", "--epochs", "1")
    assert retrained.returncode == 0, retrained.stdout[-3000:] + retrained.stderr[-3000:]
    return directory


def test_the_trials_table_names_its_hyperparameter_columns_and_ranks_by_a_metrics_own_direction(experiment):
    import ratiotune

    exp = ratiotune.read_experiment(experiment)
    assert exp.hyperparameters == ["learning_rate", "num_generations"]
    assert set(exp.hyperparameters) <= set(exp.trials.columns)
    assert (exp.rank_metric, exp.rank_mode) == ("eval/in_range_fraction", "max")
    # system/epoch_seconds improves downwards: the fastest trial first, whatever the study's mode.
    fast = exp.ranked("system/epoch_seconds")
    assert list(fast["objective"]) == sorted(fast["objective"])
    again = ratiotune.read_experiment(experiment, metric="system/epoch_seconds")
    assert again.rank_mode == "min" and list(again.trials.index) == list(fast.index)
    assert list(exp.ranked("system/epoch_seconds", mode="max").index) == list(reversed(fast.index))


def test_recommended_is_the_object_best_prints(experiment):
    import ratiotune

    exp = ratiotune.read_experiment(experiment)
    rec = exp.recommended()
    best = run_cli("best", str(experiment))
    assert best.returncode == 0 and best.stdout == str(rec)
    summary = exp.race
    assert rec.source == "race" and rec.honest and rec.which == summary["recommended"]["which"]
    assert rec.hyperparameters == summary["recommended"]["hyperparameters"]
    assert yaml.safe_load(rec.study_values())["train"] == rec.hyperparameters
    entry = summary[rec.which]
    assert rec.figures["mean"] == entry["stats"]["mean"] and rec.figures["metric"] == "test/in_range_fraction"
    assert [str(p) for p in rec.agents] == summary["recommended"]["agents"]
    assert all((p / "agent_0").is_dir() and (p / "agent_1").is_dir() for p in rec.agents)


def test_race_runs_are_a_dataframe_that_adds_up_to_the_race_summary(experiment):
    import ratiotune

    exp = ratiotune.read_experiment(experiment)
    runs = exp.race_runs()
    assert {
        "round",
        "phase",
        "contender",
        "learning_rate",
        "num_generations",
        "seed",
        "objective",
        "test/in_range_fraction",
        "collapsed",
        "agents",
    } <= set(runs.columns)
    confirm = runs[runs.phase == "confirmation"]
    assert set(runs.phase) == {"selection", "confirmation"} and runs.phase.iloc[0] == "selection"
    rec = exp.recommended()
    mine = confirm[confirm.contender == ("baseline" if rec.which == "baseline" else exp.race["winner"]["search_trial"])]
    assert sorted(mine.seed) == exp.race["seeds"]["confirmation"]
    assert mine["test/in_range_fraction"].mean() == pytest.approx(rec.figures["mean"])
    assert int(mine.collapsed.sum()) == rec.figures["collapsed"]
    assert runs[runs.phase == "selection"].collapsed.isna().all()  # the gate counts collapses at confirmation only


def test_retrain_runs_are_a_dataframe(experiment):
    import ratiotune

    runs = ratiotune.read_experiment(experiment).retrain_runs()
    assert len(runs) == 2 and set(runs.phase) == {"report"} and sorted(runs.seed) == sorted(set(runs.seed))
    assert {"rank", "learning_rate", "num_generations", "seed", "error", "test/in_range_fraction"} <= set(runs.columns)
    assert runs["test/in_range_fraction"].between(0, 1).all()


def test_optuna_study_is_read_from_the_journal_and_never_writes_it(experiment):
    import optuna

    import ratiotune

    before = sorted((str(p), p.stat().st_size) for p in experiment.rglob("*") if p.is_file())
    exp = ratiotune.read_experiment(experiment)
    study = exp.optuna_study()
    frame = study.trials_dataframe()
    assert len(frame) == 3 and {"params_learning_rate", "params_num_generations"} <= set(frame.columns)
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE
    # The objective Optuna was told is the trials table's (same trial, same value).
    by_lr = {round(row.learning_rate, 12): row.objective for row in exp.trials.itertuples()}
    for row in frame.itertuples():
        assert by_lr[round(row.params_learning_rate, 12)] == pytest.approx(row.value)
    study.enqueue_trial({"learning_rate": 1e-3, "num_generations": 2})  # a copy: nothing reaches the folder
    assert sorted((str(p), p.stat().st_size) for p in experiment.rglob("*") if p.is_file()) == before


def test_analysis_scripts_use_the_api_and_rank_a_minimised_metric_downwards(experiment, tmp_path):
    import ratiotune

    spec = importlib.util.spec_from_file_location("compare_experiments", REPO / "analysis" / "compare_experiments.py")
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    fast = ratiotune.read_experiment(experiment, metric="system/epoch_seconds")
    assert compare.summary_row(fast)["best objective"] == fast.trials["objective"].min()
    row = compare.summary_row(ratiotune.read_experiment(experiment))
    rec = fast.recommended()
    assert row["recommended"] == rec.which and row["honest mean (test/in_range_fraction)"] == rec.figures["mean"]

    done = subprocess.run(
        [
            sys.executable,
            "analysis/compare_trials.py",
            str(experiment),
            "--out",
            str(tmp_path),
            "--metric",
            "system/epoch_seconds",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ranked by system/epoch_seconds (min" in done.stdout
    assert "Ranked by **system/epoch_seconds** (min)" in (tmp_path / "report.md").read_text()
    for script in ("compare_trials.py", "compare_experiments.py", "plot_metric.py"):
        text = (REPO / "analysis" / script).read_text()
        assert "ratiotune.cli" not in text and "exp.study[" not in text, script
    assert math.isfinite(float(fast.trials["objective"].iloc[0]))


def test_example_answers_samples_the_untrained_and_the_recommended_agents(experiment):
    done = subprocess.run(
        [sys.executable, "analysis/example_answers.py", str(experiment), "--prompts", "1", "--samples", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    import ratiotune

    rec = ratiotune.read_experiment(experiment).recommended()
    assert out.startswith(f"recommended ({rec.which}): ")
    before, after = out.split("\n== before training\n")[1].split("\n== after training\n")
    # One test prompt, two pairs, before and after: each answer printed with its length.
    for part in (before, after):
        assert part.count("  agent 1 (") == 2 and part.count("  agent 2 (") == 2, out
    first_prompt = ratiotune.load_study(experiment / "study.yaml").prompts("test")[0]["prompt"]
    assert f"prompt: {first_prompt}" in before and f"prompt: {first_prompt}" in after
    bad = subprocess.run(
        [sys.executable, "analysis/example_answers.py", str(experiment / "absent")], cwd=REPO, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
