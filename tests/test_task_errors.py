"""A bug in the task's own code is named as the task's, and never retried.

A reward that raises or returns NaN, or a measure that raises, only on what a model really
writes: the pre-flight probe (real answers from the untrained agents, before Ray starts) stops
most of them; one that shows up later ends its trial with a task error (not a divergence, not a
crash Ray restarts), stops the study, keeps the trial's folder, and the CLI says what to fix.
Everything real: the CLI in its own process, Ray, comlrl, builtin:tiny.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from ratiotune.core.experiment import TASK_ERROR, load_experiment
from ratiotune.tasks import Task, TaskError, TaskMetric, call_measure, call_reward

# The task fails from its `after`-th call of reward (or measure) in a process on: each process
# (the driver's load-time probe on placeholder answers, the pre-flight probe's own process on real
# answers, every trial's worker) counts its own calls: 3 reward calls in each probe (one per training
# record), 5 per epoch in a trial of the tiny study (3 training prompts, 2 eval prompts). Or, kind
# "reward-raises-on-real", on any answer that is not one of the load-time probe's placeholders.
PLUGIN = """
import math

from ratiotune.tasks import Task, TaskMetric

CALLS = {"reward": 0, "measure": 0}
PLACEHOLDERS = ("a placeholder answer", "", "x")  # what the load-time probe answers with


def make_task(kind="ok", after=1_000_000):
    def reward(completions1, completions2, batch_items=None):
        CALLS["reward"] += 1
        if kind == "reward-raises-on-real" and any(a not in PLACEHOLDERS for a in completions1):
            return [len(b) / 0 for b in completions2]
        if CALLS["reward"] >= after and kind == "reward-raises":
            return [len(b) / 0 for a, b in zip(completions1, completions2)]
        if CALLS["reward"] >= after and kind == "reward-nan":
            return [math.nan for _ in completions1]
        return [float(len(b) > len(a)) for a, b in zip(completions1, completions2)]

    reward.reward_range = (0.0, 1.0)

    def measure(groups):
        CALLS["measure"] += 1
        if CALLS["measure"] >= after and kind == "measure-raises":
            raise KeyError("longest")
        pairs = [(a, b) for group in groups for _, a, b in group]
        return {"longer_fraction": sum(len(b) > len(a) for a, b in pairs) / len(pairs)}

    return Task(
        name="longer",
        reward=reward,
        measure=measure,
        metrics=(TaskMetric("longer_fraction", "max", "share of pairs where agent 2 wrote more", (0.0, 1.0)),),
    )
