"""The study file's search: section: the space (ParamSpec), the scheduler, and their validators."""

from __future__ import annotations

import difflib
from typing import Literal, Optional, Union

from pydantic import Field, model_validator

from ratiotune.core.study.config_keys import SEARCHABLE
from ratiotune.core.study.sections import Strict

# Databases an Optuna RDBStorage URL may name (SQLAlchemy dialects, optionally with +driver).
OPTUNA_URL_SCHEMES = ("sqlite", "postgresql", "mysql")


class ParamSpec(Strict):
    type: Literal["loguniform", "uniform", "int", "choice"] = Field(
        description="Distribution: loguniform / uniform over [low, high], int (high included), or choice of values."
    )
    low: Optional[float] = Field(None, description="Smallest value (loguniform, uniform, int).")
    high: Optional[float] = Field(None, description="Largest value (loguniform, uniform, int: included).")
    values: Optional[list[Union[float, int]]] = Field(None, description="The values of a choice.")
    default: Optional[Union[float, int]] = Field(
        None, description="The value `ratiotune train` uses when no --set gives one; must lie inside the space."
    )

    @model_validator(mode="after")
    def _check(self) -> "ParamSpec":
        if self.type == "choice":
            if not self.values:
                raise ValueError("type 'choice' needs a non-empty 'values' list")
            if self.low is not None or self.high is not None:
                raise ValueError("type 'choice' takes 'values', not 'low'/'high'")
            if self.default is not None and self.default not in self.values:
                raise ValueError(f"default {self.default!r} is not one of values {self.values}")
            return self
        if self.values is not None:
            raise ValueError(f"type {self.type!r} takes 'low' and 'high', not 'values'")
        if self.low is None or self.high is None:
            raise ValueError(f"type {self.type!r} needs both 'low' and 'high'")
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be < high ({self.high})")
        if self.type == "loguniform" and self.low <= 0:
            raise ValueError(f"loguniform needs 0 < low < high; got low={self.low}")
        if self.default is not None:
            if not self.low <= self.default <= self.high:
                raise ValueError(f"default {self.default!r} lies outside [low, high] = [{self.low}, {self.high}]")
            if self.type == "int" and not float(self.default).is_integer():
                raise ValueError(f"type 'int' needs an integer default; got {self.default!r}")
        return self

    def bounds(self) -> tuple[float, float]:
        """Smallest and largest value the space can produce."""
        if self.type == "choice":
            return min(self.values), max(self.values)
        return self.low, self.high


class SchedulerSpec(Strict):
    type: Literal["fifo", "asha", "pbt"] = Field(
        "asha", description="fifo: every trial runs all epochs; asha: stop weak trials early; pbt: population-based training."
    )
    grace_period: int = Field(2, ge=1, description="ASHA: epochs every trial runs before it can be stopped.")
    reduction_factor: float = Field(2.0, gt=1, description="ASHA: keep the top 1/reduction_factor at each rung.")
    perturbation_interval: int = Field(
        2, ge=1, description="PBT: epochs between two exploit/explore steps (must be < train.epochs)."
    )
    quantile_fraction: float = Field(
        0.25,
        gt=0,
        le=0.5,
        description="PBT: the bottom fraction of the population copies a trial of the top fraction at each step.",
    )
    resample_probability: float = Field(
        0.25,
        ge=0,
        le=1,
        description="PBT: chance that an explored value is redrawn from the space instead of multiplied by 0.8 or 1.2.",
    )


