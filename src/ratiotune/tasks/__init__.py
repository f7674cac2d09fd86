"""Tasks: what the two agents are prompted with and rewarded for (see base.py for the contract).

`load_task(name=..., entry=..., options=...)` makes the Task a study names: a builtin by
name, or one's own from `entry` = "package.module:factory" or "path/to/file.py:factory".
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Mapping

from ratiotune.tasks.base import Record, Sample, Task, TaskMetric, prompt_field

# Builtin tasks: name -> entry. Imported only when named, like a user's entry.
BUILTIN_TASKS = {
    "length-ratio": "ratiotune.tasks.length_ratio:make_task",
    "headline-expansion": "ratiotune.tasks.headline_expansion:make_task",
}


class TaskLoadError(Exception):
    """A task that cannot be made; the message names the field and the problem."""


def load_task(name: str | None = None, entry: str | None = None, options: Mapping[str, Any] | None = None) -> Task:
    """The Task a study's `task` section names (one of name/entry), made with `options`."""
    if entry is None:
        if name not in BUILTIN_TASKS:
            raise TaskLoadError(f"task.name: unknown task {name!r}; allowed: {', '.join(BUILTIN_TASKS)} (or task.entry for your own)")
        entry, field = BUILTIN_TASKS[name], "task.name"
    else:
        field = "task.entry"
    factory = _import_entry(entry, field)
    try:
        task = factory(**dict(options or {}))
    except TypeError as exc:  # an option the factory does not take, or one it needs
        raise TaskLoadError(f"task.options: {entry} does not accept {dict(options or {})}: {exc}") from None
    except (ValueError, KeyError) as exc:
        raise TaskLoadError(f"task.options: {entry}: {exc}") from None
    if not isinstance(task, Task):
        raise TaskLoadError(f"{field}: {entry} returned {type(task).__name__}, not a ratiotune.tasks.Task")
    return task


def _import_entry(entry: str, field: str) -> Any:
    target, sep, attribute = entry.rpartition(":")
    if not sep or not target or not attribute:
        raise TaskLoadError(f"{field}: {entry!r} is not 'package.module:factory' or 'path/to/file.py:factory'")
    try:
        if target.endswith(".py"):
            module = _import_file(Path(target))
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


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise TaskLoadError(f"task.entry: no such file: {path}")
    name = "ratiotune_user_task_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:  # once per process: every trial of a study makes the task from the same module
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


__all__ = ["BUILTIN_TASKS", "Record", "Sample", "Task", "TaskLoadError", "TaskMetric", "load_task", "prompt_field"]
