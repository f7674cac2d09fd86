"""Train a list of fixed configs on given seeds as one Ray Tune run (the race's stages, `retrain`'s runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ratiotune.core.study import SEED_KEY, Study, write_study

RUN_KEY = "run"  # the run's index into `runs`: how each trial finds its own values


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
    """Train every run as one Ray Tune trial under `folder`; returns Ray's ResultGrid.

    runs: each run's own trial-config values (`key`: which config; SEED_KEY; the test pairs, a start
    checkpoint, ...); configs: each `key` value's searched values, which fill the trial's config too, so
    params.json shows the whole config. prefix: names each trial's folder, PREFIX<key value>_seed<seed>
    (c1_seed3, rank2_seed5); labels: how the progress lines name each `key` value. The folder is
    itself an experiment (study.yaml + Ray trial folders) that core/experiment.py reads like a search;
    an interrupted one is restored, its finished runs kept, the rest continued from their checkpoints.
    Ray must be initialised.
    """
    from ray import tune

    from ratiotune.search.launch import make_trainable, seed_runs_config

    trainable = make_trainable(study)
    if tune.Tuner.can_restore(str(folder)):
        tuner = tune.Tuner.restore(str(folder), trainable=trainable, resume_unfinished=True, resume_errored=True)
        return tuner.fit()
    folder.mkdir(parents=True, exist_ok=True)
    write_study(folder, study)  # study.yaml and the prompt texts: the runs read like an experiment
    param_space: dict[str, Any] = {RUN_KEY: tune.grid_search(list(range(len(runs))))}
    for name in runs[0]:
        param_space[name] = tune.sample_from(lambda spec, name=name: runs[spec.config[RUN_KEY]][name])
    for name in configs[runs[0][key]]:
        param_space[name] = tune.sample_from(lambda spec, name=name: configs[runs[spec.config[RUN_KEY]][key]][name])
    tuner = tune.Tuner(
        trainable,
        param_space=param_space,
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
    return tuner.fit()
