"""The study's prompt sets: read into the study once, checked for the task's fields and for overlap."""

from __future__ import annotations

from ratiotune.core.study.errors import StudyError
from ratiotune.core.study.prompt_sets import PROMPT_SPLITS
from ratiotune.core.study.schema import Study
from ratiotune.tasks.records import canonical, load_records, missing_field, split_source


def read_prompts(study: Study, *, strict: bool = True) -> Study:
    """Read every prompt set the study names into the study (once per source); returns it.

    strict: a source that is missing, unreadable or empty, or a record that lacks a field the
    task needs, is a StudyError naming the field; otherwise it is skipped (a reader of an
    experiment folder needs no prompts).
    """
    task = study.get_task() if strict else None
    for split in PROMPT_SPLITS:
        field = f"task.{split}_prompts"
        source = getattr(study.task, f"{split}_prompts")
        if source.startswith("builtin:") or source in study._records:
            records = study.prompts(split) if strict else None
        else:
            try:
                records = load_records(source)
            except FileNotFoundError:
                if not strict:
                    continue
                raise StudyError(
                    f"{field}: prompt file not found: {split_source(source)[0]} (a study file's relative paths are resolved "
                    f"against its folder, --set values against the current directory; or use one of the task's "
                    f"{', '.join((task or study.get_task()).builtin_prompts) or 'builtin sets'})"
                ) from None
            except (OSError, ValueError) as exc:  # RecordsError, a bad encoding
                if not strict:
                    continue
                raise StudyError(f"{field}: cannot read {source}: {exc}") from None
        if records is not None and not records:
            if not strict:
                continue
            raise StudyError(f"{field}: {source} holds no prompts (one per line in .txt, one JSON object per line in .jsonl)")
        if task is not None:
            problem = missing_field(records, task.required_fields)
            if problem:
                raise StudyError(f"{field}: {source}: {problem}")
        if records is not None and not source.startswith("builtin:"):
            study._records[source] = records
    if strict:
        check_prompt_overlap(study)
    return study


# What each split is for: a prompt in two of them measures nothing held out.
SPLIT_ROLES = {"train": "trained on", "eval": "selected on", "test": "reported on"}


def check_prompt_overlap(study: Study) -> None:
    """Train, eval and test records must be disjoint: one line naming both sources and a shared record.

    A prompt trained on inflates the eval figure, and one selected on inflates the test figure:
    the honest figure would not be held out any more. Records compare as canonical JSON.
    """
    records = {split: study.prompts(split) for split in PROMPT_SPLITS}
    for i, first in enumerate(PROMPT_SPLITS):
        for second in PROMPT_SPLITS[i + 1 :]:
            seen = {canonical(r) for r in records[first]}
            shared = [r for r in records[second] if canonical(r) in seen]
            if shared:
                a, b = getattr(study.task, f"{first}_prompts"), getattr(study.task, f"{second}_prompts")
                example = shared[0]["prompt"] if set(shared[0]) == {"prompt"} else canonical(shared[0])
                raise StudyError(
                    f"task.{first}_prompts ({a}) and task.{second}_prompts ({b}) share {len(shared)} prompt(s), e.g. "
                    f"{example!r}: a prompt {SPLIT_ROLES[first]} cannot be {SPLIT_ROLES[second]}; use disjoint prompt sets"
                )
