import json
import math
import random

import pytest

from ratiotune.task import LengthRatioReward, batch_metrics, in_range, length_ratio_reward, load_prompts


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
    assert load_prompts(tmp_path / "p.txt") == ["First prompt:", "Second prompt:"]
    assert load_prompts(tmp_path / "p.jsonl") == ["A:", "B:"]
    (tmp_path / "bad.jsonl").write_text(json.dumps({"text": "no prompt"}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        load_prompts(tmp_path / "bad.jsonl")
