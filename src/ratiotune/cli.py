"""`ratiotune` command line: a thin front over study, search and results.

Every user error (bad study, bad folder, a model that cannot be had) is a StudyError:
printed as one message, exit status 2, no traceback. A study that ran but produced
nothing (every trial errored, or none reported the metric) exits 1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import yaml

from ratiotune.core import provenance
from ratiotune.core.experiment import ERRORED, INFEASIBLE, STUDY_FILE, TASK_ERROR, Experiment, error_summary, load_experiment
from ratiotune.core.study import Study, StudyError, check_launch, check_race_budget, load_study, study_files
from ratiotune.core.wandb_settings import WandbSettings
from ratiotune.tasks import TaskError

EXIT_USAGE = 2
EXIT_NO_RESULT = 1  # the study ran, but every trial errored or none reported the metric


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)  # for provenance.json
    try:
        return args.func(args)
    except StudyError as exc:
        print(f"ratiotune: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TaskError as exc:  # `train`: the task's reward or measure failed on real answers
        print(f"ratiotune: error: task error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `ratiotune fields | head`: the reader left, nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ratiotune", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    search = commands.add_parser("search", help="run a study: an Optuna search over Ray Tune trials")
    search.add_argument("study", help="study YAML file, e.g. studies/smoke.yaml")
    search.add_argument(
        "--storage", default="results",
        help="folder the experiment goes under (default: results/); on several nodes a shared path or a URI (s3://bucket/dir)",
    )
    search.add_argument("--name", help="experiment name (default: the study's name)")
    search.add_argument(
        "--optuna-storage", metavar="URL",
        help="Optuna storage URL the study is written to (e.g. sqlite:///studies.db; default: optuna.journal "
        "in the experiment folder); sets search.optuna_storage",
    )
    add_address_flag(search)
    add_verbose_flag(search)
    add_set_flag(search)
    add_wandb_flags(search)
    search.set_defaults(func=cmd_search)

    train = commands.add_parser("train", help="train one config once (no search): the check to run before a study")
    train.add_argument("study", help="study YAML file, e.g. studies/smoke.yaml")
    train.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="a searched hyperparameter's value (--set learning_rate=1e-3; else its `default:`) "
        "or a study key (--set train.epochs=2); repeatable",
    )
    train.add_argument("--output", type=Path, help="run folder (default: results/<study name>-train-<time>); never overwritten")
    add_wandb_flags(train)
    train.set_defaults(func=cmd_train)

    resume = commands.add_parser(
        "resume", help="continue an interrupted study (reads Ray's pickled state: only folders you trust)"
    )
    resume.add_argument("experiment", help="experiment folder, e.g. results/smoke")
    resume.add_argument("--skip-errored", action="store_true", help="leave errored trials as they are instead of retrying them")
    add_address_flag(resume)
    add_verbose_flag(resume)
    resume.set_defaults(func=cmd_resume)

    best = commands.add_parser("best", help="print the best trial's config, metric and checkpoint")
    best.add_argument("experiment", help="experiment folder, e.g. results/smoke")
    best.set_defaults(func=cmd_best)

    report = commands.add_parser("report", help="write an offline report: trials.csv, curves.csv, plots, report.md with warnings")
    report.add_argument("experiment", help="experiment folder, e.g. results/smoke")
    report.add_argument("--out", help="output folder (default: EXPERIMENT/report/)")
    report.add_argument("--metric", help="metric to rank by (default: the study's search.metric)")
    report.add_argument("--mode", choices=["max", "min"], help="direction of --metric (default: the study's, or max)")
    report.set_defaults(func=cmd_report)

    check = commands.add_parser("check", help="probe: does each searched hyperparameter change training at all?")
    check.add_argument("study", help="study YAML file, e.g. studies/smoke.yaml")
    add_set_flag(check)
    check.set_defaults(func=cmd_check)
    retrain = commands.add_parser("retrain", help="re-run the race's winner (or survivors) over fresh seeds, save its agents")
    retrain.add_argument("experiment", help="experiment folder made by `ratiotune search`")
    retrain.add_argument("--top-k", type=int, default=1,
                         help="configs to retrain: the race's recommendation, then its survivors (default: 1)")
    retrain.add_argument("--seeds", type=int, default=3, help="fresh report seeds for the winner (default: 3)")
    retrain.add_argument("--select-seeds", type=int,
                         help="fresh selection seeds per config when --top-k > 1, never reported on (default: --seeds)")
    retrain.add_argument("--epochs", type=int, help="epochs per run (default: the study's)")
    retrain.add_argument("--output", help="output folder (default: EXPERIMENT/retrain; never overwritten)")
    retrain.add_argument("--eval-prompts", help="held-out prompt file (.txt/.jsonl) instead of the study's")
    retrain.add_argument("--from-checkpoint", action="store_true", help="continue each trial's best checkpoint for --epochs more epochs")
    add_address_flag(retrain)
    add_verbose_flag(retrain)
    add_set_flag(retrain)
    retrain.set_defaults(func=cmd_retrain)

    dashboard = commands.add_parser(
        "dashboard", help="optuna-dashboard on an experiment's Optuna study (also while it runs); Ctrl-C stops it"
    )
    dashboard.add_argument("experiment", help="experiment folder, e.g. results/smoke")
    dashboard.add_argument(
        "--host", default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, this machine only: the dashboard can edit and delete studies)",
    )
    dashboard.add_argument("--port", type=int, default=8080, help="port to listen on (default: 8080)")
    dashboard.set_defaults(func=cmd_dashboard)

    fields = commands.add_parser("fields", help="list every study field: type, default, description")
    fields.add_argument("prefix", nargs="?", default="", help="only fields under this key, e.g. search or train.top_p")
    fields.add_argument(
        "--markdown", nargs="?", const="-", metavar="FILE",
        help="the fields as a Markdown table: printed, or written into FILE between its "
        f"{FIELDS_BEGIN} and {FIELDS_END} lines (docs/study-file.md's table is made this way)",
    )
    fields.add_argument("--json-schema", action="store_true",
                        help="the whole study schema as JSON Schema, for an editor (docs/study-file.md)")
    fields.set_defaults(func=cmd_fields)
    return parser


FIELDS_BEGIN = "<!-- ratiotune fields --markdown: begin -->"
FIELDS_END = "<!-- ratiotune fields --markdown: end -->"


def fields_markdown(rows: list[tuple[str, str, str, str]]) -> str:
    """Every study field as a Markdown table (one row per field, a bold row per section), from the schema."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, kind, default, description in rows:
        if kind == "section":
            lines.append(f"| **`{name}`** | section | | {cell(description)} |")
        else:
            shown = f"`{cell(default)}`" if default else "(required)"
            lines.append(f"| `{name}` | {cell(kind)} | {shown} | {cell(description)} |")
    return "\n".join(lines) + "\n"


