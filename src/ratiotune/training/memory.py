"""A per-trial memory estimate, from the model's shape alone (pure arithmetic, no torch).

Used at launch to say how many trials fit on one GPU. It is a rule of thumb meant to be
on the safe side, not a measurement: bench/gpu_packing.py measures the real peak.

What one trial holds (two agents, comlrl's MAGRPO):
- per agent: float32 master weights and AdamW's two float32 moments (16 bytes per
  parameter with the gradients), whatever `model.dtype` says: that is the compute dtype
  of the forward passes (torch.autocast), see models.load_agents for why.
- gradients: float32, freed after each agent's step (TrialMAGRPOTrainer._update_from_samples),
  so one agent's at a time when the agents update one after the other, both with one
  GPU per agent (parallel_training="mp").
- the update: the activations of all num_generations sequences are alive at once (one
  batched forward), in the compute dtype, plus their full-vocabulary logits (compute
  dtype) and the fp32 log-softmax taken from them; under autocast also the bf16 copy of
  the agent's weights that autocast caches for the forward pass.
- generation: the KV cache of one generate() call's rows (a rollout call decodes the
  rollout_buffer_size prompts of one update window: window x num_generations rows; an eval call
  eval prompts x samples) of prompt + max_new_tokens, and the sampler's sort over the vocabulary
  (fp32 values + int64 indices per row). Values are
  in the compute dtype, keys in float32: under autocast they come out of the rotary embedding
  float32 (measured on CPU: keys float32, values bfloat16).
- with train.generation static/compiled (generation.py), that cache is not freed between
  calls: each agent keeps its static caches (rollouts: num_generations rows, one cache per
  prompt-length bucket; compiled: one per (rows, bucket) of the rollout_buffer_size-prompt calls;
  eval: eval prompts x samples rows), each of prompt rounded up to 32 tokens + max_new_tokens,
  for the whole trial, so they count with the states. (The test prompts' cache that a retrain
  run's last epoch adds is not counted.)
- with a decode copy (train.decode_dtype; generation.copy_dtype: compiled decoding under autocast,
  or a bf16 CPU), each agent's copy of its weights in that dtype (generation.Decoding.decoder: 2
  bytes per parameter for bf16), kept for the whole trial; its caches then hold keys and values
  in that dtype.
- with CUDA, what the process holds beyond the tensors counted above: the caching allocator's
  reserved-but-unallocated blocks and what the arithmetic misses (ALLOCATOR_MARGIN), and the CUDA
  context of the trial's process (CUDA_CONTEXT_BYTES; each trial is its own process). This is the
  figure that packs trials: Ray's trials share the GPU's memory as NVML sees it, reserved memory
  and contexts included, not torch's max_memory_allocated.
Generation and update do not overlap, so the peak is the states (and kept caches) plus the larger of the two phases.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
MASTER_BYTES = 4  # weights, gradients and AdamW moments are float32 (models.load_agents)
# Values a Qwen2 decoder layer saves for backward per token, in units of hidden (H) and
# intermediate (I) size: norms, q/k/v/o inputs and outputs, residuals (~8 H) and the
# MLP's gate, up, activation and product (4 I). Attention runs through SDPA, which keeps
# no seq x seq matrix.
SAVED_PER_TOKEN_H, SAVED_PER_TOKEN_I = 8, 4
# Only counted when the trial runs on a GPU. Measured once (H200, torch 2.11, CUDA 13, the 0.5B
# shape, 8 x 128 tokens; docs/gpus-and-clusters.md): the allocator's peak ran 6% over this
# arithmetic (19.70 GiB allocated vs 18.6 compiled; 17.58 vs 16.5 eager) and reserved ran 5% over
# allocated (20.67 vs 19.70; 18.50 vs 17.58): reserved = 1.11 x the arithmetic. The margin doubles
# that (0.20): one measurement, one shape, and a fragmentation that grows with other shapes.
ALLOCATOR_MARGIN = 0.20
# The CUDA context per process: ~0.5 GiB for the bare context on recent GPUs (lazy module
# loading), plus cuBLAS workspaces and every kernel module loaded into it (inductor's compiled
# kernels, Triton's): 1 GiB, twice the bare figure, until the window's NVML reading replaces it.
CUDA_CONTEXT_BYTES = int(1.0 * GIB)


@dataclass(frozen=True)
class ModelShape:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    tie_word_embeddings: bool = True

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def parameters(self) -> int:
        """Qwen2's parameter count (q/k/v have biases, o_proj and the MLP have none)."""
        h, i, kv = self.hidden_size, self.intermediate_size, self.num_key_value_heads * self.head_dim
        attention = (h * h + h) + 2 * (h * kv + kv) + h * h
        layer = attention + 3 * h * i + 2 * h
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return embeddings + self.num_hidden_layers * layer + h


