"""How an agent decodes: which KV cache `generate()` uses and whether its decode step is compiled.

Rollouts (comlrl's `_generate_completions`) and eval (`sample_answers`) both ask one
`Decoding` per agent for the extra `generate()` arguments of a call; comlrl passes extra
keyword arguments through to `generate`, so nothing else in comlrl changes.

`train.generation` (study.py):
- eager: transformers' dynamic cache, as comlrl calls it (the old behaviour, bit for bit).
- static: a fixed-size KV cache (`StaticCache`) kept between calls, decoded uncompiled.
- compiled: the same static cache, and the one-token decode step run through
  `torch.compile` (transformers' CompileConfig; on CUDA mode "reduce-overhead", which
  captures it in CUDA graphs). The prompt's prefill is never compiled (transformers).
- auto: compiled on one CUDA device, else eager (see `resolve`).

Why the caches are kept and sized this way (each point is a way to lose the compiled speed):
- Dynamo compiles one graph per input shape and recompiles at most
  torch._dynamo.config.recompile_limit (8) times per function before it falls back to
  eager for good. The decode step's shapes are the cache's (rows, max_cache_len) only:
  transformers builds the 4-D attention mask over the whole cache outside the compiled
  call. So the cache length is the prompt length rounded up to PROMPT_BUCKET plus
  max_new_tokens: prompts of 1..32 tokens share one cache and one graph.
- A CUDA graph reads fixed memory addresses: a new cache tensor re-records the graph, and
  after 128 unexpected re-records PyTorch silently stops using graphs. transformers makes
  a new StaticCache per `generate` call; we pass our own and reset it in place instead
  (`Cache.reset` zeroes the tensors, same addresses). AdamW updates the weights in place,
  and checkpoint restores copy into them (`load_state_dict`), so the graphs keep reading
  the live weights.
- Rollouts and eval differ in batch (num_generations vs eval prompts x samples) and in
  grad mode (comlrl generates under inference_mode with requires_grad off), so each
  purpose has its own cache and its own graph: one cache per (purpose, rows, length).
  Compiled rollouts decode the rollout_buffer_size prompts between two updates in one call
  (magrpo.TrialMAGRPOTrainer.batches_rollouts), so their rows are prompts x num_generations.
  The two agents share each Dynamo graph (their weights are graph inputs, not guarded by
  identity), so a trial compiles one graph per rollout prompt bucket in use (the builtin
  prompts are 23-47 characters: 1 or 2 buckets with the character tokenizer, 1 with Qwen's)
  plus one for eval (and one for the test prompts in a retrain run's last epoch): at most 4
  of the 8.
- Under bf16 autocast the master weights are float32, and a compiled decode step would cast
  every one of them to bf16 on every step (~2 GB read + 1 GB written per step for
  Qwen2.5-0.5B, ~0.9 ms on an H200 before any real work). So compiled decoding runs on a
  bf16 copy of the agent (`Decoding.decoder`), copied in place (same addresses for the CUDA
  graphs) from the masters after each optimizer step (`refresh`, which the trainer calls) and
  whenever a master tensor's version counter moved (a checkpoint restore, a test's own step).
  Its keys and values are then bf16 too. Eager and static decoding use the masters under
  autocast, as before.

The decode copy on CPU (train.decode_dtype, `copy_dtype`): a CPU with native bf16 (avx512_bf16 /
AMX) decodes SmolLM2-135M ~2x faster from a bf16 copy than from the float32 masters, because a
decode step reads every weight once and the copy has half the bytes; builtin:tiny decodes
slower from one (its steps are dispatch, not bytes). So 'auto' keeps a bf16 copy on such a CPU
for models of BF16_COPY_MIN_PARAMETERS or more (docs/gpus-and-clusters.md, "CPU decoding", has
the speeds and the KL of the sampled distributions). The masters, the update and AdamW stay
float32; the copy follows them as above (`refresh` after each optimizer step).

The cache goes to `generate()` under the name this transformers uses (CACHE_KWARG):
`past_key_values` up to 5.2x (5.17 rejects `cache=` with "model_kwargs are not used"),
`cache` in later releases (5.24 still accepts `past_key_values`, with a deprecation warning).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from transformers import StaticCache
from transformers.generation import utils as _generation_utils
from transformers.generation.configuration_utils import CompileConfig

from ratiotune.training import packed_linear

MODES = ("auto", "eager", "static", "compiled")
DECODE_DTYPES = ("auto", "float32", "bfloat16")
# 'auto' decodes from a bf16 copy on a CPU with native bf16 only for models this large: measured
# on this project's CPU (one thread), SmolLM2-135M at 8 rows 113 vs 292 ms a step, builtin:tiny
# (81k parameters) 3.1 vs 2.2 ms (bf16 slower). Between them nothing was measured; 50M is the
# round number below the smallest real model the project runs.
BF16_COPY_MIN_PARAMETERS = 50_000_000
# Prompt lengths are rounded up to a multiple of this many tokens when sizing a cache.
PROMPT_BUCKET = 32
# generate()'s name for a cache passed in: the first of transformers' own cache names
# ("past_key_values" in 5.17, "cache" in 5.24).
CACHE_KWARG = _generation_utils.ALL_CACHE_NAMES[0]


def resolve(mode: str, device: str | torch.device, threaded: bool = False) -> str:
    """The decoding `mode` ('auto' or one of eager/static/compiled) means on `device`.

    auto = compiled on CUDA, eager on CPU, and eager when `threaded` (one GPU per agent:
    comlrl's parallel_training="mp" generates both agents from two threads at once, and
    torch.compile and CUDA graphs are not thread-safe: pytorch/pytorch#118260, #123177;
    study.py refuses an explicit 'compiled' there). The CUDA choice is measured (one H200,
    2026-12-04, bench/gpu_suite.py, the 0.5B shape at 8 x 128 tokens under bf16 autocast):
    eager 17.9 ms per decode step, compiled 3.4 ms (5.3x), 9.7 s vs 2.1 s per 2-prompt epoch.
    On CPU bench/generation_speed.py measured compiled 1.08x (0.5B shape) to 1.18x (builtin:tiny)
    per step for 3-57 s of compiling per graph, and static alone 0.92-0.96x
    (docs/gpus-and-clusters.md has the figures), so CPU stays eager.
    """
    if mode not in MODES:
        raise ValueError(f"generation mode {mode!r}; allowed: {', '.join(MODES)}")
    if mode != "auto":
        return mode
    return "compiled" if torch.device(device).type == "cuda" and not threaded else "eager"


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bf16 natively (avx512_bf16 or AMX tiles), where oneDNN's bf16 matmuls are fast."""
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def copy_dtype(
    decode_dtype: str, mode: str, device: str | torch.device, autocast_dtype: torch.dtype | None, parameters: int
) -> torch.dtype | None:
    """The dtype of the copy an agent decodes from (None = decode from the float32 masters).

    `decode_dtype` is train.decode_dtype; `mode` the resolved generation mode; `autocast_dtype` the
    forward passes' (None = float32); `parameters` the agent's. 'auto': compiled decoding under
    autocast keeps a copy in the autocast dtype (the module docstring says why); on a CPU with
    native bf16 a model of BF16_COPY_MIN_PARAMETERS or more decodes from a bf16 copy; otherwise
    none. 'bfloat16' always keeps one; 'float32' never does.
    """
    if decode_dtype not in DECODE_DTYPES:
        raise ValueError(f"decode dtype {decode_dtype!r}; allowed: {', '.join(DECODE_DTYPES)}")
    if decode_dtype == "bfloat16":
        return torch.bfloat16
    if decode_dtype == "float32":
        return None
    if mode == "compiled" and autocast_dtype not in (None, torch.float32):
        return autocast_dtype
    if torch.device(device).type == "cpu" and parameters >= BF16_COPY_MIN_PARAMETERS and cpu_has_bf16():
        return torch.bfloat16
    return None


