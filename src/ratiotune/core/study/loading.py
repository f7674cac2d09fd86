"""A study file -> a Study: read the YAML, apply overrides, validate, read the prompts and the task's file.
Also a Study -> the same Study with overrides (`override_study`)."""

from __future__ import annotations

from pathlib import Path

import yaml

from ratiotune.core.study.errors import StudyError
from ratiotune.core.study.overrides import apply_overrides, resolve_paths
from ratiotune.core.study.prompts import read_prompts
from ratiotune.core.study.schema import Study
from ratiotune.core.study.task import task_problem
from ratiotune.core.study.validation import validate_study
from ratiotune.tasks import entry_file


def load_study(path: str | Path, overrides: list[str] | tuple[str, ...] = (), *, require_prompts: bool = True) -> Study:
    """Read, override (`dotted.key=value`) and validate a study file; read its prompt records (and a .py task entry).

    Relative paths in the file are resolved against the file's folder, relative paths in
    `--set` values against the current directory. A prompt file that cannot be read is an
    error unless `require_prompts` is False (readers of an experiment folder, which only need
    the schema).

    A study travels: every path is made absolute and the prompt records (and a task entry's
    .py file) are read into the Study, so a trial on any node, in Ray's per-trial working
    directory, uses those and never reads a file. A folder keeps a study as its YAML plus
    prompts/ and task/ (`study_files`).
    """
    path = Path(path)
    if not path.is_file():
        raise StudyError(f"study file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text("utf-8"))
    except yaml.YAMLError as exc:
        raise StudyError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise StudyError(f"{path}: a study is a YAML mapping (name:, model:, train:, ...); got {type(raw).__name__}")
    resolve_paths(raw, path.parent)
    apply_overrides(raw, overrides)
    study = validate_study(raw, source=str(path))
    if study.task.entry is not None:
        read_task_source(study, strict=require_prompts)
        problem = task_problem(study.task, study.search.metric, study.get_task())
        if problem:
            raise StudyError(f"{path}: {problem}")
    return read_prompts(study, strict=require_prompts)


def override_study(study: Study, overrides: list[str] | tuple[str, ...]) -> Study:
    """A Study with `--set`-style overrides applied and validated again, as load_study does for a file
    (a path an override sets is resolved against the current directory); no overrides: the same Study.

    Only the values the study set travel (exclude_unset): a default written out would count as set,
    and the race fits only the numbers a study leaves unset (Study.race_plan)."""
    if not overrides:
        return study
    raw = study.model_dump(mode="json", exclude_unset=True)
    apply_overrides(raw, overrides)
    return validate_study(raw, source=f"study {study.name!r} with overrides {list(overrides)}")


def read_task_source(study: Study, *, strict: bool = True) -> None:
    """Carry a "file.py:factory" entry's file text in the study (trials never read the file)."""
    file = entry_file(study.task.entry or "")
    if file is None or file in study._task_sources:
        return
    try:
        study._task_sources[file] = Path(file).read_text("utf-8")
    except OSError as exc:
        if strict:
            raise StudyError(
                f"task.entry: cannot read {file} ({exc.strerror or exc}; a study file's relative paths are resolved "
                "against its folder, --set values against the current directory)"
            ) from None