@dataclass(frozen=True)
class Estimate:
    parameters: int  # per agent
    weights: int  # bytes, both agents
    gradients: int
    optimizer: int
    update_activations: int  # one agent's update (they run one after the other)
    generation: int  # both agents' dynamic caches and samplers, while they generate
    cuda_context: int
    kept_caches: int = 0  # both agents' static caches, kept for the whole trial
    decode_copies: int = 0  # both agents' decode copies (train.decode_dtype)
    allocator_margin: float = 0.0  # on a GPU: reserved + unaccounted memory, as a share of `tensors`

    @property
    def tensors(self) -> int:
        """The arithmetic: the peak bytes of the tensors counted (what max_memory_allocated should read)."""
        states = self.weights + self.gradients + self.optimizer + self.kept_caches + self.decode_copies
        return states + max(self.update_activations, self.generation)

    @property
    def reserve(self) -> int:
        """The caching allocator's slack on top of `tensors` (0 off a GPU)."""
        return int(self.tensors * self.allocator_margin)

    @property
    def total(self) -> int:
        """What the trial's process holds at its peak: tensors + the allocator's slack + the CUDA context."""
        return self.tensors + self.reserve + self.cuda_context

    def describe(self) -> str:
        g = lambda n: f"{n / GIB:.3g}"  # noqa: E731  (3 significant digits: tiny models are ~0.001 GiB)
        return (
            f"weights {g(self.weights)} + gradients {g(self.gradients)} + AdamW {g(self.optimizer)} GiB"
            + (f" + kept static caches {g(self.kept_caches)} GiB" if self.kept_caches else "")
            + (f" + decode copies {g(self.decode_copies)} GiB" if self.decode_copies else "")
            + f", then max(update activations {g(self.update_activations)}, generation cache {g(self.generation)}) GiB"
            + (f" + allocator reserve ({self.allocator_margin:.0%}) {g(self.reserve)} GiB" if self.reserve else "")
            + (f" + CUDA context {g(self.cuda_context)} GiB" if self.cuda_context else "")
            + f" = {g(self.total)} GiB"
        )


def estimate(
    shape: ModelShape,
    *,
    dtype: str,
    num_generations: int,
    max_new_tokens: int,
    prompt_tokens: int,
    on_gpu: bool,
    parallel: bool = False,
    kept_cache_tokens: int = 0,
    decode_copy: str | None = None,
    decode_packed: bool = False,
    decode_rows: int | None = None,
) -> Estimate:
    """Bytes one trial (two agents) needs at its peak.

    `dtype` is the resolved compute dtype; `parallel` = one GPU per agent (both update at once);
    `kept_cache_tokens` = rows x length of the static caches one agent keeps (0: eager decoding,
    whose dynamic cache lives only while it generates); `decode_copy` = the dtype of each agent's
    decode copy (generation.Decoding.decoder; None = none), whose caches are in that dtype too;
    `decode_packed` = its linear weights prepacked (packed_linear.py: each weight once, a tied LM head twice);
    `decode_rows` = the rows of the largest generate() call (default num_generations).
    """
    size = DTYPE_BYTES[dtype]
    params = shape.parameters()
    tokens = num_generations * (prompt_tokens + max_new_tokens)
    per_token_layer = SAVED_PER_TOKEN_H * shape.hidden_size + SAVED_PER_TOKEN_I * shape.intermediate_size
    activations = tokens * shape.num_hidden_layers * per_token_layer * size
    logits = tokens * shape.vocab_size * (size + 4)
    copy_size = DTYPE_BYTES[decode_copy] if decode_copy else 0
    kv_width = shape.num_hidden_layers * shape.num_key_value_heads * shape.head_dim
    kv_per_token = kv_width * 2 * copy_size if copy_size else kv_width * (MASTER_BYTES + size)
    rows = decode_rows or num_generations
    tied_head = shape.vocab_size * shape.hidden_size if shape.tie_word_embeddings else 0
    # static: generate() fills the kept cache
    kv_cache = 0 if kept_cache_tokens else rows * (prompt_tokens + max_new_tokens) * kv_per_token
    sampler = rows * shape.vocab_size * (4 + 8)
    autocast_weights = params * size if size != MASTER_BYTES else 0
    return Estimate(
        parameters=params,
        weights=2 * params * MASTER_BYTES,
        gradients=(2 if parallel else 1) * params * MASTER_BYTES,
        optimizer=2 * 2 * params * MASTER_BYTES,
        update_activations=activations + logits + autocast_weights,
        generation=2 * (kv_cache + sampler),
        cuda_context=CUDA_CONTEXT_BYTES if on_gpu else 0,
        allocator_margin=ALLOCATOR_MARGIN if on_gpu else 0.0,
        kept_caches=2 * kept_cache_tokens * kv_per_token,
        decode_copies=2 * copy_size * (params + (tied_head if decode_packed else 0)),
    )


