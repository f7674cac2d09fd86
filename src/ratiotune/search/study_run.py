"""The commands that run trials (search, resume, retrain): start Ray, run, print; raise when there is no result.

`search` is the one code path behind both `ratiotune search` and `ratiotune.search(...)` (results/python_api.py).
A run that started but ended without its result (interrupted, every trial errored or none reported the
metric, a failed race) raises RunStopped, a StudyError: the command line prints its line and exits with
its code (resume.EXIT_INTERRUPTED after the one-line resume hint; EXIT_NO_RESULT), the Python API raises
it. User errors are StudyErrors, which the command line prints as one line. The trial table printed after
a search is the results layer's (results/tables.py): the caller passes it in as `summarize`, since search
sits below results.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Callable, Optional

from ratiotune.core import provenance
from ratiotune.core.experiment import ERRORED, STUDY_FILE, TASK_ERROR, Experiment, is_experiment, load_experiment
from ratiotune.core.study import Study, StudyError, check_launch, check_race_budget, load_study, study_files
from ratiotune.core.study.loading import override_study
from ratiotune.core.wandb_settings import WandbSettings

EXIT_NO_RESULT = 1  # the study ran, but every trial errored or none reported the metric

# Prints the trial table after a search; returns why the study produced nothing, or None.
Summarize = Callable[[Experiment], Optional[str]]


class RunStopped(StudyError):
    """A run that started and ended without its result. `line` is what the command line prints on
    stderr, `exit_code` its exit status; from Python it is the StudyError it is (str(exc) says why)."""

    def __init__(self, message: str, *, line: str, exit_code: int):
        super().__init__(message)
        self.line = line
        self.exit_code = exit_code


def interrupted(folder) -> RunStopped:
    """Ctrl-C or SIGTERM: everything is saved, `ratiotune resume FOLDER` continues it."""
    from ratiotune.search import resume as resuming

    hint = resuming.interrupted_hint(folder)
    return RunStopped(hint.removeprefix("ratiotune: "), line=hint, exit_code=resuming.EXIT_INTERRUPTED)


def out_of_memory(exc, folder) -> RunStopped:
    """Ray killed a trial's process for memory: the study is saved, `ratiotune resume FOLDER` continues it."""
    from ratiotune.search import resume as resuming

    line = resuming.out_of_memory_hint(exc.reason, folder)
    return RunStopped(line.removeprefix("ratiotune: error: "), line=line, exit_code=1)


def resolve_study(study: Study | str | Path, overrides: list[str] | tuple[str, ...]) -> tuple[Study, str]:
    """(the Study with the `--set`-style overrides applied and validated, what the header calls its source)."""
    if isinstance(study, Study):
        return override_study(study, overrides), "a Study object"
    return load_study(study, overrides), str(study)


def search(
    study: Study | str | Path,
    *,
    overrides: list[str] | tuple[str, ...] = (),
    storage_root: str | Path = "results",
    address: str | None = None,
    verbose: bool = False,
    wandb: WandbSettings | None = None,
    argv: list[str],
    summarize: Summarize,
) -> Path | str:
    """Check the study, start Ray (or use the one running), probe the task, run the search, then the race.

    `study` is a study file or a validated Study; `overrides` are `--set` strings (name=..., train.epochs=2).
    Returns the experiment folder (a URI under remote storage); raises StudyError, RunStopped included.
    """
    study, study_file = resolve_study(study, overrides)
    check_launch(study)
    check_race_budget(study)
    from ratiotune.training import memory
    from ratiotune.search import optuna_study, launch
    from ratiotune.core import storage

    experiment_dir = storage.experiment_location(storage_root, study.name)
    if storage.exists(experiment_dir):
        raise StudyError(f"{experiment_dir} already exists; {rerun_hint(experiment_dir)}")
    location = optuna_study.storage_location(study.search.optuna_storage, experiment_dir)
    try:
        taken = bool(study.search.optuna_storage) and optuna_study.study_exists(location, study.name)
    except StudyError as exc:
        raise StudyError(f"search.optuna_storage: {exc}") from None
    if taken:
        raise StudyError(
            f"search.optuna_storage: {study.search.optuna_storage} already holds a study named {study.name!r}; "
            "pass another --name (a study is never continued by a new search: `ratiotune resume` does that)"
        )

    from ratiotune.search.progress import header
    from ratiotune.training.probe import probe_answers

    log_file = ray_log_file(experiment_dir, verbose)
    print("\n".join(header(study, study_file, experiment_dir, log_file)), flush=True)
    try:
        start_ray(address, log_file)
        # Before any trial starts (and after ray.init: see probe.py): most task bugs end here, in seconds.
        pairs, seconds = probe_answers(study)
        print(
            f"pre-flight: the task's reward and measure on {pairs} answer pairs sampled from the untrained agents: "
            f"ok ({seconds:.1f} s)"
            if pairs
            else "pre-flight: skipped (the untrained agents could not answer; the trials will say why)",
            flush=True,
        )
        # The cluster's nodes, not this machine's: a trial must fit on one node.
        launch.check_resources(study, launch.largest_node_gpus())
        report, _ = memory.launch_report(study)
    except StudyError:
        # Nothing started: leave no folder that holds only ray.log (a retry with the same name would be refused).
        if log_file is not None and [p.name for p in log_file.parent.iterdir()] == [log_file.name]:
            shutil.rmtree(log_file.parent)
        raise
    print(report, flush=True)
    # study.yaml and the prompt texts (prompts/): the folder carries everything it ran on.
    for filename, text in study_files(study, STUDY_FILE).items():
        storage.write_text(experiment_dir, filename, text)
    if not storage.is_uri(experiment_dir):
        experiment_dir = Path(experiment_dir)
        provenance.write(experiment_dir, argv)
    run_to_end(launch.build_tuner(study, experiment_dir, wandb), study, experiment_dir, summarize)
    return experiment_dir


