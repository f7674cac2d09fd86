import json
import math
import random

import pytest

from ratiotune.core.metrics import MetricTable, measure
from ratiotune.tasks import load_task
from ratiotune.tasks.length_ratio import BUILTIN_PROMPTS, LengthRatioReward, in_range, length_ratio_reward, make_task
from ratiotune.tasks.records import RecordsError, load_records, missing_field


def load_prompts(source):
    return [record["prompt"] for record in load_records(source, BUILTIN_PROMPTS)]


def batch_metrics(pairs_by_group, task=None):
    """The metrics of groups of (agent 1, agent 2) pairs, as a trial measures them."""
    task = task or make_task()
    groups = [[({"prompt": "p"}, a, b) for a, b in group] for group in pairs_by_group]
    rewards = [task.reward([a for a, _ in g], [b for _, b in g]) for g in pairs_by_group]
    return measure(task, groups, rewards)


def tutorial_reward(completions1, completions2, target_min=2.0, target_max=3.0):
    """The original CoMLRL tutorial's proper_length_ratio_reward, re-typed as the reference."""
    rewards = []
    for c1, c2 in zip(completions1, completions2):
        len1, len2 = len(c1), len(c2)
        if len1 == 0:
            rewards.append(0.0)
            continue
        ratio = len2 / len1
        if target_min <= ratio <= target_max:
            reward = 1.0
        else:
            distance = target_min - ratio if ratio < target_min else ratio - target_max
            reward = math.exp(-distance)
        rewards.append(float(reward))
    return rewards


def random_text(rng: random.Random) -> str:
    return "x" * rng.choice([0, 0, 1, 2, 3, 5, 8, 13, 21, 40, 100])


@pytest.mark.parametrize("bounds", [(2.0, 3.0), (1.0, 1.5), (0.5, 4.0)])
def test_reward_equals_tutorial_function_on_random_pairs(bounds):
    rng = random.Random(0)
    first = [random_text(rng) for _ in range(5000)]
    second = [random_text(rng) for _ in range(5000)]
    assert sum(1 for c in first if not c) > 100  # empty agent-1 answers are exercised
    expected = tutorial_reward(first, second, *bounds)
    assert LengthRatioReward(*bounds)(first, second) == expected


def test_reward_values_at_the_band_edges():
    assert length_ratio_reward("", "abc") == 0.0
    assert length_ratio_reward("ab", "abcd") == 1.0  # ratio 2.0, inclusive
    assert length_ratio_reward("ab", "abcdef") == 1.0  # ratio 3.0, inclusive
    assert length_ratio_reward("ab", "ab") == pytest.approx(math.exp(-1.0))
    assert length_ratio_reward("a", "abcde") == pytest.approx(math.exp(-2.0))
    assert not in_range("", "")
    assert in_range("ab", "abcde")


def test_batch_metrics_on_hand_made_pairs():
    groups = [
        [("ab", "abcde"), ("ab", "abcde")],  # both in range, equal rewards: a flat group
        [("", "abc"), ("abcd", "abcd")],  # empty agent 1 (out, reward 0) and ratio 1
    ]
    metrics = batch_metrics(groups)
    assert metrics["in_range_fraction"] == 0.5
    assert metrics["mean_reward"] == pytest.approx((1 + 1 + 0 + math.exp(-1)) / 4)
    assert metrics["mean_chars_agent1"] == pytest.approx((2 + 2 + 0 + 4) / 4)
    assert metrics["mean_chars_agent2"] == pytest.approx((5 + 5 + 3 + 4) / 4)
    assert metrics["mean_ratio"] == pytest.approx((2.5 + 2.5 + 1.0) / 3)  # empty agent 1 has no ratio
    assert metrics["flat_group_fraction"] == 0.5
    # The table's column order: mean_reward, the task's own, flat_group_fraction (CSV columns, reports).
    assert list(metrics) == [
        "mean_reward",
        "in_range_fraction",
        "mean_chars_agent1",
        "mean_chars_agent2",
        "mean_ratio",
        "flat_group_fraction",
    ]


