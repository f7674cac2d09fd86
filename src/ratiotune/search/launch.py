"""Study -> Ray Tune Tuner: Optuna search, scheduler, resources and kept checkpoints.

Nothing here trains; it only wires a validated Study into Ray Tune's pieces.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from ratiotune.core.objective import OBJECTIVE
from ratiotune.core.hyperparameters import held_values
from ratiotune.core.study import LR_POINTS, ParamSpec, Study, StudyError, continuous_params
from ratiotune.core.wandb_settings import WandbSettings


def param_space(study: Study) -> dict[str, Any]:
    """Ray Tune's space: a domain per searched value; a held value (held_values) as a constant, so
    that every trial still records it."""
    held = held_values(study)
    return {name: held[name] if name in held else tune_domain(spec) for name, spec in study.search.space.items()}


def baseline_point(study: Study) -> dict[str, Any] | None:
    """The baseline as Optuna's first point: its sampled values (a held one is a constant of the space)."""
    baseline = study.baseline()
    return {k: v for k, v in baseline.items() if k not in held_values(study)} if baseline else None


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


def make_searcher(study: Study, experiment_dir: Path | str | None = None, optuna_location: str | None = None):
    """OptunaSearch with a seeded sampler (OptunaSearch's own seed= is ignored once a sampler is passed),
    on the Optuna storage at optuna_location (optuna_study.py), or in memory when it is None."""
    from ray.tune.search.optuna import OptunaSearch

    if study.search.scheduler.type == "pbt":
        # PBT samples its own population from the space (Ray refuses a searcher next to it).
        from ray.tune.search import BasicVariantGenerator

        unused = {
            "sampler": "the population is drawn at random from the space",
            "max_concurrent_trials": "the whole population is started and shares the resources",
            "optuna_storage": "PBT draws its population itself: there is no Optuna study to store",
        }
        for field, why in unused.items():
            if field in study.search.model_fields_set:
                value = getattr(study.search, field)
                print(f"ratiotune: note: search.{field} ({value}) is not used with scheduler.type pbt; {why}", file=sys.stderr)
        # No concurrency limit: the whole population must exist from the start (a limited
        # generator would create trials 3 and 4 only after 1 and 2 finished); Ray
        # time-shares the CPUs/GPUs among the population instead.
        return BasicVariantGenerator(random_state=study.train.seed)
    if not study.search.space:
        return None  # nothing to search: num_samples repeats of the fixed config
    sampler = make_sampler(study)
    # The baseline is the first trial: every study then measures the hand-picked config
    # under exactly its own conditions, and the race can state the winner's margin over it.
    baseline = baseline_point(study)
    if optuna_location is None:
        return OptunaSearch(sampler=sampler, points_to_evaluate=[baseline] if baseline else None)
    from ratiotune.search.optuna_study import StoredOptunaSearch
    from ratiotune.core.storage import split_location

    return StoredOptunaSearch(
        location=optuna_location,
        study_name=split_location(experiment_dir)[1],
        baseline=baseline,
        epochs=study.train.epochs,
        experiment_dir=str(experiment_dir),
        sampler=sampler,
    )


def make_sampler(study: Study):
    """The Optuna sampler of a study, seeded with train.seed: the one object both a search and
    bench/simulate.py ask for configs, so a simulated study samples exactly as a real one does.

    startup_trials: TPE and GP draw their first n trials at random (Optuna's default n is 10,
    so an 8-trial study never leaves that phase and its draws equal random search's); the
    baseline trial counts as one of them.
    """
    import optuna

    search, seed = study.search, study.train.seed
    startup = {} if search.startup_trials is None else {"n_startup_trials": search.startup_trials}
    if search.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=search.multivariate, **startup)
    if search.sampler == "gp":
        # The objective is noisy (one seed, 48 eval pairs): a GP that fits it as exact would chase noise.
        return optuna.samplers.GPSampler(seed=seed, deterministic_objective=False, **startup)
    if search.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if search.sampler == "staged":
        from ratiotune.search.staged_sampler import StagedSampler

        values = study.hyperparameters({})  # train:'s values, where a parameter has no default
        space = {name: spec for name, spec in search.space.items() if name not in held_values(study)}
        defaults = {name: spec.default if spec.default is not None else values[name] for name, spec in space.items()}
        return StagedSampler(space, defaults, search.lr_points or LR_POINTS, seed)
    return optuna.samplers.QMCSampler(seed=seed, scramble=True)  # experimental in Optuna 5 (a warning)


