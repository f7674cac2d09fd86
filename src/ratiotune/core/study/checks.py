"""The checks before training: the launch check and the race's budget."""

from __future__ import annotations

from ratiotune.core.model_names import model_problem
from ratiotune.core.study.errors import StudyError
from ratiotune.core.study.loading import read_task_source
from ratiotune.core.study.prompts import read_prompts
from ratiotune.core.study.schema import Study
from ratiotune.core.study.task import task_problem


def check_launch(study: Study) -> Study:
    """What only a command that trains needs: readable prompts with the task's fields (kept in the
    study), a task whose reward answers a probe, and a model it can load.

    Raises StudyError with one line naming the field and the fixes. Only commands that train run it
    (search, resume, train, retrain, check); GPUs and the cluster are checked once Ray is up
    (search.check_resources).
    """
    from ratiotune.tasks import probe_reward

    read_task_source(study, strict=True)
    read_prompts(study, strict=True)
    task = study.get_task()
    problem = task_problem(study.task, study.search.metric, task) or probe_reward(task, study.prompts("train"))
    if problem is not None:
        raise StudyError(problem)
    problem = model_problem(study.model.name)
    if problem is not None:
        raise StudyError(f"model.name: {problem}")
    return study


def check_race_budget(study: Study) -> None:
    """Before a search: race numbers set in the study that cannot fit race.max_share even if every
    trial runs all its epochs are refused (StudyError, one line); numbers left at their defaults
    are fitted when the race is planned, on what the search really spent (race.py)."""
    if study.race_skipped() is not None:
        return
    from ratiotune.core.intensify import PlanError

    try:
        study.race_plan()
    except PlanError as exc:
        raise StudyError(str(exc)) from None
