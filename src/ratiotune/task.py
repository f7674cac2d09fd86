"""The length-ratio task: reward, batch metrics and prompt sets.

Pure Python on purpose (no torch, no Ray) so it can be tested exactly and read
in isolation. Lengths are characters of the decoded completions.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable, Sequence

DEFAULT_TARGET_MIN = 2.0
DEFAULT_TARGET_MAX = 3.0

# Names that resolve to the prompt files shipped inside the package.
BUILTIN_PROMPTS = {
    "builtin:train": "train_prompts.txt",
    "builtin:eval": "eval_prompts.txt",
    "builtin:tutorial": "tutorial_prompts.txt",
    # Never trained on and never used to pick a config: the honest figure for a winner is
    # measured here (see race.py). Disjoint from the other sets.
    "builtin:test": "test_prompts.txt",
    # For designing studies (bench/seed_spread.py: which spaces and lrs are worth searching):
    # disjoint from the sets above, so a design decision never looks at the test prompts.
    "builtin:design": "design_prompts.txt",
}


def length_ratio_reward(
    completion1: str,
    completion2: str,
    target_min: float = DEFAULT_TARGET_MIN,
    target_max: float = DEFAULT_TARGET_MAX,
) -> float:
    """1.0 when len2/len1 lies in [target_min, target_max], else exp(-distance to the band).

    An empty answer from agent 1 scores 0.0 (the ratio is undefined).
    """
    len1, len2 = len(completion1), len(completion2)
    if len1 == 0:
        return 0.0
    ratio = len2 / len1
    if target_min <= ratio <= target_max:
        return 1.0
    distance = target_min - ratio if ratio < target_min else ratio - target_max
    return math.exp(-distance)


def in_range(
    completion1: str,
    completion2: str,
    target_min: float = DEFAULT_TARGET_MIN,
    target_max: float = DEFAULT_TARGET_MAX,
) -> bool:
    """True when the pair sits inside the band; an empty agent-1 answer is out."""
    if not completion1:
        return False
    return target_min <= len(completion2) / len(completion1) <= target_max


@dataclass(frozen=True)
class LengthRatioReward:
    """The reward in the calling convention comlrl uses: lists in, a list of floats out."""

    target_min: float = DEFAULT_TARGET_MIN
    target_max: float = DEFAULT_TARGET_MAX

    def __call__(self, completions1: Sequence[str], completions2: Sequence[str]) -> list[float]:
        return [
            length_ratio_reward(c1, c2, self.target_min, self.target_max)
            for c1, c2 in zip(completions1, completions2)
        ]


def batch_metrics(
    groups: Sequence[Sequence[tuple[str, str]]],
    target_min: float = DEFAULT_TARGET_MIN,
    target_max: float = DEFAULT_TARGET_MAX,
) -> dict[str, float]:
    """Metrics over groups of joint samples (one group = the answers to one prompt).

    Rewards here are raw (before any scale factor). `flat_group_fraction` is the
    share of groups whose rewards are all equal: under a group-mean baseline
    their advantages are zero, so they carry no learning signal.
    """
    pairs = [pair for group in groups for pair in group]
    if not pairs:
        raise ValueError("batch_metrics needs at least one (agent 1, agent 2) pair")
    rewards = [length_ratio_reward(a, b, target_min, target_max) for a, b in pairs]
    ratios = [len(b) / len(a) for a, b in pairs if a]
    flat = [
        len({length_ratio_reward(a, b, target_min, target_max) for a, b in group}) <= 1
        for group in groups
        if group
    ]
    return {
        "mean_reward": sum(rewards) / len(pairs),
        "in_range_fraction": sum(in_range(a, b, target_min, target_max) for a, b in pairs)
        / len(pairs),
        "mean_chars_agent1": sum(len(a) for a, _ in pairs) / len(pairs),
        "mean_chars_agent2": sum(len(b) for _, b in pairs) / len(pairs),
        # NaN would poison Ray's result tables; 0.0 is the honest value when agent 1 never answered.
        "mean_ratio": sum(ratios) / len(ratios) if ratios else 0.0,
        "flat_group_fraction": sum(flat) / len(flat),
    }


def load_prompts(source: str | Path) -> list[str]:
    """Prompts from a builtin name, a .txt file (one per line) or a .jsonl file ("prompt" field)."""
    source = str(source)
    if source in BUILTIN_PROMPTS:
        text = resources.files("ratiotune.data").joinpath(BUILTIN_PROMPTS[source]).read_text("utf-8")
        return _nonblank(text.splitlines())
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"prompt file not found: {path}")
    if path.suffix == ".jsonl":
        prompts = []
        for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("prompt"), str):
                raise ValueError(f"{path}:{number}: each line needs a string 'prompt' field")
            prompts.append(record["prompt"])
        return _nonblank(prompts)
    return _nonblank(path.read_text("utf-8").splitlines())


def _nonblank(lines: Iterable[str]) -> list[str]:
    return [line.strip() for line in lines if line.strip()]
