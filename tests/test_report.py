"""`ratiotune report` / analysis/compare_trials.py and `ratiotune check` on a real tiny experiment."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, run_cli, tiny_study_dict
from ratiotune.cli import main
from ratiotune.core.experiment import load_experiment

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """One real search, made once for the module: 3 trials x 2 epochs, ASHA, lr and reward_scale searched."""
    root = tmp_path_factory.mktemp("report")
    study = tiny_study_dict(
        root / "prompts",
        search={
            "num_samples": 3,
            "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 2},
            "space": {
                "learning_rate": {"type": "loguniform", "low": 1e-4, "high": 1e-2},
                "reward_scale": {"type": "choice", "values": [1.0, 100.0]},
            },
        },
    )
    path = root / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    done = run_cli("search", str(path), "--storage", str(root / "results"), "--name", "norm_on")
    assert done.returncode == 0, done.stderr[-3000:]
    directory = root / "results" / "norm_on"
    # The CLI in-process from here on: one import of torch & co. instead of one per command.
    assert main(["report", str(directory)]) == 0
    return directory


def read_csv(path):
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_report_files_rows_statuses_and_plots(experiment):
    out = experiment / "report"
    trials = read_csv(out / "trials.csv")
    folders = sorted(p.name for p in experiment.glob("trial_*"))
    assert sorted(row["trial"] for row in trials) == folders and len(folders) == 3
    for row in trials:
        # FIFO would finish all; ASHA may stop some after epoch 1, never with an error.
        assert row["status"] == ("finished" if int(row["epochs"]) == 2 else "stopped early"), row
        assert float(row["learning_rate"]) > 0 and row["checkpoint"]
        assert row["best eval/in_range_fraction"] != "" and float(row["wall_seconds"]) > 0
    curves = read_csv(out / "curves.csv")
    assert len(curves) == sum(int(row["epochs"]) for row in trials)
    assert {"trial", "epoch", "eval/in_range_fraction", "eval/mean_chars_agent2"} <= set(curves[0])

    for name in ("learning_curves", "hyperparameters", "best_trial_lengths", "importance"):
        data = (out / f"{name}.png").read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, name
    text = (out / "report.md").read_text()
    for name in ("learning_curves", "hyperparameters", "best_trial_lengths", "importance"):
        assert f"]({name}.png)" in text
    assert "## Summary" in text and "## Top trials" in text and "CPU-hours" in text
    # Importance was computed from the 3 clean trials, and labelled as too few to trust.
    assert "| learning_rate |" in text and "| reward_scale |" in text
    assert "too few to trust" in text


def test_reward_scale_warning_only_with_normalization(experiment, tmp_path):
    text = (experiment / "report" / "report.md").read_text()
    assert "reward_scale has no effect in this study" in text

    # The same trials under a study with normalization off: the settings-based warning must go.
    copy = tmp_path / "norm_off"
    shutil.copytree(experiment, copy, ignore=shutil.ignore_patterns("report", "checkpoint_*"))
    study = yaml.safe_load((copy / "study.yaml").read_text())
    study["train"]["advantage_normalization"] = False
    (copy / "study.yaml").write_text(yaml.safe_dump(study))
    assert main(["report", str(copy)]) == 0
    assert "reward_scale has no effect in this study" not in (copy / "report" / "report.md").read_text()


def test_errored_and_infeasible_trials_are_counted_and_warned(experiment, tmp_path):
    copy = tmp_path / "faults"
    shutil.copytree(experiment, copy, ignore=shutil.ignore_patterns("report", "checkpoint_*"))
    first, second, _ = sorted(copy.glob("trial_*"))
    # As issue 3's divergence check writes it: a last row with infeasible: 1 and a reason.
    with (first / "result.json").open("a") as handle:
        handle.write(json.dumps({"epoch": 1, "infeasible": 1, "infeasible_reason": "non-finite loss"}) + "\n")
    (second / "result.json").write_text("")
    (second / "error.txt").write_text("Traceback (most recent call last):\nRuntimeError: CUDA out of memory\n")
    experiment_state = load_experiment(copy)
    statuses = {t.name: t.status(experiment_state.study.train.epochs) for t in experiment_state.trials}
    assert statuses[first.name] == "infeasible" and statuses[second.name] == "errored"

    assert main(["report", str(copy), "--out", str(tmp_path / "out")]) == 0
    rows = {row["trial"]: row for row in read_csv(tmp_path / "out" / "trials.csv")}
    assert rows[second.name]["note"] == "RuntimeError: CUDA out of memory"
    text = (tmp_path / "out" / "report.md").read_text()
    assert "2 of 3 trials failed" in text and "CUDA out of memory" in text and "non-finite loss" in text


def test_compare_trials_script_with_another_metric(experiment, tmp_path):
    done = subprocess.run(
        [sys.executable, "analysis/compare_trials.py", str(experiment), "--out", str(tmp_path), "--metric", "eval/mean_reward"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = (tmp_path / "report.md").read_text()
    assert "Ranked by **eval/mean_reward** (max)" in text
    # Ranked by the objective of that metric: its mean over each trial's last objective_window epochs.
    values = [float(row["objective"]) for row in read_csv(tmp_path / "trials.csv")]
    assert values == sorted(values, reverse=True)


def test_report_refuses_a_folder_that_is_not_an_experiment(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "not a ratiotune experiment" in capsys.readouterr().err
    assert not (tmp_path / "report").exists()


def test_check_flags_reward_scale_and_not_learning_rate(tiny_study, write_study, capsys):
    tiny_study["search"]["space"] = {
        "learning_rate": {"type": "loguniform", "low": 1e-4, "high": 1e-2},
        "reward_scale": {"type": "choice", "values": [1.0, 100.0]},
    }
    assert main(["check", str(write_study(tiny_study))]) == 0
    out = capsys.readouterr().out
    verdicts = {line.split()[0]: line for line in out.splitlines() if line.startswith(("learning_rate", "reward_scale"))}
    assert verdicts["learning_rate"].endswith("changes training"), out
    assert verdicts["reward_scale"].endswith("NO EFFECT"), out
    assert "warning: reward_scale has no effect: advantage normalization" in out
    assert "warning: learning_rate" not in out


def test_an_epoch_delivered_twice_reads_as_one_row_the_later(tiny_study, tmp_path):
    """Ray delivers results at least once: a trial whose node died after its epoch-4 row was
    logged but before that epoch's checkpoint was registered restarts from epoch 3's checkpoint
    and logs epoch 4 again (seen in test_cluster's node-loss test). Every reader (report, best,
    retrain, resume all go through results.load_experiment) sees one row per epoch, the later."""
    from ratiotune.core.experiment import curve_table, metric_names, trial_table

    experiment_dir = tmp_path / "tiny"
    trial = experiment_dir / "trial_00000"
    trial.mkdir(parents=True)
    (experiment_dir / "study.yaml").write_text(yaml.safe_dump(tiny_study))
    (trial / "params.json").write_text(json.dumps({"learning_rate": 1e-3}))
    rows = [(1, 0.1, "lost"), (2, 0.2, "lost"), (3, 0.3, "lost"), (4, 0.9, "lost"), (4, 0.4, "head"), (5, 0.5, "head")]
    (trial / "result.json").write_text(
        "".join(json.dumps({"epoch": e, "eval/in_range_fraction": v, "node_id": n}) + "\n" for e, v, n in rows)
    )
    (loaded,) = load_experiment(experiment_dir).trials
    assert [row["epoch"] for row in loaded.rows] == [1, 2, 3, 4, 5]
    assert loaded.rows[3]["eval/in_range_fraction"] == 0.4 and loaded.rows[3]["node_id"] == "head"
    assert loaded.values("eval/in_range_fraction") == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert loaded.best("eval/in_range_fraction", "max") == 0.5  # not the superseded 0.9
    experiment = load_experiment(experiment_dir)
    (row,) = trial_table(experiment)
    assert row["best eval/in_range_fraction"] == 0.5 and row["best_epoch"] == 5
    assert [r["epoch"] for r in curve_table(experiment)] == [1, 2, 3, 4, 5]
    assert "node_id" not in metric_names(experiment)  # a string: never a numeric column


def test_read_experiment_gives_the_report_tables_as_dataframes(experiment):
    """The analysis API reads the same trials and epochs as the report, and writes nothing."""
    import ratiotune

    before = sorted(str(p) for p in experiment.rglob("*"))
    exp = ratiotune.read_experiment(experiment)
    assert sorted(p.name for p in experiment.glob("trial_*")) == sorted(exp.trials.index)
    report_rows = {row["trial"]: row for row in read_csv(experiment / "report" / "trials.csv")}
    for name, row in exp.trials.iterrows():
        assert row["epochs"] == int(report_rows[name]["epochs"])
        assert row["objective"] == pytest.approx(float(report_rows[name]["objective"]))
    objectives = list(exp.trials["objective"])
    assert objectives == sorted(objectives, reverse=True)
    assert len(exp.curves) == sum(int(r["epochs"]) for r in report_rows.values())
    wide = exp.metric("eval/in_range_fraction")
    assert set(wide.columns) == set(exp.trials.index) and list(wide.index) == sorted(wide.index)
    with pytest.raises(KeyError, match="not a reported metric"):
        exp.metric("eval/no_such_metric")
    assert exp.name == "norm_on" and exp.race is None  # named by --name; race off in the tiny study
    assert sorted(str(p) for p in experiment.rglob("*")) == before


def test_analysis_scripts_run_on_an_experiment(experiment, tmp_path):
    compare = subprocess.run(
        [sys.executable, "analysis/compare_experiments.py", str(experiment), str(experiment), "--out", str(tmp_path / "c.png")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compare.returncode == 0, compare.stderr[-3000:]
    assert compare.stdout.count("norm_on") >= 4 and (tmp_path / "c.png").read_bytes().startswith(PNG_MAGIC)
    plot = subprocess.run(
        [
            sys.executable,
            "analysis/plot_metric.py",
            str(experiment),
            "--metric",
            "train/mean_reward",
            "--out",
            str(tmp_path / "m.png"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plot.returncode == 0, plot.stderr[-3000:]
    assert plot.stdout.startswith("train/mean_reward: 3 trials") and (tmp_path / "m.png").read_bytes().startswith(PNG_MAGIC)
    bad = subprocess.run(
        [sys.executable, "analysis/plot_metric.py", str(experiment), "--metric", "nope/x", "--out", str(tmp_path / "x.png")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "nope/x" in bad.stderr and "Traceback" not in bad.stderr


def test_a_notebook_gets_the_diagnostics_the_report_prints(experiment, tmp_path):
    """One computation (results/diagnostics.py) behind report.md's warnings, noise line and importance table
    and a notebook's exp.diagnostics()."""
    import ratiotune

    exp = ratiotune.read_experiment(experiment)
    found = exp.diagnostics()
    assert (found.metric, found.mode) == (exp.rank_metric, exp.rank_mode)
    text = exp.write_report(tmp_path / "report").read_text()
    printed = text.split("## Warnings\n\n", 1)[1].split("\n\n## ", 1)[0].splitlines()
    assert printed == [f"- {w}" for w in found.warnings]
    assert any("reward_scale has no effect" in w for w in found.warnings)  # normalization on, reward_scale listed
    # ... and held at its default: no importance, edge or near-zero warning is about that one constant.
    assert found.importance is None or "reward_scale" not in found.importance.values
    assert not any("reward_scale" in w for w in found.warnings if "has no effect" not in w)
    if found.noise is None:
        assert "- Noise:" not in text and found.winner_distinguishable is None
    else:
        verdict = "clear of" if found.winner_distinguishable else "within"
        assert f"#1 leads #2 by {found.noise.gap:.3f}" in text and f"the lead is {verdict} the noise" in text
    if found.importance is not None:
        for name, value in found.importance.values.items():
            assert f"| {name} | {value:.2f} |" in text
