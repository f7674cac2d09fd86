"""Tasks: what the two agents are prompted with and rewarded for (see base.py for the contract).

`load_task(name=..., entry=..., options=...)` makes the Task a study names: a builtin by
name, or one's own from `entry` = "package.module:factory" or "path/to/file.py:factory".
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import math
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from ratiotune.tasks.base import Record, Sample, Task, TaskFigure, TaskMetric, TrialCurves, prompt_field

# Builtin tasks: name -> entry. Imported only when named, like a user's entry.
BUILTIN_TASKS = {
    "length-ratio": "ratiotune.tasks.length_ratio:make_task",
    "headline-expansion": "ratiotune.tasks.headline_expansion:make_task",
}


class TaskLoadError(Exception):
    """A task that cannot be made; the message names the field and the problem."""


class TaskError(Exception):
    """The task's own code failed at run time: `reward` or `measure` raised, or returned a
    non-finite number, on real answers. A bug in the task, not a crash of a machine: a trial
    that meets one reports it and ends (never retried), and the message names the function,
    the answer pair (shortened) and the record, so the fix can start from it."""


def shorten(text: Any, limit: int = 40) -> str:
    """repr of a text cut to `limit` characters, with its full length when cut."""
    text = str(text)
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}...({len(text)} chars)"


def describe_record(record: Record | None, limit: int = 120) -> str:
    """The record as a dict literal, cut to `limit` characters."""
    text = repr(dict(record or {}))
    return text if len(text) <= limit else text[:limit] + "...}"


def describe_pair(record: Record | None, first: str, second: str) -> str:
    """'answers ('..', '..') to record {...}': which answer pair a task error happened on."""
    where = f"answers ({shorten(first)}, {shorten(second)})"
    return f"{where} to record {describe_record(record)}" if record is not None else where


def call_reward(
    reward: Any,
    prompts: Sequence[str],
    completions1: Sequence[str],
    completions2: Sequence[str],
    batch_items: Sequence[Record] | None = None,
) -> list[float]:
    """The task's reward over one group of answer pairs, as comlrl calls it, checked.

    Raises TaskError when it raises, returns the wrong number of values or a non-finite one
    (a NaN reward would reach the loss and be reported as a diverged learning rate).
    """
    from comlrl.utils.reward_utils import call_reward_function

    items = list(batch_items or [])
    record_of = lambda i: items[i] if i < len(items) else (items[0] if items else None)  # noqa: E731
    try:
        rewards = call_reward_function(
            reward, list(prompts), [list(completions1), list(completions2)], num_agents=2, batch_items=items or None
        )
    except Exception as exc:
        # Which pair: the first one that raises on its own (a reward may score pairs independently).
        culprit = 0
        for i, (a, b) in enumerate(zip(completions1, completions2)):
            try:
                call_reward_function(
                    reward, list(prompts[i : i + 1]), [[a], [b]], num_agents=2, batch_items=[record_of(i)] if items else None
                )
            except Exception:
                culprit = i
                break
        raise TaskError(
            f"task.reward raised {type(exc).__name__}: {exc} on "
            f"{describe_pair(record_of(culprit), completions1[culprit], completions2[culprit])}"
        ) from None
    rewards = list(rewards)
    if len(rewards) != len(completions1):
        raise TaskError(
            f"task.reward returned {len(rewards)} value(s) for {len(completions1)} answer pairs "
            f"(record {describe_record(record_of(0))}); it must return one per pair"
        )
    for i, value in enumerate(rewards):
        try:
            finite = math.isfinite(value)
        except TypeError:
            finite = False
        if not finite:
            raise TaskError(
                f"task.reward returned {value!r} on {describe_pair(record_of(i), completions1[i], completions2[i])}; "
                "rewards must be finite numbers"
            )
    return [float(r) for r in rewards]


def call_measure(task: Task, groups: Sequence[Sequence[Sample]]) -> dict[str, float]:
    """task.measure over groups of answer pairs, checked: raises TaskError when it raises or
    returns a non-finite value for a declared metric, naming the first answer pair that does."""
    try:
        values = dict(task.measure(groups))
        bad = next((m.name for m in task.metrics if m.name in values and not _finite(values[m.name])), None)
    except Exception as exc:
        problem, bad = f"raised {type(exc).__name__}: {exc}", None
    else:
        if bad is None:
            return values
        problem = f"returned {values[bad]!r} for {bad!r}"
    pair = _first_failing_pair(task, groups)
    where = f" on {describe_pair(*pair)}" if pair is not None else " on a batch of answers (no single pair fails alone)"
    raise TaskError(f"task.measure {problem}{where}; metrics must be finite numbers")


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _first_failing_pair(task: Task, groups: Sequence[Sequence[Sample]]) -> Sample | None:
    for group in groups:
        for sample in group:
            try:
                values = dict(task.measure([[sample]]))
                if all(_finite(values.get(m.name, 0.0)) for m in task.metrics):
                    continue
            except Exception:
                pass
            return sample
    return None


def load_task(
    name: str | None = None, entry: str | None = None, options: Mapping[str, Any] | None = None, *, source: str | None = None
) -> Task:
    """The Task a study's `task` section names (one of name/entry), made with `options`.

    `source`: the text of a "file.py:factory" entry's file, read once at launch and carried by
    the study (a trial on another node may not have the file); None reads the file.
    """
    if entry is None:
        if name not in BUILTIN_TASKS:
            raise TaskLoadError(
                f"task.name: unknown task {name!r}; allowed: {', '.join(BUILTIN_TASKS)} (or task.entry for your own)"
            )
        entry, field = BUILTIN_TASKS[name], "task.name"
    else:
        field = "task.entry"
    factory = _import_entry(entry, field, source)
    try:
        task = factory(**dict(options or {}))
    except TypeError as exc:  # an option the factory does not take, or one it needs
        raise TaskLoadError(f"task.options: {entry} does not accept {dict(options or {})}: {exc}") from None
    except (ValueError, KeyError) as exc:
        raise TaskLoadError(f"task.options: {entry}: {exc}") from None
    except Exception as exc:  # the user's factory failed: say which and why, no traceback
        raise TaskLoadError(f"{field}: {entry} raised {type(exc).__name__}: {exc}") from None
    if not isinstance(task, Task):
        raise TaskLoadError(f"{field}: {entry} returned {type(task).__name__}, not a ratiotune.tasks.Task")
    return task


def entry_file(entry: str) -> str | None:
    """The file of a "path/to/file.py:factory" entry, else None (a module entry)."""
    target, sep, _ = entry.rpartition(":")
    return target if sep and target.endswith(".py") else None


def _import_entry(entry: str, field: str, source: str | None = None) -> Any:
    target, sep, attribute = entry.rpartition(":")
    if not sep or not target or not attribute:
        raise TaskLoadError(f"{field}: {entry!r} is not 'package.module:factory' or 'path/to/file.py:factory'")
    try:
        if target.endswith(".py"):
            module = _import_file(Path(target), source)
        else:
            module = importlib.import_module(target)
    except TaskLoadError:
        raise
    except Exception as exc:  # the user's module failed to import: say which and why, no traceback
        raise TaskLoadError(f"{field}: cannot import {target!r}: {type(exc).__name__}: {exc}") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise TaskLoadError(f"{field}: {target!r} has no callable {attribute!r}")
    return factory


def _import_file(path: Path, source: str | None = None) -> Any:
    if source is None:
        if not path.is_file():
            raise TaskLoadError(f"task.entry: no such file: {path}")
        source = path.read_text("utf-8")
    key = f"{path.resolve()}\0{source}"
    name = "ratiotune_user_task_" + hashlib.sha1(key.encode()).hexdigest()[:12]
    if name in sys.modules:  # once per process: every trial of a study makes the task from the same module
        return sys.modules[name]
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader=None, origin=str(path)))
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def probe_reward(task: Task, records: Sequence[Record]) -> str | None:
    """Why the task's formatters or reward fail on a few records with placeholder answers, or None.

    Called once at launch, before Ray starts: a reward that returns the wrong number of values
    or non-finite ones would otherwise fail (or silently train on NaN) inside every trial.
    comlrl calls the reward once per prompt, with that prompt's group of answers.
    """
    from comlrl.utils.reward_utils import call_reward_function

    answers = (["a placeholder answer", "", "x"], ["a longer placeholder answer, twice as long", "y", ""])
    for record in list(records)[:3]:
        try:
            prompts = [formatter(record) for formatter in task.formatters]
        except Exception as exc:
            return f"task.formatters raised {type(exc).__name__}: {exc} on record {dict(record)!r:.200}"
        for index, prompt in enumerate(prompts):
            if not isinstance(prompt, str):
                return f"task.formatters[{index}] returned {type(prompt).__name__}, not a prompt string"
        try:
            rewards = call_reward_function(
                task.reward, [prompts[0]] * len(answers[0]), list(answers), num_agents=2, batch_items=[record]
            )
        except Exception as exc:
            return f"task.reward raised {type(exc).__name__}: {exc} on placeholder answers to record {dict(record)!r:.200}"
        if len(rewards) != len(answers[0]):
            return f"task.reward returned {len(rewards)} value(s) for {len(answers[0])} answer pairs; it must return one per pair"
        bad = [r for r in rewards if not math.isfinite(r)]
        if bad:
            return f"task.reward returned non-finite values ({bad[0]!r}) on placeholder answers; rewards must be finite numbers"
    # measure() too: a declared metric it does not return would fail every trial at its first epoch.
    groups = [[(record, a, b) for a, b in zip(*answers)] for record in list(records)[:3]]
    if groups:
        try:
            values = dict(task.measure(groups))
        except Exception as exc:
            return f"task.measure raised {type(exc).__name__}: {exc} on placeholder answers"
        for metric in task.metrics:
            if metric.name not in values:
                return (
                    f"task.measure returned no {metric.name!r}, which Task.metrics declares; it must return every declared metric"
                )
            try:
                finite = math.isfinite(float(values[metric.name]))
            except (TypeError, ValueError):
                finite = False
            if not finite:
                return (
                    f"task.measure returned {values[metric.name]!r} for {metric.name!r} on placeholder answers; "
                    f"metrics must be finite numbers"
                )
    return None


__all__ = [
    "BUILTIN_TASKS",
    "Record",
    "Sample",
    "Task",
    "TaskError",
    "TaskFigure",
    "TaskLoadError",
    "TaskMetric",
    "TrialCurves",
    "call_measure",
    "call_reward",
    "entry_file",
    "load_task",
    "probe_reward",
    "prompt_field",
]
