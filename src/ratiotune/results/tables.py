"""What a finished search prints: each failed trial's line, then the trial table, best first."""

from __future__ import annotations

import pandas as pd

from ratiotune.core.experiment import ERRORED, INFEASIBLE, TASK_ERROR, Experiment, error_summary


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
            reason = trial.infeasible_reason or error_summary(trial.error) or ""
            print(f"{statuses[trial.name]}: {trial.name}: {reason}")
    task_errors = [trial for trial in experiment.trials if statuses[trial.name] == TASK_ERROR]
    if task_errors:
        # The study stopped at the first one (search/stop.py): its figures are a bug's, not a result.
        return (
            f"the task failed on real answers, so the study stopped ({task_errors[0].name}): "
            f"{task_errors[0].task_error}. Fix the task, then rerun with another --name or delete "
            f"{experiment.directory}"
        )
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
    print(
        f"search ranking by objective = mean {metric} over each trial's last {window} epochs "
        "(selection figures: optimistic for the configs they picked)"
    )
    table = pd.DataFrame(
        [
            [
                t.name,
                *(format_value(t.config.get(name)) for name in searched),
                f"{t.score(metric, window):.3f}",
                f"{t.best(metric, mode):.3f}",
                str(t.best_epoch(metric, mode)),
                str(t.epochs),
            ]
            for t in ranked[:top]
        ],
        columns=["trial", *searched, "objective", f"best {metric}", "at epoch", "epochs"],
        dtype=object,
    )
    print(left_aligned(table))
    best = ranked[0]
    print(
        f"search's top by objective: {best.name}, objective {best.score(metric, window):.4f}; "
        f"best {metric}: {best.best(metric, mode):.4f} at epoch {best.best_epoch(metric, mode)} (optimistic)"
    )
    print(f"best checkpoint: {best.best_checkpoint(metric, mode)}")
    print(f"best config:     ratiotune best {experiment.directory}")
    return failure if all_errored else None


def left_aligned(table: pd.DataFrame) -> str:
    """A table of strings as text: every column left-aligned, two spaces between columns (the last one padded
    too). pandas' own layout (values right-aligned, one space between) is not the text `search` has always
    printed, so each cell is padded here and pandas lays out the rows."""
    last = table.columns[-1]

    def pad(width: int, gap: str):
        return lambda value: value.ljust(width) + gap

    formatters = {
        column: pad(max(len(str(column)), int(table[column].str.len().max())), "" if column == last else " ")
        for column in table.columns
    }
    return table.to_string(index=False, justify="left", formatters=formatters)


def format_value(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
