"""CandidateSampler (training/sampling.py) draws from exactly the distribution HF's sampler draws from.

The candidates' probabilities are compared with HF's own warpers (temperature, top-k, top-p) and
softmax over the whole vocabulary, row by row, on SmolLM2's vocabulary size and on bf16-rounded
scores, whose ties at the k-th value HF keeps.
"""

from __future__ import annotations

import pytest
import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from ratiotune.training.models import load_agents
from ratiotune.training.sampling import CandidateSampler, candidate_sampling

VOCAB = 49_152  # SmolLM2's


def hf_probabilities(scores: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """What transformers' sample step draws from: its warpers in its order, then softmax."""
    warpers = LogitsProcessorList([TemperatureLogitsWarper(temperature), TopKLogitsWarper(top_k)])
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    return warpers(None, scores.clone()).softmax(-1)


def candidate_probabilities(scores: torch.Tensor, sampler: CandidateSampler) -> torch.Tensor:
    values, indices = sampler.candidates(scores.clone())
    return torch.zeros_like(scores).scatter_(-1, indices, values.softmax(-1))


# The studies' settings, top-k alone, and top-p at a few depths (0.0: only the best token is left).
SETTINGS = [(0.6, 50, 0.6), (1.0, 50, 1.0), (0.7, 20, 0.95), (1.3, 5, 0.3), (1.0, 50, 0.0)]


@pytest.mark.parametrize("temperature,top_k,top_p", SETTINGS)
def test_the_candidates_carry_hfs_probabilities(temperature, top_k, top_p):
    torch.manual_seed(0)
    # A slowly falling head (so top-p cuts inside the top k) over a long tail, and the same rows
    # rounded to bf16 (as the decode copy's logits are) with two tail tokens set to the k-th score:
    # HF keeps every token that ties it.
    head = -0.08 * torch.arange(VOCAB, dtype=torch.float32)
    rows = [head[torch.randperm(VOCAB)] + 0.3 * torch.randn(VOCAB) for _ in range(4)]
    tied = torch.stack([r.to(torch.bfloat16).float() for r in rows])
    k_th = tied.topk(top_k, dim=-1).values[:, -1]
    tail = tied.topk(top_k + 10, dim=-1).indices[:, -2:]
    tied.scatter_(-1, tail, k_th[:, None].expand(-1, 2))
    scores = torch.cat([torch.stack(rows), tied])
    assert ((scores[4:] >= k_th[:, None]).sum(-1) >= top_k + 2).all()  # (bf16 rounding may tie more)
    want = hf_probabilities(scores, temperature, top_k, top_p)
    got = candidate_probabilities(scores, CandidateSampler(temperature, top_k, top_p))
    assert torch.equal(got > 0, want > 0)  # the same tokens can be drawn
    assert torch.allclose(got, want, atol=1e-6, rtol=1e-5)


def test_the_sampler_emits_its_draw_and_draws_by_the_probabilities():
    torch.manual_seed(1)
    scores = torch.tensor([[2.0, 1.0, 0.5, -1.0, -3.0]]).repeat(20_000, 1)
    sampler = CandidateSampler(1.0, 3, 1.0)
    out = sampler(None, scores)
    assert torch.isfinite(out).sum(-1).eq(1).all()  # one finite score a row: a greedy step takes it
    counts = out.argmax(-1).bincount(minlength=5).float() / 20_000
    expected = torch.tensor([2.0, 1.0, 0.5]).exp() / torch.tensor([2.0, 1.0, 0.5]).exp().sum()
    assert counts[3:].sum() == 0 and torch.allclose(counts[:3], expected, atol=0.015)


def test_candidate_sampling_applies_only_where_it_matches_hf():
    (model, _), _tokenizer = load_agents("builtin:tiny")
    # comlrl passes no top_k: HF's default of 50 applies, and so does the sampler.
    assert candidate_sampling(model, 0.6, 0.6, None) is not None
    assert candidate_sampling(model, 0.6, 0.6, 0) is None  # top-k off: nothing to save
    model.generation_config.min_p = 0.1  # a warper the sampler does not implement
    assert candidate_sampling(model, 0.6, 0.6, 50) is None
