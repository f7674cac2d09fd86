"""The study file, one idea per module; this re-exports the names callers import from ratiotune.core.study."""

from ratiotune.core.study.checks import check_launch, check_race_budget
from ratiotune.core.study.config_keys import LR_POINTS, SEARCHABLE, SEED_KEY, START_KEY, TEST_KEY
from ratiotune.core.study.errors import StudyError
from ratiotune.core.study.fields import json_schema, schema_fields
from ratiotune.core.study.folders import PROMPTS_DIR, TASK_DIR, study_files, write_study
from ratiotune.core.study.loading import load_study, read_task_source
from ratiotune.core.study.overrides import PATH_FIELDS, apply_override, apply_overrides, resolve_paths
from ratiotune.core.study.prompt_sets import PROMPT_SPLITS
from ratiotune.core.study.prompts import SPLIT_ROLES, check_prompt_overlap, read_prompts
from ratiotune.core.study.schema import Study
from ratiotune.core.study.search_section import (
    OPTUNA_URL_SCHEMES,
    ParamSpec,
    SchedulerSpec,
    SearchSpec,
    continuous_params,
    describe_space,
    spec_contains,
)
from ratiotune.core.study.sections import CheckpointSpec, ModelSpec, RaceSpec, ResourcesSpec, Strict, TaskSpec, TrainSpec
from ratiotune.core.study.task import make_task, task_problem
from ratiotune.core.study.validation import validate_study

__all__ = [
    "OPTUNA_URL_SCHEMES",
    "PATH_FIELDS",
    "PROMPTS_DIR",
    "PROMPT_SPLITS",
    "LR_POINTS",
    "SEARCHABLE",
    "SEED_KEY",
    "SPLIT_ROLES",
    "START_KEY",
    "TASK_DIR",
    "TEST_KEY",
    "CheckpointSpec",
    "ModelSpec",
    "ParamSpec",
    "RaceSpec",
    "ResourcesSpec",
    "SchedulerSpec",
    "SearchSpec",
    "Strict",
    "Study",
    "StudyError",
    "TaskSpec",
    "TrainSpec",
    "apply_override",
    "apply_overrides",
    "check_launch",
    "check_prompt_overlap",
    "check_race_budget",
    "continuous_params",
    "describe_space",
    "json_schema",
    "load_study",
    "make_task",
    "read_prompts",
    "read_task_source",
    "resolve_paths",
    "schema_fields",
    "spec_contains",
    "study_files",
    "task_problem",
    "validate_study",
    "write_study",
]
