"""What a run prints on the terminal: a header, one line per trial event, and nothing of Ray's.

A study's terminal output is for a person watching it: what is about to run (the header),
each trial's start, its objective every few epochs and its end with the study's counts,
best objective so far and time left, then the result. Everything else Ray says goes to
EXPERIMENT/ray.log: its INFO and WARNING records, and the trial processes' own output stays in
Ray's session logs instead of being forwarded to the driver (`--verbose` puts both back on the
terminal). Ray Tune's status tables are off (RunConfig verbose=0); the lines come from Tune
callbacks (`SearchProgress`, `RunsProgress`), which Ray calls on the driver at every trial
event, so no terminal code here but `print`.

Measured on the smoke study: 1,330 lines before (277 repeated Ray warnings, 14 status tables,
19 tracebacks of a sync racing a checkpoint: see trainable.checkpoint_staging_dir).
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path
from typing import Any

from ray import tune

from ratiotune.core.experiment import TASK_ERROR_KEY
from ratiotune.core.hyperparameters import SCALE_CANCELS_FIGURE, config_text, held_values, space_text
from ratiotune.core.objective import OBJECTIVE
from ratiotune.core.study import LR_POINTS, Study
from ratiotune.core.values import finite

RAY_LOG = "ray.log"


# --------------------------------------------------------------------------- Ray's own log


def quiet_ray_logging(log_file: Path | None) -> dict[str, Any]:
    """Send Ray's (and Optuna's) log records to log_file; the keyword arguments ray.init then takes.

    None keeps them on the terminal (`--verbose`). Called before ray.init, which keeps the
    "ray" logger's handlers (configure_logging=True only sets their level and format).
    """
    import ray  # noqa: F401  (its import installs the "ray" logger's terminal handler)

    # Ray warns when it snapshots the experiment state more than once in 5 s. ratiotune asks for
    # that on purpose: num_to_keep is always set, so every checkpoint forces a snapshot and a
    # killed driver's state names only checkpoints that exist (resume.py). 0 turns the warning off.
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    # Ray's new output engine prints a configuration box and a TensorBoard hint per Tuner even at
    # verbose=0 (three per search with its race); the classic one prints nothing at verbose=0.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    if log_file is None:
        return {"logging_level": "WARNING", "log_to_driver": True}
    import optuna

    optuna.logging.disable_default_handler()  # "A new study created ..." and friends
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_file, encoding="utf-8")
    for name in ("ray", "optuna"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.addHandler(handler)
        logger.propagate = False
    logging.getLogger("optuna").setLevel(logging.INFO)
    # Python warnings from Ray and friends (DeprecationWarning and the like) go there too.
    logging.captureWarnings(True)
    logging.getLogger("py.warnings").handlers = [handler]
    logging.getLogger("py.warnings").propagate = False
    return {"logging_level": "INFO", "log_to_driver": False}


# --------------------------------------------------------------------------- header


def header(study: Study, source: str, experiment_dir: Any, log_file: Path | None) -> list[str]:
    """What is about to run: the study, its space, the compute plan, known ineffective values."""
    search = study.search
    lines = [
        f"study {study.name} ({source}): model {study.model.name}, {study.train.epochs} epochs per trial, "
        f"objective = mean {search.metric} over each trial's last {search.objective_window} epoch(s) ({search.mode})"
    ]
    if search.space:
        lines.append("space: " + "; ".join(visited_text(study, name) for name in study.searched()))
    else:
        lines.append("space: nothing searched (num_samples repeats of the train: config)")
    scheduler = search.scheduler
    stopping = {
        "asha": f"ASHA stops weak trials from epoch {min(scheduler.grace_period, study.train.epochs)}",
        "fifo": "every trial trains all its epochs",
        "pbt": f"PBT: every {scheduler.perturbation_interval} epochs the bottom trials copy the top ones",
    }[scheduler.type]
    at_once = "all" if scheduler.type == "pbt" else search.max_concurrent_trials or "as many as fit"
    resources = f"{study.resources.cpu:g} CPU" + (f" + {study.resources.gpu:g} GPU" if study.resources.gpu else "")
    lines.append(
        f"plan: {search.num_samples} trials ({search.sampler if scheduler.type != 'pbt' else 'random'} sampler; "
        f"{stopping}), {at_once} at a time, {resources} each"
        + (
            ""
            if study.race_skipped()
            else "; then a race of the best configs against the baseline on fresh seeds "
            "(its size is fitted to what the search spent)"
        )
    )
    lines += [f"note: {note}" for note in ineffective_notes(study)]
    where = f"experiment: {experiment_dir}"
    lines.append(where + (f"  (Ray's log: {log_file}; --verbose shows it here)" if log_file else ""))
    return lines


def visited_text(study: Study, name: str) -> str:
    """What the search visits of one listed value: the staged sampler's grid, a held value, or the space."""
    spec, held = study.search.space[name], held_values(study)
    if name in held:
        return f"{name} {held[name]:g} (held)"
    if name == "learning_rate" and study.search.sampler == "staged":
        points = study.search.lr_points or LR_POINTS
        return f"{name} {points}-point {'log ' if spec.type == 'loguniform' else ''}grid [{spec.low:g}, {spec.high:g}]"
    return f"{name} {space_text(spec)}"


