"""The report's figures: matplotlib, written as PNG files, read back by nothing.

Every function takes plain values (an Experiment, a metric, a path) and writes one
figure. The Agg backend renders without a display, so this runs on headless nodes.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
from matplotlib.ticker import MaxNLocator  # noqa: E402

from ratiotune.core.experiment import ERRORED, FINISHED, INFEASIBLE, STOPPED, UNFINISHED, Experiment, TrialResult  # noqa: E402
from ratiotune.core.study import ParamSpec  # noqa: E402

# Small, crisp figures: a report page holds several without scrolling forever.
DPI = 110
HIGHLIGHT = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
BACKGROUND = "#b0b0b0"


def learning_curves(experiment: Experiment, top: list[TrialResult], metrics: list[str], path: Path) -> Path:
    """One panel per metric: every trial in grey, the top trials in colour and labelled."""
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 3.8), squeeze=False)
    top_names = [t.name for t in top]
    for ax, metric in zip(axes[0], metrics):
        for trial in experiment.trials:
            if trial.name in top_names:
                continue
            epochs, values = _curve(trial, metric)
            ax.plot(epochs, values, color=BACKGROUND, linewidth=1, alpha=0.8)
        for rank, trial in enumerate(top):
            epochs, values = _curve(trial, metric)
            ax.plot(
                epochs,
                values,
                color=HIGHLIGHT[rank % len(HIGHLIGHT)],
                linewidth=2,
                marker="o",
                markersize=3,
                label=f"#{rank + 1} {trial.name}",
            )
        if len(experiment.trials) > len(top):
            ax.plot([], [], color=BACKGROUND, linewidth=1, label="other trials")
        ax.set_title(metric)
        ax.set_ylabel(metric.rsplit("/", 1)[-1].replace("_", " "))
        _epoch_axis(ax, experiment.study.train.epochs)
    axes[0][0].legend(fontsize=8, loc="best")
    fig.suptitle(f"Learning curves of all {len(experiment.trials)} trials (top {len(top)} highlighted)")
    return _save(fig, path)


def hyperparameter_axes(experiment: Experiment, metric: str, mode: str, path: Path) -> Path:
    """One panel per searched hyperparameter: its value vs the trial's best metric.

    Filled: finished; hollow: stopped early by the scheduler (its value is an early
    one); crosses along the bottom: errored / infeasible trials without a value.
    """
    study = experiment.study
    searched = study.searched()
    # Two panels per row keeps the figure readable at page width.
    columns = min(2, len(searched))
    rows = math.ceil(len(searched) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 3.2 * rows + 0.6), squeeze=False, sharey=True)
    for ax in axes.flat[len(searched) :]:
        ax.set_visible(False)
    scored = [t.best(metric, mode) for t in experiment.trials if t.best(metric, mode) is not None]
    low, high = (min(scored), max(scored)) if scored else (0.0, 1.0)
    floor = low - 0.08 * max(high - low, 1e-3)
    best = experiment.ranked(metric, mode)[:1]
    for ax, name in zip(axes.flat, searched):
        spec = study.search.space[name]
        for index, trial in enumerate(experiment.trials):
            if name not in trial.config:
                continue
            x = _position(spec, trial.config[name], index)
            status = trial.status(study.train.epochs)
            value = trial.best(metric, mode)
            if status in (ERRORED, INFEASIBLE):
                marker, color = ("x", "#d62728") if status == ERRORED else ("^", "#ff7f0e")
                ax.scatter([x], [floor if value is None else value], marker=marker, color=color, s=40, zorder=3)
            elif value is not None:
                color = BACKGROUND if status == UNFINISHED else "#1f77b4"
                ax.scatter([x], [value], s=36, zorder=3, edgecolors=color, facecolors="none" if status == STOPPED else color)
            if best and trial is best[0]:
                ax.scatter([x], [value], marker="*", s=220, color="#ffbf00", edgecolors="black", zorder=4)
        _format_axis(ax, spec)
        ax.set_xlabel(name + (" (log scale)" if spec.type == "loguniform" else ""))
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel(f"best {metric.rsplit('/', 1)[-1]}")
    # One legend for the figure: what each marker means.
    handles = [
        plt.Line2D([], [], marker="o", linestyle="", color="#1f77b4", label=FINISHED),
        plt.Line2D([], [], marker="o", linestyle="", markerfacecolor="none", color="#1f77b4", label=STOPPED),
        plt.Line2D([], [], marker="o", linestyle="", color=BACKGROUND, label=UNFINISHED),
        plt.Line2D([], [], marker="x", linestyle="", color="#d62728", label=ERRORED),
        plt.Line2D([], [], marker="^", linestyle="", color="#ff7f0e", label=INFEASIBLE),
        plt.Line2D([], [], marker="*", linestyle="", markersize=12, color="#ffbf00", markeredgecolor="black", label="best"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(f"Searched hyperparameters vs each trial's best {metric}")
    fig.tight_layout(rect=(0, 0.5 / (3.2 * rows + 0.6), 1, 1))
    return _save(fig, path, tight=False)


def task_figure(figure, trial: TrialResult, epochs: int, path: Path) -> Path:
    """A figure the task draws (tasks.base.TaskFigure) from the trial's curves of every metric it reported."""
    from ratiotune.tasks.base import TrialCurves

    names = {key for row in trial.rows for key in row if "/" in key}
    figure.draw(TrialCurves(trial.name, epochs, {name: _curve(trial, name) for name in sorted(names)}), path)
    plt.close("all")
    return path


