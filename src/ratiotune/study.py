"""The study file: a typed schema, validated once at the edge, plus `--set` overrides.

Everything downstream receives a `Study` value and trusts it. A bad file raises
`StudyError` with one line per problem, naming the field, the value and what is allowed.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ratiotune.models import BUILTIN_MODELS, looks_like_path
from ratiotune.task import BUILTIN_PROMPTS

# The four hyperparameters a study may search; each is fixed in `train` unless searched.
SEARCHABLE = ("learning_rate", "num_generations", "max_new_tokens", "reward_scale")

# Every metric the trainable reports; `search.metric` must be one of them.
TASK_METRICS = (
    "mean_reward",
    "in_range_fraction",
    "mean_chars_agent1",
    "mean_chars_agent2",
    "mean_ratio",
    "flat_group_fraction",
)
REPORTED_METRICS = (
    *(f"{split}/{name}" for split in ("train", "eval") for name in TASK_METRICS),
    "epoch",
    "system/epoch_seconds",
    "system/tokens_per_second",
)


class StudyError(Exception):
    """A study that cannot run. The message is for people: field, value, what is allowed."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelSpec(Strict):
    name: str = Field("builtin:tiny", description="Hub id, local directory, or builtin:tiny / builtin:qwen-vocab / builtin:qwen2.5-0.5b-shape.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="Compute dtype of the forward passes (autocast; weights and AdamW stay float32); auto = float32 on CPU, bfloat16 on GPU."
    )

    @model_validator(mode="after")
    def _exists(self) -> "ModelSpec":
        if self.name.startswith("builtin:") and self.name not in BUILTIN_MODELS:
            raise ValueError(f"unknown builtin model {self.name!r}; allowed: {', '.join(BUILTIN_MODELS)}")
        if self.name.startswith((".", "/", "~")) and not Path(self.name).expanduser().is_dir():
            raise ValueError(f"model directory {self.name!r} does not exist")
        return self


class TaskSpec(Strict):
    target_min: float = Field(2.0, gt=0, description="Lower bound of the rewarded len2/len1 band.")
    target_max: float = Field(3.0, gt=0, description="Upper bound of the rewarded band.")
    train_prompts: str = Field("builtin:train", description="builtin:train, builtin:tutorial, or a .txt/.jsonl file.")
    eval_prompts: str = Field("builtin:eval", description="Held-out prompts for the fixed eval protocol.")
    eval_samples_per_prompt: int = Field(
        4, ge=1, description="Sampled answer pairs per eval prompt; the same for every trial so trials compare fairly."
    )

    @model_validator(mode="after")
    def _check(self) -> "TaskSpec":
        if self.target_min > self.target_max:
            raise ValueError(f"target_min ({self.target_min}) must be <= target_max ({self.target_max})")
        for field in ("train_prompts", "eval_prompts"):
            value = getattr(self, field)
            if value not in BUILTIN_PROMPTS and not Path(value).is_file():
                raise ValueError(f"{field}: {value!r} is neither a file nor one of {', '.join(BUILTIN_PROMPTS)}")
        return self


class TrainSpec(Strict):
    epochs: int = Field(10, ge=1, description="Epochs per trial (one epoch = every training prompt once).")
    seed: int = Field(0, description="Seeds python/numpy/torch in every trial, the eval protocol and the sampler.")
    learning_rate: float = Field(5e-5, gt=0, description="AdamW learning rate, unless searched.")
    num_generations: int = Field(8, ge=2, description="Answers per prompt and agent (the group); >= 2 for a baseline.")
    max_new_tokens: int = Field(128, ge=1, description="Generation budget per answer.")
    reward_scale: float = Field(100.0, gt=0, description="RewardProcessors.scale factor (cancels under advantage normalization).")
    temperature: float = Field(0.6, gt=0)
    top_p: float = Field(0.6, gt=0, le=1)
    top_k: Optional[int] = Field(None, ge=1, description="None = sample from the whole (top-p) distribution.")
    advantage_normalization: bool = True
    advantage_mode: Literal["mean", "raw", "max", "rloo"] = "mean"
    rollout_buffer_size: int = Field(2, ge=1, description="Prompts collected before each update.")
    train_batch_size: Optional[int] = Field(None, ge=1)
    fast_update: bool = Field(
        True,
        description="Batched policy-gradient loss (same gradients as comlrl, several times faster with a large "
        "vocabulary); false runs comlrl's own per-token loss.",
    )