def ineffective_notes(study: Study) -> list[str]:
    """Listed values the search holds because they change nothing (hyperparameters.held_values), one line each."""
    return [
        f"{name} held at {value:g}: it cancels under train.advantage_normalization: true (`ratiotune check` trains "
        f"one update at each end of its range: the weights differ by {SCALE_CANCELS_FIGURE}); every trial records "
        "it; with normalization off it is searched"
        for name, value in held_values(study).items()
    ]


# --------------------------------------------------------------------------- lines while it runs


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def trial_name(trial) -> str:
    """The trial's folder name (trial_<id>, c0_seed1, rank1_seed3): what the user finds on disk."""
    return Path(trial.path).name if getattr(trial, "path", None) else str(trial)


class SearchProgress(tune.Callback):
    """One line when a trial starts, every `every` epochs, and when it ends.

    Each epoch and end line carries the study's counts (done, running, stopped early), the best
    objective so far and the time left: the trial-epochs still to train at the rate of this run's
    epochs so far (an upper bound under ASHA, which stops some trials early).
    """

    def __init__(self, study: Study, every: int | None = None):
        self.epochs = study.train.epochs
        self.num_samples = study.search.num_samples
        self.mode = study.search.mode
        self.searched = study.searched()
        # About three lines per trial: a start, one or two epoch lines, an end.
        self.every = every or max(1, math.ceil(self.epochs / 3))
        self.pbt = study.search.scheduler.type == "pbt"
        self.reset()

    def reset(self) -> None:
        self.started_at: float | None = None
        self.started: set[str] = set()
        self.ended: dict[str, str] = {}  # trial -> "done" / "stopped" / "errored"
        self.epoch: dict[str, int] = {}
        self.epochs_here = 0  # trial-epochs reported by this driver (the rate's numerator)
        self.best: float | None = None

    def setup(self, **info):
        # Called when fit() starts (also after a resume restored this callback from tuner.pkl).
        self.reset()
        self.started_at = time.monotonic()

    def on_trial_start(self, iteration, trials, trial, **info):
        name = trial_name(trial)
        if name in self.started:
            if not self.pbt:  # PBT restarts every trial at every perturbation: not news
                self.line(f"{name} restarted from its latest checkpoint (epoch {self.epoch.get(name, 0)})")
            return
        self.started.add(name)
        self.line(f"{name} started ({len(self.started)} of {self.num_samples}): {config_text(trial.config, self.searched)}")

    def on_trial_result(self, iteration, trials, trial, result, **info):
        name = trial_name(trial)
        epoch = int(result.get("epoch", result.get("training_iteration", 0)))
        self.epoch[name] = epoch
        self.epochs_here += 1
        objective = result.get(OBJECTIVE)
        if isinstance(objective, (int, float)) and math.isfinite(objective):
            if self.best is None or (objective > self.best if self.mode == "max" else objective < self.best):
                self.best = objective
        # The final epoch (or the one a scheduler stops it at) is the end line's.
        if not result.get("done") and epoch % self.every == 0 and epoch < self.epochs:
            self.line(f"{name} epoch {epoch}/{self.epochs}: objective {number(objective)}", status=True)

    def on_trial_complete(self, iteration, trials, trial, **info):
        name = trial_name(trial)
        result = trial.last_result or {}
        epoch = self.epoch.get(name, int(result.get("epoch", 0)))
        if result.get(TASK_ERROR_KEY):
            self.ended[name] = "task error"
            self.line(f"{name} task error at epoch {epoch} (not retried; the study stops): {result[TASK_ERROR_KEY]}", status=True)
            return
        if result.get("infeasible"):
            self.ended[name] = "errored"
            self.line(f"{name} diverged at epoch {epoch}: {result.get('infeasible_reason')}", status=True)
            return
        self.ended[name] = "done" if epoch >= self.epochs else "stopped"
        verb = "finished" if epoch >= self.epochs else "stopped early"
        self.line(f"{name} {verb} at epoch {epoch}: objective {number(result.get(OBJECTIVE))}", status=True)

    def on_trial_error(self, iteration, trials, trial, **info):
        name = trial_name(trial)
        self.ended[name] = "errored"
        self.line(f"{name} errored at epoch {self.epoch.get(name, 0)}: see {Path(trial.path) / 'error.txt'}", status=True)

    def line(self, text: str, status: bool = False) -> None:
        elapsed = time.monotonic() - (self.started_at or time.monotonic())
        if status:
            text += "  | " + self.status()
        print(f"[{clock(elapsed)}] {text}", flush=True)

    def status(self) -> str:
        ended = list(self.ended.values())
        running = len(self.started) - len(ended)
        parts = [f"{ended.count('done')} done", f"{running} running"]
        if ended.count("stopped"):
            parts.append(f"{ended.count('stopped')} stopped early")
        if ended.count("errored"):
            parts.append(f"{ended.count('errored')} errored/diverged")
        if ended.count("task error"):
            parts.append(f"{ended.count('task error')} task error")
        text = ", ".join(parts) + f" | best {number(self.best)}"
        left = self.seconds_left()
        return text + (f" | ~{clock(left)} left" if left is not None else "")

    def seconds_left(self) -> float | None:
        if not self.epochs_here or self.started_at is None:
            return None
        unstarted = max(0, self.num_samples - len(self.started)) * self.epochs
        running = sum(self.epochs - self.epoch.get(name, 0) for name in self.started if name not in self.ended)
        rate = (time.monotonic() - self.started_at) / self.epochs_here
        return (unstarted + running) * rate


