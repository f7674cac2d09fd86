"""Train a list of fixed configs on given seeds as one Ray Tune run (the race's stages, `retrain`'s runs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ratiotune.core.experiment import checkpoint_meta
from ratiotune.core.study import SEED_KEY, Study, StudyError, write_study

RUN_KEY = "run"  # the run's index into `runs`: how each trial finds its own values
# Written when every run of the stage has ended: a later resume reads the stage as it is and never
# restores it (which would retrain its errored runs). The name predates retrain's use of it.
ENDED_FILE = "round.json"


def run_seed_grid(
    study: Study,
    folder: Path,
    runs: list[dict[str, Any]],
    configs: dict[Any, dict[str, Any]],
    key: str,
    *,
    prefix: str,
    labels: dict[Any, str] | None = None,
    reuse_actors: bool = False,
):
    """Train every run as one Ray Tune trial under `folder` (unless it has ended before: ENDED_FILE).

    runs: each run's own trial-config values (`key`: which config; SEED_KEY; the test pairs, a start
    checkpoint, ...); configs: each `key` value's searched values, which fill the trial's config too, so
    params.json shows the whole config. prefix: names each trial's folder, PREFIX<key value>_seed<seed>
    (c1_seed3, rank2_seed5); labels: how the progress lines name each `key` value. The folder is
    itself an experiment (study.yaml + Ray trial folders) that core/experiment.py reads like a search;
    an interrupted one is restored, its finished runs kept, the rest continued from their checkpoints.
    Raises StageInterrupted when Ray stopped the run (Ctrl-C, SIGTERM) before every trial ended, and
    StudyError when a trial ran with a config other than the one planned for it. Ray must be initialised.
    """
    if (folder / ENDED_FILE).is_file():
        drop_training_state(folder)  # a kill may have come between the two steps below
        return
    from ray import tune

    from ratiotune.search.launch import make_trainable

    trainable = make_trainable(study)
    space = param_space(runs, configs, key)
    if tune.Tuner.can_restore(str(folder)):
        # The space holds functions: Ray saved placeholders for them ("__fn_ph", hash) and resolves
        # them again only from the space handed back here. Without it the restored trials would
        # train on the placeholders themselves (the race's kill-and-resume bug of issue 39).
        tuner = tune.Tuner.restore(
            str(folder), trainable=trainable, param_space=space, resume_unfinished=True, resume_errored=True
        )
    else:
        folder.mkdir(parents=True, exist_ok=True)
        write_study(folder, study)  # study.yaml and the prompt texts: the runs read like an experiment
        tuner = new_tuner(trainable, study, folder, runs, key, space, prefix=prefix, labels=labels, reuse_actors=reuse_actors)
    from ratiotune.search.resume import memory_kills_named

    with memory_kills_named():  # resume.OutOfMemory: the caller names the folder to resume
        grid = tuner.fit()
    if grid.num_terminated + grid.num_errors < len(grid):
        raise StageInterrupted(folder)
    check_configs(folder, grid, planned_configs(runs, configs, key))
    (folder / ENDED_FILE).write_text(json.dumps({"runs": len(grid)}) + "\n")
    drop_training_state(folder)


def drop_training_state(folder: Path) -> int:
    """Delete what only continuing a run needs (AdamW moments, comlrl's trainer state) from the
    checkpoints of a stage that has ended; the final agents stay. Returns the bytes freed.

    Only after ENDED_FILE: from then on no resume restores these runs, and nothing else reads that
    state (the race and `best` read the agents; retrain copies the winner's agents). It is two thirds
    of a checkpoint (a 135M-parameter model: 2.2 of 3.2 GB a run). meta.json's file list, by which a
    checkpoint counts as complete (core/experiment.checkpoint_is_complete), is rewritten first, so a
    kill in between leaves a complete checkpoint with files to spare, never one that lists a missing file.
    """
    freed = 0
    for checkpoint in folder.glob("*/checkpoint_*"):
        meta_path = checkpoint / "meta.json"
        meta = checkpoint_meta(checkpoint)
        listed = meta.get("files", {})
        kept = {name: size for name, size in listed.items() if not is_training_state(name)}
        if kept != listed:
            staged = meta_path.with_suffix(".json.tmp")
            staged.write_text(json.dumps({**meta, "files": kept}, indent=2))
            staged.replace(meta_path)
        for part in [*checkpoint.glob("optimizer_*.pt"), checkpoint / "trainer_state"]:
            if part.is_file():
                freed += part.stat().st_size
                part.unlink()
            elif part.is_dir():
                freed += sum(f.stat().st_size for f in part.rglob("*") if f.is_file())
                shutil.rmtree(part)
    return freed


def is_training_state(name: str) -> bool:
    """A checkpoint file (relative name) that only continuing the run reads: see drop_training_state."""
    first = Path(name).parts[0]
    return first == "trainer_state" or (first.startswith("optimizer_") and first.endswith(".pt"))


def param_space(runs: list[dict[str, Any]], configs: dict[Any, dict[str, Any]], key: str) -> dict[str, Any]:
    """One grid point per run; every other value looked up from the run's index. Built the same way
    from the same arguments, so a restore hands Ray the space the run started with."""
    from ray import tune

    space: dict[str, Any] = {RUN_KEY: tune.grid_search(list(range(len(runs))))}
    for name in runs[0]:
        space[name] = tune.sample_from(lambda spec, name=name: runs[spec.config[RUN_KEY]][name])
    for name in configs[runs[0][key]]:
        space[name] = tune.sample_from(lambda spec, name=name: configs[runs[spec.config[RUN_KEY]][key]][name])
    return space


def planned_configs(runs: list[dict[str, Any]], configs: dict[Any, dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Each run's whole trial config, as the space resolves it."""
    return [{RUN_KEY: i, **run, **configs[run[key]]} for i, run in enumerate(runs)]


def check_configs(folder: Path, grid, planned: list[dict[str, Any]]) -> None:
    """Every trial ran with the config planned for it; else a StudyError naming the stage and the values."""
    for result in grid:
        config = result.config or {}
        index = config.get(RUN_KEY)
        expected = planned[index] if isinstance(index, int) and 0 <= index < len(planned) else None
        if expected is None or any(config.get(name) != value for name, value in expected.items()):
            got = {name: config.get(name) for name in (expected or config)}
            raise StudyError(
                f"{folder.name}: a run has the config {got}, not one this stage planned "
                f"({len(planned)} runs); it is not used. Delete {folder} to run the stage again"
            )


def new_tuner(trainable, study: Study, folder: Path, runs, key: str, space, *, prefix: str, labels, reuse_actors: bool):
    from ray import tune

    from ratiotune.search.launch import seed_runs_config

    return tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune.TuneConfig(
            max_concurrent_trials=study.search.max_concurrent_trials,
            # The race reuses the worker process from run to run: saves a Python + torch start (~5 s) each.
            reuse_actors=reuse_actors,
            # From `runs`: the sample_from values are not resolved yet when Ray names the folder.
            trial_dirname_creator=lambda t: "{}{}_seed{}".format(
                prefix, runs[t.config[RUN_KEY]][key], runs[t.config[RUN_KEY]][SEED_KEY]
            ),
        ),
        run_config=seed_runs_config(
            study, folder.name, str(folder.parent), [key, SEED_KEY], len(runs), {key: labels} if labels else None
        ),
    )


class StageInterrupted(Exception):
    """A stage was stopped (Ctrl-C, SIGTERM) and saved; `ratiotune resume` continues it."""

    def __init__(self, folder: Path):
        super().__init__(str(folder))
        self.folder = folder