def packs_copy(copy: torch.dtype | None, mode: str, device: str | torch.device) -> bool:
    """Whether a decode copy keeps its linear weights prepacked for oneDNN (packed_linear.py): a bf16
    copy on CPU, uncompiled (Dynamo does not trace the packed op), where this torch has the op."""
    return copy == torch.bfloat16 and torch.device(device).type == "cpu" and mode != "compiled" and packed_linear.available()


def cache_length(prompt_tokens: int, max_new_tokens: int) -> int:
    """Tokens a static cache holds: the prompt rounded up to PROMPT_BUCKET, plus the answer."""
    return -(-prompt_tokens // PROMPT_BUCKET) * PROMPT_BUCKET + max_new_tokens


def compile_config(device: str | torch.device, backend: str = "inductor") -> CompileConfig:
    """How the decode step is compiled on `device`.

    CUDA: inductor with mode "reduce-overhead" (CUDA graphs). Elsewhere: no CUDA graphs
    (mode None), and `_compile_all_devices` because transformers compiles only on
    accelerators unless told. dynamic=False: one static graph per cache shape, never
    a dynamic-shape graph (which CUDA graphs would record once per shape anyway).
    Tests on CPU pass backend="aot_eager" (traced by Dynamo and AOTAutograd, no codegen).
    """
    on_cuda = torch.device(device).type == "cuda"
    mode = "reduce-overhead" if on_cuda and backend == "inductor" else None
    config = CompileConfig(fullgraph=False, dynamic=False, backend=backend, mode=mode)
    if not on_cuda:
        config._compile_all_devices = True
    return config


def _contiguous_input(module: torch.nn.Module, args: tuple) -> tuple:
    """The LM head's input made contiguous (a forward pre-hook on the decode copy's head).

    generate() gives the head the last position's hidden states, a strided view of the
    prefill's [rows, prompt, hidden]. For a weight that does not require grad (the copy's),
    torch.matmul does not fold such a view into one mm: it expands the vocabulary matrix to one
    per row and runs bmm, a copy of rows x vocab x hidden (453 MB at 8 rows of SmolLM2; 1.8 s a
    call on this CPU, half of a 16-token rollout). Copying the [rows, 1, hidden] view costs nothing.
    """
    return (args[0].contiguous(), *args[1:])


class Decoding:
    """One agent's decoding mode and the static caches it keeps between `generate` calls."""

    def __init__(
        self,
        mode: str,
        model: torch.nn.Module,
        device: str | torch.device,
        threaded: bool = False,
        dtype: torch.dtype | None = None,
        decode_dtype: str = "auto",
    ):
        self.mode = resolve(mode, device, threaded)
        self.model = model
        # The dtype of the copy decoding runs on (`copy_dtype`: `dtype` is the autocast dtype,
        # `decode_dtype` train.decode_dtype); None = on the model itself.
        parameters = sum(p.numel() for p in model.parameters())
        self.copy_dtype = copy_dtype(decode_dtype, self.mode, device, dtype, parameters)
        self.packs = packs_copy(self.copy_dtype, self.mode, device)
        self._copy: torch.nn.Module | None = None
        self._versions: tuple[int, ...] = ()
        # A test may swap in another backend before the first call (compile_config(device, "aot_eager")).
        self.compile_config = compile_config(device) if self.mode == "compiled" else None
        # (purpose, rows, max_cache_len) -> the cache; see the module docstring for why it is kept.
        self.caches: dict[tuple[str, int, int], StaticCache] = {}

    def generate_kwargs(self, purpose: str, rows: int, prompt_tokens: int, max_new_tokens: int) -> dict[str, Any]:
        """Extra `generate()` arguments for one call of `rows` sequences (prompts x return sequences).

        `prompt_tokens` is the call's padded prompt length. Nothing for eager: the
        call is exactly what it was before this option existed.
        """
        if self.mode == "eager":
            return {}
        key = (purpose, rows, cache_length(prompt_tokens, max_new_tokens))
        cache = self.caches.get(key)
        if cache is None:
            # Allocated lazily by its first prefill, in the dtypes of the keys and values
            # (autocast decides them), then never again.
            cache = self.caches[key] = StaticCache(config=self.model.config, max_cache_len=key[2])
        else:
            # comlrl generates under inference_mode, so the rollout caches hold inference
            # tensors, which may be changed in place only there.
            with torch.inference_mode():
                cache.reset()
        if self.mode == "static":
            # On CUDA transformers would otherwise compile the decode step of any static cache.
            return {CACHE_KWARG: cache, "disable_compile": True}
        return {CACHE_KWARG: cache, "compile_config": self.compile_config}

    def decoder(self) -> torch.nn.Module:
        """The module to call generate() on: the decode copy if there is one (`copy_dtype`), else the model.

        The copy is made on first use (eval mode, requires_grad off, as comlrl samples) and
        refreshed here if any master tensor changed since the last refresh (version counters).
        """
        if self.copy_dtype is None:
            return self.model
        if self._copy is None:
            # Parameters only: buffers (the rotary inv_freq) keep their float32 values.
            self._copy = copy.deepcopy(self.model).eval().requires_grad_(False)
            for param in self._copy.parameters():
                param.data = param.data.to(self.copy_dtype)
            self._copy.get_output_embeddings().register_forward_pre_hook(_contiguous_input)
            if self.packs:
                packed_linear.pack(self._copy)
            self._versions = self._master_versions()
        elif self._master_versions() != self._versions:
            self.refresh()
        return self._copy

    def refresh(self) -> None:
        """Copy the master weights into the decode copy, in place (the CUDA graphs keep its addresses)."""
        if self._copy is None:
            return
        with torch.no_grad():
            masters = dict(self.model.named_parameters())
            copies = list(self._copy.named_parameters())
            torch._foreach_copy_([t for _, t in copies], [masters[name] for name, _ in copies])
        if self.packs:
            packed_linear.repack(self._copy, masters)
        self._versions = self._master_versions()

    def _master_versions(self) -> tuple[int, ...]:
        return tuple(p._version for p in self.model.parameters())

    def copy_bytes(self) -> int:
        """Bytes of the decode copy, its packed weights included (0 until its first use, and without one)."""
        if self._copy is None:
            return 0
        return sum(t.numel() * t.element_size() for t in self._copy.parameters()) + packed_linear.packed_bytes(self._copy)

    def kept_bytes(self) -> int:
        """Bytes of the caches kept now (0 until their first call allocates them)."""
        return sum(
            layer.keys.numel() * layer.keys.element_size() + layer.values.numel() * layer.values.element_size()
            for cache in self.caches.values()
            for layer in cache.layers
            if layer.is_initialized
        )