def trials_per_gpu(gpu: float) -> int:
    """How many trials Ray packs on one GPU for `resources.gpu` (0 < gpu <= 1)."""
    return int(1 / gpu + 1e-9) if gpu > 0 else 0


def packing_report(per_trial: Estimate, gpu: float, gpu_memory: int | None, gpu_name: str = "") -> tuple[str, bool]:
    """A line about the chosen packing and whether it overflows the GPU (True = warn)."""
    if gpu == 0:
        return f"packing: resources.gpu=0 -> trials run on CPU ({per_trial.total / GIB:.3g} GiB of host memory each)", False
    if gpu >= 2:
        # One agent per GPU: each GPU holds half of everything but the whole CUDA context.
        per_gpu = (per_trial.tensors + per_trial.reserve) / 2 + per_trial.cuda_context
        line, need = f"packing: resources.gpu={gpu:g} -> one agent per GPU, ~{per_gpu / GIB:.2f} GiB on each", per_gpu
    else:
        n = trials_per_gpu(gpu)
        need = n * per_trial.total
        line = f"packing: resources.gpu={gpu:g} -> {n} trial(s) per GPU x {per_trial.total / GIB:.2f} GiB = {need / GIB:.2f} GiB"
    if gpu_memory is None:
        return line + " (no CUDA device visible to this process: not compared with GPU memory)", False
    line += f" of {gpu_memory / GIB:.1f} GiB on {gpu_name or 'GPU 0'}"
    if need > gpu_memory:
        return (
            line + "\nwarning: that exceeds the GPU's memory; raise resources.gpu (fewer trials per GPU) "
            "or shrink num_generations / max_new_tokens",
            True,
        )
    return line, False


# --------------------------------------------------------------------------- at launch


def study_shape(model_name: str) -> ModelShape:
    """The shape of a study's model: builtin shapes are known; others come from their config.json."""
    from ratiotune.core.model_names import BUILTIN_MODELS, looks_like_path
    from ratiotune.training.models import CHARACTERS

    if model_name in BUILTIN_MODELS:
        s = BUILTIN_MODELS[model_name]
        vocab = s.vocab_size or 3 + len(CHARACTERS)  # pad/eos/unk + the characters
        return ModelShape(
            vocab, s.hidden_size, s.intermediate_size, s.num_hidden_layers, s.num_attention_heads, s.num_key_value_heads
        )
    from pathlib import Path

    from transformers import AutoConfig

    from ratiotune.core.model_names import gguf_file
    from ratiotune.training.models import model_source

    source = model_source(model_name)
    if gguf_file(model_name) is None and not looks_like_path(model_name):
        from huggingface_hub import try_to_load_from_cache

        # A cached hub model's config is read from the cache: no request, no retries (check_launch
        # has already refused an id that is neither cached nor reachable).
        cached = try_to_load_from_cache(model_name, "config.json")
        source = str(Path(cached).parent) if isinstance(cached, str) else model_name
    c = AutoConfig.from_pretrained(source)
    return ModelShape(
        c.vocab_size,
        c.hidden_size,
        c.intermediate_size,
        c.num_hidden_layers,
        c.num_attention_heads,
        getattr(c, "num_key_value_heads", None) or c.num_attention_heads,
        bool(getattr(c, "tie_word_embeddings", False)),
    )