def write_fields_markdown(path: Path, table: str) -> None:
    """Replace the block between FIELDS_BEGIN and FIELDS_END in `path` with `table`."""
    if not path.is_file():
        raise StudyError(f"fields --markdown: no such file: {path}")
    text = path.read_text()
    if FIELDS_BEGIN not in text or FIELDS_END not in text:
        raise StudyError(f"fields --markdown: {path} has no {FIELDS_BEGIN} ... {FIELDS_END} block to write the table into")
    head, rest = text.split(FIELDS_BEGIN, 1)
    _, tail = rest.split(FIELDS_END, 1)
    path.write_text(f"{head}{FIELDS_BEGIN}\n{table}{FIELDS_END}{tail}")


def cmd_fields(args: argparse.Namespace) -> int:
    from ratiotune.core.study import json_schema, schema_fields

    if args.json_schema:
        import json

        if args.prefix or args.markdown is not None:
            raise StudyError("fields --json-schema prints the whole study's schema: drop PREFIX and --markdown")
        print(json.dumps(json_schema(), indent=2))
        return 0
    prefix = args.prefix.rstrip(".")
    rows = [row for row in schema_fields() if not prefix or row[0] == prefix or row[0].startswith(prefix + ".")]
    if not rows:
        top = ", ".join(name for name, _, _, _ in schema_fields() if "." not in name)
        raise StudyError(f"fields: no study field is named {args.prefix!r}; the top-level keys are: {top}")
    if args.markdown is not None:
        if args.markdown == "-":
            print(fields_markdown(rows), end="")
        else:
            write_fields_markdown(Path(args.markdown), fields_markdown(rows))
            print(f"wrote the field table ({len(rows)} rows) into {args.markdown}")
        return 0
    for name, kind, default, description in rows:
        if kind == "section":
            print(f"\n{name}:  {description}")
            continue
        print(f"  {name}  ({kind}{', default ' + default if default else ''})\n      {description}")
    if any(name == "search.metric" for name, *_ in rows):
        print_task_metrics()
    return 0


