"""bench/decode_loop.py draws what generate() draws: the same greedy tokens on left-padded prompts
(also with early EOS stops, and with the step compiled), and sampled tokens that pass a chi-square
test of homogeneity against generate()'s at the study's temperature and top-p (with a control that
fails it). Real builtin:tiny, float32 on CPU; facts, not timing."""

from __future__ import annotations

import sys

import torch
from scipy.stats import chi2_contingency

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
from decode_loop import DecodeLoop, filter_logits  # noqa: E402  (bench/: not wired into training)
from ratiotune.training.models import load_agents

PROMPTS = ["Hi:", "Tell a joke about dinosaurs:", "Design a playground on Mars, please:", "A"]


def setup():
    (model, _), tokenizer = load_agents("builtin:tiny")
    model.eval()
    tokenizer.padding_side = "left"
    return model, tokenizer, tokenizer(PROMPTS, return_tensors="pt", padding=True)


def reference(model, tokenizer, batch, **kwargs):
    with torch.no_grad():
        return model.generate(**batch, pad_token_id=tokenizer.pad_token_id, **kwargs)


def test_greedy_tokens_equal_generate_on_left_padded_prompts_also_with_early_stops_and_compiled():
    model, tokenizer, batch = setup()
    loop = DecodeLoop(model)
    compiled = DecodeLoop(model, compile_step=lambda fn: torch.compile(fn, backend="aot_eager", dynamic=False))

    def check(eos):
        """Both loops' greedy tokens equal generate()'s under `eos`; generate()'s tokens."""
        expected = reference(model, tokenizer, batch, do_sample=False, max_new_tokens=24, eos_token_id=eos)
        for decoder in (loop, compiled):
            got = decoder.generate(batch.input_ids, batch.attention_mask, max_new_tokens=24, do_sample=False,
                                   pad_token_id=tokenizer.pad_token_id, eos_token_id=eos)  # fmt: skip
            assert torch.equal(got, expected), (eos, decoder is compiled)
        return expected

    expected = check(tokenizer.eos_token_id)
    # Early stops: the token greedy decoding emits most often (under the tokenizer's EOS) becomes EOS.
    expected = check(int(expected[:, batch.input_ids.shape[1] :].flatten().bincount().argmax()))
    new = expected[:, batch.input_ids.shape[1] :]
    assert expected.shape[1] - batch.input_ids.shape[1] <= 24 and (new == tokenizer.pad_token_id).any()  # rows did stop early
    # The buffers are kept per (rows, cache length) and reused in place, as the CUDA graphs need.
    assert list(loop.buffers) == [(4, 64 + 24)]


def test_filter_logits_keeps_what_transformers_keeps():
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    torch.manual_seed(0)
    logits = torch.randn(6, 99)
    for temperature, top_k, top_p in ((0.6, None, 0.6), (1.0, 5, 0.9), (1.3, 1, 1.0)):
        expected = TemperatureLogitsWarper(temperature)(None, logits.clone())
        if top_k is not None:
            expected = TopKLogitsWarper(top_k)(None, expected)
        if top_p < 1.0:
            expected = TopPLogitsWarper(top_p)(None, expected)
        assert torch.equal(filter_logits(logits, temperature, top_k, top_p).isinf(), expected.isinf())
        assert torch.allclose(filter_logits(logits, temperature, top_k, top_p).softmax(-1), expected.softmax(-1))


def test_sampled_tokens_follow_generates_distribution():
    """Rows are independent draws: each prompt's first and second sampled tokens over 96 rollouts per path,
    chi-square homogeneity with generate(): not rejected (p > 0.001); the control (greedy) rejected (p < 1e-6)."""
    model, tokenizer, batch = setup()
    loop = DecodeLoop(model)
    sampling = {"do_sample": True, "temperature": 0.6, "top_p": 0.6, "max_new_tokens": 3, "num_return_sequences": 8}
    width = batch.input_ids.shape[1]

    def draws(call, repeats: int = 12) -> dict[tuple[int, int], list[int]]:
        seen: dict[tuple[int, int], list[int]] = {}
        for repeat in range(repeats):
            torch.manual_seed(100 + repeat)
            sequences = call()
            for row, tokens in enumerate(sequences[:, width:]):
                for position in (0, 1):
                    seen.setdefault((row // 8, position), []).append(int(tokens[position]))
        return seen

    def p_value(a: list[int], b: list[int]) -> float:
        counts = {t: (a.count(t), b.count(t)) for t in set(a) | set(b)}
        common = [c for c in counts.values() if sum(c) >= 5]
        rare = (sum(c[0] for c in counts.values() if sum(c) < 5), sum(c[1] for c in counts.values() if sum(c) < 5))
        table = common + ([rare] if sum(rare) else [])
        return 1.0 if len(table) < 2 else float(chi2_contingency(list(zip(*table)))[1])

    eos = tokenizer.eos_token_id
    ours = draws(
        lambda: loop.generate(
            batch.input_ids, batch.attention_mask, pad_token_id=tokenizer.pad_token_id, eos_token_id=eos, **sampling
        )
    )
    theirs = draws(lambda: reference(model, tokenizer, batch, eos_token_id=eos, **sampling))
    for key in theirs:
        assert len(ours[key]) == len(theirs[key]) == 96
        assert p_value(ours[key], theirs[key]) > 1e-3, key
    greedy = draws(lambda: loop.generate(batch.input_ids, batch.attention_mask, pad_token_id=tokenizer.pad_token_id,
                                         eos_token_id=eos, **{**sampling, "top_k": 1}), repeats=4)  # fmt: skip
    assert max(p_value(greedy[key], theirs[key]) for key in theirs) < 1e-6