def rerun_hint(experiment_dir) -> str:
    """What to do about a taken --name: a folder whose every trial failed holds nothing to keep."""
    from ratiotune.core import storage

    hint = "pass another --name (experiments are never overwritten)"
    if storage.is_uri(experiment_dir):
        return hint
    try:
        experiment = load_experiment(experiment_dir)
    except StudyError:
        return hint
    study = experiment.study
    statuses = [trial.status(study.train.epochs) for trial in experiment.trials]
    if TASK_ERROR in statuses:
        # A task error stops the whole study (search/stop.py): the trials beside it end wherever they
        # were, so the folder holds no result whatever their number.
        return (
            f"the study in it stopped on a task error ({statuses.count(TASK_ERROR)} of {len(statuses)} trials "
            f"hit it), so it holds no result: after the fix, rerun with another --name, or delete it first "
            f"(rm -r {experiment_dir})"
        )
    failed = [s for s in statuses if s == ERRORED]
    if not failed or len(failed) < len(statuses) or experiment.ranked():
        return hint
    return (
        f"every trial in it errored ({len(failed)} of {len(statuses)}), so it holds no result: after the fix, "
        f"rerun with another --name, or delete it first (rm -r {experiment_dir})"
    )


def resume(
    experiment_path: str, *, skip_errored: bool, address: str | None, verbose: bool, argv: list[str], summarize: Summarize
) -> int:
    """`ratiotune resume`: continue an interrupted search (then its race), only its race, or a retrain."""
    from ratiotune.search.retrain import is_retrain

    folder = Path(experiment_path).expanduser().resolve()
    if is_retrain(folder):
        return resume_retrain(folder, address=address, verbose=verbose)
    if folder.is_dir() and not is_experiment(folder):
        raise StudyError(
            f"{folder}: nothing to resume here (no {STUDY_FILE}, which a search writes, and no retrain.json, "
            "which a retrain writes)"
        )
    experiment = load_experiment(folder)
    experiment_dir, study = experiment.directory, experiment.study

    from ratiotune.search import resume as resuming, launch
    from ratiotune.search.progress import header

    if resuming.is_finished(experiment_dir):
        from ratiotune.core.race_summary import load_summary

        if study.race_skipped() is not None or load_summary(experiment_dir) is not None:
            raced = "" if study.race_skipped() is not None else ", and so has its race"
            print(f"{experiment_dir}: the study has finished ({len(experiment.trials)} trials){raced}; nothing to resume")
            return 0
        check_launch(study)
        log_file = ray_log_file(experiment_dir, verbose)
        print(f"{experiment_dir}: the search has finished; continuing its race")
        start_ray(address, log_file)
        launch.check_resources(study, launch.largest_node_gpus())
        provenance.append_resume(experiment_dir, argv)
        run_race(experiment)
        return 0
    # The prompts come from the experiment's own prompts/ folder, the model from study.yaml.
    check_launch(study)
    log_file = ray_log_file(experiment_dir, verbose)
    print("\n".join(header(study, str(experiment_dir / STUDY_FILE), experiment_dir, log_file)), flush=True)
    print(f"resuming: {len(experiment.trials)} of {study.search.num_samples} trials started before", flush=True)
    start_ray(address, log_file)
    launch.check_resources(study, launch.largest_node_gpus())
    provenance.append_resume(experiment_dir, argv)
    tuner = resuming.restore_tuner(study, experiment_dir, retry_errored=not skip_errored)
    run_to_end(tuner, study, experiment_dir, summarize)
    return 0


