"""What a search's results say beyond its ranking: importance, the winner against the noise, and the warnings.

Pure functions of an experiment (core/experiment.py's records): they return data and print nothing.
`ratiotune report` renders them into report.md; a notebook gets the same object from
`ratiotune.read_experiment(path).diagnostics()`. The warnings are the ones a careful engineer writes
by hand after a search: a best value at the edge of its range, a hyperparameter with no effect, a
winner inside the noise, and many failed trials (Markdown sentences, as report.md lists them).
"""

from __future__ import annotations

import math
import warnings as pywarnings
from dataclasses import dataclass

from ratiotune.core.experiment import (
    ERRORED,
    FINISHED,
    INFEASIBLE,
    STOPPED,
    TASK_ERROR,
    Experiment,
    TrialResult,
    error_summary,
    metric_direction,
)
from ratiotune.core.hyperparameters import held_values
from ratiotune.core.study import ParamSpec, Study

TOP = 3  # trials compared for noise (and highlighted in the report's curves)

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
    names = [n for n in searched(study) if n not in held_values(study)]  # a held value is one constant: nothing to rank
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
        tail = values[len(values) // 2 :]
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
            f"swap them: the race (race:) re-runs the top configs on paired fresh seeds and gates the winner against "
            f"the baseline."
        )
    found.extend(failure_warnings(experiment))
    return found


def edge_warnings(study: Study, best: TrialResult) -> list[str]:
    """A best value in the outer part of its range: the optimum may lie outside it."""
    found = []
    for name in searched(study):
        if name in held_values(study):
            continue  # held at its default: its place in the range says nothing
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
            "**reward_scale has no effect in this study.** It is listed in search.space while "
            "train.advantage_normalization is on: comlrl divides each group's advantages by their standard "
            "deviation, so a constant factor on the reward cancels (one update at scale 1 and at 100 from the same "
            "seeds ends with the same weights, to the bit on builtin:tiny). The search holds it at its default and "
            "every trial records it; trials that differ only in it differ by noise. Turn advantage_normalization "
            "off if you mean to study the scale. `ratiotune check STUDY.yaml` measures this on your model."
        )
    if importance is not None:
        flat = [n for n in importance.values if importance.values[n] < NEAR_ZERO_IMPORTANCE]
        if flat:
            trust = (
                f" Only {importance.trials} trials went into it, too few to trust (≥ {FEW_TRIALS} needed), so read "
                f"this as a hint."
                if importance.trials < FEW_TRIALS
                else ""
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
        hint = (
            f" at learning_rate {rates[0]:.3g}–{rates[-1]:.3g}: consider a lower search.space.learning_rate.high" if rates else ""
        )
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


@dataclass(frozen=True)
class Diagnostics:
    metric: str  # what the trials were ranked by
    mode: str  # ... in which direction ("max" or "min")
    importance: Importance | None  # None: fewer than 2 trials ran cleanly, or nothing is searched
    noise: Noise | None  # the top two trials' gap against their own noise; None with fewer than 2 ranked
    warnings: list[str]  # Markdown sentences, in report.md's order

    @property
    def winner_distinguishable(self) -> bool | None:
        """Does the top trial lead the runner-up by more than the noise? None when it cannot be told."""
        return None if self.noise is None else self.noise.distinguishable


def diagnose(experiment: Experiment, metric: str | None = None, mode: str | None = None) -> Diagnostics:
    """The experiment's diagnostics, the trials ranked by `metric` (default: search.metric) in `mode`
    (default: the metric's own direction), as `ratiotune report` computes them."""
    study = experiment.study
    metric = metric or study.search.metric
    mode = mode or metric_direction(study, metric)
    ranked = experiment.ranked(metric, mode)
    importance = compute_importance(experiment, metric, mode)
    noise = measure_noise(ranked[:TOP], metric, study.search.objective_window)
    return Diagnostics(metric, mode, importance, noise, find_warnings(experiment, metric, mode, importance, noise))
