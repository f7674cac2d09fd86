"""The headline-expansion builtin task: reward, metrics, formatters and shipped data (pure, fast)."""

import fnmatch
import json
import math
import random
import tomllib
from pathlib import Path

import pytest
from comlrl.utils.reward_utils import call_reward_function, resolve_reward_range

from ratiotune.tasks import BUILTIN_TASKS, Task, TaskLoadError, load_task
from ratiotune.tasks.headline_expansion import (
    BUILTIN_PROMPTS,
    band_score,
    coverage,
    headline_expansion_reward,
    words,
)

REPO = Path(__file__).resolve().parents[1]


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def test_words_are_lowercased_alphanumeric_runs():
    assert words("Big News: Cats RULE, 2 dogs!") == ["big", "news", "cats", "rule", "2", "dogs"]
    assert words("!!! ...") == []


def test_coverage_is_the_share_of_distinct_headline_words_in_the_paragraph():
    assert coverage("Cats rule", "cats everywhere, and they rule") == 1.0
    assert coverage("cats cats rule", "Cats sleep") == 0.5  # distinct words: {cats, rule}
    assert coverage("cats rule", "dogs drool") == 0.0
    assert coverage("", "anything at all") == 0.0


@pytest.mark.parametrize(
    "n2, expected",
    [(0, 0.0), (1, 1 / 3), (3, 1.0), (7, 1.0), (10, 1.0), (20, 0.5), (40, 0.25)],
)
def test_band_score_is_one_in_band_and_the_missed_factor_outside(n2, expected):
    headline = "one"
    paragraph = " ".join(["w"] * n2)
    assert band_score(headline, paragraph, 3.0, 10.0) == pytest.approx(expected)


def test_reward_on_hand_made_pairs():
    # Full coverage, 4x the words: both parts are 1.
    assert headline_expansion_reward("Cats rule", "cats rule the house every day") == 1.0
    # Half coverage (rule is missing), ratio 3/2 = 1.5 of a band starting at 3: 0.5 * 0.5 + 0.5 * 0.5.
    assert headline_expansion_reward("cats rule", "cats sleep more") == pytest.approx(0.5)
    # The weight moves the mix: only coverage, only the band.
    assert headline_expansion_reward("cats rule", "cats sleep more", coverage_weight=1.0) == pytest.approx(0.5)
    assert headline_expansion_reward("cats rule", "cats sleep more", coverage_weight=0.0) == pytest.approx(0.5)
    assert headline_expansion_reward("cats rule", "dogs", coverage_weight=0.0) == pytest.approx(0.5 / 3)
    # Agent 1 said nothing: nothing to expand.
    assert headline_expansion_reward("", "a long paragraph about nothing in particular") == 0.0
    assert headline_expansion_reward("?!", "a long paragraph") == 0.0


def random_answer(rng: random.Random) -> str:
    alphabet = "abcde fg,.!?XYZ019 "
    return "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 3, 8, 16, 40])))


def test_reward_lies_in_range_and_is_graded_on_random_answers():
    task = load_task("headline-expansion")
    rng = random.Random(0)
    first = [random_answer(rng) for _ in range(2000)]
    second = [random_answer(rng) for _ in range(2000)]
    rewards = task.reward(first, second)
    assert len(rewards) == 2000
    assert all(0.0 <= r <= 1.0 for r in rewards)
    assert len({round(r, 3) for r in rewards}) > 20  # graded: GRPO's group baseline sees differences
    assert resolve_reward_range(task.reward) == (0.0, 1.0)


def test_reward_through_comlrls_call_reward_function_gives_one_finite_float_per_pair():
    task = load_task("headline-expansion")
    record = {"topic": "a city that floats on the sea"}
    for c1, c2 in [("Floating city", "the floating city sails on the sea all year"), ("", "x"), ("a", "")]:
        rewards = call_reward_function(
            task.reward, [task.formatters[0](record)], [[c1], [c2]], num_agents=2, batch_items=[record]
        )
        assert len(rewards) == 1 and math.isfinite(rewards[0]) and 0.0 <= rewards[0] <= 1.0


def test_measure_reports_every_declared_metric():
    task = load_task("headline-expansion")
    record = {"topic": "cats"}
    groups = [
        [(record, "Cats rule", "cats rule the house every day"), (record, "cats rule", "cats sleep more")],
        [(record, "", "dogs")],
    ]
    values = task.measure(groups)
    assert set(values) == {m.name for m in task.metrics}
    assert values["coverage"] == pytest.approx((1.0 + 0.5 + 0.0) / 3)
    assert values["band_fraction"] == pytest.approx(1 / 3)
    assert values["mean_words_agent1"] == pytest.approx(4 / 3)
    assert values["mean_words_agent2"] == pytest.approx((6 + 3 + 1) / 3)
    for metric in task.metrics:
        if metric.bounds is not None:
            assert metric.bounds[0] <= values[metric.name] <= metric.bounds[1]


def test_the_agents_get_different_prompts_from_the_topic_field():
    task = load_task("headline-expansion")
    record = {"topic": "a robot that learns to bake bread"}
    first, second = (formatter(record) for formatter in task.formatters)
    assert first != second
    assert record["topic"] in first and record["topic"] in second
    assert "headline" in first and "paragraph" in second
    assert task.required_fields == ("topic",)
    with pytest.raises(KeyError):
        task.formatters[0]({"prompt": "no topic here"})


def test_builtin_sets_load_have_the_required_field_and_are_disjoint():
    task = load_task("headline-expansion")
    assert set(task.builtin_prompts) == {"builtin:train", "builtin:eval", "builtin:test", "builtin:design"}
    topics = {}
    for name, path in task.builtin_prompts.items():
        rows = records(path)
        assert all(set(row) == {"topic"} and row["topic"].strip() for row in rows), name
        topics[name] = [row["topic"] for row in rows]
        assert len(set(topics[name])) == len(topics[name]), f"{name} repeats a topic"
        # The builtin model's character tokenizer knows printable ASCII only.
        assert all(t.isascii() and t.isprintable() for t in topics[name]), name
    assert [len(topics[n]) for n in ("builtin:train", "builtin:eval", "builtin:test", "builtin:design")] == [60, 20, 20, 20]
    names = list(topics)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not set(topics[a]) & set(topics[b]), (a, b)


def test_shipped_data_is_listed_in_package_data():
    """A data file that no package-data glob names is missing from the installed wheel."""
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["ratiotune"]
    package = REPO / "src" / "ratiotune"
    for path in BUILTIN_PROMPTS.values():
        relative = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(relative, g) for g in globs), relative


def test_load_task_by_name_passes_options_and_refuses_bad_ones():
    assert BUILTIN_TASKS["headline-expansion"] == "ratiotune.tasks.headline_expansion:make_task"
    task = load_task("headline-expansion", options={"coverage_weight": 1.0, "min_ratio": 2, "max_ratio": 4})
    assert isinstance(task, Task) and task.name == "headline-expansion"
    assert task.reward(["cats rule"], ["cats sleep more"]) == [pytest.approx(0.5)]  # coverage only
    with pytest.raises(TaskLoadError, match="coverage_weight"):
        load_task("headline-expansion", options={"coverage_weight": 1.5})
    with pytest.raises(TaskLoadError, match="min_ratio"):
        load_task("headline-expansion", options={"min_ratio": 5, "max_ratio": 4})
    with pytest.raises(TaskLoadError, match="task.options"):
        load_task("headline-expansion", options={"target_min": 2})
