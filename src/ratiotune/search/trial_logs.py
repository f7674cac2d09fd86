"""Ray's per-trial result.json and progress.csv loggers, minus a way they lose rows.

Ray's JsonLoggerCallback and CSVLoggerCallback write a trial's rows into the driver's staging
folder, which Ray copies to the experiment folder now and then. Each time a trial starts again
from a checkpoint (a PBT exploit, a retry after its process died) they first copy the
experiment folder's file back over the staging one ("resume the file from remote storage").
That copy is as old as the last sync, so every row since then is lost: a PBT trial in CI kept
only its epochs 5-6 (Ray 2.60), and `report`/`best` would read what is left.

The copy back is needed only when this driver has not written the file yet (`resume` starts a
new driver with an empty staging folder); these loggers skip it otherwise. Passing them in
RunConfig.callbacks replaces Ray's defaults (Ray adds its own only when none of the kind is there).
"""

from __future__ import annotations

from pathlib import Path

from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback


def _written_here(file_name: str, trial) -> bool:
    local = Path(trial.local_path, file_name)
    return local.is_file() and local.stat().st_size > 0


class KeepingJsonLogger(JsonLoggerCallback):
    def _restore_from_remote(self, file_name: str, trial) -> None:
        if not _written_here(file_name, trial):
            super()._restore_from_remote(file_name, trial)


class KeepingCSVLogger(CSVLoggerCallback):
    def _restore_from_remote(self, file_name: str, trial) -> None:
        if not _written_here(file_name, trial):
            super()._restore_from_remote(file_name, trial)


def trial_loggers() -> list:
    """The loggers every Tuner of ratiotune passes (TensorBoard's is still added by Ray)."""
    return [KeepingJsonLogger(), KeepingCSVLogger()]
