"""Experiment folder -> plain records and tables.

Reads only JSON/CSV written by Ray (params.json, result.json, error.txt, the plain
fields of experiment_state-*.json) and our own
study.yaml / meta.json; never unpickles anything from the folder, so it is safe
on folders you did not write.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ratiotune.core.objective import OBJECTIVE, trailing_mean
from ratiotune.core.study import Study, StudyError, load_study
from ratiotune.core.values import finite

STUDY_FILE = "study.yaml"

# Trial statuses, as the report shows them.
FINISHED = "finished"
STOPPED = "stopped early"  # by the scheduler (ASHA): fewer epochs, no error
ERRORED = "errored"
INFEASIBLE = "infeasible"
UNFINISHED = "unfinished"  # still running, or the study was interrupted (resume continues it)
# The task's reward or measure failed on real answers (tasks.TaskError): a bug to fix, not retried.
TASK_ERROR = "task error"
STATUSES = (FINISHED, STOPPED, ERRORED, INFEASIBLE, TASK_ERROR, UNFINISHED)
# The result key a trial reports its task error under (its value: the one-line message).
TASK_ERROR_KEY = "task_error"


@dataclass
class TrialResult:
    name: str
    directory: Path
    config: dict[str, Any]
    rows: list[dict[str, Any]]
    error: str | None = None
    checkpoints: list[Path] = field(default_factory=list)
    # Ray's own status from experiment_state-*.json (TERMINATED, ERROR, RUNNING, PENDING, PAUSED), if any.
    ray_status: str | None = None
    # The study's search.max_failures: Ray restarts a trial that many times, then gives up.
    max_failures: int | None = None

    @property
    def failures(self) -> int:
        """Failures Ray recorded for this trial (error.txt holds one "Failure # N" entry each)."""
        return len(re.findall(r"^Failure # \d+", self.error or "", flags=re.MULTILINE))

    @property
    def epochs(self) -> int:
        return max((int(row.get("epoch", 0)) for row in self.rows), default=0)

    def values(self, metric: str) -> list[float]:
        return [float(row[metric]) for row in self.rows if finite(row.get(metric))]

    def score(self, metric: str, window: int) -> float | None:
        """The objective: `metric`'s mean over the trial's last `window` reported epochs (objective.py).

        Computed from the rows, so it means the same for experiments made before the
        trainable reported it, and for any metric `report --metric` ranks by.
        """
        values = self.values(metric)
        return trailing_mean(values, window) if values else None

    def best(self, metric: str, mode: str) -> float | None:
        values = self.values(metric)
        if not values:
            return None
        return max(values) if mode == "max" else min(values)

    def best_checkpoint(self, metric: str, mode: str) -> Path | None:
        """The kept checkpoint with the best objective (from its meta.json; `metric` for
        checkpoints written before the objective was reported)."""
        scored = []
        for path in self.checkpoints:
            metrics = checkpoint_meta(path).get("metrics", {})
            value = metrics.get(OBJECTIVE, metrics.get(metric))
            if finite(value):
                scored.append((float(value), path))
        if not scored:
            return None
        pick = max if mode == "max" else min
        return pick(scored, key=lambda item: item[0])[1]

    def best_epoch(self, metric: str, mode: str) -> int | None:
        scored = [(float(row[metric]), int(row.get("epoch", 0))) for row in self.rows if finite(row.get(metric))]
        if not scored:
            return None
        pick = max if mode == "max" else min
        return pick(scored, key=lambda item: item[0])[1]

    def latest_checkpoint(self) -> Path | None:
        return max(self.checkpoints, key=lambda p: checkpoint_meta(p).get("epoch", -1), default=None)

    @property
    def task_error(self) -> str | None:
        """The task error that ended the trial (tasks.TaskError's message), else None."""
        for row in self.rows:
            if row.get(TASK_ERROR_KEY):
                return str(row[TASK_ERROR_KEY])
        return None

    @property
    def infeasible_reason(self) -> str | None:
        """Why the trial was stopped as infeasible (a row with `infeasible: 1`), else None."""
        for row in self.rows:
            if row.get("infeasible") in (1, True):
                reason = row.get("infeasible_reason")
                return str(reason) if reason else "reported infeasible"
        return None

    def status(self, target_epochs: int) -> str:
        """One of STATUSES. A trial that reached its epochs is finished even if an
        earlier attempt left an error.txt (Ray retried it); one Ray still lists as
        running/pending is unfinished (running now, or its driver was interrupted)."""
        if self.task_error is not None:
            return TASK_ERROR
        if self.infeasible_reason is not None:
            return INFEASIBLE
        if self.epochs >= target_epochs:
            return FINISHED
        # Ray gave up on it. Checked before Ray's status: the state file Ray writes as the study
        # ends can still list a trial that failed its last try at the very end as RUNNING.
        # (A trial `resume` retries reads errored until it reaches its epochs.)
        if self.max_failures is not None and self.failures > self.max_failures:
            return ERRORED
        if self.ray_status in ("RUNNING", "PENDING", "PAUSED"):
            return UNFINISHED
        if self.error is not None or self.ray_status == "ERROR":
            return ERRORED
        return STOPPED

    @property
    def wall_seconds(self) -> float:
        """Training wall time: Ray's cumulative time_total_s (survives restores)."""
        times = [float(row["time_total_s"]) for row in self.rows if finite(row.get("time_total_s"))]
        return max(times, default=0.0)


@dataclass
class Experiment:
    directory: Path
    study: Study
    trials: list[TrialResult]

    def ranked(self, metric: str | None = None, mode: str | None = None) -> list[TrialResult]:
        """Trials that reported `metric`, best first by their objective (the trailing mean of
        `metric` at their last epoch: what Optuna and ASHA saw). Diverged (infeasible) trials
        are left out: their early scores came from a config that does not train."""
        metric = metric or self.study.search.metric
        mode = mode or self.study.search.mode
        window = self.study.search.objective_window
        scored = [t for t in self.trials if t.infeasible_reason is None and t.score(metric, window) is not None]
        return sorted(scored, key=lambda t: t.score(metric, window), reverse=mode == "max")


# --------------------------------------------------------------------------- tidy tables


def metric_direction(study: Study, metric: str) -> str:
    """Which way `metric` ranks: the study's mode for its own metric and the objective, else the
    metric's own direction (system/epoch_seconds: min), "max" for descriptive ones."""
    if metric in (study.search.metric, OBJECTIVE):
        return study.search.mode
    return study.metrics().better(metric) or "max"


def metric_names(experiment: Experiment) -> list[str]:
    """Namespaced metrics (train/..., eval/..., system/...) that some trial reported, in a stable order."""
    seen = {
        key for trial in experiment.trials for row in trial.rows for key, value in row.items() if "/" in key and finite(value)
    }
    known = [name for name in experiment.study.metrics().reported if name in seen]
    return known + sorted(seen - set(known))


def trial_table(experiment: Experiment, metric: str | None = None, mode: str | None = None) -> list[dict[str, Any]]:
    """One row per trial: searched params, status, epochs, best and final value of each metric,
    wall seconds and the best checkpoint. Best first by `metric`; trials without it last."""
    study = experiment.study
    metric = metric or study.search.metric
    mode = mode or study.search.mode
    searched = study.searched()
    metrics = metric_names(experiment)
    ranked = experiment.ranked(metric, mode)
    order = ranked + [t for t in experiment.trials if t not in ranked]
    table = []
    table_of = study.metrics()
    for trial in order:
        row: dict[str, Any] = {"trial": trial.name, "status": trial.status(study.train.epochs)}
        row.update({name: trial.config.get(name) for name in searched})
        row["epochs"] = trial.epochs
        row["objective"] = trial.score(metric, study.search.objective_window)
        row["best_epoch"] = trial.best_epoch(metric, mode)
        for name in metrics:
            values = trial.values(name)
            direction = mode if name in (metric, OBJECTIVE) else table_of.better(name)
            if direction is not None:
                row[f"best {name}"] = trial.best(name, direction)
            row[f"final {name}"] = values[-1] if values else None
        row["wall_seconds"] = round(trial.wall_seconds, 2)
        checkpoint = trial.best_checkpoint(metric, mode) or trial.latest_checkpoint()
        row["checkpoint"] = str(checkpoint) if checkpoint else ""
        row["note"] = trial.infeasible_reason or error_summary(trial.error) or ""
        table.append(row)
    return table


def curve_table(experiment: Experiment) -> list[dict[str, Any]]:
    """Long format: one row per trial per reported epoch, with every metric."""
    metrics = metric_names(experiment)
    table = []
    for trial in experiment.trials:
        for row in trial.rows:
            if not finite(row.get("epoch")):
                continue
            record: dict[str, Any] = {"trial": trial.name, "epoch": int(row["epoch"])}
            record.update({name: row.get(name) if finite(row.get(name)) else None for name in metrics})
            record["time_total_s"] = row.get("time_total_s")
            table.append(record)
    return table


def error_summary(text: str | None) -> str | None:
    """The last non-blank line of a traceback (the exception), which is what a reader wants."""
    if not text:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else None


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
        raise StudyError(
            f"{directory}: not a ratiotune experiment (no {STUDY_FILE}; expected a folder made by `ratiotune search`)"
        )
    # The schema only (no file or model checks): a copied or moved folder reads anywhere. Its
    # prompt paths resolve against the folder (prompts/), whose texts are read if present.
    study = load_study(directory / STUDY_FILE, require_prompts=False)
    loaded = [load_trial(d) for d in sorted(directory.iterdir()) if (d / "params.json").is_file()]
    trials = [t for t in loaded if t is not None]
    states = ray_trial_states(directory)
    for trial in trials:
        trial.ray_status = states.get(trial.name)
        trial.max_failures = study.search.max_failures
    return Experiment(directory, study, trials)


def ray_trial_states(directory: Path) -> dict[str, str]:
    """Trial folder name -> Ray's trial status, from the newest experiment_state-*.json.

    Only the plain JSON fields are read; the hex-encoded pickles Ray stores next to
    them are never decoded. Empty when Ray has not written the file (yet).
    """
    files = sorted(directory.glob("experiment_state-*.json"))
    if not files:
        return {}
    try:
        state = json.loads(files[-1].read_text())
    except (OSError, ValueError):
        return {}
    statuses = {}
    for entry in state.get("trial_data", []):
        try:
            trial = json.loads(entry[0])
        except (TypeError, ValueError, IndexError):
            continue
        if isinstance(trial, dict) and isinstance(trial.get("status"), str):
            statuses[str(trial.get("relative_logdir") or trial.get("trial_id"))] = trial["status"]
    return statuses


def load_trial(directory: Path) -> TrialResult | None:
    """A trial folder as Ray wrote it; None for one that holds nothing yet (a driver killed while
    Ray was writing its params.json, before it reported: the resumed run trains it again)."""
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
    try:
        config = json.loads((directory / "params.json").read_text())
    except ValueError:
        # Cut short by a kill; every row Ray logged carries the config too.
        config = next((r["config"] for r in reversed(rows.values()) if isinstance(r.get("config"), dict)), None)
        if config is None:
            return None
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