def print_task_metrics() -> None:
    """What search.metric may name, per builtin task: the values depend on the task, not the schema."""
    from ratiotune.core.metrics import MetricTable
    from ratiotune.tasks import BUILTIN_TASKS, load_task

    print("\nsearch.metric, by builtin task (one's own task: its Task.metrics, after train/ or eval/):")
    for name in BUILTIN_TASKS:
        table = MetricTable(load_task(name))
        names = [f"{m} ({table.better(m)})" if table.better(m) else m for m in table.selectable]
        print(f"  {name}:  {', '.join(names)}")


def add_set_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a study key, e.g. --set train.epochs=2 (repeatable; validated like the file)",
    )


def add_address_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--address", metavar="ADDR",
        help="join an existing Ray cluster (auto, or host:port of its head) instead of starting a local Ray; "
        "a head from `ray start --head` also needs RAY_AUTH_MODE=token in this environment",
    )


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verbose", action="store_true",
        help="show Ray's own log and the trial processes' output here (default: Ray's log goes to ray.log in the experiment folder)",
    )


def add_wandb_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wandb", action="store_true", help="log every trial to W&B (honours WANDB_MODE, WANDB_DIR)")
    parser.add_argument("--wandb-project", help="W&B project (default: ratiotune)")
    parser.add_argument("--wandb-entity", help="W&B entity (default: your W&B default)")


# --------------------------------------------------------------------------- search


def cmd_search(args: argparse.Namespace) -> int:
    overrides = list(args.overrides) + ([f"name={args.name}"] if args.name else [])
    overrides += [f"search.optuna_storage={args.optuna_storage}"] if args.optuna_storage else []
    study = check_launch(load_study(args.study, overrides))
    check_race_budget(study)
    from ratiotune.training import memory
    from ratiotune.search import optuna_study, launch
    from ratiotune.core import storage

    experiment_dir = storage.experiment_location(args.storage, study.name)
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

    log_file = ray_log_file(experiment_dir, args.verbose)
    print("\n".join(header(study, args.study, experiment_dir, log_file)), flush=True)
    try:
        start_ray(args.address, log_file)
        # Before any trial starts (and after ray.init: see probe.py): most task bugs end here, in seconds.
        pairs, seconds = probe_answers(study)
        print(f"pre-flight: the task's reward and measure on {pairs} answer pairs sampled from the untrained agents: "
              f"ok ({seconds:.1f} s)" if pairs else "pre-flight: skipped (the untrained agents could not answer; the "
              "trials will say why)", flush=True)
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
    for name, text in study_files(study, STUDY_FILE).items():
        storage.write_text(experiment_dir, name, text)
    if not storage.is_uri(experiment_dir):
        experiment_dir = Path(experiment_dir)
        provenance.write(experiment_dir, args.argv)
    wandb = WandbSettings(args.wandb_project, args.wandb_entity) if args.wandb else None
    return run_to_end(launch.build_tuner(study, experiment_dir, wandb), study, experiment_dir)


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
        return (f"the study in it stopped on a task error ({statuses.count(TASK_ERROR)} of {len(statuses)} trials hit it), "
                f"so it holds no result: after the fix, rerun with another --name, or delete it first (rm -r {experiment_dir})")
    failed = [s for s in statuses if s == ERRORED]
    if not failed or len(failed) < len(statuses) or experiment.ranked():
        return hint
    return (f"every trial in it errored ({len(failed)} of {len(statuses)}), so it holds no result: after the fix, "
            f"rerun with another --name, or delete it first (rm -r {experiment_dir})")