def study_estimate(study) -> tuple[Estimate, str]:
    """The estimate for the study's most demanding trial (largest num_generations and max_new_tokens in the space)."""

    def largest(name: str) -> int:
        spec = study.search.space.get(name)
        return int(spec.bounds()[1]) if spec else int(getattr(study.train, name))

    import torch

    from ratiotune.training.generation import cache_length, copy_dtype, packs_copy, resolve

    on_gpu = study.resources.gpu > 0
    dtype = study.model.compute_dtype(on_gpu)
    generations, new_tokens = largest("num_generations"), largest("max_new_tokens")
    # Characters bound tokens from above for our character tokenizer, and loosely for BPE ones.
    formatters = study.get_task().formatters
    train_prompts = [f(r) for r in study.prompts("train") for f in formatters]
    prompt_tokens = max(len(p) for p in train_prompts)
    decoding = resolve(study.train.generation, "cuda" if on_gpu else "cpu", threaded=study.resources.gpu >= 2)
    # Rollouts decode the rollout_buffer_size prompts between two updates in one call
    # (magrpo.TrialMAGRPOTrainer.batches_rollouts; training is single-turn); eval decodes all its
    # prompts in one call.
    window = study.train.rollout_buffer_size
    eval_prompts = [max((f(r) for f in formatters), key=len) for r in study.prompts("eval")]
    eval_rows = len(eval_prompts) * study.task.eval_samples_per_prompt
    kept = 0
    if decoding != "eager":
        # One kept cache per (rows, length) that the windows of the prompt list, in order, use;
        # per agent's prompts; and one for eval.
        records = study.prompts("train")
        rollout = 0
        for f in formatters:
            prompts = [f(r) for r in records]
            keys = {(generations * len(prompts[i : i + window]),
                     cache_length(max(map(len, prompts[i : i + window])), new_tokens))
                    for i in range(0, len(prompts), window)}  # fmt: skip
            rollout = max(rollout, sum(rows * length for rows, length in keys))
        eval_length = cache_length(max(len(p) for p in eval_prompts), new_tokens)
        kept = rollout + eval_rows * eval_length
    shape = study_shape(study.model.name)
    autocast = None if dtype == "float32" else getattr(torch, dtype)
    copy = copy_dtype(study.train.decode_dtype, decoding, "cuda" if on_gpu else "cpu", autocast, shape.parameters())
    copy_name = str(copy).removeprefix("torch.") if copy is not None else None
    result = estimate(
        shape,
        dtype=dtype,
        num_generations=generations,
        max_new_tokens=new_tokens,
        prompt_tokens=prompt_tokens,
        on_gpu=on_gpu,
        parallel=study.resources.gpu >= 2,
        kept_cache_tokens=kept,
        decode_copy=copy_name,
        decode_packed=packs_copy(copy, decoding, "cuda" if on_gpu else "cpu"),
        decode_rows=max(generations * min(window, len(study.prompts("train"))), eval_rows),
    )
    header = (
        f"memory estimate per trial ({study.model.name}, float32 weights, {dtype} compute, {decoding} decoding"
        f"{f' from a {copy_name} copy' if copy_name else ''}, "
        f"{result.parameters / 1e6:.1f}M parameters per agent, "
        f"num_generations {generations}, max_new_tokens {new_tokens}, prompts <= {prompt_tokens} tokens):"
    )
    return result, header


def launch_report(study) -> tuple[str, bool]:
    """What `ratiotune search` prints before it starts: the estimate, the packing, and a warning if it overflows."""
    import torch

    per_trial, header = study_estimate(study)
    gpu_memory, gpu_name = None, ""
    if study.resources.gpu > 0 and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu_memory, gpu_name = props.total_memory, props.name
    line, warn = packing_report(per_trial, study.resources.gpu, gpu_memory, gpu_name)
    return f"{header}\n  {per_trial.describe()}\n{line}", warn
