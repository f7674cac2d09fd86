"""`ratiotune` command line: a thin front over study, search and results.

Every user error (bad study, bad folder) is a StudyError: printed as one message,
exit status 2, no traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

from ratiotune import provenance
from ratiotune.results import STUDY_FILE, Experiment, load_experiment
from ratiotune.study import SEARCHABLE, Study, StudyError, load_study

EXIT_USAGE = 2


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)  # for provenance.json
    try:
        return args.func(args)
    except StudyError as exc:
        print(f"ratiotune: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ratiotune", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    search = commands.add_parser("search", help="run a study: an Optuna search over Ray Tune trials")
    search.add_argument("study", help="study YAML file, e.g. studies/smoke.yaml")
    search.add_argument("--storage", default="results", help="folder the experiment goes under (default: results/)")
    search.add_argument("--name", help="experiment name (default: the study's name)")
    add_set_flag(search)
    add_wandb_flags(search)
    search.set_defaults(func=cmd_search)

    resume = commands.add_parser(
        "resume", help="continue an interrupted study (reads Ray's pickled state: only folders you trust)"
    )
    resume.add_argument("experiment", help="experiment folder, e.g. results/smoke")
    resume.add_argument("--skip-errored", action="store_true", help="leave errored trials as they are instead of retrying them")
    resume.set_defaults(func=cmd_resume)

    best = commands.add_parser("best", help="print the best trial's config, metric and checkpoint")
    best.add_argument("experiment", help="experiment folder, e.g. results/smoke")
    best.set_defaults(func=cmd_best)
    return parser


def add_set_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a study key, e.g. --set train.epochs=2 (repeatable; validated like the file)",
    )


def add_wandb_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wandb", action="store_true", help="log every trial to W&B (honours WANDB_MODE, WANDB_DIR)")
    parser.add_argument("--wandb-project", help="W&B project (default: ratiotune)")
    parser.add_argument("--wandb-entity", help="W&B entity (default: your W&B default)")


# --------------------------------------------------------------------------- search


def cmd_search(args: argparse.Namespace) -> int:
    overrides = list(args.overrides) + ([f"name={args.name}"] if args.name else [])
    study = load_study(args.study, overrides)
    experiment_dir = Path(args.storage).expanduser().resolve() / study.name
    if experiment_dir.exists():
        raise StudyError(f"{experiment_dir} already exists; pass another --name (experiments are never overwritten)")

    from ratiotune import search

    search.check_resources(study, search.local_gpu_count())
    experiment_dir.mkdir(parents=True)
    (experiment_dir / STUDY_FILE).write_text(study.to_yaml())
    provenance.write(experiment_dir, args.argv)
    wandb = search.WandbSettings(args.wandb_project, args.wandb_entity) if args.wandb else None
    start_ray()
    return run_to_end(search.build_tuner(study, experiment_dir, wandb), study, experiment_dir)


def run_to_end(tuner, study: Study, experiment_dir: Path) -> int:
    """Fit; on an interruption print the one-line resume hint and exit non-zero."""
    from ratiotune import resume

    if not resume.fit(tuner, study, experiment_dir):
        print(resume.interrupted_hint(experiment_dir), file=sys.stderr)
        return resume.EXIT_INTERRUPTED
    print_summary(load_experiment(experiment_dir))
    return 0


def start_ray() -> None:
    import ray

    # Ray's classic trial table lets us choose its columns (params + headline metrics).
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    ray.init(include_dashboard=False, configure_logging=True, logging_level="WARNING")


def print_summary(experiment: Experiment, top: int = 5) -> None:
    study = experiment.study
    metric, mode = study.search.metric, study.search.mode
    ranked = experiment.ranked()
    print(f"\nexperiment: {experiment.directory}  ({len(experiment.trials)} trials)")
    for trial in experiment.trials:
        if trial.status != "ok":
            print(f"{trial.status}: {trial.name}: {trial.infeasible_reason or last_line(trial.error)}")
    infeasible = sum(t.status == "infeasible" for t in experiment.trials)
    errored = sum(t.status == "errored" for t in experiment.trials)
    print(f"infeasible (diverged) trials: {infeasible}   errored trials: {errored}")
    if not ranked:
        print(f"no trial reported {metric}")
        return
    searched = [name for name in SEARCHABLE if name in study.search.space]
    header = ["trial", *searched, f"best {metric}", "epochs"]
    rows = [
        [t.name]
        + [format_value(t.config.get(name)) for name in searched]
        + [f"{t.best(metric, mode):.3f}", str(t.epochs)]
        for t in ranked[:top]
    ]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)))
    checkpoint = ranked[0].best_checkpoint(metric, mode)
    print(f"best checkpoint: {checkpoint}")
    print(f"best config:     ratiotune best {experiment.directory}")


def last_line(text: str | None) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def format_value(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


# --------------------------------------------------------------------------- resume


def cmd_resume(args: argparse.Namespace) -> int:
    experiment = load_experiment(Path(args.experiment).expanduser().resolve())
    experiment_dir, study = experiment.directory, experiment.study

    from ratiotune import resume, search

    if resume.is_finished(experiment_dir):
        print(f"{experiment_dir}: the study has finished ({len(experiment.trials)} trials); nothing to resume")
        return 0
    search.check_resources(study, search.local_gpu_count())
    provenance.append_resume(experiment_dir, args.argv)
    start_ray()
    tuner = resume.restore_tuner(study, experiment_dir, retry_errored=not args.skip_errored)
    return run_to_end(tuner, study, experiment_dir)


# --------------------------------------------------------------------------- best


def cmd_best(args: argparse.Namespace) -> int:
    experiment = load_experiment(args.experiment)
    study = experiment.study
    metric, mode = study.search.metric, study.search.mode
    ranked = experiment.ranked()
    if not ranked:
        raise StudyError(f"{experiment.directory}: no trial reported {metric} yet")
    best = ranked[0]
    fragment = {"train": best_train_values(study, best.config)}
    print(f"# best trial: {best.name}")
    print(f"# {metric} ({mode}): {best.best(metric, mode):.4f} after {best.epochs} epochs")
    print(f"# checkpoint: {best.best_checkpoint(metric, mode)}")
    print(yaml.safe_dump(fragment, sort_keys=False), end="")
    return 0


def best_train_values(study: Study, config: dict) -> dict:
    """The trial's four hyperparameters as fixed `train:` values a study file accepts."""
    return study.hyperparameters(config)


if __name__ == "__main__":
    sys.exit(main())