def run_to_end(tuner, study: Study, experiment_dir) -> int:
    """Fit, then race the top configs; on an interruption print the one-line resume hint and exit
    non-zero; exit EXIT_NO_RESULT when every trial errored or none reported the metric."""
    from ratiotune.search import resume
    from ratiotune.core import storage

    finished, grid = resume.fit_interruptibly(tuner, study, experiment_dir)
    if not finished:
        print(resume.interrupted_hint(experiment_dir), file=sys.stderr)
        return resume.EXIT_INTERRUPTED
    if storage.is_uri(experiment_dir):
        failure = print_remote_summary(experiment_dir, grid, study)
        if failure is None and study.race_skipped() is None:
            print("race: skipped (it reads the search's results from a local folder); copy the folder locally and "
                  "run `ratiotune resume` on the copy to race its top configs")
    else:
        experiment = load_experiment(experiment_dir)
        failure = print_summary(experiment)
    if failure is not None:
        print(f"ratiotune: error: {failure}", file=sys.stderr)
        return EXIT_NO_RESULT
    if storage.is_uri(experiment_dir):
        return 0
    return run_race(experiment)


def run_race(experiment: Experiment) -> int:
    """The confirmation race after a finished search (race.py); prints the honest figure."""
    from ratiotune.core import race_summary
    from ratiotune.search import race, race_text, resume

    skipped = experiment.study.race_skipped()
    if skipped is not None:
        print(f"race: none ({skipped}); the figures above are selection figures and optimistic")
        return 0
    print("\nrace: the top configs against the baseline on paired fresh seeds, then the gate", flush=True)
    try:
        with resume.sigterm_as_sigint():
            summary = race.race(experiment)
    except race.RaceInterrupted:
        print(resume.interrupted_hint(experiment.directory), file=sys.stderr)
        return resume.EXIT_INTERRUPTED
    except race.RaceError as exc:
        print(f"ratiotune: race: {exc}", file=sys.stderr)
        return 1
    # The verdict only: `best` prints its figures (printed here too, a demo showed them twice in a row).
    print(f"\n  {race_text.verdict(summary)}")
    from ratiotune.search.optuna_study import record_race

    try:
        record_race(experiment.directory, summary["winner"]["search_trial"], race_text.headline(summary))
    except StudyError as exc:  # the race's result stands; only the dashboard misses it
        print(f"ratiotune: note: the race's winner is not in the Optuna study: {exc}", file=sys.stderr)
    print(f"race details: {race_summary.race_dir(experiment.directory) / 'summary.md'}")
    print(f"its figures, the recommended config as study values, and its agents: ratiotune best {experiment.directory}")
    return 0


def start_ray(address: str | None = None, log_file: Path | None = None) -> None:
    """Start a local Ray, or join the cluster at `address` ("auto" or host:port of its head).

    Shared by every command that runs trials (search, resume, ...). Ray's own log goes to
    log_file (progress.quiet_ray_logging), or to the terminal when it is None (--verbose).
    A head started with `ray start --head` uses token authentication: joining it needs
    RAY_AUTH_MODE=token in the environment (the token is read from ~/.ray/auth_token or RAY_AUTH_TOKEN).
    """
    import ray

    from ratiotune.search.progress import quiet_ray_logging

    logging_kwargs = quiet_ray_logging(log_file)
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


