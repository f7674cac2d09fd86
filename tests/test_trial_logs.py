"""A trial restarted from a checkpoint keeps the rows this driver logged (trial_logs.py says why)."""

import csv
import json
from pathlib import Path

import pyarrow.fs
import pytest
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

from ratiotune.search.trial_logs import KeepingCSVLogger, KeepingJsonLogger


class StagedTrial:
    """What Ray's loggers read of a trial: the driver's staging folder and the experiment's folder."""

    def __init__(self, root: Path, staging: str = "driver_artifacts"):
        self.config = {"learning_rate": 1e-3}
        self.local_path = str(root / staging / "trial_0")
        self.init_local_path()  # Ray makes it before any logger runs
        self.storage = type(
            "Storage",
            (),
            {
                "trial_fs_path": str(root / "experiment" / "trial_0"),
                "storage_filesystem": pyarrow.fs.LocalFileSystem(),
            },
        )()
        self.checkpoint = None  # no checkpoint: a fresh start, nothing to restore

    def init_local_path(self):
        Path(self.local_path).mkdir(parents=True, exist_ok=True)

    def sync_to_experiment(self):
        """What Ray's periodic sync does: copy the staging folder to the experiment folder."""
        target = Path(self.storage.trial_fs_path)
        target.mkdir(parents=True, exist_ok=True)
        for file in Path(self.local_path).iterdir():
            (target / file.name).write_bytes(file.read_bytes())


def epochs_logged(logger, trial: StagedTrial) -> list[int]:
    """Epochs 1-2 synced, epochs 3-4 not yet; then the trial restarts from a checkpoint."""
    for epoch in (1, 2):
        logger.log_trial_result(epoch, trial, {"epoch": epoch, "config": trial.config})
    trial.sync_to_experiment()
    for epoch in (3, 4):
        logger.log_trial_result(epoch, trial, {"epoch": epoch, "config": trial.config})
    logger.log_trial_end(trial)
    trial.checkpoint = "checkpoint_000004"  # a PBT exploit or a retry after a crash
    logger.log_trial_start(trial)
    logger.log_trial_result(5, trial, {"epoch": 5, "config": trial.config})
    logger.log_trial_end(trial)
    staged = Path(trial.local_path)
    if (staged / "result.json").is_file():
        return [json.loads(line)["epoch"] for line in (staged / "result.json").read_text().splitlines()]
    return [int(row["epoch"]) for row in csv.DictReader((staged / "progress.csv").open())]


@pytest.mark.parametrize("ray_logger, ours", [(JsonLoggerCallback, KeepingJsonLogger), (CSVLoggerCallback, KeepingCSVLogger)])
def test_a_restarted_trial_keeps_the_rows_logged_since_the_last_sync(tmp_path, ray_logger, ours):
    # Ray's own logger copies the stale experiment copy over the staging file: epochs 3-4 are gone.
    assert epochs_logged(ray_logger(), StagedTrial(tmp_path / "ray")) == [1, 2, 5]
    assert epochs_logged(ours(), StagedTrial(tmp_path / "ours")) == [1, 2, 3, 4, 5]


def test_a_new_driver_still_continues_the_experiments_file(tmp_path):
    """`resume`: the staging folder of a new driver is empty, so the file comes from the experiment."""
    first = StagedTrial(tmp_path)
    logger = KeepingJsonLogger()
    for epoch in (1, 2):
        logger.log_trial_result(epoch, first, {"epoch": epoch})
    logger.log_trial_end(first)
    first.sync_to_experiment()

    resumed = StagedTrial(tmp_path, staging="new_driver_artifacts")
    resumed.checkpoint = "checkpoint_000002"
    logger = KeepingJsonLogger()
    logger.log_trial_start(resumed)
    logger.log_trial_result(3, resumed, {"epoch": 3})
    logger.log_trial_end(resumed)
    lines = (Path(resumed.local_path) / "result.json").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2, 3]
