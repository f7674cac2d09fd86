"""One's own task (task.entry): it trains and travels, and a bad one fails at launch in one line.

Every refusal goes through the real CLI (`ratiotune search`): exit status 2, one line naming the
field and the problem, no traceback, and no experiment folder (nothing started, Ray included).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from ratiotune.core.study import StudyError, load_study, study_files, write_study

# A task of one's own: agent 2 should answer longer than agent 1. `kind` makes it misbehave.
PLUGIN = """
import math

from ratiotune.tasks import Task, TaskMetric


def longer(completions1, completions2, batch_items=None):
    return [float(len(b) > len(a)) for a, b in zip(completions1, completions2)]

longer.reward_range = (0.0, 1.0)


def measure(groups):
    pairs = [(a, b) for group in groups for _, a, b in group]
    return {"longer_fraction": sum(len(b) > len(a) for a, b in pairs) / len(pairs)}


def make_task(kind="ok"):
    if kind == "raise":
        raise RuntimeError("the judge model is not installed")
    if kind == "not-a-task":
        return {"reward": longer}
    reward = {
        "ok": longer,
        "short": lambda completions1, completions2, batch_items=None: [0.0],
        "nan": lambda completions1, completions2, batch_items=None: [math.nan] * len(completions1),
    }[kind]
    return Task(
        name="longer",
        reward=reward,
        measure=measure,
        metrics=(TaskMetric("longer_fraction", "max", "share of pairs where agent 2 wrote more", (0.0, 1.0)),),
        formatters=(lambda r: r["prompt"], lambda r: r["prompt"] + " (answer at length)"),
    )
