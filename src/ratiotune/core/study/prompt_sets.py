"""The study's three prompt sets by name, and one set's records: the study's copy, else read now."""

from __future__ import annotations

from typing import Any, Callable

from ratiotune.core.study.sections import TaskSpec
from ratiotune.tasks import Task
from ratiotune.tasks.records import load_records

PROMPT_SPLITS = ("train", "eval", "test")


def split_records(
    spec: TaskSpec, split: str, read: dict[str, list[dict[str, Any]]], get_task: Callable[[], Task]
) -> list[dict[str, Any]]:
    """The train, eval or test records: those read at load time (`read`, by source), else (a builtin
    set, or a study built in code) read now. get_task is called only then: a task may not load here."""
    source = getattr(spec, f"{split}_prompts")
    records = read.get(source)
    if records is None:
        records = load_records(source, get_task().builtin_prompts)
    return [dict(r) for r in records]
