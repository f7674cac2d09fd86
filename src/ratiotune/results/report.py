"""Experiment folder -> an offline report: trials.csv, curves.csv, PNG plots and report.md.

Reads only what `results` reads (JSON/CSV; never unpickles), so it works on finished,
interrupted and still-running experiments and on folders you did not write. What it says
beyond the tables (importance, the noise, the warnings) is results/diagnostics.py's: this
module renders it.
"""

from __future__ import annotations

import csv
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ratiotune.results import plots
from ratiotune.core import race_summary
from ratiotune.results.diagnostics import FEW_TRIALS, TOP, Importance, Noise, diagnose, searched
from ratiotune.search import race_text
from ratiotune.core.experiment import (
    STATUSES,
    STOPPED,
    TASK_ERROR,
    UNFINISHED,
    Experiment,
    TrialResult,
    curve_table,
    load_experiment,
    metric_direction,
    metric_names,
    trial_table,
)
from ratiotune.core.study import StudyError

TOP_TABLE = 5  # rows of the top-trials table in report.md (trials.csv has them all)


def curve_metrics(study) -> tuple[str, ...]:
    """The eval curves every report draws: the task's headline metric and the mean reward
    (length-ratio: eval/in_range_fraction, eval/mean_reward)."""
    return tuple(f"eval/{n}" for n in dict.fromkeys((study.metrics().headline, "mean_reward")))


def task_figures(study) -> tuple:
    """The figures the study's task adds to the report (tasks.base.TaskFigure); none when the task
    cannot be made here (its module is missing): the report stands without them."""
    from ratiotune.tasks import TaskLoadError

    try:
        return tuple(study.get_task().figures)
    except (TaskLoadError, StudyError):
        return ()


def write_report(
    experiment_dir: str | Path, out: str | Path | None = None, metric: str | None = None, mode: str | None = None
) -> Path:
    """Write the report files into `out` (default EXPERIMENT_DIR/report/); returns report.md."""
    experiment = load_experiment(experiment_dir)
    study = experiment.study
    metric = metric or study.search.metric
    # Another metric ranks the way the metrics table says it improves (max for descriptive ones).
    table = study.metrics()
    mode = mode or metric_direction(study, metric)
    available = metric_names(experiment)
    if metric not in available and metric not in table.reported:
        raise StudyError(f"--metric {metric!r} is not a reported metric; allowed: {', '.join(available or table.reported)}")
    out_dir = Path(out) if out else experiment.directory / "report"
    out_dir.mkdir(parents=True, exist_ok=True)

    trials = trial_table(experiment, metric, mode)
    write_csv(out_dir / "trials.csv", trials)
    write_csv(out_dir / "curves.csv", curve_table(experiment))

    ranked = experiment.ranked(metric, mode)
    # The same object a notebook gets from ratiotune.read_experiment(...).diagnostics().
    found = diagnose(experiment, metric, mode)
    figures = draw_figures(experiment, ranked, metric, mode, found.importance, out_dir)
    text = render_markdown(experiment, trials, ranked, metric, mode, found.importance, found.noise, found.warnings, figures)
    path = out_dir / "report.md"
    path.write_text(text)
    return path


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


# --------------------------------------------------------------------------- figures and page


def draw_figures(
    experiment: Experiment,
    ranked: list[TrialResult],
    metric: str,
    mode: str,
    importance: Importance | None,
    out_dir: Path,
) -> dict[str, Path]:
    study = experiment.study
    figures = {}
    curves = [m for m in dict.fromkeys((metric, *curve_metrics(study))) if m in metric_names(experiment)]
    if curves and experiment.trials:
        figures["curves"] = plots.learning_curves(experiment, ranked[:TOP], curves, out_dir / "learning_curves.png")
    if searched(study) and experiment.trials:
        figures["params"] = plots.hyperparameter_axes(experiment, metric, mode, out_dir / "hyperparameters.png")
    for figure in task_figures(study) if ranked else ():
        figures[figure.name] = plots.task_figure(figure, ranked[0], study.train.epochs, out_dir / f"{figure.name}.png")
    if importance is not None:
        title = f"{importance.method} importance for {metric}, {importance.trials} trials"
        if importance.trials < FEW_TRIALS:
            title += f"\n(fewer than {FEW_TRIALS}: indicative only)"
        figures["importance"] = plots.importance_bars(importance.values, title, out_dir / "importance.png")
    return figures