def test_length_ratio_is_the_default_builtin_and_its_metric_table():
    task = load_task("length-ratio", options={"target_min": 1.5, "target_max": 2.5})
    assert task.name == "length-ratio" and task.reward.target_min == 1.5
    table = MetricTable(task)
    assert table.reported[:6] == tuple(
        f"train/{n}"
        for n in (
            "mean_reward",
            "in_range_fraction",
            "mean_chars_agent1",
            "mean_chars_agent2",
            "mean_ratio",
            "flat_group_fraction",
        )
    )
    assert table.progress == (
        "train/mean_reward",
        "train/in_range_fraction",
        "eval/mean_reward",
        "eval/in_range_fraction",
        "search/objective",
    )
    assert table.value_range("eval/mean_reward") == (0.0, 1.0)  # the reward's declared reward_range
    assert table.value_range("test/in_range_fraction") == (0.0, 1.0) and table.value_range("eval/mean_ratio") is None
    assert table.better("eval/flat_group_fraction") == "min" and table.better("eval/mean_chars_agent1") is None


def test_batch_metrics_rejects_an_empty_batch():
    with pytest.raises(ValueError):
        batch_metrics([[]])


def test_builtin_prompt_sets():
    tutorial = load_prompts("builtin:tutorial")
    train = load_prompts("builtin:train")
    held_out = load_prompts("builtin:eval")
    assert len(tutorial) == 10 and set(tutorial) <= set(train)
    assert len(train) >= 30
    assert len(held_out) >= 10 and not set(held_out) & set(train)


def test_prompt_files_txt_and_jsonl(tmp_path):
    (tmp_path / "p.txt").write_text("First prompt:\n\n  Second prompt:  \n")
    (tmp_path / "p.jsonl").write_text(json.dumps({"prompt": "A:"}) + "\n\n" + json.dumps({"prompt": "B:", "x": 1}) + "\n")
    assert load_records(tmp_path / "p.txt") == [{"prompt": "First prompt:"}, {"prompt": "Second prompt:"}]
    assert load_records(tmp_path / "p.jsonl") == [{"prompt": "A:"}, {"prompt": "B:", "x": 1}]
    (tmp_path / "bad.jsonl").write_text("not json\n")
    with pytest.raises(RecordsError, match="bad.jsonl:1"):
        load_records(tmp_path / "bad.jsonl")
    (tmp_path / "list.jsonl").write_text("[1, 2]\n")
    with pytest.raises(RecordsError, match="list.jsonl:1: each line must be a JSON object"):
        load_records(tmp_path / "list.jsonl")
    problem = missing_field(load_records(tmp_path / "p.jsonl") + [{"text": "no prompt"}], ("prompt",))
    assert problem.startswith("record 3 has no 'prompt' field") and "'text'" in problem


def test_saved_datasets_and_their_splits(tmp_path):
    from datasets import Dataset, DatasetDict

    Dataset.from_list([{"prompt": "A:", "n": 1}, {"prompt": "B:", "n": 2}]).save_to_disk(str(tmp_path / "one"))
    assert load_records(tmp_path / "one") == [{"prompt": "A:", "n": 1}, {"prompt": "B:", "n": 2}]
    DatasetDict(
        {"train": Dataset.from_list([{"prompt": "T:"}]), "validation": Dataset.from_list([{"prompt": "V:"}])}
    ).save_to_disk(str(tmp_path / "dict"))
    assert load_records(f"{tmp_path / 'dict'}#validation") == [{"prompt": "V:"}]
    with pytest.raises(RecordsError, match="has no split 'test'; its splits: train, validation"):
        load_records(f"{tmp_path / 'dict'}#test")
    with pytest.raises(RecordsError, match="name the split"):
        load_records(tmp_path / "dict")