def make_scheduler(study: Study):
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    spec = study.search.scheduler
    if spec.type == "fifo":
        return FIFOScheduler()
    if spec.type == "pbt":
        return make_pbt(study)
    # ASHA stops weak trials early; OptunaSearch then records their early score as final,
    # which is fair only for metrics that grow with training (the README says so).
    return ASHAScheduler(
        time_attr="training_iteration",
        max_t=study.train.epochs,
        grace_period=min(spec.grace_period, study.train.epochs),
        reduction_factor=spec.reduction_factor,
    )


def make_pbt(study: Study):
    """Population-based training over the continuous searched parameters.

    synch=True: the population is ranked only once every trial has reached the same
    epoch, so trials are compared at equal training time (with more trials than slots,
    asynchronous PBT compares a trial against others' scores from other epochs) and
    the bottom quantile surely exploits at every interval.
    """
    import random

    import numpy as np
    from ray.tune.schedulers import PopulationBasedTraining

    spec = study.search.scheduler
    space = study.search.space
    mutations = {name: tune_domain(space[name]) for name in continuous_params(space)}

    def keep_in_space(config: dict[str, Any]) -> dict[str, Any]:
        # Ray multiplies by 0.8 / 1.2 without bounds; the study's range is a promise.
        for name in mutations:
            config[name] = min(max(config[name], space[name].low), space[name].high)
        return config

    # PopulationBasedTraining takes no seed: it explores with the driver's global
    # `random` (perturbation choices) and numpy (resampling) generators.
    random.seed(study.train.seed)
    np.random.seed(study.train.seed)
    return PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=spec.perturbation_interval,
        hyperparam_mutations=mutations,
        quantile_fraction=spec.quantile_fraction,
        resample_probability=spec.resample_probability,
        custom_explore_fn=keep_in_space,
        synch=True,
    )


def checkpoint_config(study: Study):
    """Kept checkpoints: the best num_to_keep by the objective, except under PBT.

    A PBT exploit hands the exploiting trial a reference to the donor's *latest*
    checkpoint, read only when the exploiter restarts. Ray keeps the latest
    checkpoint but may delete the one before it as soon as the donor reports again
    if it is not among the donor's best by score; and every pause registers the
    latest checkpoint once more. Until the exploiter restarts (before the next sync
    point) the donor registers at most perturbation_interval epochs + 2 pause saves,
    so keep the newest perturbation_interval + 3.
    """
    from ray import tune

    search = study.search
    if search.scheduler.type == "pbt":
        return tune.CheckpointConfig(num_to_keep=max(study.checkpoint.num_to_keep, search.scheduler.perturbation_interval + 3))
    return tune.CheckpointConfig(
        num_to_keep=study.checkpoint.num_to_keep,
        checkpoint_score_attribute=OBJECTIVE,
        checkpoint_score_order=search.mode,
    )


def check_resources(study: Study, available_gpus: float) -> None:
    """Refuse a trial that can never be placed: Ray would wait forever with only a warning."""
    wanted = study.resources.gpu
    if wanted > 0 and wanted > available_gpus:
        raise StudyError(
            f"resources.gpu: {wanted:g} GPU(s) per trial requested, but only {available_gpus:g} available; "
            "set resources.gpu: 0 to train on CPU, or run where GPUs are visible"
        )


def largest_node_gpus() -> float:
    """GPUs on the largest alive node of the connected Ray cluster: a trial must fit on one node."""
    import ray

    return max((node["Resources"].get("GPU", 0.0) for node in ray.nodes() if node["Alive"]), default=0.0)


def make_trainable(study: Study):
    """The trial function with the study bound and its resources: the same for search and resume."""
    from ray import tune

    from ratiotune.training.trainable import tune_trainable

    return tune.with_resources(
        tune.with_parameters(tune_trainable, study=study),
        {"cpu": study.resources.cpu, "gpu": study.resources.gpu},
    )


