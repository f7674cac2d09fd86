"""Every metric a trial reports: its name, which way is better, and what it means.

The one table the rest reads: the study schema (what `search.metric` may name), the
ranking and the report (which way is better), the progress lines, `ratiotune fields`
and the docs (docs/study-file.md shows the same rows). A trial's result rows also carry
`infeasible` and `infeasible_reason` (a flag, not a metric: see trainable.Trial.divergence).
"""

from __future__ import annotations

from dataclasses import dataclass

from ratiotune.objective import OBJECTIVE


@dataclass(frozen=True)
class Metric:
    name: str
    better: str | None  # "max", "min", or None for descriptive numbers that have no "best"
    description: str


# Measured on a set of answer pairs (task.batch_metrics), under each split below.
TASK_METRICS: dict[str, tuple[str | None, str]] = {
    "mean_reward": ("max", "mean shared reward, raw (comlrl's logged rewards are multiplied by reward_scale)"),
    "in_range_fraction": ("max", "share of answer pairs whose len(agent 2) / len(agent 1) lies in the target band"),
    "mean_chars_agent1": (None, "mean characters of agent 1's answers"),
    "mean_chars_agent2": (None, "mean characters of agent 2's answers"),
    "mean_ratio": (None, "mean len(agent 2) / len(agent 1): how the ratio is reached"),
    # Under a group baseline a prompt whose answers all got the same reward teaches nothing.
    "flat_group_fraction": ("min", "share of prompts whose answers all got the same reward: no learning signal"),
}
SPLITS = {
    "train": "over the epoch's training rollouts",
    "eval": "on the held-out eval prompts, a fixed protocol (seed, pairs per prompt) the same for every trial",
    "test": "on the test prompts, 4x the eval pairs; only in the final row of race confirmation and retrain runs",
}

METRICS: dict[str, Metric] = {
    **{
        f"{split}/{name}": Metric(f"{split}/{name}", better, f"{text}, {where}")
        for split, where in SPLITS.items() if split != "test"
        for name, (better, text) in TASK_METRICS.items()
    },
    OBJECTIVE: Metric(
        OBJECTIVE, None,
        "search.metric's mean over the trial's last search.objective_window epochs: what Optuna, ASHA, "
        "the kept checkpoints and the ranking use (better = search.mode)",
    ),
    **{
        f"test/{name}": Metric(f"test/{name}", better, f"{text}, {SPLITS['test']}")
        for name, (better, text) in TASK_METRICS.items()
    },
    "epoch": Metric("epoch", None, "epochs trained so far (1 after the first)"),
    "system/epoch_seconds": Metric("system/epoch_seconds", "min", "seconds of training in the epoch (sampling + update)"),
    "system/tokens_per_second": Metric("system/tokens_per_second", "max", "tokens generated in training per second"),
    "system/eval_seconds": Metric("system/eval_seconds", "min", "seconds of the epoch's eval"),
    "system/optimizer_lr": Metric(
        "system/optimizer_lr", None, "the learning rate in agent 0's optimizer during the epoch (under PBT it follows the mutated config)"
    ),
}
REPORTED_METRICS = tuple(METRICS)

# Shares and the shared reward (exp(-distance), 1.0 in the band) lie in [0, 1]: the range a
# diverged run's worst value and the prediction interval's clipping come from.
BOUNDED_TASK_METRICS = ("mean_reward", "in_range_fraction", "flat_group_fraction")


def value_range(metric: str) -> tuple[float, float] | None:
    """The values a metric can take, when bounded (task shares and rewards: [0, 1]); else None."""
    name = metric.split("/", 1)[-1]
    return (0.0, 1.0) if metric in METRICS and name in BOUNDED_TASK_METRICS else None

# What `search.metric` may name: measured every epoch, on the training rollouts or the eval prompts.
SELECTABLE_METRICS = (
    *(name for name in METRICS if name.startswith(("train/", "eval/"))),
    "system/epoch_seconds",
    "system/tokens_per_second",
)

# The few numbers people follow while a study runs: Ray's trial table (with the epoch and
# the searched values) and `ratiotune train`'s line per epoch.
PROGRESS_METRICS = ("train/mean_reward", "train/in_range_fraction", "eval/mean_reward", "eval/in_range_fraction", OBJECTIVE)


def better_direction(metric: str) -> str | None:
    """Which way a metric improves; None for descriptive ones (lengths, ratio, epoch) and unknown names."""
    known = METRICS.get(metric)
    return known.better if known else None

