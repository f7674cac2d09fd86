"""The study schema's root: the Study model, its sections, its validators, and the task and prompts it carries."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field, PrivateAttr, model_validator

from ratiotune.core.study.errors import StudyError
from ratiotune.core.study.prompt_sets import split_records
from ratiotune.core.study.race_plan import plan_race, race_skip_reason
from ratiotune.core.study.search_section import SearchSpec
from ratiotune.core.study.searched import baseline_values, searched_names, trial_hyperparameters
from ratiotune.core.study.sections import CheckpointSpec, ModelSpec, RaceSpec, ResourcesSpec, Strict, TaskSpec, TrainSpec
from ratiotune.core.study.task import make_task, task_problem
from ratiotune.tasks import Task


class Study(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="Experiment name (folder under --storage).")
    model: ModelSpec = Field(ModelSpec(), description="The two agents' starting model.")
    task: TaskSpec = Field(
        TaskSpec(), description="The task (a builtin by name, or one's own entry), its options and the prompt sets."
    )
    train: TrainSpec = Field(TrainSpec(), description="One trial's training: MAGRPO settings and the four searchable values.")
    search: SearchSpec = Field(SearchSpec(), description="What is searched, how trials are judged, sampled and stopped.")
    race: RaceSpec = Field(
        RaceSpec(),
        description="After the search: the top configs race the baseline on paired fresh seeds; "
        "a gate confirms the winner or keeps the baseline.",
    )
    resources: ResourcesSpec = Field(ResourcesSpec(), description="CPUs and GPUs per trial.")
    checkpoint: CheckpointSpec = Field(CheckpointSpec(), description="Which checkpoints are kept.")

    # Prompt records by source (an absolute path), read once by `read_prompts`. Ray pickles
    # the study to every trial (tune.with_parameters), so trials on any node use exactly these
    # records and never read the files, which may not exist there or may have changed since.
    _records: dict[str, list[dict[str, Any]]] = PrivateAttr(default_factory=dict)
    # A "file.py:factory" entry's file text, by path: carried like the records.
    _task_sources: dict[str, str] = PrivateAttr(default_factory=dict)
    # (TaskSpec.key(), Task, MetricTable or None): made once per process, never pickled (a Task may hold lambdas).
    _task: Optional[tuple] = PrivateAttr(default=None)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        private = dict(state.get("__pydantic_private__") or {})
        private["_task"] = None
        return {**state, "__pydantic_private__": private}

    def get_task(self) -> Task:
        """The study's Task, made once per process (StudyError, one line, when it cannot be made)."""
        key = self.task.key()
        if self._task is None or self._task[0] != key:
            self._task = (key, make_task(self.task, self._task_sources), None)
        return self._task[1]

    def metrics(self):
        """The metric table of the study's task (metrics.MetricTable)."""
        from ratiotune.core.metrics import MetricTable

        task = self.get_task()
        if self._task[2] is None:
            self._task = (*self._task[:2], MetricTable(task))
        return self._task[2]

    @model_validator(mode="after")
    def _check_task(self) -> "Study":
        # A builtin task is ratiotune's own code: made here, so the schema checks its metric
        # names and prompt sets. One's own (task.entry) is imported only by load_study.
        if self.task.entry is None:
            try:
                problem = task_problem(self.task, self.search.metric, make_task(self.task, {}))
            except StudyError as exc:
                problem = str(exc)
            if problem:
                raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _check_generation(self) -> "Study":
        if self.train.generation == "compiled" and self.resources.gpu >= 2:
            raise ValueError(
                "train.generation: 'compiled' cannot run with resources.gpu: 2 (one GPU per agent): comlrl then "
                "generates both agents from two threads, and torch.compile and CUDA graphs are not thread-safe "
                "(pytorch/pytorch#118260, #123177); use auto (eager there), eager or static"
            )
        return self

    @model_validator(mode="after")
    def _check_pbt(self) -> "Study":
        interval = self.search.scheduler.perturbation_interval
        if self.search.scheduler.type == "pbt" and interval >= self.train.epochs:
            raise ValueError(
                f"search.scheduler.perturbation_interval ({interval}) must be < train.epochs ({self.train.epochs}), "
                "or no trial is ever perturbed"
            )
        return self

    def race_skipped(self) -> str | None:
        """Why this study runs no confirmation race, or None when it runs one (race_plan.race_skip_reason)."""
        return race_skip_reason(self.race, self.search)

    def baseline(self) -> dict[str, Any] | None:
        """The searched values of the hand-picked config, or None (searched.baseline_values)."""
        return baseline_values(self.search, self.train)

    def race_plan(self, search_epochs: int | None = None, available: int | None = None, explicit: frozenset[str] | None = None):
        """The race fitted to race.max_share (race_plan.plan_race; intensify.PlanError for explicit numbers that cannot fit)."""
        return plan_race(self.race, self.search, self.train, search_epochs, available, explicit)

    def searched(self) -> list[str]:
        """The searched hyperparameters, in SEARCHABLE's order (searched.searched_names)."""
        return searched_names(self.search)

    def hyperparameters(self, config: dict[str, Any]) -> dict[str, Any]:
        """The four searchable values for one trial (searched.trial_hyperparameters)."""
        return trial_hyperparameters(self.train, config)

    def prompts(self, split: str) -> list[dict[str, Any]]:
        """The train, eval or test records (prompt_sets.split_records)."""
        return split_records(self.task, split, self._records, self.get_task)