class RunsProgress(tune.Callback):
    """Runs of fixed configs on fresh seeds (the race's rounds, `retrain`): one line per run that ends,
    named by the config keys in `columns` (e.g. contender and seed); `labels` names a key's values
    (the race: contender 0 -> "the baseline", 1 -> "challenger lr 0.00275, gens 8, tokens 32")."""

    def __init__(self, columns: list[str], total: int, labels: dict[str, dict[Any, str]] | None = None):
        self.columns = columns
        self.labels = labels or {}
        # Ray creates the runs one at a time, so its list grows while they start: count against the plan.
        self.total = total
        self.reset()

    def reset(self) -> None:
        self.started_at: float | None = None
        self.ended = 0

    def setup(self, **info):
        self.reset()
        self.started_at = time.monotonic()

    def on_trial_complete(self, iteration, trials, trial, **info):
        result = trial.last_result or {}
        self.ended += 1
        if result.get(TASK_ERROR_KEY):
            what = f"task error at epoch {result.get('epoch')} (not retried): {result[TASK_ERROR_KEY]}"
        elif result.get("infeasible"):
            what = f"diverged at epoch {result.get('epoch')}: {result.get('infeasible_reason')}"
        else:
            what = f"epoch {result.get('epoch')}, objective {number(result.get(OBJECTIVE))}"
        self.line(trial, what, trials)

    def on_trial_error(self, iteration, trials, trial, **info):
        self.ended += 1
        self.line(trial, f"errored: see {Path(trial.path) / 'error.txt'}", trials)

    def line(self, trial, text: str, trials) -> None:
        elapsed = time.monotonic() - (self.started_at or time.monotonic())
        left = ""
        total = max(self.total, len(trials))
        if 0 < self.ended < total:
            left = f", ~{clock(elapsed / self.ended * (total - self.ended))} left"
        run = ", ".join(
            self.labels[key].get(trial.config.get(key), f"{key} {trial.config.get(key)}")
            if key in self.labels
            else f"{key} {trial.config.get(key)}"
            for key in self.columns
        )
        print(f"[{clock(elapsed)}]   {run}: {text}  ({self.ended} of {total} runs done{left})", flush=True)


def number(value: Any) -> str:
    if finite(value):
        return f"{value:.3f}"
    return "n/a"
