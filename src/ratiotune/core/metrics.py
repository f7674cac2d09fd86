"""Every metric a trial reports: its name, which way is better, what it means, its range.

The table is a function of the study's task (`MetricTable(task)`, or `study.metrics()`): the
two common metrics ratiotune measures for every task, the task's own (Task.metrics), each
under the train/eval/test splits, plus the objective and the system/* numbers. The rest reads
it: the study schema (what `search.metric` may name), the ranking and the report (which way is
better), the race and retrain (bounds), the progress lines, `ratiotune fields` and the docs. A
trial's result rows also carry `infeasible` and `infeasible_reason` (a flag, not a metric: see
trainable.Trial.divergence).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from ratiotune.core.objective import OBJECTIVE
from ratiotune.tasks import call_measure
from ratiotune.tasks.base import Sample, Task, TaskMetric


class Metric(TaskMetric):
    """A row of the metric table: TaskMetric's fields (name, better, description, bounds) under the name a trial
    reports (train/<name>, eval/<name>, test/<name>, the objective, system/*)."""


# Measured by ratiotune for every task, around the task's own: mean_reward first and
# flat_group_fraction last (the column order of every table). mean_reward's bounds are the
# reward's declared range (comlrl's reward_range), read in MetricTable.
MEAN_REWARD = TaskMetric("mean_reward", "max", "mean shared reward, raw (comlrl's logged rewards are multiplied by reward_scale)")
# Under a group baseline a prompt whose answers all got the same reward teaches nothing.
FLAT_GROUPS = TaskMetric(
    "flat_group_fraction", "min", "share of prompts whose answers all got the same reward: no learning signal", (0.0, 1.0)
)
COMMON_METRICS = (MEAN_REWARD, FLAT_GROUPS)

SPLITS = {
    "train": "over the epoch's training rollouts",
    "eval": "on the held-out eval prompts, a fixed protocol (seed, pairs per prompt) the same for every trial",
    "test": "on the test prompts, 4x the eval pairs; only in the final row of race confirmation and retrain runs",
}

SYSTEM_METRICS = (
    Metric("epoch", None, "epochs trained so far (1 after the first)"),
    Metric("system/epoch_seconds", "min", "seconds of training in the epoch (sampling + update)"),
    Metric("system/tokens_per_second", "max", "tokens generated in training per second"),
    Metric("system/eval_seconds", "min", "seconds of the epoch's eval"),
    Metric(
        "system/optimizer_lr",
        None,
        "the learning rate in agent 0's optimizer during the epoch (under PBT it follows the mutated config)",
    ),
)


def split_metrics(task: Task) -> tuple[TaskMetric, ...]:
    """What is measured on a set of answer pairs, in column order: mean_reward, the task's, flat_group_fraction."""
    own = tuple(task.metrics)
    clash = [m.name for m in own if m.name in {c.name for c in COMMON_METRICS}]
    if clash:
        raise ValueError(f"task {task.name!r} declares metric {clash[0]!r}, which ratiotune measures itself for every task")
    return (MEAN_REWARD, *own, FLAT_GROUPS)


def common_measures(groups: Sequence[Sequence[Sample]], rewards: Sequence[Sequence[float]]) -> dict[str, float]:
    """mean_reward and flat_group_fraction over groups of answer pairs and their raw rewards (one list per group)."""
    flat = [len(set(group)) <= 1 for group in rewards if group]
    values = [r for group in rewards for r in group]
    if not values:
        raise ValueError("metrics need at least one (agent 1, agent 2) pair")
    return {"mean_reward": sum(values) / len(values), "flat_group_fraction": sum(flat) / len(flat)}


def measure(task: Task, groups: Sequence[Sequence[Sample]], rewards: Sequence[Sequence[float]]) -> dict[str, float]:
    """Every split metric of a batch, in the table's order: the common ones plus task.measure(groups)."""
    common = common_measures(groups, rewards)
    own = call_measure(task, groups)  # TaskError naming the answer pair when the task's measure fails
    names = [m.name for m in split_metrics(task)]
    missing = [n for n in names if n not in common and n not in own]
    if missing:
        raise ValueError(f"task {task.name!r}: measure() returned no {missing[0]!r} (it declares it in Task.metrics)")
    return {n: float(common[n]) if n in common else float(own[n]) for n in names}


class MetricTable:
    """Every metric a study's trials report, for the study's task."""

    def __init__(self, task: Task):
        self.task = task
        rows: dict[str, Metric] = {}
        measured = split_metrics(task)
        for split, where in SPLITS.items():
            if split == "test":
                continue
            for m in measured:
                rows[f"{split}/{m.name}"] = Metric(f"{split}/{m.name}", m.better, f"{m.description}, {where}", m.bounds)
        rows[OBJECTIVE] = Metric(
            OBJECTIVE,
            None,
            "search.metric's mean over the trial's last search.objective_window epochs: what Optuna, ASHA, "
            "the kept checkpoints and the ranking use (better = search.mode)",
        )
        for m in measured:
            rows[f"test/{m.name}"] = Metric(f"test/{m.name}", m.better, f"{m.description}, {SPLITS['test']}", m.bounds)
        rows.update({m.name: m for m in SYSTEM_METRICS})
        self.rows: Mapping[str, Metric] = rows
        self.measured = tuple(m.name for m in measured)
        self._reward_range: tuple[float, float] | None | bool = False  # False: not read yet

    @property
    def reported(self) -> tuple[str, ...]:
        """Every name, in table order (the column order of results and reports)."""
        return tuple(self.rows)

    @property
    def selectable(self) -> tuple[str, ...]:
        """What `search.metric` may name: measured every epoch, on the training rollouts or the eval prompts."""
        return (*(n for n in self.rows if n.startswith(("train/", "eval/"))), "system/epoch_seconds", "system/tokens_per_second")

    @property
    def headline(self) -> str:
        """The task's own first metric with a direction (length-ratio: in_range_fraction); else mean_reward."""
        return next((m.name for m in self.task.metrics if m.better is not None), "mean_reward")

    @property
    def progress(self) -> tuple[str, ...]:
        """The few numbers people follow while a study runs: Ray's trial table and `ratiotune train`'s line per epoch."""
        names = dict.fromkeys(("mean_reward", self.headline))
        return (*(f"train/{n}" for n in names), *(f"eval/{n}" for n in names), OBJECTIVE)

    def better(self, metric: str) -> str | None:
        """Which way a metric improves; None for descriptive ones (lengths, ratio, epoch) and unknown names."""
        known = self.rows.get(metric)
        return known.better if known else None

    def value_range(self, metric: str) -> tuple[float, float] | None:
        """The values a metric can take, when bounded; else None. mean_reward: the reward's declared range."""
        known = self.rows.get(metric)
        if known is None:
            return None
        if metric.split("/", 1)[-1] == MEAN_REWARD.name and "/" in metric:
            return self.reward_range()
        return known.bounds

    def collapsed_reward(self) -> float:
        """The mean test reward of a collapsed run: every reward at the bottom of the declared range
        (length-ratio: 0, agent 1 answers empty); 0 when the task declares no range."""
        bounds = self.reward_range()
        return bounds[0] if bounds is not None else 0.0

    def reward_range(self) -> tuple[float, float] | None:
        if self._reward_range is False:
            from comlrl.utils.reward_utils import resolve_reward_range

            bounds = resolve_reward_range(self.task.reward)
            self._reward_range = bounds if bounds is None or all(math.isfinite(b) for b in bounds) else None
        return self._reward_range
