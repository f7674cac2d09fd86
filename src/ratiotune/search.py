"""Study -> Ray Tune Tuner: Optuna search, scheduler, resources and kept checkpoints.

Nothing here trains; it only wires a validated Study into Ray Tune's pieces.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ratiotune.study import SEARCHABLE, ParamSpec, Study, StudyError

# The trial table Ray prints while a study runs.
PROGRESS_METRICS = ["epoch", "eval/in_range_fraction", "eval/mean_reward"]


@dataclass(frozen=True)
class WandbSettings:
    """W&B logging through Ray's WandbLoggerCallback: one run per trial, grouped by experiment.

    WANDB_MODE and WANDB_DIR from the environment are honoured (offline works fully offline).
    """

    project: str | None = None
    entity: str | None = None


def param_space(study: Study) -> dict[str, Any]:
    from ray import tune

    return {name: tune_domain(spec) for name, spec in study.search.space.items()}


def tune_domain(spec: ParamSpec):
    from ray import tune

    if spec.type == "loguniform":
        return tune.loguniform(spec.low, spec.high)
    if spec.type == "uniform":
        return tune.uniform(spec.low, spec.high)
    if spec.type == "int":
        # tune.randint excludes its upper bound; study files state inclusive ranges.
        return tune.randint(int(spec.low), int(spec.high) + 1)
    return tune.choice(list(spec.values))


def make_searcher(study: Study):
    """OptunaSearch with a seeded sampler (OptunaSearch's own seed= is ignored once a sampler is passed)."""
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    if not study.search.space:
        return None  # nothing to search: num_samples repeats of the fixed config
    seed = study.train.seed
    sampler = {
        "tpe": lambda: optuna.samplers.TPESampler(seed=seed),
        "random": lambda: optuna.samplers.RandomSampler(seed=seed),
        "qmc": lambda: optuna.samplers.QMCSampler(seed=seed, scramble=True),
    }[study.search.sampler]()
    return OptunaSearch(sampler=sampler)


def make_scheduler(study: Study):
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    spec = study.search.scheduler
    if spec.type == "fifo":
        return FIFOScheduler()
    # ASHA stops weak trials early; OptunaSearch then records their early score as final,
    # which is fair only for metrics that grow with training (the README says so).
    return ASHAScheduler(
        time_attr="training_iteration",
        max_t=study.train.epochs,
        grace_period=min(spec.grace_period, study.train.epochs),
        reduction_factor=spec.reduction_factor,
    )


def check_resources(study: Study, available_gpus: float) -> None:
    """Refuse a trial that can never be placed: Ray would wait forever with only a warning."""
    wanted = study.resources.gpu
    if wanted > 0 and wanted > available_gpus:
        raise StudyError(
            f"resources.gpu: {wanted:g} GPU(s) per trial requested, but only {available_gpus:g} available; "
            "set resources.gpu: 0 to train on CPU, or run where GPUs are visible"
        )


def local_gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


def make_trainable(study: Study):
    """The trial function with the study bound and its resources: the same for search and resume."""
    from ray import tune

    from ratiotune.trainable import tune_trainable

    return tune.with_resources(
        tune.with_parameters(tune_trainable, study=study),
        {"cpu": study.resources.cpu, "gpu": study.resources.gpu},
    )


def build_tuner(study: Study, experiment_dir: Path, wandb: WandbSettings | None = None):
    """The Tuner for `study`, writing into experiment_dir (= storage_path / name)."""
    from ray import tune

    trainable = make_trainable(study)
    search = study.search
    callbacks = []
    if wandb is not None:
        from ray.air.integrations.wandb import WandbLoggerCallback

        callbacks.append(
            WandbLoggerCallback(
                project=wandb.project or "ratiotune",
                entity=wandb.entity,
                group=experiment_dir.name,
                dir=os.environ.get("WANDB_DIR"),
            )
        )
    run_config = tune.RunConfig(
        name=experiment_dir.name,
        storage_path=str(experiment_dir.parent),
        checkpoint_config=tune.CheckpointConfig(
            num_to_keep=study.checkpoint.num_to_keep,
            checkpoint_score_attribute=search.metric,
            checkpoint_score_order=search.mode,
        ),
        # A trial whose process dies restarts from its last checkpoint, up to max_failures times.
        failure_config=tune.FailureConfig(max_failures=study.failure.max_failures),
        callbacks=callbacks,
        progress_reporter=progress_reporter(study),
        verbose=1,
    )
    tune_config = tune.TuneConfig(
        metric=search.metric,
        mode=search.mode,
        num_samples=search.num_samples,
        max_concurrent_trials=search.max_concurrent_trials,
        search_alg=make_searcher(study),
        scheduler=make_scheduler(study),
        trial_dirname_creator=lambda trial: f"trial_{trial.trial_id}",
    )
    return tune.Tuner(trainable, param_space=param_space(study), tune_config=tune_config, run_config=run_config)


def progress_reporter(study: Study):
    """Ray's classic trial table (our cli sets RAY_AIR_NEW_OUTPUT=0 so it is used)."""
    from ray.tune import CLIReporter

    return CLIReporter(
        parameter_columns=[name for name in SEARCHABLE if name in study.search.space],
        metric_columns=PROGRESS_METRICS,
        max_report_frequency=30,
        sort_by_metric=True,
    )
