"""same-answer: a task defined outside ratiotune, loaded by path (`task.entry: "task.py:make_task"`).

Both agents get a question with many right answers ("Name a fruit.") and answer independently;
they are rewarded for giving the *same* answer, and more for a right one: a coordination game
(to score, the two must converge on the same answer, the way people asked to "meet in the city"
both pick the main station). Agent 2's prompt says so; agent 1's only asks the question.

Records are JSON objects {"question": ..., "answers": [...]}: the reward reads the record of each
answer pair (comlrl passes it as `batch_items`), so this task shows a reward that needs more than
the two answers. The reward, in [0, 1]:

    agreement x (1 - valid_weight + valid_weight x valid)

- agreement: difflib's similarity ratio of the two answers, each reduced to its lowercased letters
  ("Apple." and "apple" agree fully, "apple" and "apples" by 0.91), 0 when either has no letter;
  graded, so a random-init model's answers already differ in reward;
- valid: the share of the two answers whose first word is one of the record's "answers".

Copy this folder to start your own task: docs/your-task.md explains the contract.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Mapping, Sequence

from comlrl.utils.reward_utils import set_reward_range

from ratiotune.tasks import Sample, Task, TaskMetric

_LETTERS = re.compile(r"[a-z]+")


def ask(record: Mapping[str, Any]) -> str:
    """Agent 1's prompt."""
    return f"{record['question']} Answer in one word:"


def ask_to_match(record: Mapping[str, Any]) -> str:
    """Agent 2's prompt: the same question, and the rule of the game."""
    return f"{record['question']} Another player answers too; you win if you both give the same word. Answer in one word:"


def normalize(answer: str) -> str:
    return " ".join(_LETTERS.findall(answer.lower()))


def agreement(answer1: str, answer2: str) -> float:
    a, b = normalize(answer1), normalize(answer2)
    if not a or not b:
        return 0.0
    return difflib.SequenceMatcher(None, a, b).ratio()


def is_valid(answer: str, record: Mapping[str, Any]) -> bool:
    words = normalize(answer).split()
    return bool(words) and words[0] in record["answers"]


def pair_reward(answer1: str, answer2: str, record: Mapping[str, Any], valid_weight: float) -> float:
    valid = (is_valid(answer1, record) + is_valid(answer2, record)) / 2
    return agreement(answer1, answer2) * (1.0 - valid_weight + valid_weight * valid)


def measure(groups: Sequence[Sequence[Sample]]) -> dict[str, float]:
    samples = [sample for group in groups for sample in group]
    n = len(samples)
    return {
        "agreement": sum(agreement(a, b) for _, a, b in samples) / n,
        "exact_match_fraction": sum(bool(normalize(a)) and normalize(a) == normalize(b) for _, a, b in samples) / n,
        "valid_fraction": sum(is_valid(a, r) + is_valid(b, r) for r, a, b in samples) / (2 * n),
        "mean_answer_words": sum(len(normalize(a).split()) + len(normalize(b).split()) for _, a, b in samples) / (2 * n),
    }


METRICS = (
    TaskMetric("agreement", "max", "mean similarity of the two answers (lowercased letters, difflib ratio)", (0.0, 1.0)),
    TaskMetric("exact_match_fraction", "max", "share of answer pairs that are the same non-empty answer", (0.0, 1.0)),
    TaskMetric("valid_fraction", "max", "share of answers whose first word is a right answer to the question", (0.0, 1.0)),
    TaskMetric("mean_answer_words", None, "mean words per answer (one is what was asked for)"),
)


def make_task(valid_weight: float = 0.5) -> Task:
    """same-answer; valid_weight is how much of the reward needs a right answer (0: agreeing is enough)."""
    if not 0.0 <= valid_weight <= 1.0:
        raise ValueError(f"valid_weight ({valid_weight}) must lie in [0, 1]")

    # batch_items is keyword-only on purpose: comlrl's call_reward_function passes the prompts
    # as the first argument to a reward that takes three positional parameters.
    def reward(
        completions1: Sequence[str], completions2: Sequence[str], *, batch_items: Sequence[Mapping[str, Any]] | None = None
    ) -> list[float]:
        if batch_items is None:
            raise ValueError("same-answer's reward reads each pair's record: call it with batch_items=[record, ...]")
        records = list(batch_items)
        if len(records) == 1:  # comlrl scores one pair at a time; one record may also cover a batch
            records = records * len(completions1)
        return [pair_reward(a, b, r, valid_weight) for a, b, r in zip(completions1, completions2, records)]

    return Task(
        name="same-answer",
        reward=set_reward_range(reward, 0.0, 1.0),
        measure=measure,
        metrics=METRICS,
        formatters=(ask, ask_to_match),
        required_fields=("question", "answers"),
        description=f"both agents name the same thing (a right answer counts for {valid_weight:g} of the reward)",
    )
