"""The study's task: made from its TaskSpec, and checked against what the study asks of it."""

from __future__ import annotations

import difflib

from ratiotune.core.study.errors import StudyError
from ratiotune.core.study.prompt_sets import PROMPT_SPLITS
from ratiotune.core.study.sections import TaskSpec
from ratiotune.tasks import Task, TaskLoadError, entry_file, load_task


def make_task(spec: TaskSpec, sources: dict[str, str]) -> Task:
    """load_task for a TaskSpec; TaskLoadError becomes a StudyError (one line)."""
    file = entry_file(spec.entry) if spec.entry else None
    try:
        return load_task(spec.name, spec.entry, spec.options, source=sources.get(file) if file else None)
    except TaskLoadError as exc:
        raise StudyError(str(exc)) from None


def task_problem(spec: TaskSpec, metric: str, task: Task) -> str | None:
    """What the study asks of its task that the task lacks: search.metric, a builtin prompt set of task:."""
    from ratiotune.core.metrics import MetricTable

    try:
        table = MetricTable(task)
    except ValueError as exc:
        return f"task: {exc}"
    if metric not in table.selectable:
        close = difflib.get_close_matches(metric, table.selectable, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (
            f"search.metric: {metric!r} is not a metric a search can select on{hint}; task {task.name!r} has: "
            f"{', '.join(table.selectable)}"
        )
    for split in PROMPT_SPLITS:
        value = getattr(spec, f"{split}_prompts")
        if value.startswith("builtin:") and value not in task.builtin_prompts:
            close = difflib.get_close_matches(value, list(task.builtin_prompts), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return (
                f"task.{split}_prompts: unknown builtin prompt set {value!r}{hint}; task {task.name!r} has: "
                f"{', '.join(task.builtin_prompts) or '(none)'}, or use a .txt/.jsonl file or a saved dataset folder"
            )
    return None
