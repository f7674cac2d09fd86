"""What a folder keeps of a study: its YAML, its prompt records under prompts/ and a task entry's file under task/."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ratiotune.core.study.prompt_sets import PROMPT_SPLITS
from ratiotune.core.study.schema import Study
from ratiotune.tasks import entry_file
from ratiotune.tasks.records import is_plain_prompt

# Where a folder (experiment, retrain runs, final/, a train run) keeps the study's prompt records.
PROMPTS_DIR = "prompts"
# Where a folder keeps a task entry's .py file ("task/my_task.py:make_task").
TASK_DIR = "task"


def study_files(study: Study, filename: str = "study.yaml") -> dict[str, str]:
    """What a folder keeps of a study, relative name -> text: FILENAME, the prompt records under
    prompts/ and a task entry's .py file under task/, with FILENAME pointing at them relative to
    the folder (load_study resolves them there).

    So a copied or moved folder carries its own prompts and task, and a later edit of the
    original files does not change what the study trained on. Builtin prompt sets stay names;
    sets of plain one-line prompts are written one per line (.txt), others as JSON lines.
    """
    raw = study.model_dump(mode="json", exclude_none=True)
    files: dict[str, str] = {}
    for split in PROMPT_SPLITS:
        if raw["task"][f"{split}_prompts"].startswith("builtin:"):
            continue
        records = study.prompts(split)
        if all(is_plain_prompt(r) for r in records):
            name, text = f"{PROMPTS_DIR}/{split}.txt", "".join(r["prompt"] + "\n" for r in records)
        else:
            name, text = f"{PROMPTS_DIR}/{split}.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        files[name] = text
        raw["task"][f"{split}_prompts"] = name
    file = entry_file(study.task.entry or "")
    if file is not None:
        source = study._task_sources.get(file)
        if source is None:
            source = Path(file).read_text("utf-8")
        name = f"{TASK_DIR}/{Path(file).name}"
        files[name] = source
        raw["task"]["entry"] = name + study.task.entry[len(file) :]
    return {filename: yaml.safe_dump(raw, sort_keys=False), **files}


def write_study(folder: Path, study: Study, filename: str = "study.yaml") -> Path:
    """Write `study_files` into a local folder (created if needed); returns the study file's path."""
    for name, text in study_files(study, filename).items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return folder / filename