def build_tuner(study: Study, experiment_dir: Path | str, wandb: WandbSettings | None = None):
    """The Tuner for `study`, writing into experiment_dir (= storage_path / name; a path or an s3://-style URI)."""
    from ray import tune

    from ratiotune.core.storage import split_location

    storage_path, name = split_location(experiment_dir)
    trainable = make_trainable(study)
    search = study.search
    optuna_location = optuna_storage(study, experiment_dir)
    from ratiotune.search.trial_logs import trial_loggers

    from ratiotune.search.progress import SearchProgress
    from ratiotune.search.stop import TaskErrorStopper

    callbacks = [*trial_loggers(), SearchProgress(study)]
    if wandb is not None:
        from ratiotune.search.wandb_logger import WandbLogger

        callbacks.append(
            WandbLogger(
                project=wandb.project,
                entity=wandb.entity,
                group=name,
                dir=os.environ.get("WANDB_DIR"),
            )
        )
    run_config = tune.RunConfig(
        name=name,
        storage_path=storage_path,
        checkpoint_config=checkpoint_config(study),
        # The first task error ends the study (stop.py): every trial would meet the same bug.
        # PBT would otherwise perturb a trial at its last epoch and restart it for nothing.
        stop=TaskErrorStopper(max_iteration=study.train.epochs if search.scheduler.type == "pbt" else None),
        # A trial whose process dies (or its node) restarts from its latest checkpoint, up to max_failures times.
        failure_config=tune.FailureConfig(max_failures=study.search.max_failures),
        callbacks=callbacks,
        # No status tables: SearchProgress prints one line per trial event (progress.py).
        verbose=0,
    )
    pbt = search.scheduler.type == "pbt"
    tune_config = tune.TuneConfig(
        # One score for the searcher, ASHA and the kept checkpoints (objective.py says why).
        metric=OBJECTIVE,
        mode=search.mode,
        num_samples=search.num_samples,
        # Under pbt the resources alone limit how many of the population run at once.
        max_concurrent_trials=None if pbt else search.max_concurrent_trials,
        search_alg=make_searcher(study, experiment_dir, optuna_location),
        scheduler=make_scheduler(study),
        # PBT pauses and restarts trials at every perturbation: reusing the worker process
        # saves a Python + torch start each time (the function trainable is simply rerun).
        reuse_actors=pbt,
        trial_dirname_creator=lambda trial: f"trial_{trial.trial_id}",
    )
    return tune.Tuner(trainable, param_space=param_space(study), tune_config=tune_config, run_config=run_config)


def optuna_storage(study: Study, experiment_dir: Path | str) -> str | None:
    """Where this search's Optuna study goes (optuna_study.py), recorded in the experiment folder;
    None when Optuna does not search (PBT, nothing searched) or the folder is a URI without a URL."""
    from ratiotune.search import optuna_study
    from ratiotune.core.storage import is_uri, split_location

    if study.search.scheduler.type == "pbt" or not study.search.space:
        return None
    location = optuna_study.storage_location(study.search.optuna_storage, experiment_dir)
    if location is None:
        print(
            f"ratiotune: note: no Optuna storage for {experiment_dir}: the default journal file needs a local "
            "folder; set search.optuna_storage (e.g. a PostgreSQL URL) to watch it in `ratiotune dashboard`",
            file=sys.stderr,
        )
        return None
    if not is_uri(experiment_dir):
        Path(experiment_dir).mkdir(parents=True, exist_ok=True)
        optuna_study.write_record(Path(experiment_dir), location, split_location(experiment_dir)[1])
    return location


def seed_runs_config(
    study: Study, name: str, storage_path: str, columns: list[str], total: int, labels: dict[str, dict[Any, str]] | None = None
):
    """RunConfig for runs of fixed configs over fresh seeds (the race's rounds, `retrain`): only the
    final agents matter, so each run keeps its latest checkpoint; a run whose process or node dies
    restarts from it, as a search trial does."""
    from ray import tune

    from ratiotune.search.progress import RunsProgress
    from ratiotune.search.trial_logs import trial_loggers

    return tune.RunConfig(
        name=name,
        storage_path=storage_path,
        # One line per run that ends, named by `columns` (progress.py); no status tables.
        callbacks=[*trial_loggers(), RunsProgress(columns, total, labels)],
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
        failure_config=tune.FailureConfig(max_failures=study.search.max_failures),
        verbose=0,
    )
