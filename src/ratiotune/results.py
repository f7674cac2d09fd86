"""Experiment folder -> plain records and tables.

Reads only JSON/CSV written by Ray (params.json, result.json, error.txt) and our own
study.yaml / meta.json; never unpickles anything from the folder, so it is safe
on folders you did not write.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ratiotune.study import Study, StudyError, validate_study

STUDY_FILE = "study.yaml"


@dataclass
class TrialResult:
    name: str
    directory: Path
    config: dict[str, Any]
    rows: list[dict[str, Any]]
    error: str | None = None
    checkpoints: list[Path] = field(default_factory=list)

    @property
    def infeasible_reason(self) -> str | None:
        """Why the trial was stopped as diverged (its last row says), or None."""
        last = self.rows[-1] if self.rows else {}
        return str(last.get("infeasible_reason", "diverged")) if last.get("infeasible") == 1 else None

    @property
    def status(self) -> str:
        if self.error is not None:
            return "errored"
        if self.infeasible_reason is not None:
            return "infeasible"
        return "ok"

    @property
    def epochs(self) -> int:
        return max((int(row.get("epoch", 0)) for row in self.rows), default=0)

    def values(self, metric: str) -> list[float]:
        return [float(row[metric]) for row in self.rows if _is_number(row.get(metric))]

    def best(self, metric: str, mode: str) -> float | None:
        values = self.values(metric)
        if not values:
            return None
        return max(values) if mode == "max" else min(values)

    def best_checkpoint(self, metric: str, mode: str) -> Path | None:
        """The kept checkpoint with the best metric (from its meta.json)."""
        scored = []
        for path in self.checkpoints:
            value = checkpoint_meta(path).get("metrics", {}).get(metric)
            if _is_number(value):
                scored.append((float(value), path))
        if not scored:
            return None
        pick = max if mode == "max" else min
        return pick(scored, key=lambda item: item[0])[1]

    def latest_checkpoint(self) -> Path | None:
        return max(self.checkpoints, key=lambda p: checkpoint_meta(p).get("epoch", -1), default=None)


@dataclass
class Experiment:
    directory: Path
    study: Study
    trials: list[TrialResult]

    def ranked(self, metric: str | None = None, mode: str | None = None) -> list[TrialResult]:
        """Trials that reported `metric`, best first. Diverged (infeasible) trials are left out:
        their early scores came from a config that does not train."""
        metric = metric or self.study.search.metric
        mode = mode or self.study.search.mode
        scored = [t for t in self.trials if t.infeasible_reason is None and t.best(metric, mode) is not None]
        return sorted(scored, key=lambda t: t.best(metric, mode), reverse=mode == "max")


def checkpoint_meta(path: Path) -> dict[str, Any]:
    try:
        return json.loads((path / "meta.json").read_text())
    except (OSError, ValueError):
        return {}


def checkpoint_is_complete(path: Path) -> bool:
    """Every file meta.json lists exists with its recorded size.

    meta.json is written last, but Ray copies a checkpoint into the trial folder file
    by file in no set order, so a killed copy may leave any subset: the list decides.
    Checkpoints from before the list was kept count as complete.
    """
    meta = checkpoint_meta(path)
    if not meta:
        return False
    for name, size in meta.get("files", {}).items():
        file = path / name
        if not file.is_file() or file.stat().st_size != size:
            return False
    return True


def is_experiment(path: Path) -> bool:
    return (path / STUDY_FILE).is_file()


def load_experiment(path: str | Path) -> Experiment:
    directory = Path(path)
    if not directory.is_dir():
        raise StudyError(f"{directory}: no such experiment folder")
    if not is_experiment(directory):
        raise StudyError(f"{directory}: not a ratiotune experiment (no {STUDY_FILE}; expected a folder made by `ratiotune search`)")
    study = validate_study(yaml.safe_load((directory / STUDY_FILE).read_text()), source=str(directory / STUDY_FILE))
    trials = [load_trial(d) for d in sorted(directory.iterdir()) if (d / "params.json").is_file()]
    return Experiment(directory, study, trials)


def load_trial(directory: Path) -> TrialResult:
    config = json.loads((directory / "params.json").read_text())
    rows: dict[Any, dict[str, Any]] = {}
    result_file = directory / "result.json"
    if result_file.is_file():
        for line in result_file.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line cut short by a killed driver
            # A trial resumed from an older checkpoint than its last logged epoch logs those
            # epochs again: the later row is the one the finished trial stands on.
            rows[row.get("epoch", len(rows))] = row
    error_file = directory / "error.txt"
    checkpoints = sorted(p for p in directory.glob("checkpoint_*") if p.is_dir() and checkpoint_is_complete(p))
    return TrialResult(
        name=directory.name,
        directory=directory,
        config=config,
        rows=list(rows.values()),
        error=error_file.read_text() if error_file.is_file() else None,
        checkpoints=checkpoints,
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