def render_markdown(
    experiment: Experiment,
    trials: list[dict[str, Any]],
    ranked: list[TrialResult],
    metric: str,
    mode: str,
    importance: Importance | None,
    noise: Noise | None,
    found: list[str],
    figures: dict[str, Path],
) -> str:
    study = experiment.study
    names = searched(study)
    epochs = study.train.epochs
    counts = {status: sum(1 for row in trials if row["status"] == status) for status in STATUSES}
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Study report: {study.name}",
        "",
        f"Experiment `{experiment.directory}`, read {stamp}. Ranked by **{metric}** ({mode}); "
        f"{study.search.num_samples} trials planned, {epochs} epochs each, model `{study.model.name}`.",
        "",
        "## Summary",
        "",
    ]
    summary = race_summary.load_summary(experiment.directory) if metric == study.search.metric else None
    if summary is not None:
        lines.append(
            f"- **Race: {race_text.verdict(summary)}** (race winner or best challenger: search trial "
            f"{summary['winner']['search_trial']})."
        )
        lines += [f"  - {line}" for line in race_text.headline(summary)[1:]]
        lines.append(f"  - Every round and seed: `{race_summary.race_dir(experiment.directory) / 'summary.md'}`.")
    elif study.race_skipped() is None and metric == study.search.metric:
        lines.append(f"- No honest figure yet: the race has not finished (`ratiotune resume {experiment.directory}`).")
    if ranked:
        best = ranked[0]
        window = study.search.objective_window
        config = ", ".join(f"{n} = {_fmt(best.config.get(n))}" for n in names)
        lines.append(
            f"- **Search's top by objective: {best.name}**, mean {metric} over its last {window} epochs = "
            f"**{best.score(metric, window):.3f}**; its best single epoch {best.best(metric, mode):.3f} at epoch "
            f"{best.best_epoch(metric, mode)} of {best.epochs} ({config}). Selection figures: optimistic, "
            "they picked this trial."
        )
        checkpoint = best.best_checkpoint(metric, mode)
        if checkpoint:
            lines.append(
                f"- Best checkpoint: `{checkpoint}`; its config as study values: `ratiotune best {experiment.directory}`."
            )
    else:
        lines.append(f"- No trial has reported {metric} yet.")
    lines.append(
        f"- Trials: {len(trials)} — "
        + ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s] or s not in (UNFINISHED, TASK_ERROR))
        + "."
    )
    if counts[UNFINISHED]:
        lines.append(
            f"- {counts[UNFINISHED]} trial(s) unfinished: the study is still running or was interrupted "
            "(this report reads what is on disk; an interrupted study continues with `ratiotune resume`)."
        )
    if counts[STOPPED]:
        lines.append(
            f"- Trials stopped early by {study.search.scheduler.type.upper()} rank by the value they reached before "
            "stopping, as the searcher recorded them; that is fair for a metric that grows with training."
        )
    lines.append(f"- Compute: {_compute(experiment)}.")
    if noise is not None:
        verdict = "clear of" if noise.distinguishable else "within"
        lines.append(
            f"- Noise: #1 leads #2 by {noise.gap:.3f} in objective; the objective's noise from the top trials' "
            f"epoch-to-epoch changes has an sd of {noise.spread:.3f} "
            f"(from {noise.epochs_used} late-epoch changes), so the lead is {verdict} the noise."
        )
    lines += ["", "## Warnings", ""]
    lines += [f"- {w}" for w in found] if found else ["None: no edge values, no dead hyperparameters, no failures."]

    lines += ["", "## Top trials", ""]
    header = ["rank", "trial", "status", *names, "epochs", f"best {metric}", f"final {metric}", "wall s"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" for _ in header) + "|")
    scored = [row for row in trials if row.get(f"best {metric}") is not None]
    for rank, row in enumerate(scored[:TOP_TABLE], start=1):
        cells = [
            str(rank),
            row["trial"],
            row["status"],
            *(_fmt(row.get(n)) for n in names),
            str(row["epochs"]),
            _fmt(row.get(f"best {metric}")),
            _fmt(row.get(f"final {metric}")),
            f"{row['wall_seconds']:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"All {len(trials)} trials: [trials.csv](trials.csv); every epoch of every trial: [curves.csv](curves.csv).")

    sections = [
        ("curves", "Learning curves", f"Every trial's curve; the top {TOP} by the search's objective in colour."),
        (
            "params",
            "Searched hyperparameters",
            "Each trial's value against its best metric. Hollow markers: "
            "stopped early (an early value); markers along the bottom: errored/infeasible trials without a value.",
        ),
        # The task's own figures, in its own words (length-ratio: how the best trial reached the ratio).
        *((f.name, f.title, f.caption) for f in task_figures(study)),
        ("importance", "Hyperparameter importance", _importance_note(importance)),
    ]
    for key, title, caption in sections:
        if key not in figures:
            continue
        lines += ["", f"## {title}", "", caption, "", f"![{title}]({figures[key].name})"]
    if importance is not None:
        lines += ["", "| hyperparameter | importance |", "|---|---|"]
        lines += [f"| {n} | {v:.2f} |" for n, v in sorted(importance.values.items(), key=lambda kv: -kv[1])]
    elif names:
        lines += ["", "## Hyperparameter importance", "", "Not computed: it needs at least 2 trials that ran cleanly."]
    return "\n".join(lines) + "\n"


def _importance_note(importance: Importance | None) -> str:
    if importance is None:
        return ""
    note = (
        f"{importance.method} (Optuna) over the {importance.trials} trials that ran cleanly (finished or stopped "
        f"early), in an Optuna study rebuilt from their values and the searched distributions."
    )
    if importance.trials < FEW_TRIALS:
        note += f" **{importance.trials} trials are too few to trust it** (≥ {FEW_TRIALS} needed): read it as a hint."
    return note


def _compute(experiment: Experiment) -> str:
    study = experiment.study
    seconds = sum(t.wall_seconds for t in experiment.trials)
    epochs = sum(t.epochs for t in experiment.trials)
    stamps = [row for t in experiment.trials for row in t.rows if isinstance(row.get("timestamp"), (int, float))]
    parts = [f"{epochs} epochs in {len(experiment.trials)} trials", f"{seconds / 60:.1f} trial-minutes"]
    parts.append(f"{seconds * study.resources.cpu / 3600:.2f} CPU-hours")
    if study.resources.gpu:
        parts.append(f"{seconds * study.resources.gpu / 3600:.2f} GPU-hours")
    if stamps:
        start = min(row["timestamp"] - float(row.get("time_this_iter_s", 0) or 0) for row in stamps)
        parts.append(f"{(max(row['timestamp'] for row in stamps) - start) / 60:.1f} min wall clock")
    return ", ".join(parts)


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-2 or abs(value) >= 1e4 else f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)