def importance_bars(importance: dict[str, float], title: str, path: Path) -> Path:
    """Horizontal bars, most important on top."""
    names = sorted(importance, key=importance.get)
    fig, ax = plt.subplots(figsize=(6.4, 0.5 * len(names) + 1.6))
    bars = ax.barh(names, [importance[n] for n in names], color="#1f77b4")
    ax.bar_label(bars, fmt="%.2f", padding=3, fontsize=8)
    ax.set_xlim(0, 1.12)
    ax.set_xlabel("importance (sums to 1)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


# --------------------------------------------------------------------------- helpers


def _curve(trial: TrialResult, metric: str) -> tuple[list[int], list[float]]:
    points = [
        (int(row["epoch"]), float(row[metric]))
        for row in trial.rows
        if isinstance(row.get(metric), (int, float)) and isinstance(row.get("epoch"), (int, float))
    ]
    return [e for e, _ in points], [v for _, v in points]


def _epoch_axis(ax, epochs: int) -> None:
    """Whole epochs, the study's full length: an unfinished trial shows how far it got."""
    ax.set_xlabel("epoch")
    ax.set_xlim(0.7, max(epochs, 1) + 0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def _position(spec: ParamSpec, value, index: int) -> float:
    """x position: the value itself, or for a choice its slot plus a small, fixed jitter
    (so several trials at one value stay visible)."""
    if spec.type != "choice":
        return float(value)
    slot = sorted(spec.values).index(value) if value in spec.values else -1
    return slot + ((index * 37) % 11 - 5) * 0.02


def _format_axis(ax, spec: ParamSpec) -> None:
    if spec.type == "loguniform":
        ax.set_xscale("log")
        ax.set_xlim(spec.low / 1.5, spec.high * 1.5)
    elif spec.type == "choice":
        values = sorted(spec.values)
        ax.set_xticks(range(len(values)), [f"{v:g}" for v in values])
        ax.set_xlim(-0.5, len(values) - 0.5)
    else:
        span = spec.high - spec.low
        ax.set_xlim(spec.low - 0.05 * span, spec.high + 0.05 * span)
    # Dotted lines at the range's edges: a best point sitting on one asks for a wider range.
    if spec.type != "choice":
        for edge in (spec.low, spec.high):
            ax.axvline(edge, color="black", linestyle=":", linewidth=1)


def _save(fig, path: Path, tight: bool = True) -> Path:
    if tight:
        fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
