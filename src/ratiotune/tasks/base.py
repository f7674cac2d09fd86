"""What a task is: the contract between ratiotune and the MAGRPO task it tunes.

A task is the part of a study that is not hyperparameters: the records the agents are
prompted with, how each agent's prompt is made from a record, the shared reward over the two
agents' answers, and the metrics that describe a batch of answers. comlrl's MAGRPOTrainer
conventions are the interface, so a task that trains under MAGRPOTrainer plugs in unchanged:

- `formatters`: one callable per agent, record -> prompt text (MAGRPOTrainer's `formatters`).
- `reward`: MAGRPOTrainer's `reward_func`: reward(completions1, completions2, batch_items=...)
  -> one float per answer pair (comlrl calls it through `call_reward_function`, which also
  accepts the plain two-argument form). A bounded reward declares its range with comlrl's
  `set_reward_range`; ratiotune reads it with `resolve_reward_range`.
- records: dicts, as in a `datasets.Dataset` (comlrl's `train_dataset`); the length-ratio
  task reads only their "prompt" field.

Every task reports two metrics ratiotune computes itself (`COMMON_METRICS`): the mean raw
reward and the share of prompts whose answers all got the same reward. `measure` adds the
task's own, described in `metrics`; `search.metric` may name any of them per split.

A task is made by a factory, `make_task(**options) -> Task`, named by the study file
(`task.name` for a builtin, `task.entry` for one's own; see ratiotune.tasks.load_task).
The factory runs once per process (the driver and every trial), so a Task never travels
through Ray's pickling and may hold lambdas, models or open files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

Record = Mapping[str, Any]
Formatter = Callable[[Record], str]
# One answer pair and the record it answers: (record, agent 1's answer, agent 2's answer).
Sample = tuple[Record, str, str]


@dataclass(frozen=True)
class TaskMetric:
    """One number `measure` returns: reported as train/<name>, eval/<name> and test/<name>."""

    name: str
    better: str | None  # "max", "min", or None for descriptive numbers that have no "best"
    description: str
    # The values it can take, when bounded: a diverged run scores the worst end of it, and
    # the prediction intervals printed for a winner are clipped to it.
    bounds: tuple[float, float] | None = None


def prompt_field(record: Record) -> str:
    """comlrl's default formatter: the record's "prompt" field."""
    return record["prompt"]


@dataclass(frozen=True)
class TrialCurves:
    """What a task figure is drawn from: one trial's reported metrics per epoch."""

    name: str  # the trial
    epochs: int  # the epochs a trial trains (the x axis runs to it)
    # "eval/mean_chars_agent1" -> (epochs, values), for every metric the trial reported
    metrics: Mapping[str, tuple[list[int], list[float]]]


@dataclass(frozen=True)
class TaskFigure:
    """A figure the task adds to `ratiotune report`, drawn for the best trial: the task owns its
    pictures and its words, so the report itself knows no task."""

    name: str  # the file: <name>.png in the report folder
    title: str  # the report section's title
    caption: str  # the words under the title
    draw: Callable[[TrialCurves, Path], None]  # writes a PNG to the path (import matplotlib inside)


@dataclass(frozen=True)
class Task:
    name: str
    reward: Callable[..., Sequence[float]]
    # Task metrics over answer pairs, grouped by prompt: name -> value for every entry of `metrics`.
    measure: Callable[[Sequence[Sequence[Sample]]], Mapping[str, float]]
    metrics: tuple[TaskMetric, ...] = ()
    formatters: tuple[Formatter, Formatter] = (prompt_field, prompt_field)
    # "builtin:<name>" prompt sets the task ships: name -> file (.txt: one prompt per line, .jsonl: records).
    builtin_prompts: Mapping[str, Path] = field(default_factory=dict)
    # Record fields the formatters and the reward read; a record without one fails at load.
    required_fields: tuple[str, ...] = ("prompt",)
    description: str = ""
    # Figures `ratiotune report` draws for the best trial (length-ratio: agent 1's and agent 2's characters).
    figures: tuple[TaskFigure, ...] = ()
