"""A decode loop of our own: one function per step (forward + temperature/top-k/top-p sampling + EOS
bookkeeping) over preallocated buffers, so that the whole step can be captured in one CUDA graph.

Why: compiled `generate()` spends most of a decode step outside the captured graph, on per-step work
(input and mask preparation, guards, the top-p sort and sampling, `torch.cat`, stopping criteria, a
host sync every step); docs/gpus-and-clusters.md has the figures measured on the GPU node. Here the
step's inputs are buffers written in place, the sampling
is inside the step, the tokens go into a preallocated output, and the host looks at EOS only every
`check_every` steps.

Not wired into training, so it lives in bench/: `bench/gpu_window.py` measures it against
`generate()` (the `decode_loop` section), and it would replace `generate()` in rollouts only if it is
faster there. On CPU
`tests/test_decode_loop.py` checks it draws what `generate()` draws: the same greedy tokens on
left-padded prompts, and sampled tokens that pass a test of homogeneity against `generate()`'s.

The sampling is transformers' own order and rules (temperature, then top-k, then top-p keeping at
least one token, then one draw over the softmax, by the exponential race instead of torch.multinomial:
the same distribution, no host sync), so the distribution is the same; the random stream is not (a run
is reproducible with itself, not with `generate()`'s draws).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from transformers import StaticCache

from ratiotune.training.generation import CACHE_KWARG, cache_length


def draw(probs: torch.Tensor) -> torch.Tensor:
    """One index per row, with probability `probs` (rows sum to 1): the exponential race, argmax(p / E) with
    E ~ Exp(1), which picks i with probability p_i exactly like torch.multinomial, without a host sync and
    without multinomial's kernel inside a CUDA graph (gpt-fast samples this way)."""
    return (probs / torch.empty_like(probs).exponential_(1)).argmax(dim=-1)


def filter_logits(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float) -> torch.Tensor:
    """transformers' TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper, in that order."""
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        ordered, indices = torch.sort(logits, descending=False)
        cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
        remove = cumulative <= 1 - top_p
        remove[..., -1:] = False  # keep at least the most likely token
        logits = logits.masked_fill(remove.scatter(-1, indices, remove), float("-inf"))
    return logits


class DecodeLoop:
    """Sampling from one model with a kept static cache and a step function that may be compiled.

    `generate(input_ids, attention_mask, ...)` takes left-padded prompts, as `generate()` does, and
    returns `generate()`'s sequences: the prompts, then the new tokens, with `pad_token_id` after a
    row's EOS, as long as the longest row ran (EOS included) or `max_new_tokens`.
    """

    def __init__(self, model: torch.nn.Module, compile_step: Callable | None = None, check_every: int = 8):
        self.model = model
        self.check_every = check_every
        # compile_step(fn) -> the compiled fn (torch.compile(fn, mode="reduce-overhead") on CUDA); None = eager.
        self.step = compile_step(self._step) if compile_step else self._step
        self.buffers: dict[tuple[int, int], dict[str, Any]] = {}

    def _buffers(self, rows: int, length: int, device: torch.device) -> dict[str, Any]:
        """One set per (rows, cache length): the cache, the mask, the step's inputs and the output, reused in place."""
        key = (rows, length)
        if key not in self.buffers:
            self.buffers[key] = {
                "cache": StaticCache(config=self.model.config, max_cache_len=length),
                "mask": torch.zeros(rows, length, dtype=torch.long, device=device),
                "token": torch.zeros(rows, 1, dtype=torch.long, device=device),
                "position": torch.zeros(rows, 1, dtype=torch.long, device=device),
                "cache_position": torch.zeros(1, dtype=torch.long, device=device),
                "finished": torch.zeros(rows, dtype=torch.bool, device=device),
            }
        return self.buffers[key]

    def _step(self, token, position, cache_position, mask, cache, finished, eos, pad: int, sampling: dict):
        """One decode step: the next token of every row (pad once a row has finished), and its finished flags."""
        logits = self.model(input_ids=token, position_ids=position, cache_position=cache_position, attention_mask=mask,
                            use_cache=True, **{CACHE_KWARG: cache}).logits[:, -1, :].float()  # fmt: skip
        if sampling["do_sample"]:
            chosen = draw(filter_logits(logits, sampling["temperature"], sampling["top_k"], sampling["top_p"]).softmax(-1))
        else:
            chosen = logits.argmax(-1)
        chosen = torch.where(finished, torch.full_like(chosen, pad), chosen)
        return chosen, finished | torch.isin(chosen, eos)

    @torch.inference_mode()
    def generate(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, max_new_tokens: int, pad_token_id: int,
        eos_token_id: int | list[int], num_return_sequences: int = 1, do_sample: bool = True, temperature: float = 1.0,
        top_p: float = 1.0, top_k: int | None = None,
    ) -> torch.Tensor:  # fmt: skip
        device = input_ids.device
        if num_return_sequences > 1:
            input_ids = input_ids.repeat_interleave(num_return_sequences, dim=0)
            attention_mask = attention_mask.repeat_interleave(num_return_sequences, dim=0)
        rows, width = input_ids.shape
        length = cache_length(width, max_new_tokens)
        b = self._buffers(rows, length, device)
        cache, mask, finished = b["cache"], b["mask"], b["finished"]
        cache.reset()
        mask.zero_()
        mask[:, :width] = attention_mask
        finished.zero_()
        eos = torch.tensor([eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id), device=device)
        sampling = {"do_sample": do_sample, "temperature": temperature, "top_p": top_p, "top_k": top_k}
        # Prefill, uncompiled (as transformers does): positions count only real prompt tokens.
        positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        logits = self.model(input_ids=input_ids, attention_mask=mask[:, :width], position_ids=positions,
                            cache_position=torch.arange(width, device=device), use_cache=True,
                            **{CACHE_KWARG: cache}).logits[:, -1, :].float()  # fmt: skip
        if do_sample:
            first = draw(filter_logits(logits, temperature, top_k, top_p).softmax(-1))
        else:
            first = logits.argmax(-1)
        out = torch.full((rows, max_new_tokens), pad_token_id, dtype=torch.long, device=device)
        out[:, 0] = first
        finished |= torch.isin(first, eos)
        b["position"].copy_(positions[:, -1:] + 1)
        steps = 1
        while steps < max_new_tokens:
            if steps % self.check_every == 0 and bool(finished.all()):  # the host looks only every check_every steps
                break
            b["token"].copy_(out[:, steps - 1 : steps])
            b["cache_position"].fill_(width + steps - 1)
            mask[:, width + steps - 1] = 1
            chosen, now = self.step(b["token"], b["position"], b["cache_position"], mask, cache, finished, eos,
                                    pad_token_id, sampling)  # fmt: skip
            out[:, steps] = chosen
            finished.copy_(now)
            b["position"].add_(1)
            steps += 1
        # As generate() returns them: up to the step at which the last row finished (its EOS included).
        stopped = torch.isin(out, eos)
        ends = torch.where(
            stopped.any(-1), stopped.float().argmax(-1) + 1, torch.full_like(stopped[:, 0], max_new_tokens, dtype=torch.long)
        )
        return torch.cat([input_ids, out[:, : int(ends.max())]], dim=1)
