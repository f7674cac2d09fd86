"""The headline-expansion task: agent 1 writes a headline, agent 2 expands it into a paragraph.

The second builtin task, and the one that shows what the first does not: the records carry a
"topic" field (not "prompt") and the two agents get different prompts made from it. The agents
still answer independently (agent 2 never sees the headline), so they cooperate only through
what training teaches them: agent 2 is rewarded for using agent 1's words and for being several
times longer.

The reward, in [0, 1], mixes two graded parts, both over words (lowercased runs of letters and
digits, so punctuation separates words):

- coverage: the share of agent 1's distinct words that also appear in agent 2's answer;
- length band: 1.0 when agent 2 has min_ratio..max_ratio times agent 1's word count, else the
  factor by which it misses the band (ratio / min_ratio below it, max_ratio / ratio above it),
  so being 2x short costs as much as being 2x long.

An answer from agent 1 without a word scores 0.0 (there is nothing to expand). Both parts are
graded on purpose: a random-init model's answers (random characters, short words between
punctuation) differ in both, so the group baseline of GRPO has something to compare from the
first epoch. Like length-ratio it scores no quality: "the the the" covers the headline "the".
Pure Python (no torch, no Ray).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

from ratiotune.tasks.base import Record, Sample, Task, TaskMetric

DEFAULT_COVERAGE_WEIGHT = 0.5
# A headline of ~8 words and a paragraph of 40-80 words: 3-10x covers that with slack.
DEFAULT_MIN_RATIO = 3.0
DEFAULT_MAX_RATIO = 10.0

_WORD = re.compile(r"[a-z0-9]+")


def _data(name: str) -> Path:
    return Path(str(resources.files("ratiotune.data").joinpath("headline_expansion", name)))


# Hand-written topics, one JSON record per line ({"topic": ...}); the four sets are disjoint.
BUILTIN_PROMPTS = {
    "builtin:train": _data("train.jsonl"),  # 60
    "builtin:eval": _data("eval.jsonl"),  # 20
    "builtin:test": _data("test.jsonl"),  # 20: never trained on, never used to select
    "builtin:design": _data("design.jsonl"),  # 20: for designing studies without touching test
}


def headline_prompt(record: Record) -> str:
    return f"Write a one-line headline about {record['topic']}:"


def paragraph_prompt(record: Record) -> str:
    return f"Write a detailed paragraph about {record['topic']}:"


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def coverage(headline: str, paragraph: str) -> float:
    """Share of the headline's distinct words found in the paragraph (0.0 for a wordless headline)."""
    wanted = set(words(headline))
    if not wanted:
        return 0.0
    return len(wanted & set(words(paragraph))) / len(wanted)


def band_score(
    headline: str, paragraph: str, min_ratio: float = DEFAULT_MIN_RATIO, max_ratio: float = DEFAULT_MAX_RATIO
) -> float:
    """1.0 when the word-count ratio paragraph/headline is in [min_ratio, max_ratio], else the factor it misses by."""
    n1, n2 = len(words(headline)), len(words(paragraph))
    if n1 == 0:
        return 0.0
    ratio = n2 / n1
    if ratio < min_ratio:
        return ratio / min_ratio
    if ratio > max_ratio:
        return max_ratio / ratio
    return 1.0


def in_band(headline: str, paragraph: str, min_ratio: float = DEFAULT_MIN_RATIO, max_ratio: float = DEFAULT_MAX_RATIO) -> bool:
    return band_score(headline, paragraph, min_ratio, max_ratio) == 1.0


def headline_expansion_reward(
    headline: str,
    paragraph: str,
    coverage_weight: float = DEFAULT_COVERAGE_WEIGHT,
    min_ratio: float = DEFAULT_MIN_RATIO,
    max_ratio: float = DEFAULT_MAX_RATIO,
) -> float:
    return coverage_weight * coverage(headline, paragraph) + (1.0 - coverage_weight) * band_score(
        headline, paragraph, min_ratio, max_ratio
    )


@dataclass(frozen=True)
class HeadlineExpansionReward:
    """The reward in comlrl's calling convention: two lists of answers in, one float per pair out."""

    coverage_weight: float = DEFAULT_COVERAGE_WEIGHT
    min_ratio: float = DEFAULT_MIN_RATIO
    max_ratio: float = DEFAULT_MAX_RATIO
    # comlrl's declared-range attribute (what set_reward_range sets; read by resolve_reward_range).
    reward_range = (0.0, 1.0)

    def __call__(self, completions1: Sequence[str], completions2: Sequence[str]) -> list[float]:
        return [
            headline_expansion_reward(c1, c2, self.coverage_weight, self.min_ratio, self.max_ratio)
            for c1, c2 in zip(completions1, completions2)
        ]


METRICS = (
    TaskMetric("coverage", "max", "mean share of agent 1's distinct words that appear in agent 2's answer", (0.0, 1.0)),
    TaskMetric(
        "band_fraction", "max", "share of answer pairs whose word-count ratio agent 2 / agent 1 lies in the band", (0.0, 1.0)
    ),
    TaskMetric("mean_words_agent1", None, "mean words in agent 1's answers (the headlines)"),
    TaskMetric("mean_words_agent2", None, "mean words in agent 2's answers (the paragraphs)"),
)


def measure(groups: Sequence[Sequence[Sample]], min_ratio: float, max_ratio: float) -> dict[str, float]:
    pairs = [(a, b) for group in groups for _, a, b in group]
    n = len(pairs)
    return {
        "coverage": sum(coverage(a, b) for a, b in pairs) / n,
        "band_fraction": sum(in_band(a, b, min_ratio, max_ratio) for a, b in pairs) / n,
        "mean_words_agent1": sum(len(words(a)) for a, _ in pairs) / n,
        "mean_words_agent2": sum(len(words(b)) for _, b in pairs) / n,
    }


def make_task(
    coverage_weight: float = DEFAULT_COVERAGE_WEIGHT,
    min_ratio: float = DEFAULT_MIN_RATIO,
    max_ratio: float = DEFAULT_MAX_RATIO,
) -> Task:
    """Headline expansion; the reward is coverage_weight x coverage + the rest x the length band."""
    if not 0.0 <= coverage_weight <= 1.0:
        raise ValueError(f"coverage_weight ({coverage_weight}) must lie in [0, 1]")
    if not 0 < min_ratio <= max_ratio:
        raise ValueError(f"min_ratio ({min_ratio}) must be > 0 and <= max_ratio ({max_ratio})")
    return Task(
        name="headline-expansion",
        reward=HeadlineExpansionReward(coverage_weight, min_ratio, max_ratio),
        measure=lambda groups: measure(groups, min_ratio, max_ratio),
        metrics=METRICS,
        formatters=(headline_prompt, paragraph_prompt),
        builtin_prompts=BUILTIN_PROMPTS,
        required_fields=("topic",),
        description=(
            f"agent 1 writes a headline, agent 2 a paragraph with {min_ratio:g}-{max_ratio:g}x its words "
            f"that uses them (coverage weight {coverage_weight:g})"
        ),
    )