"""


def plugin_study(tiny_study: dict, folder: Path, **task) -> Path:
    """The tiny study on the plugin task, written to folder/study.yaml with the plugin next to it."""
    (folder / "tasks").mkdir(parents=True, exist_ok=True)
    (folder / "tasks" / "longer.py").write_text(PLUGIN)
    (folder / "test.txt").write_text("Describe a lighthouse:\nName a new colour:\n")  # the task ships no builtin sets
    study = json.loads(json.dumps(tiny_study))
    study["task"].update({"entry": "tasks/longer.py:make_task", "test_prompts": "test.txt", **task})
    study["search"]["metric"] = "eval/longer_fraction"
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def test_a_plugin_task_trains_on_its_formatters_and_reward_and_travels(tiny_study, tmp_path):
    from ratiotune.training.trainable import Trial

    study = load_study(plugin_study(tiny_study, tmp_path / "project"))
    table = study.metrics()
    assert "eval/longer_fraction" in table.selectable and table.better("eval/longer_fraction") == "max"
    assert table.progress == (
        "train/mean_reward",
        "train/longer_fraction",
        "eval/mean_reward",
        "eval/longer_fraction",
        "search/objective",
    )
    assert table.value_range("eval/mean_reward") == (0.0, 1.0)  # the plugin's declared reward_range
    metrics = Trial(study, {}).run_epoch()
    assert {"train/longer_fraction", "eval/longer_fraction", "eval/flat_group_fraction"} <= set(metrics)
    assert 0.0 <= metrics["eval/longer_fraction"] <= 1.0 and math.isfinite(metrics["search/objective"])

    # What Ray ships to a trial carries the plugin's source: it loads where the file does not exist.
    import pickle

    shipped = pickle.dumps(study)
    (tmp_path / "project" / "tasks" / "longer.py").rename(tmp_path / "project" / "tasks" / "moved.py")
    for name in [n for n in sys.modules if n.startswith("ratiotune_user_task_")]:
        del sys.modules[name]  # as in a fresh trial process
    assert pickle.loads(shipped).get_task().name == "longer"
    (tmp_path / "project" / "tasks" / "moved.py").rename(tmp_path / "project" / "tasks" / "longer.py")

    # A folder keeps the plugin's file as it was read: task/longer.py, the entry rewritten to it.
    files = study_files(study)
    assert yaml.safe_load(files["study.yaml"])["task"]["entry"] == "task/longer.py:make_task"
    assert files["task/longer.py"] == PLUGIN
    kept = write_study(tmp_path / "kept", study)
    (tmp_path / "project" / "tasks" / "longer.py").unlink()
    again = load_study(kept)
    assert again.task.entry == f"{tmp_path / 'kept' / 'task' / 'longer.py'}:make_task"
    assert again.get_task().name == "longer" and again.prompts("train") == study.prompts("train")


def test_old_study_files_with_the_band_at_task_level_still_read(tiny_study, tmp_path):
    tiny_study["task"].update(target_min=1.5, target_max=2.5)
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(tiny_study))
    study = load_study(path)
    assert study.task.name == "length-ratio" and study.task.options == {"target_min": 1.5, "target_max": 2.5}
    assert study.get_task().reward.target_min == 1.5
    assert "target_min" not in yaml.safe_load(study_files(study)["study.yaml"])["task"]  # written in the new form
    with pytest.raises(
        StudyError,
        match=r"task: target_min, target_max: length-ratio's options at task level; "
        r"task '.*longer.py:make_task' takes its options under task.options",
    ):
        load_study(plugin_study(tiny_study, tmp_path / "p"))


def refused(study: Path, tmp_path: Path, *fragments: str) -> str:
    storage = tmp_path / "results"
    result = run_cli("search", str(study), "--storage", str(storage), timeout=300, env={"CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert not storage.exists() or not any(storage.iterdir())
    return lines[0]


def test_an_entry_that_cannot_be_imported_is_refused(tiny_study, tmp_path):
    path = plugin_study(tiny_study, tmp_path, entry="no_such_package.tasks:make_task")
    refused(path, tmp_path, "task.entry: cannot import 'no_such_package.tasks'", "ModuleNotFoundError")


def test_a_factory_that_raises_is_refused(tiny_study, tmp_path):
    path = plugin_study(tiny_study, tmp_path, options={"kind": "raise"})
    refused(path, tmp_path, "task.entry:", "raised RuntimeError: the judge model is not installed")


def test_a_factory_that_returns_no_task_is_refused(tiny_study, tmp_path):
    path = plugin_study(tiny_study, tmp_path, options={"kind": "not-a-task"})
    refused(path, tmp_path, "task.entry:", "returned dict, not a ratiotune.tasks.Task")


def test_a_reward_with_the_wrong_number_of_values_is_refused(tiny_study, tmp_path):
    path = plugin_study(tiny_study, tmp_path, options={"kind": "short"})
    refused(path, tmp_path, "task.reward returned 1 value(s) for 3 answer pairs")


def test_a_reward_with_non_finite_values_is_refused(tiny_study, tmp_path):
    path = plugin_study(tiny_study, tmp_path, options={"kind": "nan"})
    refused(path, tmp_path, "task.reward returned non-finite values (nan)")


def test_a_search_metric_the_task_lacks_is_refused_with_the_ones_it_has(tiny_study, tmp_path):
    path = plugin_study(tiny_study, tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw["search"]["metric"] = "eval/in_range_fraction"  # length-ratio's, not this task's
    path.write_text(yaml.safe_dump(raw))
    refused(path, tmp_path, "search.metric: 'eval/in_range_fraction'", "task 'longer' has:", "eval/longer_fraction")


def test_a_missing_dataset_split_is_refused_with_the_splits_there(tiny_study, tmp_path):
    from datasets import Dataset, DatasetDict

    DatasetDict(
        {"train": Dataset.from_list([{"prompt": "T:"}]), "validation": Dataset.from_list([{"prompt": "V:"}])}
    ).save_to_disk(str(tmp_path / "data"))
    path = plugin_study(tiny_study, tmp_path, eval_prompts="data#test")
    refused(path, tmp_path, "task.eval_prompts:", "has no split 'test'; its splits: train, validation")


def test_a_record_without_a_required_field_is_refused(tiny_study, tmp_path):
    (tmp_path / "eval.jsonl").write_text(json.dumps({"prompt": "Fine:"}) + "\n" + json.dumps({"question": "No prompt?"}) + "\n")
    path = plugin_study(tiny_study, tmp_path, eval_prompts="eval.jsonl")
    refused(path, tmp_path, "task.eval_prompts:", "record 2 has no 'prompt' field", "'question'")