class SearchSpec(Strict):
    metric: str = Field(
        "eval/in_range_fraction",
        description="What a trial is judged by, every epoch; the search optimises its trailing mean (objective_window). "
        "One of the task's metrics: `ratiotune fields search.metric` lists each builtin task's.",
    )
    mode: Literal["max", "min"] = Field("max", description="Whether a larger metric is better (max) or a smaller one (min).")
    objective_window: int = Field(
        4,
        ge=1,
        description="The searched score: the metric's mean over a trial's last k epochs (search/objective). "
        "Optuna, ASHA, the kept checkpoints and the ranking all use it; 1 = the last epoch alone.",
    )
    baseline: Optional[dict[str, Union[float, int]]] = Field(
        None,
        description="The hand-picked config every search starts with (its first trial) and the winner is compared "
        "with. Must lie inside the space; names it leaves out (or all, when it is not set) take train:'s values, "
        "and when those lie outside the space the study has no baseline.",
    )
    start_with_baseline: bool = Field(True, description="Run the baseline as the first trial (Optuna's points_to_evaluate).")
    num_samples: int = Field(8, ge=1, description="Trials in the study.")
    max_concurrent_trials: int = Field(2, ge=1, description="Trials that run at once (each takes resources.cpu / resources.gpu).")
    max_failures: int = Field(
        2,
        ge=0,
        description="Times a failed trial (process crash, lost node) is restarted from its latest checkpoint "
        "before it is marked errored.",
    )
    sampler: Literal["tpe", "gp", "random", "qmc", "staged"] = Field(
        "tpe",
        description="Optuna sampler, seeded with train.seed: tpe, gp (Gaussian process, noisy objective), random, "
        "qmc (scrambled Sobol), or staged (a grid of lr_points learning rates, each with the next combination of the "
        "other choices, then the grid's configs best first by their pooled objective: search/staged_sampler.py). "
        "tpe and gp draw their first startup_trials trials at random.",
    )
    lr_points: Optional[int] = Field(None, ge=2, description="staged: learning-rate grid points of its first stage (null = 10).")
    startup_trials: Optional[int] = Field(
        None,
        ge=1,
        description="tpe/gp: trials drawn at random (the baseline included) before the sampler models the results; "
        "null = Optuna's default, 10 (an 8-trial study then never leaves the random phase).",
    )
    multivariate: bool = Field(
        False, description="tpe: model the parameters jointly (multivariate TPE) instead of one at a time."
    )
    scheduler: SchedulerSpec = Field(SchedulerSpec(), description="When trials stop early (ASHA) or swap weights (PBT).")
    optuna_storage: Optional[str] = Field(
        None,
        description="Optuna storage URL the study is written to as it runs (sqlite:///studies.db, postgresql://...), "
        "under the experiment's name; null = a journal file, optuna.journal, in the experiment folder. "
        "`ratiotune dashboard` shows it.",
    )
    space: dict[str, ParamSpec] = Field(
        default_factory=dict,
        description="The searched hyperparameters (any of the four searchable train: values) and their ranges.",
    )

    @model_validator(mode="after")
    def _check(self) -> "SearchSpec":
        # `metric` depends on the task: checked by the Study (task_problem).
        for name, spec in self.space.items():
            if name not in SEARCHABLE:
                close = difflib.get_close_matches(name, SEARCHABLE, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"space: {name!r} cannot be searched{hint}; allowed: {', '.join(SEARCHABLE)}")
            _check_space_value(name, spec)
        if self.startup_trials is not None and self.sampler not in ("tpe", "gp"):
            raise ValueError(
                f"startup_trials: {self.startup_trials} is used only by sampler tpe or gp; sampler {self.sampler!r} "
                "draws every trial the same way (remove startup_trials or set sampler: tpe)"
            )
        if self.lr_points is not None and self.sampler != "staged":
            raise ValueError(f"lr_points: {self.lr_points} is used only by sampler staged; sampler is {self.sampler!r}")
        if self.sampler == "staged" and self.space and "learning_rate" not in self.space:
            raise ValueError(
                "sampler: staged sweeps the learning rate first, so space needs learning_rate "
                f"(it has: {', '.join(self.space) or 'nothing'}); or choose tpe, gp, random or qmc"
            )
        if self.multivariate and self.sampler != "tpe":
            raise ValueError(f"multivariate: true is a tpe option; sampler is {self.sampler!r} (set sampler: tpe or remove it)")
        if self.optuna_storage is not None:
            scheme = self.optuna_storage.partition("://")[0].split("+")[0]
            if "://" not in self.optuna_storage or scheme not in OPTUNA_URL_SCHEMES:
                raise ValueError(
                    f"optuna_storage: {self.optuna_storage!r} is not an Optuna database URL; allowed: "
                    f"{', '.join(s + '://...' for s in OPTUNA_URL_SCHEMES)} (e.g. sqlite:///studies.db), "
                    "or leave it unset for a journal file in the experiment folder"
                )
        for name, value in (self.baseline or {}).items():
            if name not in self.space:
                raise ValueError(
                    f"baseline.{name}: not a searched parameter; the baseline names values of: "
                    f"{', '.join(self.space) or '(nothing searched)'}"
                )
            if not spec_contains(self.space[name], value):
                raise ValueError(f"baseline.{name}: {value!r} lies outside the space ({describe_space(self.space[name])})")
        if self.scheduler.type == "pbt":
            if not continuous_params(self.space):
                raise ValueError(
                    "scheduler.type 'pbt' mutates continuous parameters during training; the space has none "
                    "(add e.g. learning_rate: {type: loguniform, low: 1.0e-4, high: 1.0e-2})"
                )
            if self.num_samples < 2:
                raise ValueError(f"scheduler.type 'pbt' needs a population: num_samples must be >= 2; got {self.num_samples}")
        return self


def spec_contains(spec: "ParamSpec", value: float) -> bool:
    if spec.type == "choice":
        return value in spec.values
    if spec.type == "int" and not float(value).is_integer():
        return False
    return spec.low <= value <= spec.high


def describe_space(spec: "ParamSpec") -> str:
    return f"one of {spec.values}" if spec.type == "choice" else f"{spec.type} [{spec.low:g}, {spec.high:g}]"


def continuous_params(space: dict[str, "ParamSpec"]) -> list[str]:
    """The searched parameters PBT mutates mid-run (uniform / loguniform ones)."""
    return [name for name, spec in space.items() if spec.type in ("uniform", "loguniform")]


def _check_space_value(name: str, spec: ParamSpec) -> None:
    """The same range rules as the fixed values in `train`, applied to the whole space."""
    low, high = spec.bounds()
    if name == "num_generations" and low < 2:
        raise ValueError(f"space.num_generations: values must be >= 2 (a group baseline needs two answers); got {low}")
    if name == "max_new_tokens" and low < 1:
        raise ValueError(f"space.max_new_tokens: values must be >= 1; got {low}")
    if name in ("learning_rate", "reward_scale") and low <= 0:
        raise ValueError(f"space.{name}: values must be > 0; got {low}")
    if name in ("num_generations", "max_new_tokens"):
        integral = spec.type in ("int", "choice") and all(float(v).is_integer() for v in (spec.values or [low, high]))
        if not integral:
            raise ValueError(f"space.{name}: must be an integer (type int or choice of integers)")