def run_to_end(tuner, study: Study, experiment_dir, summarize: Summarize) -> None:
    """Fit, then race the top configs. Raises RunStopped on an interruption (the resume hint) and when
    every trial errored or none reported the metric (EXIT_NO_RESULT)."""
    from ratiotune.search import resume as resuming
    from ratiotune.core import storage

    try:
        finished, grid = resuming.fit_interruptibly(tuner, study, experiment_dir)
    except resuming.OutOfMemory as exc:
        raise out_of_memory(exc, experiment_dir) from None
    if not finished:
        raise interrupted(experiment_dir)
    if storage.is_uri(experiment_dir):
        failure = print_remote_summary(experiment_dir, grid, study)
        if failure is None and study.race_skipped() is None:
            print(
                "race: skipped (it reads the search's results from a local folder); copy the folder locally and "
                "run `ratiotune resume` on the copy to race its top configs"
            )
    else:
        experiment = load_experiment(experiment_dir)
        failure = summarize(experiment)
    if failure is not None:
        raise RunStopped(failure, line=f"ratiotune: error: {failure}", exit_code=EXIT_NO_RESULT)
    if not storage.is_uri(experiment_dir):
        run_race(experiment)


def run_race(experiment: Experiment) -> None:
    """The confirmation race after a finished search (race.py); prints the honest figure.
    Raises RunStopped on an interruption or a RaceError (exit status 1)."""
    from ratiotune.core import race_summary
    from ratiotune.search import race, race_text, resume as resuming
    from ratiotune.search.seed_grid import StageInterrupted

    skipped = experiment.study.race_skipped()
    if skipped is not None:
        print(f"race: none ({skipped}); the figures above are selection figures and optimistic")
        return
    print("\nrace: the top configs against the baseline on paired fresh seeds, then the gate", flush=True)
    try:
        with resuming.sigterm_as_sigint():
            summary = race.race(experiment)
    except StageInterrupted:
        raise interrupted(experiment.directory) from None
    except resuming.OutOfMemory as exc:
        raise out_of_memory(exc, experiment.directory) from None
    except race.RaceError as exc:
        raise RunStopped(f"race: {exc}", line=f"ratiotune: race: {exc}", exit_code=1) from None
    # The verdict only: `best` prints its figures (printed here too, a demo showed them twice in a row).
    print(f"\n  {race_text.verdict(summary)}")
    from ratiotune.search.optuna_study import record_race

    try:
        record_race(experiment.directory, summary["winner"]["search_trial"], race_text.headline(summary))
    except StudyError as exc:  # the race's result stands; only the dashboard misses it
        print(f"ratiotune: note: the race's winner is not in the Optuna study: {exc}", file=sys.stderr)
    print(f"race details: {race_summary.race_dir(experiment.directory) / 'summary.md'}")
    print(f"its figures, the recommended config as study values, and its agents: ratiotune best {experiment.directory}")


def retrain(experiment_path: str, *, address: str | None, verbose: bool, **plan_options) -> int:
    """`ratiotune retrain`: plan (every input check, before Ray starts), print the plan, train, print the summary.
    `plan_options` are retrain.plan_retrain's keywords (top_k, seeds, epochs, output, ...)."""
    from ratiotune.search import retrain as retraining

    # Every input check happens here, before Ray starts (GPUs: once it has, against the cluster).
    plan = retraining.plan_retrain(experiment_path, **plan_options)
    retraining.record_plan(plan, plan_options)
    return run_retrain(plan, address=address, verbose=verbose)


def resume_retrain(output: Path, *, address: str | None, verbose: bool) -> int:
    """`ratiotune resume OUTPUT` of a retrain: the same plan again; finished runs are kept."""
    from ratiotune.search import retrain as retraining

    if retraining.is_finished(output):
        print(f"{output}: the retrain has finished; nothing to resume")
        return 0
    print(f"{output}: continuing the retrain", flush=True)
    return run_retrain(retraining.resume_plan(output), address=address, verbose=verbose)


