"""Prompt sets as records: what a study's train/eval/test_prompts name, read into dicts.

A source is one of
- "builtin:<set>": a set the task ships (Task.builtin_prompts: name -> .txt or .jsonl file);
- a .txt file: one prompt per line -> {"prompt": line} (blank lines skipped, lines stripped);
- a .jsonl file: one JSON object (a record) per line;
- a folder written by datasets' `save_to_disk`: a Dataset, or a DatasetDict with the split
  named after "#" ("folder#validation").
Records must be JSON-serialisable: a folder keeps a study's non-builtin sets as JSON lines.
Pure Python (datasets is imported only for a saved folder).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

Record = dict[str, Any]


class RecordsError(ValueError):
    """A prompt source that cannot be read as records; the message says why (no field name)."""


def split_source(source: str) -> tuple[str, str | None]:
    """("folder", "validation") for "folder#validation"; (source, None) without a "#"."""
    path, sep, split = str(source).rpartition("#")
    return (path, split) if sep and path and split and "/" not in split else (str(source), None)


def load_records(source: str | Path, builtin: Mapping[str, Path] | None = None) -> list[Record]:
    """The records a source names (see the module docstring). Raises FileNotFoundError for a
    missing file or folder and RecordsError for one that cannot be read as records."""
    source = str(source)
    if source.startswith("builtin:"):
        builtin = builtin or {}
        if source not in builtin:
            raise RecordsError(f"unknown builtin prompt set {source!r}; this task has: {', '.join(builtin) or '(none)'}")
        return load_records(str(builtin[source]))
    location, split = split_source(source) if not Path(source).exists() else (source, None)  # a file may hold a "#"
    path = Path(location)
    if path.is_dir():
        return _saved_dataset(path, split)
    if split is not None and not path.exists():
        raise FileNotFoundError(f"prompt folder not found: {path}")
    if not path.is_file():
        raise FileNotFoundError(f"prompt file not found: {path}")
    if path.suffix == ".jsonl":
        records = []
        for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordsError(f"{path}:{number}: not JSON ({exc})") from None
            if not isinstance(record, dict):
                raise RecordsError(f"{path}:{number}: each line must be a JSON object (a record); got {type(record).__name__}")
            records.append(record)
        return records
    return [{"prompt": line.strip()} for line in path.read_text("utf-8").splitlines() if line.strip()]


def _saved_dataset(path: Path, split: str | None) -> list[Record]:
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except FileNotFoundError as exc:
        raise RecordsError(f"{path}: not a folder written by datasets' save_to_disk ({exc})") from None
    if isinstance(loaded, datasets.DatasetDict):
        if split is None:
            raise RecordsError(f"{path} holds a DatasetDict; name the split as {path}#SPLIT (splits: {', '.join(loaded)})")
        if split not in loaded:
            raise RecordsError(f"{path} has no split {split!r}; its splits: {', '.join(loaded)}")
        loaded = loaded[split]
    elif split is not None:
        raise RecordsError(f"{path} holds one Dataset, not a DatasetDict: it has no split {split!r} (drop '#{split}')")
    records = [dict(row) for row in loaded]
    for number, record in enumerate(records, start=1):
        try:
            json.dumps(record)
        except (TypeError, ValueError) as exc:
            raise RecordsError(f"{path}: record {number} is not JSON-serialisable ({exc}); keep text and numbers") from None
    return records


def missing_field(records: Sequence[Record], required: Sequence[str]) -> str | None:
    """Why the first record lacking a required field fails, or None when every record has them all."""
    for number, record in enumerate(records, start=1):
        for name in required:
            if name not in record:
                return (
                    f"record {number} has no {name!r} field (the task needs {', '.join(repr(r) for r in required)}; "
                    f"it has {', '.join(repr(k) for k in record) or 'no fields'})"
                )
    return None


def canonical(record: Mapping[str, Any]) -> str:
    """One string per record, equal for equal records (the overlap check compares these)."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False)


def is_plain_prompt(record: Mapping[str, Any]) -> bool:
    """A record a .txt line holds unchanged: only a non-blank, stripped, one-line "prompt"."""
    prompt = record.get("prompt")
    return (
        set(record) == {"prompt"}
        and isinstance(prompt, str)
        and bool(prompt)
        and prompt == prompt.strip()
        and "\n" not in prompt
        and "\r" not in prompt
    )
