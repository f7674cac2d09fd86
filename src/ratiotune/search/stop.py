"""When a search stops early: the first task error ends the whole study.

A task error (tasks.TaskError: the task's reward or measure raised, or returned a non-finite
number, on real answers) is a bug in the task, so every other trial would meet it too: running
them on, or starting the ones still pending, only spends compute on the same bug. Ray's Stopper
is the hook: `stop_all()` ends every trial, and the trials' folders stay as they are.
"""

from __future__ import annotations

from typing import Any

from ray.tune.stopper import Stopper

from ratiotune.core.experiment import TASK_ERROR_KEY


class TaskErrorStopper(Stopper):
    """Stops the study at the first result that carries a task error; `max_iteration` (PBT: a trial
    stops at that training_iteration) keeps its say over single trials."""

    def __init__(self, max_iteration: int | None = None):
        self.max_iteration = max_iteration
        self.task_error: str | None = None

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        if result.get(TASK_ERROR_KEY):
            self.task_error = self.task_error or str(result[TASK_ERROR_KEY])
            return True
        if self.max_iteration is not None and result.get("training_iteration", 0) >= self.max_iteration:
            return True
        return False

    def stop_all(self) -> bool:
        return self.task_error is not None