class ParamSpec(Strict):
    type: Literal["loguniform", "uniform", "int", "choice"]
    low: Optional[float] = None
    high: Optional[float] = None
    values: Optional[list[Union[float, int]]] = None
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
    type: Literal["fifo", "asha", "pbt"] = "asha"
    grace_period: int = Field(2, ge=1, description="ASHA: epochs every trial runs before it can be stopped.")
    reduction_factor: float = Field(2.0, gt=1, description="ASHA: keep the top 1/reduction_factor at each rung.")
    perturbation_interval: int = Field(
        2, ge=1, description="PBT: epochs between two exploit/explore steps (must be < train.epochs)."
    )
    quantile_fraction: float = Field(
        0.25, gt=0, le=0.5,
        description="PBT: the bottom fraction of the population copies a trial of the top fraction at each step.",
    )
    resample_probability: float = Field(
        0.25, ge=0, le=1,
        description="PBT: chance that an explored value is redrawn from the space instead of multiplied by 0.8 or 1.2.",
    )


class SearchSpec(Strict):
    metric: str = "eval/in_range_fraction"
    mode: Literal["max", "min"] = "max"
    num_samples: int = Field(8, ge=1, description="Trials in the study.")
    max_concurrent_trials: int = Field(2, ge=1)
    max_failures: int = Field(
        2, ge=0, description="Times a failed trial (process crash, lost node) is restarted from its latest checkpoint before it is marked errored."
    )
    sampler: Literal["tpe", "random", "qmc"] = "tpe"
    scheduler: SchedulerSpec = SchedulerSpec()
    space: dict[str, ParamSpec] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> "SearchSpec":
        if self.metric not in REPORTED_METRICS:
            close = difflib.get_close_matches(self.metric, REPORTED_METRICS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"metric {self.metric!r} is not reported by the trainable{hint}; allowed: {', '.join(REPORTED_METRICS)}")
        for name, spec in self.space.items():
            if name not in SEARCHABLE:
                close = difflib.get_close_matches(name, SEARCHABLE, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"space: {name!r} cannot be searched{hint}; allowed: {', '.join(SEARCHABLE)}")
            _check_space_value(name, spec)
        if self.scheduler.type == "pbt":
            if not continuous_params(self.space):
                raise ValueError(
                    "scheduler.type 'pbt' mutates continuous parameters during training; the space has none "
                    "(add e.g. learning_rate: {type: loguniform, low: 1.0e-4, high: 1.0e-2})"
                )
            if self.num_samples < 2:
                raise ValueError(f"scheduler.type 'pbt' needs a population: num_samples must be >= 2; got {self.num_samples}")
        return self


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
        0.0, ge=0,
        description="GPUs per trial: 0 = CPU; a fraction (0.25) packs 1/gpu trials on one GPU; 1; or 2 = one GPU per agent.",
    )

    @model_validator(mode="after")
    def _check_gpu(self) -> "ResourcesSpec":
        # Ray takes fractions only below 1, and two agents cannot use more than two GPUs.
        if not (self.gpu <= 1 or self.gpu == 2):
            raise ValueError(f"gpu: {self.gpu:g} is not allowed; use 0, a fraction up to 1 (e.g. 0.25), 1, or 2 (one GPU per agent)")
        return self