"""


def plugin_study(tiny_study: dict, folder: Path, **options) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "longer.py").write_text(PLUGIN)
    (folder / "test.txt").write_text("Describe a lighthouse:\nName a new colour:\n")
    study = json.loads(json.dumps(tiny_study))
    study["task"].update(
        {"entry": str(folder / "longer.py") + ":make_task", "test_prompts": str(folder / "test.txt"), "options": options}
    )
    study["search"].update({"metric": "eval/longer_fraction", "max_failures": 2})
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def search(study: Path, storage: Path):
    return run_cli(
        "search", str(study), "--storage", str(storage), "--name", "bug", timeout=600, env={"CUDA_VISIBLE_DEVICES": ""}
    )


def test_a_reward_that_fails_on_real_answers_is_stopped_before_ray_starts(tiny_study, tmp_path):
    # It passes the load-time probe (placeholder answers) and fails on what a model really writes.
    study = plugin_study(tiny_study, tmp_path / "p", kind="reward-raises-on-real")
    result = search(study, tmp_path / "results")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    for fragment in (
        "pre-flight",
        "task.reward raised ZeroDivisionError: division by zero on answers (",
        "to record {'prompt': ",
    ):
        assert fragment in line, line
    assert not (tmp_path / "results" / "bug").exists()  # nothing started, no experiment folder


@pytest.mark.parametrize(
    ("kind", "after", "says"),
    [
        # 3 calls in each probe; a trial's 9th call is in its epoch 2 (6-8: training rollouts, 9-10: eval).
        ("reward-raises", 9, "task.reward raised ZeroDivisionError: division by zero on answers ("),
        ("reward-nan", 9, "task.reward returned nan on answers ("),
        # measure: once in each probe; a trial calls it twice an epoch, the 4th is epoch 2's eval.
        ("measure-raises", 4, "task.measure raised KeyError: 'longest' on answers ("),
    ],
)
def test_a_task_error_at_run_time_is_named_not_retried_and_kept(tiny_study, tmp_path, kind, after, says):
    study = plugin_study(tiny_study, tmp_path / "p", kind=kind, after=after)
    storage = tmp_path / "results"
    result = search(study, storage)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert says in line and "to record {'prompt': " in line and "Fix the task" in line, line
    assert "diverged" not in result.stdout and "race:" not in result.stdout  # no divergence, no race on a bug
    assert "task error at epoch 2 (not retried; the study stops)" in result.stdout

    experiment = load_experiment(storage / "bug")
    statuses = {t.name: t.status(experiment.study.train.epochs) for t in experiment.trials}
    assert TASK_ERROR in statuses.values()
    for trial in experiment.trials:
        # Never retried: Ray recorded no failure (no error.txt); the folder with its epochs stays.
        assert trial.error is None and trial.failures == 0 and not (trial.directory / "error.txt").exists()
        assert trial.directory.is_dir()
        if statuses[trial.name] == TASK_ERROR:
            assert says in trial.task_error
            assert [row["epoch"] for row in trial.rows] == [1, 2]  # epoch 1's result, then the error's row
            assert math.isnan(trial.rows[-1]["search/objective"])

    from ratiotune.results.diagnostics import failure_warnings

    [warning] = failure_warnings(experiment)
    assert "The task failed on real answers" in warning and "learning_rate" not in warning

    if kind == "reward-raises":  # the rerun after the fix is told how, once
        again = search(study, storage)
        assert again.returncode == 2
        [line] = again.stderr.strip().splitlines()
        assert "the study in it stopped on a task error" in line and "another --name" in line and "rm -r" in line, line


def test_the_checked_calls_name_the_function_the_pair_and_the_record():
    def reward(completions1, completions2):
        return [1.0 / len(a) for a in completions1]

    record = {"prompt": "Tell a joke about dinosaurs:"}
    assert call_reward(reward, [], ["ab", "abcd"], ["x", "y"], [record]) == [0.5, 0.25]
    with pytest.raises(TaskError) as info:
        call_reward(reward, [], ["ab", ""], ["x", "y" * 100], [record])
    message = str(info.value)
    assert message.startswith("task.reward raised ZeroDivisionError")
    assert "answers ('', 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy'...(100 chars))" in message
    assert "to record {'prompt': 'Tell a joke about dinosaurs:'}" in message

    def measure(groups):
        pairs = [(a, b) for group in groups for _, a, b in group]
        return {"ratio": sum(len(b) / len(a) for a, b in pairs)}

    task = Task(name="t", reward=reward, measure=measure, metrics=(TaskMetric("ratio", None, "ratio"),))
    with pytest.raises(
        TaskError, match=r"task.measure raised ZeroDivisionError: .* on answers \('', 'b'\) to record \{'prompt': 'q2'\}"
    ):
        call_measure(task, [[({"prompt": "q1"}, "a", "bb")], [({"prompt": "q2"}, "", "b")]])
    nan_task = Task(name="t", reward=reward, measure=lambda groups: {"ratio": math.nan}, metrics=task.metrics)
    with pytest.raises(TaskError, match=r"task.measure returned nan for 'ratio' on answers \('a', 'bb'\)"):
        call_measure(nan_task, [[({"prompt": "q1"}, "a", "bb")]])
