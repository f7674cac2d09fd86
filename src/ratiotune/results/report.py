"""Experiment folder -> an offline report: trials.csv, curves.csv, PNG plots and report.md.

Reads only what `results` reads (JSON/CSV; never unpickles), so it works on finished,
interrupted and still-running experiments and on folders you did not write. The
warnings are the ones a careful engineer writes by hand after a search: a best value
at the edge of its range, a hyperparameter with no effect, a winner inside the noise,
and many failed trials.
"""

from __future__ import annotations

import csv
import math
import warnings as pywarnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ratiotune.results import plots
from ratiotune.core import race_summary
from ratiotune.search import race_text
from ratiotune.core.experiment import (
    ERRORED,
    FINISHED,
    INFEASIBLE,
    STATUSES,
    STOPPED,
    TASK_ERROR,
    UNFINISHED,
    Experiment,
    TrialResult,
    curve_table,
    error_summary,
    load_experiment,
    metric_direction,
    metric_names,
    trial_table,
)
from ratiotune.core.study import ParamSpec, Study, StudyError

TOP = 3  # trials highlighted in the curves and compared for noise
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


# Importance from fewer trials than this is a hint, not a finding (Optuna's TPE itself
# samples at random for its first 10 trials).
FEW_TRIALS = 10
NEAR_ZERO_IMPORTANCE = 0.05  # of a total of 1
EDGE_FRACTION = 0.1  # best value within the outer 10% of its range (log range for loguniform)
FAILED_SHARE = 0.25  # warn when a quarter or more of the trials errored or went infeasible


@dataclass
class Importance:
    values: dict[str, float]  # searched hyperparameter -> importance, summing to 1
    trials: int  # how many trials it was computed from
    method: str = "PED-ANOVA"


@dataclass
class Noise:
    gap: float  # best metric of #1 minus #2
    spread: float  # epoch-to-epoch standard deviation of the top trials' own curves
    epochs_used: int

    @property
    def distinguishable(self) -> bool:
        # Two standard deviations: a gap smaller than that is what re-running the
        # same config would often produce.
        return self.gap > 2 * self.spread


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
    importance = compute_importance(experiment, metric, mode)
    noise = measure_noise(ranked[:TOP], metric, study.search.objective_window)
    found = find_warnings(experiment, metric, mode, importance, noise)
    figures = draw_figures(experiment, ranked, metric, mode, importance, out_dir)
    text = render_markdown(experiment, trials, ranked, metric, mode, importance, noise, found, figures)
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


# --------------------------------------------------------------------------- analysis


def searched(study: Study) -> list[str]:
    return study.searched()


def compute_importance(experiment: Experiment, metric: str, mode: str) -> Importance | None:
    """Hyperparameter importance from an Optuna study rebuilt from the trials that ran cleanly.

    Trials stopped early by ASHA count with the value they reached, as OptunaSearch
    itself recorded them. PED-ANOVA is used because Optuna's default (fANOVA) needs
    scikit-learn; it asks which values the top trials share, compared with all trials.
    """
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances

    study = experiment.study
    names = searched(study)
    distributions = {}
    for name in names:
        spec = study.search.space[name]
        if spec.type == "choice":
            distributions[name] = CategoricalDistribution(list(spec.values))
        elif spec.type == "int":
            distributions[name] = IntDistribution(int(spec.low), int(spec.high))
        else:
            distributions[name] = FloatDistribution(spec.low, spec.high, log=spec.type == "loguniform")
    trials = []
    for trial in experiment.trials:
        value = trial.best(metric, mode)
        if value is None or trial.status(study.train.epochs) not in (FINISHED, STOPPED):
            continue
        try:
            params = {name: trial.config[name] for name in names}
            trials.append(optuna.trial.create_trial(params=params, distributions=distributions, value=value))
        except (KeyError, ValueError):
            continue  # a trial from an older space: its values no longer fit the distributions
    if not names or len(trials) < 2:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rebuilt = optuna.create_study(direction="maximize" if mode == "max" else "minimize")
    rebuilt.add_trials(trials)
    with pywarnings.catch_warnings():
        pywarnings.simplefilter("ignore")  # PED-ANOVA is marked experimental
        try:
            values = get_param_importances(rebuilt, evaluator=PedAnovaImportanceEvaluator())
        except (ValueError, RuntimeError, ZeroDivisionError):
            return None
    values = {name: float(values.get(name, 0.0)) for name in names}
    if not all(math.isfinite(v) for v in values.values()):
        return None
    return Importance(values, len(trials))


