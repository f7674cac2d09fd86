"""Sampling among the top-k candidates only: what HF's sampler draws, without its whole-vocabulary work.

A sampled generate() step (transformers 5.24, GenerationMixin._sample) runs the temperature, top-k
and top-p warpers over the whole vocabulary, then torch.multinomial over it: top-p sorts all 49,152
of SmolLM2's tokens although top-k has already kept 50, and multinomial draws an exponential for
every one of them: 21 ms a step at 8 rows on this CPU, one thread, against 3.3 ms here (measured
side by side on 2026-12-07; SmolLM2's whole decode step is now ~62 ms, docs/gpus-and-clusters.md).

CandidateSampler takes the same steps on the top-k candidates alone, draws the token there, and
hands generate() scores in which only that token is finite, so a greedy generate() (do_sample
False) emits it. The distribution is HF's: same warpers, same order, same tie rule at the k-th
value. tests/test_sampling.py holds its probabilities to HF's warpers row by row, and
tests/test_batched_rollouts.py the two samplers' whole answers against each other.

`candidate_sampling` builds the generate() arguments for it from the settings HF would sample
with, or returns None where it does not apply (no top-k, or a warper it does not implement): the
caller then samples as HF does.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList


def other_warpers(config: Any) -> list[str]:
    """The HF warpers this sampler does not implement that `config` turns on (HF's own conditions)."""
    on = {
        "top_h": config.top_h is not None,
        "min_p": config.min_p is not None,
        "typical_p": config.typical_p is not None and config.typical_p < 1.0,
        "epsilon_cutoff": config.epsilon_cutoff is not None and 0.0 < config.epsilon_cutoff < 1.0,
        "eta_cutoff": config.eta_cutoff is not None and 0.0 < config.eta_cutoff < 1.0,
    }
    return [name for name, used in on.items() if used]


class CandidateSampler(LogitsProcessor):
    """Temperature, then the top_k highest scores (ties at the k-th kept, as HF's TopKLogitsWarper),
    then top-p among them (HF's TopPLogitsWarper: the smallest tail whose mass is <= 1 - top_p is
    cut, the best token always kept), then one draw per row. Returns -inf everywhere but the drawn
    token (0 there)."""

    def __init__(self, temperature: float | None, top_k: int, top_p: float | None):
        self.temperature = temperature if temperature not in (None, 1.0) else None
        self.top_k = int(top_k)
        self.top_p = top_p if top_p is not None and top_p < 1.0 else None

    def candidates(self, scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's candidate tokens and their warped scores (-inf: cut by top-p or a tie's padding)."""
        if self.temperature is not None:
            scores = scores / self.temperature
        k = min(self.top_k, scores.shape[-1])
        values, indices = scores.topk(k, dim=-1)  # descending
        # HF keeps every token that ties the k-th score: take as many as the widest row has.
        ties = int((scores >= values[:, -1:]).sum(-1).max())
        if ties > k:
            values, indices = scores.topk(ties, dim=-1)
            values = values.masked_fill(values < values[:, k - 1 : k], float("-inf"))
        if self.top_p is not None:
            ascending = values.flip(-1)
            cut = ascending.softmax(-1).cumsum(-1) <= (1 - self.top_p)
            cut[..., -1:] = False
            values = ascending.masked_fill(cut, float("-inf")).flip(-1)
        return values, indices

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        values, indices = self.candidates(scores)
        drawn = indices.gather(-1, torch.multinomial(values.softmax(-1), num_samples=1))
        return torch.full_like(scores, float("-inf")).scatter_(-1, drawn, 0.0)


def candidate_sampling(model: Any, temperature: float | None, top_p: float | None, top_k: int | None) -> dict | None:
    """generate() arguments that sample as `do_sample=True, temperature, top_p[, top_k]` would, through
    CandidateSampler (greedy over its scores), or None where it does not apply. The effective settings
    are HF's own merge of these with the model's generation config. num_return_sequences must then be
    1: the caller repeats each prompt's rows (as generate() would, repeat_interleave)."""
    asked = {"do_sample": True, "temperature": temperature, "top_p": top_p, "num_beams": 1}
    if top_k is not None:
        asked["top_k"] = top_k
    # HF's own merge (a private method; transformers is pinned): e.g. top_k unset means its default of 50.
    config, _ = model._prepare_generation_config(None, **asked)
    if not config.top_k or other_warpers(config):
        return None
    sampler = CandidateSampler(config.temperature, config.top_k, config.top_p)
    return {"do_sample": False, "num_beams": 1, "logits_processor": LogitsProcessorList([sampler])}
