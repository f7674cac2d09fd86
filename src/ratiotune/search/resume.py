"""Nothing lost: run a study so that an interruption can be resumed, resume it, bound its disk.

How each fault is covered:
- Ctrl-C / SIGTERM on the driver: Ray Tune's own SIGINT handler stops the trials and saves
  the experiment state; SIGTERM is turned into that same SIGINT. The command then exits
  EXIT_INTERRUPTED with a one-line `ratiotune resume <dir>` hint.
- SIGKILL of the driver: Ray rewrites the experiment state whenever a trial saves a
  checkpoint (num_to_keep is always set), so the last saved state names only checkpoints
  that exist; `resume` continues from it.
- A crashed trial: FailureConfig(max_failures) restarts it from its last checkpoint.
- Ray's memory monitor kills a trial's process as it starts (the machine ran low on memory): Tune's
  fit() raises; `memory_kills_named` turns that into one line with Ray's figures and the resume
  hint (exit 1) instead of a traceback.
- A study that ends writes FINISHED_FILE (plain JSON), so `resume` knows without unpickling.

`restore_tuner` is the only code in ratiotune that reads Ray's pickled state (tuner.pkl,
trainable.pkl): use `resume` only on experiment folders you trust.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
from pathlib import Path
from typing import Any

from ratiotune.core.experiment import STATUSES, Experiment, load_experiment
from ratiotune.core.storage import STAGING_PREFIX, is_uri
from ratiotune.core.study import Study

FINISHED_FILE = "finished.json"
EXIT_INTERRUPTED = 130  # the shell's code for "stopped by Ctrl-C"


class OutOfMemory(Exception):
    """Ray's memory monitor killed a trial's process and Tune's fit() gave up (it raises a RuntimeError,
    "Caught unexpected exception", when the process dies while it starts). The state is saved: resume."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@contextlib.contextmanager
def memory_kills_named():
    """Around tuner.fit(): Ray's out-of-memory kill becomes OutOfMemory with a one-line reason."""
    try:
        yield
    except RuntimeError as exc:
        reason = memory_kill_reason(exc)
        if reason is None:
            raise
        raise OutOfMemory(reason) from None


def memory_kill_reason(exc: BaseException) -> str | None:
    """The line a user needs when `exc` (or what caused it) is Ray's out-of-memory kill, else None."""
    seen: BaseException | None = exc
    while seen is not None:
        text = str(seen)
        if type(seen).__name__ == "OutOfMemoryError" or "running low on memory" in text:
            used = re.search(r"was ([\d.]+GB) used / ([\d.]+GB) limit", text)
            figures = f" ({used.group(1)} used of {used.group(2)})" if used else ""
            return f"Ray stopped a trial's process: this machine ran low on memory{figures}"
        seen = seen.__cause__ or seen.__context__
    return None


def out_of_memory_hint(reason: str, folder: Path | str) -> str:
    return (
        f"ratiotune: error: {reason}; the study is saved. Free memory (other processes) or run fewer trials at once "
        f"(search.max_concurrent_trials), then continue it with: ratiotune resume {folder}"
    )


def is_finished(experiment_dir: Path) -> bool:
    return (experiment_dir / FINISHED_FILE).is_file()


def fit_interruptibly(tuner: Any, study: Study, experiment_dir: Path | str) -> tuple[bool, Any]:
    """Run the tuner to the end or to an interruption: (every trial has ended, Ray's ResultGrid).

    Ray counts a study as done when all num_samples trials are terminated or errored;
    after Ray's SIGINT handling, fit() returns normally with the others still pending.
    """
    with sigterm_as_sigint(), memory_kills_named():
        grid = tuner.fit()
    ended = grid.num_terminated + grid.num_errors
    if ended < study.search.num_samples:
        return False, grid
    if is_uri(experiment_dir):
        return True, grid  # remote storage: Ray's own files only; pruning needs a local folder
    # Every trial has ended: a staging folder left now is one of a trial killed mid-save.
    for staging in Path(experiment_dir).glob(STAGING_PREFIX + "*"):
        shutil.rmtree(staging, ignore_errors=True)
    experiment = load_experiment(experiment_dir)
    freed = prune_checkpoints(experiment, study.checkpoint.keep_best_trials)
    statuses = [t.status(study.train.epochs) for t in experiment.trials]
    counts = {status: statuses.count(status) for status in STATUSES}
    (experiment_dir / FINISHED_FILE).write_text(json.dumps({"trials": counts, "checkpoint_bytes_freed": freed}, indent=2) + "\n")
    return True, grid


@contextlib.contextmanager
def sigterm_as_sigint():
    """Ray Tune only listens for SIGINT; a preempted node or `kill` sends SIGTERM."""
    previous = signal.signal(signal.SIGTERM, _sigterm_as_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _sigterm_as_sigint(signum: int, frame: Any) -> None:
    signal.raise_signal(signal.SIGINT)


def interrupted_hint(experiment_dir: Path) -> str:
    return f"ratiotune: interrupted; the study is saved. Continue it with: ratiotune resume {experiment_dir}"


def restore_tuner(study: Study, experiment_dir: Path, *, retry_errored: bool):
    """Tuner.restore with the trainable rebuilt from the experiment's own study.yaml.

    Unpickles Ray's experiment state: only for folders you trust. Errored trials are
    continued from their last checkpoint (retry_errored) or left as they are.
    """
    from ray import tune

    from ratiotune.core.study import StudyError
    from ratiotune.search.launch import make_trainable

    if not tune.Tuner.can_restore(str(experiment_dir)):
        raise StudyError(f"{experiment_dir}: no Ray experiment state to resume from (the study never started a trial?)")
    try:
        return tune.Tuner.restore(
            str(experiment_dir),
            trainable=make_trainable(study),
            resume_unfinished=True,
            resume_errored=retry_errored,
            restart_errored=False,
        )
    except ModuleNotFoundError as exc:
        # Ray's pickles name ratiotune's modules; the layout by layer (0.2) moved them all.
        if not (exc.name or "").startswith("ratiotune."):
            raise
        raise StudyError(
            f"{experiment_dir}: its Ray state was written by another ratiotune layout (it names {exc.name}, which this "
            "ratiotune lacks); resume it with the version in its provenance.json. `best`, `report` and `retrain` read it as is"
        ) from None


def prune_checkpoints(experiment: Experiment, keep_best_trials: int | None) -> int:
    """Delete the checkpoints of all but the best K trials; returns the bytes freed.

    Runs only when the study has ended: until then Ray's state may still need them.
    """
    if keep_best_trials is None:
        return 0
    keep = {t.name for t in experiment.ranked()[:keep_best_trials]}
    freed = 0
    for trial in experiment.trials:
        if trial.name in keep:
            continue
        for checkpoint in trial.directory.glob("checkpoint_*"):
            if checkpoint.is_dir():
                freed += sum(f.stat().st_size for f in checkpoint.rglob("*") if f.is_file())
                shutil.rmtree(checkpoint)
    return freed
