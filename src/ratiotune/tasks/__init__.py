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

from ratiotune.tasks.base import Record, Sample, Task, TaskMetric, prompt_field

# Builtin tasks: name -> entry. Imported only when named, like a user's entry.
BUILTIN_TASKS = {
    "length-ratio": "ratiotune.tasks.length_ratio:make_task",
    "headline-expansion": "ratiotune.tasks.headline_expansion:make_task",
}


class TaskLoadError(Exception):
    """A task that cannot be made; the message names the field and the problem."""


def load_task(
    name: str | None = None, entry: str | None = None, options: Mapping[str, Any] | None = None, *, source: str | None = None
) -> Task:
    """The Task a study's `task` section names (one of name/entry), made with `options`.

    `source`: the text of a "file.py:factory" entry's file, read once at launch and carried by
    the study (a trial on another node may not have the file); None reads the file.
    """
    if entry is None:
        if name not in BUILTIN_TASKS:
            raise TaskLoadError(f"task.name: unknown task {name!r}; allowed: {', '.join(BUILTIN_TASKS)} (or task.entry for your own)")
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
                return f"task.measure returned no {metric.name!r}, which Task.metrics declares; it must return every declared metric"
            try:
                finite = math.isfinite(float(values[metric.name]))
            except (TypeError, ValueError):
                finite = False
            if not finite:
                return f"task.measure returned {values[metric.name]!r} for {metric.name!r} on placeholder answers; metrics must be finite numbers"
    return None


__all__ = [
    "BUILTIN_TASKS", "Record", "Sample", "Task", "TaskLoadError", "TaskMetric", "entry_file", "load_task", "probe_reward", "prompt_field",
]