def measure_noise(top: list[TrialResult], metric: str, window: int) -> Noise | None:
    """Compare the gap between #1 and #2 with how much their own curves move per epoch.

    The spread is the RMS of consecutive-epoch changes over the second half of each
    top trial's curve, divided by sqrt(2): for a curve that has levelled off,
    Var(x[t+1] - x[t]) = 2 * sigma^2, so this estimates the per-epoch noise sigma
    without counting the early rise as noise.
    """
    if len(top) < 2:
        return None
    changes = []
    for trial in top:
        values = trial.values(metric)
        tail = values[len(values) // 2:]
        changes.extend(b - a for a, b in zip(tail, tail[1:]))
    if len(changes) < 2:
        return None
    # The objective averages `window` epochs, so its own noise is the per-epoch spread / sqrt(window).
    spread = math.sqrt(sum(c * c for c in changes) / len(changes) / 2) / math.sqrt(min(window, len(top[0].values(metric))))
    gap = abs(top[0].score(metric, window) - top[1].score(metric, window))
    return Noise(gap=gap, spread=spread, epochs_used=len(changes))


def find_warnings(
    experiment: Experiment, metric: str, mode: str, importance: Importance | None, noise: Noise | None
) -> list[str]:
    study = experiment.study
    ranked = experiment.ranked(metric, mode)
    found: list[str] = []
    if ranked:
        found.extend(edge_warnings(study, ranked[0]))
    found.extend(no_effect_warnings(study, importance))
    if noise is not None and not noise.distinguishable:
        found.append(
            f"**The winner is not distinguishable from the runner-up.** The top two trials differ by "
            f"{noise.gap:.3f} in their objective (trailing mean of {metric}), while its noise from their own "
            f"curves has an sd of about {noise.spread:.3f} (late epochs). Re-running either config with another seed could "
            f"swap them: the race (race:) re-runs the top configs on paired fresh seeds and gates the winner against the baseline."
        )
    found.extend(failure_warnings(experiment))
    return found


def edge_warnings(study: Study, best: TrialResult) -> list[str]:
    """A best value in the outer part of its range: the optimum may lie outside it."""
    found = []
    for name in searched(study):
        spec = study.search.space[name]
        value = best.config.get(name)
        if value is None:
            continue
        if spec.type == "choice":
            values = sorted(spec.values)
            # With two values every value is an edge; the warning would carry no information.
            if len(values) < 3 or value not in (values[0], values[-1]):
                continue
            side = "largest" if value == values[-1] else "smallest"
            found.append(
                f"**{name} at the edge of its range.** The best trial used {value:g}, the {side} of the values "
                f"searched ({', '.join(f'{v:g}' for v in values)}). Add a "
                f"{'larger' if side == 'largest' else 'smaller'} value to search.space.{name}.values."
            )
            continue
        position = _range_position(spec, float(value))
        if EDGE_FRACTION <= position <= 1 - EDGE_FRACTION:
            continue
        upper = position > 0.5
        scale = " (log scale)" if spec.type == "loguniform" else ""
        found.append(
            f"**{name} at the edge of its range.** The best trial used {value:.3g}, in the "
            f"{'top' if upper else 'bottom'} {EDGE_FRACTION:.0%} of [{spec.low:g}, {spec.high:g}]{scale}: the optimum "
            f"may lie {'above' if upper else 'below'} it. Widen the range, e.g. "
            f"{'high' if upper else 'low'}: {_widened(spec, upper):.2g}."
        )
    return found


def no_effect_warnings(study: Study, importance: Importance | None) -> list[str]:
    found = []
    names = searched(study)
    if "reward_scale" in names and study.train.advantage_normalization:
        found.append(
            "**reward_scale has no effect in this study.** It is searched while train.advantage_normalization is "
            "on: comlrl divides each group's advantages by their standard deviation, so a constant factor on "
            "the reward cancels (one epoch at scale 1 and at 100 from the same seeds ends with weights equal to "
            "~1e-6 relative). Every trial spent on it is wasted; remove it from search.space, or turn "
            "advantage_normalization off if you mean to study the scale. `ratiotune check STUDY.yaml` "
            "measures this on your model before a search."
        )
    if importance is not None:
        flat = [n for n in names if importance.values.get(n, 0.0) < NEAR_ZERO_IMPORTANCE]
        if flat:
            trust = (
                f" Only {importance.trials} trials went into it, too few to trust (≥ {FEW_TRIALS} needed), so read "
                f"this as a hint." if importance.trials < FEW_TRIALS else ""
            )
            found.append(
                f"**Near-zero importance in the data: {', '.join(flat)}.** {importance.method} importance "
                f"below {NEAR_ZERO_IMPORTANCE:g} (of 1): the best trials did not share a particular value of "
                f"{'it' if len(flat) == 1 else 'them'}.{trust} A hyperparameter that does not matter can be fixed "
                f"and its budget spent on the others."
            )
    return found


def failure_warnings(experiment: Experiment) -> list[str]:
    epochs = experiment.study.train.epochs
    total = len(experiment.trials)
    task_errors = [t for t in experiment.trials if t.status(epochs) == TASK_ERROR]
    if task_errors:
        # A bug in the task's own code, whatever the hyperparameters: never blame the learning rate.
        return [
            f"**The task failed on real answers** ({len(task_errors)} of {total} trials; the study stopped at the first): "
            f"`{task_errors[0].task_error}`. Fix the task (reward or measure), then rerun the search."
        ]
    errored = [t for t in experiment.trials if t.status(epochs) == ERRORED]
    infeasible = [t for t in experiment.trials if t.status(epochs) == INFEASIBLE]
    failed = len(errored) + len(infeasible)
    if not total or failed / total < FAILED_SHARE:
        return []
    lines = [f"**{failed} of {total} trials failed** ({len(errored)} errored, {len(infeasible)} infeasible)."]
    causes: dict[str, int] = {}
    for trial in errored:
        cause = error_summary(trial.error) or "no error text"
        causes[cause] = causes.get(cause, 0) + 1
    for cause, count in sorted(causes.items(), key=lambda item: -item[1])[:3]:
        lines.append(f"{count}× `{cause}`.")
    if infeasible:
        rates = sorted(float(t.config["learning_rate"]) for t in infeasible if "learning_rate" in t.config)
        reason = infeasible[0].infeasible_reason
        hint = f" at learning_rate {rates[0]:.3g}–{rates[-1]:.3g}: consider a lower search.space.learning_rate.high" if rates else ""
        lines.append(f"Infeasible (diverged) trials, e.g. `{reason}`{hint}.")
    if errored:  # only errored trials have one; a diverged trial ends cleanly with its reason in result.json
        lines.append("Each errored trial's folder has error.txt with the full traceback.")
    return [" ".join(lines)]


def _range_position(spec: ParamSpec, value: float) -> float:
    """0 at low, 1 at high; in log space for loguniform."""
    if spec.type == "loguniform":
        return (math.log(value) - math.log(spec.low)) / (math.log(spec.high) - math.log(spec.low))
    return (value - spec.low) / (spec.high - spec.low)


def _widened(spec: ParamSpec, upper: bool) -> float:
    """A bound half a range further out (a factor for log ranges)."""
    if spec.type == "loguniform":
        factor = math.sqrt(spec.high / spec.low)
        return spec.high * factor if upper else spec.low / factor
    step = (spec.high - spec.low) / 2
    value = spec.high + step if upper else spec.low - step
    if spec.type == "int":
        value = round(value)
    return max(value, 1) if not upper and spec.type == "int" else value


# --------------------------------------------------------------------------- figures and page


def draw_figures(
    experiment: Experiment, ranked: list[TrialResult], metric: str, mode: str,
    importance: Importance | None, out_dir: Path,
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
    experiment: Experiment, trials: list[dict[str, Any]], ranked: list[TrialResult], metric: str, mode: str,
    importance: Importance | None, noise: Noise | None, found: list[str], figures: dict[str, Path],
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
        lines.append(f"- **Race: {race_text.verdict(summary)}** (race winner or best challenger: search trial "
                     f"{summary['winner']['search_trial']}).")
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
            lines.append(f"- Best checkpoint: `{checkpoint}`; its config as study values: `ratiotune best {experiment.directory}`.")
    else:
        lines.append(f"- No trial has reported {metric} yet.")
    lines.append(
        f"- Trials: {len(trials)} — " + ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s] or s not in (UNFINISHED, TASK_ERROR)) + "."
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
        cells = [str(rank), row["trial"], row["status"], *(_fmt(row.get(n)) for n in names), str(row["epochs"]),
                 _fmt(row.get(f"best {metric}")), _fmt(row.get(f"final {metric}")), f"{row['wall_seconds']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"All {len(trials)} trials: [trials.csv](trials.csv); every epoch of every trial: [curves.csv](curves.csv).")

    sections = [
        ("curves", "Learning curves", f"Every trial's curve; the top {TOP} by best {metric} in colour."),
        ("params", "Searched hyperparameters", "Each trial's value against its best metric. Hollow markers: "
         "stopped early (an early value); markers along the bottom: errored/infeasible trials without a value."),
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
