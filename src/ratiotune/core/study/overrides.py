"""`--set dotted.key=value` overrides, and the paths a study names made absolute."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ratiotune.core.study.errors import StudyError
from ratiotune.tasks import entry_file
from ratiotune.tasks.records import split_source


# (section, key) of every study value that may name a file or folder.
PATH_FIELDS = (
    ("model", "name"),
    ("task", "entry"),
    ("task", "train_prompts"),
    ("task", "eval_prompts"),
    ("task", "test_prompts"),
)


def resolve_paths(raw: dict[str, Any], base: Path) -> None:
    """Make every path in `raw` absolute against `base`, in place; builtin names and hub ids stay.

    A model name is a local folder when it starts with . / ~ or names a folder under `base`
    (else it is a hub id such as Qwen/Qwen2.5-0.5B).
    """
    for section, key in PATH_FIELDS:
        node = raw.get(section)
        value = node.get(key) if isinstance(node, dict) else None
        if not isinstance(value, str) or not value or value.startswith("builtin:"):
            continue
        if (section, key) == ("task", "entry"):
            file = entry_file(value)
            if file is not None:  # "path/to/file.py:factory"; a module entry stays as it is
                node[key] = os.path.normpath(base.resolve() / Path(file).expanduser()) + value[len(file) :]
            continue
        location, split = split_source(value) if section == "task" else (value, None)
        path = Path(location).expanduser()
        if section == "model" and not (value.startswith((".", "/", "~")) or (base / path).is_dir()):
            continue
        node[key] = os.path.normpath(base.resolve() / path) + (f"#{split}" if split else "")  # an absolute `path` replaces base


def apply_overrides(raw: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> None:
    """Apply `--set` overrides in order; a path they set is resolved against the current directory."""
    before = {field: _get(raw, field) for field in PATH_FIELDS}
    for override in overrides:
        apply_override(raw, override)
    changed: dict[str, Any] = {}
    for field in PATH_FIELDS:
        value = _get(raw, field)
        if value != before[field]:
            changed.setdefault(field[0], {})[field[1]] = value
    resolve_paths(changed, Path.cwd())
    for section, values in changed.items():
        raw[section].update(values)


def _get(raw: dict[str, Any], field: tuple[str, str]) -> Any:
    node = raw.get(field[0])
    return node.get(field[1]) if isinstance(node, dict) else None


def apply_override(raw: dict[str, Any], override: str) -> None:
    """`search.num_samples=4` sets raw['search']['num_samples'] = 4 (the value parsed as YAML)."""
    key, sep, text = override.partition("=")
    if not sep or not key:
        raise StudyError(f"--set {override!r}: expected dotted.key=value, e.g. train.epochs=2")
    try:
        value = yaml.safe_load(text) if text else ""
    except yaml.YAMLError as exc:
        raise StudyError(f"--set {override!r}: value is not valid YAML: {exc}") from None
    node = raw
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise StudyError(f"--set {override!r}: {part!r} is a value, not a section")
        node = child
    node[parts[-1]] = value
