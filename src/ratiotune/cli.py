"""`ratiotune` command line: a thin front over study, search and results.

Every user error (bad study, bad folder, a model that cannot be had) is a StudyError:
printed as one message, exit status 2, no traceback. A study that ran but produced
nothing (every trial errored, or none reported the metric) exits 1, an interrupted one 130
(search/study_run.py's RunStopped).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ratiotune.core.experiment import load_experiment
from ratiotune.core.study import StudyError, check_launch, check_race_budget, load_study
from ratiotune.core.wandb_settings import WandbSettings
from ratiotune.search.study_run import RunStopped
from ratiotune.tasks import TaskError

EXIT_USAGE = 2  # a StudyError (search/study_run.py: EXIT_NO_RESULT, a study that ran but produced nothing)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)  # for provenance.json
    try:
        return args.func(args)
    except RunStopped as exc:  # started, then interrupted or left without a result: its own line and exit status
        print(exc.line, file=sys.stderr)
        return exc.exit_code
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
        "--storage",
        default="results",
        help="folder the experiment goes under (default: results/); on several nodes a shared path or a URI (s3://bucket/dir)",
    )
    search.add_argument("--name", help="experiment name (default: the study's name)")
    search.add_argument(
        "--optuna-storage",
        metavar="URL",
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
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a searched hyperparameter's value (--set learning_rate=1e-3; else its `default:`) "
        "or a study key (--set train.epochs=2); repeatable",
    )
    train.add_argument("--output", type=Path, help="run folder (default: results/<study name>-train-<time>); never overwritten")
    add_wandb_flags(train)
    train.set_defaults(func=cmd_train)

    resume = commands.add_parser(
        "resume", help="continue an interrupted study or retrain (reads Ray's pickled state: only folders you trust)"
    )
    resume.add_argument("experiment", help="experiment folder (e.g. results/smoke) or a retrain's output folder")
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
    retrain.add_argument(
        "--top-k", type=int, default=1, help="configs to retrain: the race's recommendation, then its survivors (default: 1)"
    )
    retrain.add_argument("--seeds", type=int, default=3, help="fresh report seeds for the winner (default: 3)")
    retrain.add_argument(
        "--select-seeds", type=int, help="fresh selection seeds per config when --top-k > 1, never reported on (default: --seeds)"
    )
    retrain.add_argument("--epochs", type=int, help="epochs per run (default: the study's)")
    retrain.add_argument("--output", help="output folder (default: EXPERIMENT/retrain; never overwritten)")
    retrain.add_argument("--eval-prompts", help="held-out prompt file (.txt/.jsonl) instead of the study's")
    retrain.add_argument(
        "--from-checkpoint", action="store_true", help="continue each trial's best checkpoint for --epochs more epochs"
    )
    add_address_flag(retrain)
    add_verbose_flag(retrain)
    add_set_flag(retrain)
    retrain.set_defaults(func=cmd_retrain)

    dashboard = commands.add_parser(
        "dashboard", help="optuna-dashboard on an experiment's Optuna study (also while it runs); Ctrl-C stops it"
    )
    dashboard.add_argument("experiment", help="experiment folder, e.g. results/smoke")
    dashboard.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, this machine only: the dashboard can edit and delete studies)",
    )
    dashboard.add_argument("--port", type=int, default=8080, help="port to listen on (default: 8080)")
    dashboard.set_defaults(func=cmd_dashboard)

    fields = commands.add_parser("fields", help="list every study field: type, default, description")
    fields.add_argument("prefix", nargs="?", default="", help="only fields under this key, e.g. search or train.top_p")
    fields.add_argument(
        "--markdown",
        nargs="?",
        const="-",
        metavar="FILE",
        help="the fields as a Markdown table: printed, or written into FILE between its "
        f"{FIELDS_BEGIN} and {FIELDS_END} lines (docs/study-file.md's table is made this way)",
    )
    fields.add_argument(
        "--json-schema", action="store_true", help="the whole study schema as JSON Schema, for an editor (docs/study-file.md)"
    )
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
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a study key, e.g. --set train.epochs=2 (repeatable; validated like the file)",
    )


def add_address_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--address",
        metavar="ADDR",
        help="join an existing Ray cluster (auto, or host:port of its head) instead of starting a local Ray; "
        "a head from `ray start --head` also needs RAY_AUTH_MODE=token in this environment",
    )


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Ray's own log and the trial processes' output here "
        "(default: Ray's log goes to ray.log in the experiment folder)",
    )


def add_wandb_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wandb", action="store_true", help="log every trial to W&B (honours WANDB_MODE, WANDB_DIR)")
    parser.add_argument("--wandb-project", help="W&B project (default: ratiotune)")
    parser.add_argument("--wandb-entity", help="W&B entity (default: your W&B default)")


# --------------------------------------------------------------------------- search


def cmd_search(args: argparse.Namespace) -> int:
    from ratiotune.results.tables import print_summary
    from ratiotune.search import study_run

    # The code path ratiotune.search(...) takes too (results/python_api.py); --name and --optuna-storage are overrides.
    overrides = list(args.overrides) + ([f"name={args.name}"] if args.name else [])
    overrides += [f"search.optuna_storage={args.optuna_storage}"] if args.optuna_storage else []
    study_run.search(
        args.study,
        overrides=overrides,
        storage_root=args.storage,
        address=args.address,
        verbose=args.verbose,
        wandb=wandb_settings(args),
        argv=args.argv,
        summarize=print_summary,
    )
    return 0


def wandb_settings(args: argparse.Namespace) -> WandbSettings | None:
    return WandbSettings(args.wandb_project, args.wandb_entity) if args.wandb else None


# --------------------------------------------------------------------------- train


def cmd_train(args: argparse.Namespace) -> int:
    from ratiotune.training import one_run

    study = check_launch(one_run.resolve_study(args.study, args.overrides))
    one_run.train(study, args.output or one_run.default_output(study), wandb_settings(args))
    return 0


# --------------------------------------------------------------------------- resume


def cmd_resume(args: argparse.Namespace) -> int:
    from ratiotune.results.tables import print_summary
    from ratiotune.search import study_run

    return study_run.resume(
        args.experiment,
        skip_errored=args.skip_errored,
        address=args.address,
        verbose=args.verbose,
        argv=args.argv,
        summarize=print_summary,
    )


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
    from ratiotune.search import study_run

    return study_run.retrain(
        args.experiment,
        address=args.address,
        verbose=args.verbose,
        top_k=args.top_k,
        seeds=args.seeds,
        epochs=args.epochs,
        output=args.output,
        eval_prompts=args.eval_prompts,
        overrides=args.overrides,
        from_checkpoint=args.from_checkpoint,
        select_seeds=args.select_seeds,
    )


if __name__ == "__main__":
    sys.exit(main())
