"""The length-ratio task: agent 2 should write 2-3x the characters of agent 1.

The first builtin task (the CoMLRL tutorial's). Pure Python on purpose (no torch, no Ray)
so it can be tested exactly and read in isolation. Lengths are characters of the decoded
completions; both agents see the record's "prompt" unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

from ratiotune.tasks.base import Sample, Task, TaskFigure, TaskMetric, TrialCurves

DEFAULT_TARGET_MIN = 2.0
DEFAULT_TARGET_MAX = 3.0


def _data(name: str) -> Path:
    return Path(str(resources.files("ratiotune.data").joinpath(name)))


# The prompt sets shipped inside the package.
BUILTIN_PROMPTS = {
    "builtin:train": _data("train_prompts.txt"),
    "builtin:eval": _data("eval_prompts.txt"),
    "builtin:tutorial": _data("tutorial_prompts.txt"),
    # Never trained on and never used to pick a config: the honest figure for a winner is
    # measured here (see race.py). Disjoint from the other sets.
    "builtin:test": _data("test_prompts.txt"),
    # For designing studies (bench/seed_spread.py: which spaces and lrs are worth searching):
    # disjoint from the sets above, so a design decision never looks at the test prompts.
    "builtin:design": _data("design_prompts.txt"),
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
    # comlrl's declared-range attribute (what set_reward_range sets; read by resolve_reward_range).
    reward_range = (0.0, 1.0)

    def __call__(self, completions1: Sequence[str], completions2: Sequence[str]) -> list[float]:
        return [length_ratio_reward(c1, c2, self.target_min, self.target_max) for c1, c2 in zip(completions1, completions2)]


METRICS = (
    TaskMetric(
        "in_range_fraction", "max", "share of answer pairs whose len(agent 2) / len(agent 1) lies in the target band", (0.0, 1.0)
    ),
    TaskMetric("mean_chars_agent1", None, "mean characters of agent 1's answers"),
    TaskMetric("mean_chars_agent2", None, "mean characters of agent 2's answers"),
    TaskMetric("mean_ratio", None, "mean len(agent 2) / len(agent 1): how the ratio is reached"),
)


def measure(groups: Sequence[Sequence[Sample]], target_min: float, target_max: float) -> dict[str, float]:
    pairs = [(a, b) for group in groups for _, a, b in group]
    ratios = [len(b) / len(a) for a, b in pairs if a]
    return {
        "in_range_fraction": sum(in_range(a, b, target_min, target_max) for a, b in pairs) / len(pairs),
        "mean_chars_agent1": sum(len(a) for a, _ in pairs) / len(pairs),
        "mean_chars_agent2": sum(len(b) for _, b in pairs) / len(pairs),
        # NaN would poison Ray's result tables; 0.0 is the honest value when agent 1 never answered.
        "mean_ratio": sum(ratios) / len(ratios) if ratios else 0.0,
    }


def draw_answer_lengths(curves: TrialCurves, path: Path, target_min: float, target_max: float) -> None:
    """Mean characters of agent 1 and agent 2 per epoch, with agent 2's target band (on eval)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(8.4, 3.8))
    for split, style in (("eval", "-"), ("train", "--")):
        xs, first = curves.metrics.get(f"{split}/mean_chars_agent1", ([], []))
        _, second = curves.metrics.get(f"{split}/mean_chars_agent2", ([], []))
        if not xs:
            continue
        ax.plot(xs, first, style, color="#1f77b4", marker="o", markersize=3, label=f"agent 1 ({split})")
        ax.plot(xs, second, style, color="#d62728", marker="o", markersize=3, label=f"agent 2 ({split})")
        if split == "eval":
            ax.fill_between(
                xs,
                [target_min * c for c in first],
                [target_max * c for c in first],
                color="#d62728",
                alpha=0.12,
                label=f"agent 2 target: {target_min:g}-{target_max:g}x agent 1 (eval)",
            )
    ax.set_ylabel("mean characters per answer")
    ax.set_title(f"How the best trial reached the ratio ({curves.name})")
    ax.set_xlabel("epoch")
    ax.set_xlim(0.7, max(curves.epochs, 1) + 0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # outside: the band fills the axes
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def lengths_figure(target_min: float, target_max: float) -> TaskFigure:
    return TaskFigure(
        name="best_trial_lengths",
        title="How the best trial reached the ratio",
        caption=f"Agent 2 is rewarded for {target_min:g}–{target_max:g}× agent 1's characters; the band is that target on eval.",
        draw=lambda curves, path: draw_answer_lengths(curves, path, target_min, target_max),
    )


def make_task(target_min: float = DEFAULT_TARGET_MIN, target_max: float = DEFAULT_TARGET_MAX) -> Task:
    """The length-ratio task with the rewarded band [target_min, target_max]."""
    if not target_min > 0:
        raise ValueError(f"target_min ({target_min}) must be > 0")
    if target_min > target_max:
        raise ValueError(f"target_min ({target_min}) must be <= target_max ({target_max})")
    return Task(
        name="length-ratio",
        reward=LengthRatioReward(target_min, target_max),
        measure=lambda groups: measure(groups, target_min, target_max),
        metrics=METRICS,
        builtin_prompts=BUILTIN_PROMPTS,
        description=f"agent 2 writes {target_min:g}-{target_max:g}x the characters of agent 1",
        figures=(lengths_figure(target_min, target_max),),
    )