class CheckpointSpec(Strict):
    num_to_keep: int = Field(2, ge=1, description="Checkpoints kept per trial, best by the study metric.")
    keep_best_trials: Optional[int] = Field(
        None, ge=1, description="When the study ends, delete the checkpoints of all but the best K trials (None = keep all)."
    )


class Study(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    model: ModelSpec = ModelSpec()
    task: TaskSpec = TaskSpec()
    train: TrainSpec = TrainSpec()
    search: SearchSpec = SearchSpec()
    resources: ResourcesSpec = ResourcesSpec()
    checkpoint: CheckpointSpec = CheckpointSpec()

    @model_validator(mode="after")
    def _check_pbt(self) -> "Study":
        interval = self.search.scheduler.perturbation_interval
        if self.search.scheduler.type == "pbt" and interval >= self.train.epochs:
            raise ValueError(
                f"search.scheduler.perturbation_interval ({interval}) must be < train.epochs ({self.train.epochs}), "
                "or no trial is ever perturbed"
            )
        return self

    def hyperparameters(self, config: dict[str, Any]) -> dict[str, Any]:
        """The four searchable values for one trial: the trial's config over the study's fixed ones."""
        values = {name: getattr(self.train, name) for name in SEARCHABLE}
        values.update({k: v for k, v in config.items() if k in SEARCHABLE})
        for name in ("num_generations", "max_new_tokens"):
            values[name] = int(values[name])
        for name in ("learning_rate", "reward_scale"):
            values[name] = float(values[name])
        return values

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json", exclude_none=True), sort_keys=False)


# --------------------------------------------------------------------------- loading


def load_study(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Study:
    """Read, override (`dotted.key=value`) and validate a study file."""
    path = Path(path)
    if not path.is_file():
        raise StudyError(f"study file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text("utf-8"))
    except yaml.YAMLError as exc:
        raise StudyError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise StudyError(f"{path}: a study is a YAML mapping (name:, model:, train:, ...); got {type(raw).__name__}")
    for override in overrides:
        apply_override(raw, override)
    return validate_study(raw, source=str(path))


def apply_override(raw: dict[str, Any], override: str) -> None:
    """`search.num_samples=4` sets raw['search']['num_samples'] = 4 (the value parsed as YAML)."""
    key, sep, text = override.partition("=")
    if not sep or not key:
        raise StudyError(f"--set {override!r}: expected dotted.key=value, e.g. train.epochs=2")
    try:
        value = yaml.safe_load(text) if text else ""
    except yaml.YAMLError as exc:
        raise StudyError(f"--set {override!r}: value is not valid YAML: {exc}") from None
    node = raw
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise StudyError(f"--set {override!r}: {part!r} is a value, not a section")
        node = child
    node[parts[-1]] = value


def validate_study(raw: dict[str, Any], source: str = "study") -> Study:
    try:
        return Study.model_validate(raw)
    except ValidationError as exc:
        lines = [_describe(error, raw) for error in exc.errors()]
        raise StudyError(f"{source}: invalid study\n" + "\n".join(f"  {line}" for line in lines)) from None


def _describe(error: dict[str, Any], raw: dict[str, Any]) -> str:
    field = ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        allowed = _allowed_keys(error["loc"][:-1])
        close = difflib.get_close_matches(str(error["loc"][-1]), allowed, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"{field}: unknown key{hint} (allowed: {', '.join(allowed)})"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "missing":
        return f"{field}: required"
    value = error.get("input")
    if isinstance(value, dict) or error["type"].startswith("value_error"):
        return f"{field}: {message}" if field else message
    return f"{field}: {message}; got {value!r}"


def _allowed_keys(loc: tuple) -> list[str]:
    """Field names of the schema section at `loc` (used for 'did you mean')."""
    model: type[BaseModel] = Study
    parts = iter(loc)
    for part in parts:
        if model is SearchSpec and part == "space":
            next(parts, None)  # the parameter's name: its section is a ParamSpec
            model = ParamSpec
            continue
        annotation = model.model_fields[part].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
    return list(model.model_fields)