def print_summary(experiment: Experiment, top: int = 5) -> str | None:
    """The trial table, best first. Returns why the study produced nothing (every trial errored,
    no trial reported the metric), or None."""
    study = experiment.study
    metric, mode = study.search.metric, study.search.mode
    ranked = experiment.ranked()
    print(f"\nexperiment: {experiment.directory}  ({len(experiment.trials)} trials)")
    statuses = {trial.name: trial.status(study.train.epochs) for trial in experiment.trials}
    for trial in experiment.trials:
        if statuses[trial.name] == TASK_ERROR:
            print(f"task error: {trial.name}: {trial.task_error}")
        elif statuses[trial.name] in (ERRORED, INFEASIBLE):
            print(f"{statuses[trial.name]}: {trial.name}: {trial.infeasible_reason or error_summary(trial.error) or ''}")
    task_errors = [trial for trial in experiment.trials if statuses[trial.name] == TASK_ERROR]
    if task_errors:
        # The study stopped at the first one (search/stop.py): its figures are a bug's, not a result.
        return (f"the task failed on real answers, so the study stopped ({task_errors[0].name}): {task_errors[0].task_error}. "
                f"Fix the task, then rerun with another --name or delete {experiment.directory}")
    infeasible = sum(status == INFEASIBLE for status in statuses.values())
    errored = sum(status == ERRORED for status in statuses.values())
    print(f"infeasible (diverged) trials: {infeasible}   errored trials: {errored}")
    # A trial can report epochs and then error for good: the table still shows it, the exit status says it.
    all_errored = bool(experiment.trials) and errored == len(experiment.trials)
    failure = f"every trial errored ({errored} of {errored}); see the error lines above and error.txt in {experiment.directory}"
    if not ranked:
        if all_errored:
            return failure
        return f"no trial reported {metric}; see the trial logs in {experiment.directory}"
    searched = study.searched()
    window = study.search.objective_window
    print(f"search ranking by objective = mean {metric} over each trial's last {window} epochs "
          "(selection figures: optimistic for the configs they picked)")
    header = ["trial", *searched, "objective", f"best {metric}", "at epoch", "epochs"]
    rows = [
        [t.name]
        + [format_value(t.config.get(name)) for name in searched]
        + [f"{t.score(metric, window):.3f}", f"{t.best(metric, mode):.3f}", str(t.best_epoch(metric, mode)), str(t.epochs)]
        for t in ranked[:top]
    ]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)))
    best = ranked[0]
    print(
        f"search's top by objective: {best.name}, objective {best.score(metric, window):.4f}; "
        f"best {metric}: {best.best(metric, mode):.4f} at epoch {best.best_epoch(metric, mode)} (optimistic)"
    )
    print(f"best checkpoint: {best.best_checkpoint(metric, mode)}")
    print(f"best config:     ratiotune best {experiment.directory}")
    return failure if all_errored else None


