"""The task plug-in from a user's side: examples/your_task (a task loaded by path) and the
headline-expansion study.

Two parts:
- pure tests of the example's task module (fast, no Ray, no model);
- END-TO-END tests (marked `needs_task_section` below): `ratiotune search` on
  studies/headline-expansion.yaml, and the example study through search, best, report and
  retrain, plus the load-time checks docs/your-task.md promises. They need the study file's
  `task: {name | entry, options, ...}` form wired into the pipeline (issue #26's core
  integration); until it is merged they are skipped, with the reason shown by `pytest -ra`.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import yaml
from comlrl.utils.reward_utils import call_reward_function, resolve_reward_range

from conftest import REPO
from conftest import run_cli as _run_cli
from ratiotune.core.study import TaskSpec
from ratiotune.tasks import Task, TaskLoadError, load_task

EXAMPLE = REPO / "examples" / "your_task"
ENTRY = f"{EXAMPLE / 'task.py'}:make_task"
FRUIT = {"question": "Name a fruit.", "answers": ["apple", "banana", "pear"]}


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task(entry=ENTRY)


# --- the example's task module (pure) ----------------------------------------------------------


def test_the_example_loads_by_path_and_declares_its_contract(task):
    assert task.name == "same-answer"
    assert task.required_fields == ("question", "answers")
    assert resolve_reward_range(task.reward) == (0.0, 1.0)
    assert {m.name for m in task.metrics} == {"agreement", "exact_match_fraction", "valid_fraction", "mean_answer_words"}
    # Loading again (every trial does) reuses the imported module.
    assert type(load_task(entry=ENTRY).reward) is type(task.reward)


def test_reward_on_hand_made_pairs(task):
    def reward(a, b, record=FRUIT):
        return task.reward([a], [b], batch_items=[record])[0]

    assert reward("Apple.", "apple") == 1.0  # same right answer: full reward
    assert reward("kumquat", "kumquat") == 0.5  # agree on an answer the record does not list: 1 - valid_weight
    assert reward("apple", "pear") == pytest.approx(2 * 1 / 9)  # both right but different: one "p" of 5 + 4 letters matches
    assert reward("apple", "apples") == pytest.approx(10 / 11 * 0.75)  # close; one of two is right
    assert reward("", "apple") == 0.0 and reward("!!", "apple") == 0.0  # no letters: no answer
    # valid_weight 0: agreeing is enough.
    relaxed = load_task(entry=ENTRY, options={"valid_weight": 0.0})
    assert relaxed.reward(["kumquat"], ["kumquat"], batch_items=[FRUIT]) == [1.0]


def test_reward_needs_the_records_and_broadcasts_one(task):
    with pytest.raises(ValueError, match="batch_items"):
        task.reward(["apple"], ["apple"])
    assert task.reward(["apple", "pear"], ["apple", "x"], batch_items=[FRUIT]) == [1.0, 0.0]


def test_reward_through_comlrls_call_reward_function_gives_one_finite_float_per_pair(task):
    # How MAGRPOTrainer scores: one pair at a time, lists of length 1, the pair's record in batch_items.
    for a, b in [("apple", "apple"), ("Pear!", "pears"), ("", ""), ("x" * 50, "?")]:
        rewards = call_reward_function(task.reward, [task.formatters[0](FRUIT)], [[a], [b]], num_agents=2, batch_items=[FRUIT])
        assert len(rewards) == 1 and math.isfinite(rewards[0]) and 0.0 <= rewards[0] <= 1.0


def test_measure_reads_the_records(task):
    other = {"question": "Name a color.", "answers": ["red", "blue"]}
    groups = [[(FRUIT, "apple", "apple"), (FRUIT, "kumquat", "")], [(other, "red", "blue")]]
    values = task.measure(groups)
    assert set(values) == {m.name for m in task.metrics}
    assert values["exact_match_fraction"] == pytest.approx(1 / 3)
    assert values["valid_fraction"] == pytest.approx(4 / 6)  # apple, apple, red, blue
    assert values["agreement"] == pytest.approx((1.0 + 0.0 + 2 / 7) / 3)  # red/blue: one "e" of 3 + 4 letters
    assert values["mean_answer_words"] == pytest.approx(5 / 6)


def test_the_agents_get_different_prompts_from_the_question(task):
    first, second = (formatter(FRUIT) for formatter in task.formatters)
    assert first != second and FRUIT["question"] in first and FRUIT["question"] in second


def test_bad_options_are_refused_with_the_option_named():
    with pytest.raises(TaskLoadError, match="valid_weight"):
        load_task(entry=ENTRY, options={"valid_weight": 2})
    with pytest.raises(TaskLoadError, match="task.options"):
        load_task(entry=ENTRY, options={"weight": 0.5})


def test_the_example_data_has_the_required_fields_and_disjoint_splits(task):
    questions = {}
    for split in ("train", "eval", "test"):
        records = rows(EXAMPLE / "data" / f"{split}.jsonl")
        assert records, split
        for record in records:
            assert set(task.required_fields) <= set(record), (split, record)
            assert record["answers"] == [a.lower() for a in record["answers"]]  # compared lowercased
            assert all(a.isalpha() for a in record["answers"]), record  # compared as one word of letters
        questions[split] = {r["question"] for r in records}
    assert not questions["train"] & questions["eval"]
    assert not questions["train"] & questions["test"]
    assert not questions["eval"] & questions["test"]


def test_the_example_study_names_files_next_to_it():
    study = yaml.safe_load((EXAMPLE / "study.yaml").read_text())
    entry_file, _, factory = study["task"]["entry"].rpartition(":")
    assert (EXAMPLE / entry_file).is_file() and factory == "make_task"
    for key in ("train_prompts", "eval_prompts", "test_prompts"):
        assert (EXAMPLE / study["task"][key]).is_file(), key
    assert study["search"]["metric"] == "eval/agreement"


# --- end to end: needs the core integration (study file's task section) ------------------------

needs_task_section = pytest.mark.skipif(
    "entry" not in TaskSpec.model_fields,
    reason="needs issue #26's core integration: the study file's task: {name | entry, options} section",
)

# A trial's rows report the common metrics and the task's own, per split.
COMMON = ("mean_reward", "flat_group_fraction")


def run_cli(*args, **kwargs):
    # A fresh local Ray per command (see test_retrain.py).
    return _run_cli(*args, env={"RAY_ADDRESS": "local"}, **kwargs)


def trial_rows(experiment: Path) -> list[list[dict]]:
    trials = sorted(d for d in experiment.iterdir() if (d / "params.json").is_file())
    return [rows(t / "result.json") for t in trials]


def assert_task_metrics_reported(experiment: Path, task: Task, epochs: int) -> None:
    for results in trial_rows(experiment):
        assert [r["epoch"] for r in results] == list(range(1, epochs + 1))
        for result in results:
            for split in ("train", "eval"):
                for name in COMMON:
                    assert 0.0 <= result[f"{split}/{name}"] <= 1.0, (split, name)
                for metric in task.metrics:
                    value = result[f"{split}/{metric.name}"]
                    assert math.isfinite(value), (split, metric.name)
                    if metric.bounds:
                        assert metric.bounds[0] <= value <= metric.bounds[1], (split, metric.name, value)
            # Another task's metric is not reported.
            assert "eval/in_range_fraction" not in result


@needs_task_section
def test_headline_expansion_study_searches(tmp_path):
    done = run_cli(
        "search",
        str(REPO / "studies" / "headline-expansion.yaml"),
        "--storage",
        str(tmp_path),
        "--name",
        "he",
        "--set",
        "search.num_samples=2",
        "--set",
        "train.epochs=1",
        "--set",
        "race.enabled=false",
        "--set",
        "task.train_prompts=builtin:design",
        "--set",
        "task.eval_samples_per_prompt=1",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "best eval/mean_reward" in done.stdout
    assert_task_metrics_reported(tmp_path / "he", load_task("headline-expansion"), epochs=1)


@pytest.fixture(scope="module")
def example_experiment(tmp_path_factory):
    """The example study, small: 2 trials x 2 epochs, no race, run from a folder that is not the
    example's (its paths resolve against the study file)."""
    root = tmp_path_factory.mktemp("your_task")
    done = run_cli(
        "search",
        str(EXAMPLE / "study.yaml"),
        "--storage",
        str(root / "results"),
        "--name",
        "same",
        "--set",
        "search.num_samples=2",
        "--set",
        "train.epochs=2",
        "--set",
        "race.enabled=false",
        "--set",
        "task.eval_samples_per_prompt=2",
        cwd=root,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "best eval/agreement" in done.stdout
    return root / "results" / "same"


@needs_task_section
def test_example_study_reports_its_task_metrics(example_experiment, task):
    assert_task_metrics_reported(example_experiment, task, epochs=2)
    # The experiment keeps the records it ran on, fields and all.
    kept = rows(example_experiment / "prompts" / "train.jsonl")
    assert kept == rows(EXAMPLE / "data" / "train.jsonl")


@needs_task_section
def test_example_best_and_report(example_experiment):
    best = run_cli("best", str(example_experiment), timeout=120)
    assert best.returncode == 0, best.stderr[-3000:]
    assert "train:" in best.stdout and "learning_rate" in best.stdout

    report = run_cli("report", str(example_experiment), timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    with (example_experiment / "report" / "trials.csv").open() as handle:
        trials = list(csv.DictReader(handle))
    assert len(trials) == 2 and all(row["best eval/agreement"] != "" for row in trials)
    assert "eval/agreement" in (example_experiment / "report" / "report.md").read_text()


@needs_task_section
def test_example_retrain_ships_final_agents(example_experiment):
    output = example_experiment.parent / "retrain"
    done = run_cli("retrain", str(example_experiment), "--seeds", "2", "--epochs", "1", "--output", str(output))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (output / "final" / "agent_0").is_dir() and (output / "final" / "agent_1").is_dir()
    # The winner is reported on the test prompts with the task's metrics too.
    assert "test/agreement" in (output / "summary.json").read_text()
    final = yaml.safe_load((output / "final" / "config.yaml").read_text())
    assert final["task"]["options"] == {"valid_weight": 0.5}
    assert final["task"]["entry"].endswith(":make_task")


def write(path: Path, study: dict) -> Path:
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def refused(study_path: Path, *needles: str) -> None:
    done = run_cli("search", str(study_path), "--storage", str(study_path.parent / "results"), timeout=120)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    message = done.stderr.strip().splitlines()
    assert len(message) == 1, done.stderr
    for needle in needles:
        assert needle in message[0], message[0]
    assert not (study_path.parent / "results").exists()


@needs_task_section
def test_what_is_checked_at_load_is_one_line_and_exit_2(tmp_path):
    """The checks docs/your-task.md lists, on a copy of the example study."""
    base = yaml.safe_load((EXAMPLE / "study.yaml").read_text())
    base["task"]["entry"] = ENTRY
    for key in ("train_prompts", "eval_prompts", "test_prompts"):
        base["task"][key] = str(EXAMPLE / base["task"][key])

    def variant(name: str, **task_changes) -> dict:
        study = json.loads(json.dumps(base))
        study["task"].update(task_changes)
        return write(tmp_path / f"{name}.yaml", study)

    refused(variant("no_file", entry="nowhere.py:make_task"), "task.entry", "nowhere.py")
    refused(variant("no_factory", entry=f"{EXAMPLE / 'task.py'}:make_it"), "task.entry", "make_it")
    refused(variant("bad_option", options={"valid_weight": 3}), "valid_weight")
    no_answers = tmp_path / "no_answers.jsonl"
    no_answers.write_text(json.dumps({"question": "Name a fruit."}) + "\n")
    refused(variant("missing_field", train_prompts=str(no_answers)), "answers")
    refused(variant("missing_split", train_prompts="builtin:train"), "builtin:train")
    study = json.loads(json.dumps(base))
    study["search"]["metric"] = "eval/agreemnt"
    refused(write(tmp_path / "bad_metric.yaml", study), "eval/agreemnt")

    # A task whose reward or measure breaks the contract is refused before Ray starts.
    (tmp_path / "broken.py").write_text(BROKEN_TASK)
    for split, prompt in [("train", "Name a fruit."), ("eval", "Name a color."), ("test", "Name a tree.")]:
        (tmp_path / f"{split}.txt").write_text(prompt + "\n")
    for kind, needle in [("nan", "reward"), ("short", "reward"), ("no_metric", "sharpness")]:
        study = json.loads(json.dumps(base))
        study["search"]["metric"] = "eval/mean_reward"
        study["task"] = {
            "entry": "broken.py:make_task",
            "options": {"kind": kind},
            "train_prompts": "train.txt",
            "eval_prompts": "eval.txt",
            "test_prompts": "test.txt",
        }
        refused(write(tmp_path / f"broken_{kind}.yaml", study), needle)


BROKEN_TASK = """
from ratiotune.tasks import Task, TaskMetric


def make_task(kind):
    def reward(completions1, completions2):
        if kind == "nan":
            return [float("nan")] * len(completions1)
        if kind == "short":
            return []
        return [0.5] * len(completions1)

    def measure(groups):
        return {} if kind == "no_metric" else {"sharpness": 0.0}

    return Task(name="broken", reward=reward, measure=measure, metrics=(TaskMetric("sharpness", "max", "made up"),))
"""