def run_retrain(plan, *, address: str | None, verbose: bool) -> int:
    from ratiotune.core.hyperparameters import config_text
    from ratiotune.search import resume as resuming, retrain as retraining
    from ratiotune.search.seed_grid import StageInterrupted

    log_file = ray_log_file(plan.output, verbose)
    print(
        f"retrain {plan.experiment.directory}: {len(plan.candidates)} config(s) x {len(plan.seeds)} fresh seed(s), "
        f"{plan.study.train.epochs} epochs each, into {plan.output}",
        flush=True,
    )
    for candidate in plan.candidates:
        print(f"  rank {candidate.rank}: {config_text(candidate.config, plan.study.searched())}", flush=True)
    if log_file is not None:
        print(f"Ray's log: {log_file} (--verbose shows it here)", flush=True)
    start_ray(address, log_file)
    try:
        with resuming.sigterm_as_sigint():
            retraining.retrain(plan)
    except StageInterrupted:
        raise interrupted(plan.output) from None
    except resuming.OutOfMemory as exc:
        raise out_of_memory(exc, plan.output) from None
    print()
    print((plan.output / "summary.md").read_text(), end="")
    print(f"final agents: {plan.output / 'final'}")
    return 0


def start_ray(address: str | None = None, log_file: Path | None = None) -> None:
    """Start a local Ray, or join the cluster at `address` ("auto", or host:port of its head).

    Shared by every command that runs trials (search, resume, retrain). Ray's own log goes to
    log_file (progress.quiet_ray_logging), or to the terminal when it is None (--verbose).
    A Ray this process already runs is used as it is, as Tune's fit() does: a notebook's second
    `ratiotune.search`, or one the caller started with ray.init (its logging stays as it was set).
    A head started with `ray start --head` uses token authentication: joining it needs
    RAY_AUTH_MODE=token in the environment (the token is read from ~/.ray/auth_token or RAY_AUTH_TOKEN).
    """
    import ray

    from ratiotune.search.progress import quiet_ray_logging

    logging_kwargs = quiet_ray_logging(log_file)
    if ray.is_initialized():
        return
    if address is None:
        # "local": a fresh Ray of our own, never a cluster that happens to run on this machine.
        ray.init(address="local", include_dashboard=False, configure_logging=True, **logging_kwargs)
        return
    try:
        ray.init(address=address, configure_logging=True, **logging_kwargs)
    except (ConnectionError, RuntimeError) as exc:
        raise StudyError(
            f"--address {address}: cannot join the Ray cluster ({exc}). Is `ray start --head` running there? "
            "A head started that way needs RAY_AUTH_MODE=token in this environment."
        ) from None
    nodes = [node for node in ray.nodes() if node["Alive"]]
    print(f"joined Ray cluster at {address}: {len(nodes)} node(s), {ray.cluster_resources()}", flush=True)


def ray_log_file(folder, verbose: bool) -> Path | None:
    """FOLDER/ray.log for a local folder; a file in the temp folder for a URI (s3://); None with --verbose."""
    import tempfile

    from ratiotune.core import storage
    from ratiotune.search.progress import RAY_LOG

    if verbose:
        return None
    if storage.is_uri(folder):
        return Path(tempfile.gettempdir()) / f"ratiotune-{storage.split_location(folder)[1]}-{os.getpid()}-{RAY_LOG}"
    return Path(folder) / RAY_LOG


def print_remote_summary(location: str, grid, study: Study) -> str | None:
    """For an experiment on a URI: `best` and friends read a local copy, so print what Ray returned.

    Returns why the study produced nothing (every trial errored, no trial reported the metric), or None.
    """
    metric, mode = study.search.metric, study.search.mode
    print(f"\nexperiment: {location}  ({len(grid)} trials, {grid.num_errors} errored)")
    if len(grid) and grid.num_errors == len(grid):
        return f"every trial errored ({grid.num_errors} of {len(grid)}); see error.txt in the trial folders under {location}"
    try:
        best = grid.get_best_result(metric, mode, scope="all")
        history = best.metrics_dataframe
        column = history[metric].dropna()
    except (RuntimeError, KeyError, TypeError, AttributeError):
        return f"no trial reported {metric}"
    if column.empty:
        return f"no trial reported {metric}"
    # scope="all" picks the trial by its best epoch, but its .metrics are the last epoch's: look the best row up.
    row = column.idxmax() if mode == "max" else column.idxmin()
    epoch = int(history["epoch"][row]) if "epoch" in history else "?"
    print(f"best {metric}: {column[row]:.4f} at epoch {epoch}  config: {best.config}")
    print(f"copy the folder locally (e.g. `aws s3 sync {location} results/{location.rsplit('/', 1)[-1]}`) for `ratiotune best`")
    return None