def format_value(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


# --------------------------------------------------------------------------- train


def cmd_train(args: argparse.Namespace) -> int:
    from ratiotune.training import one_run

    study = check_launch(one_run.resolve_study(args.study, args.overrides))
    wandb = WandbSettings(args.wandb_project, args.wandb_entity) if args.wandb else None
    one_run.train(study, args.output or one_run.default_output(study), wandb)
    return 0


# --------------------------------------------------------------------------- resume


def cmd_resume(args: argparse.Namespace) -> int:
    experiment = load_experiment(Path(args.experiment).expanduser().resolve())
    experiment_dir, study = experiment.directory, experiment.study

    from ratiotune.search import resume, launch
    from ratiotune.search.progress import header

    if resume.is_finished(experiment_dir):
        from ratiotune.core.race_summary import load_summary

        if study.race_skipped() is not None or load_summary(experiment_dir) is not None:
            raced = "" if study.race_skipped() is not None else ", and so has its race"
            print(f"{experiment_dir}: the study has finished ({len(experiment.trials)} trials){raced}; nothing to resume")
            return 0
        check_launch(study)
        log_file = ray_log_file(experiment_dir, args.verbose)
        print(f"{experiment_dir}: the search has finished; continuing its race")
        start_ray(args.address, log_file)
        launch.check_resources(study, launch.largest_node_gpus())
        provenance.append_resume(experiment_dir, args.argv)
        return run_race(experiment)
    # The prompts come from the experiment's own prompts/ folder, the model from study.yaml.
    check_launch(study)
    log_file = ray_log_file(experiment_dir, args.verbose)
    print("\n".join(header(study, str(experiment_dir / STUDY_FILE), experiment_dir, log_file)), flush=True)
    print(f"resuming: {len(experiment.trials)} of {study.search.num_samples} trials started before", flush=True)
    start_ray(args.address, log_file)
    launch.check_resources(study, launch.largest_node_gpus())
    provenance.append_resume(experiment_dir, args.argv)
    tuner = resume.restore_tuner(study, experiment_dir, retry_errored=not args.skip_errored)
    return run_to_end(tuner, study, experiment_dir)


# --------------------------------------------------------------------------- best


def cmd_best(args: argparse.Namespace) -> int:
    """The winner as study values: the race's when it has run (with the honest figure), else the search's top."""
    from ratiotune.results.recommended import recommended

    # The same object a notebook gets from ratiotune.read_experiment(...).recommended().
    print(recommended(load_experiment(args.experiment)), end="")
    return 0


# --------------------------------------------------------------------------- dashboard


def cmd_dashboard(args: argparse.Namespace) -> int:
    from ratiotune.results.dashboard import serve

    return serve(Path(args.experiment).expanduser().resolve(), args.host, args.port)


# --------------------------------------------------------------------------- report, check


def cmd_report(args: argparse.Namespace) -> int:
    from ratiotune.results.report import write_report

    path = write_report(args.experiment, args.out, args.metric, args.mode)
    print(f"report: {path}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from ratiotune.training.check import check_study, format_check

    study = check_launch(load_study(args.study, args.overrides))
    check_race_budget(study)
    print(format_check(check_study(study), study, args.study))
    return 0


# --------------------------------------------------------------------------- retrain


def cmd_retrain(args: argparse.Namespace) -> int:
    from ratiotune.search import retrain

    # Every input check happens here, before Ray starts (GPUs: once it has, against the cluster).
    plan = retrain.plan_retrain(
        args.experiment,
        top_k=args.top_k,
        seeds=args.seeds,
        epochs=args.epochs,
        output=args.output,
        eval_prompts=args.eval_prompts,
        overrides=args.overrides,
        from_checkpoint=args.from_checkpoint,
        select_seeds=args.select_seeds,
    )
    log_file = ray_log_file(plan.output, args.verbose)
    from ratiotune.core.hyperparameters import config_text

    print(f"retrain {plan.experiment.directory}: {len(plan.candidates)} config(s) x {len(plan.seeds)} fresh seed(s), "
          f"{plan.study.train.epochs} epochs each, into {plan.output}", flush=True)
    for candidate in plan.candidates:
        print(f"  rank {candidate.rank}: {config_text(candidate.config, plan.study.searched())}", flush=True)
    if log_file is not None:
        print(f"Ray's log: {log_file} (--verbose shows it here)", flush=True)
    start_ray(args.address, log_file)
    retrain.retrain(plan)
    print()
    print((plan.output / "summary.md").read_text(), end="")
    print(f"final agents: {plan.output / 'final'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
