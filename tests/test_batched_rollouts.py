"""One generate() call per update window draws what one call per prompt draws.

The window's prompts are left-padded into one call (rollouts.generate_batched, which draws each
token among the top-k candidates: training/sampling.py); comlrl's own path
(TrialMAGRPOTrainer._generate_completions without a prefetched window) calls generate() once per
prompt. Greedy decoding must give the same tokens row for row; sampled answers must come from the
same distribution (a chi-square test on answer lengths and first tokens, per prompt, over 2,400
answers each), and the same test must tell apart a sampler that really differs.
"""

from __future__ import annotations

import torch
from conftest import per_prompt_rollouts
from scipy.stats import chi2_contingency

from ratiotune.core.study import validate_study
from ratiotune.training.rollouts import generate_batched
from ratiotune.training.sampling import candidate_sampling
from ratiotune.training.trainable import Trial

# Prompts of four lengths (11 to 42 characters with the character tokenizer), so the batched call pads.
PROMPTS = [
    "Tell a joke about dinosaurs:",
    "Invent a new type of fruit:",
    "Design a playground on Mars:",
    "Name a cat:",
    "Describe a village on the back of a whale:",
]


def window_trial(tiny_study, tmp_path, **train) -> Trial:
    prompts = tmp_path / "window.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    train = {**tiny_study["train"], "num_generations": 8, "max_new_tokens": 8, "rollout_buffer_size": 5, **train}
    study = validate_study({**tiny_study, "task": {**tiny_study["task"], "train_prompts": str(prompts)}, "train": train})
    return Trial(study, {})


def train_items(trial: Trial) -> list:
    return [batch[0] for batch in trial.trainer.get_train_dataloader()]


def test_greedy_rollouts_are_the_same_tokens_batched_or_one_prompt_at_a_time(tiny_study, tmp_path):
    # top_k 1 leaves one token to sample: decoding is greedy, so every row must match to the token.
    for decode_dtype in ("float32", "bfloat16"):
        trial = window_trial(tiny_study, tmp_path, top_k=1, decode_dtype=decode_dtype)
        items = train_items(trial)
        assert len({len(item["prompt"]) for item in items}) == 4  # four lengths: the call pads
        for agent_idx in (0, 1):
            batched = generate_batched(trial.trainer, agent_idx, items)
            single = per_prompt_rollouts(trial.trainer, items, agent_idx)
            for one, many in zip(single, batched):
                assert torch.equal(one["prompt_input_ids"], many["prompt_input_ids"])
                assert one["response_lens"] == many["response_lens"]
                assert one["completions"] == many["completions"]
                for a, b in zip(one["completion_input_ids"][0], many["completion_input_ids"][0]):
                    assert torch.equal(a, b), decode_dtype


def answer_counts(outputs_per_round: list[list[dict]]) -> tuple[dict, dict]:
    """Counts of (prompt, answer length) and (prompt, first token) over every answer drawn."""
    lengths: dict = {}
    firsts: dict = {}
    for outputs in outputs_per_round:
        for index, out in enumerate(outputs):
            for tokens, n in zip(out["completion_input_ids"][0], out["response_lens"]):
                lengths[(index, n)] = lengths.get((index, n), 0) + 1
                first = int(tokens[0]) if n else -1
                firsts[(index, first)] = firsts.get((index, first), 0) + 1
    return lengths, firsts


def p_value(a: dict, b: dict, min_expected: float = 5.0) -> float:
    """Chi-square test that two samples of categories come from one distribution (rare categories pooled)."""
    categories = sorted(set(a) | set(b))
    # The smaller side's expected count of a category under one shared distribution.
    share = min(sum(a.values()), sum(b.values())) / (sum(a.values()) + sum(b.values()))
    common = [c for c in categories if (a.get(c, 0) + b.get(c, 0)) * share >= min_expected]
    rare = [c for c in categories if c not in common]
    table = [[a.get(c, 0) for c in common] + [sum(a.get(c, 0) for c in rare)],
             [b.get(c, 0) for c in common] + [sum(b.get(c, 0) for c in rare)]]  # fmt: skip
    if not rare or sum(table[0][-1:] + table[1][-1:]) == 0:
        table = [row[:-1] for row in table]
    return chi2_contingency(table).pvalue


def draw(trial: Trial, rounds: int, batched: bool, seed: int) -> list[list[dict]]:
    """Answers of both agents to the window's prompts, `rounds` times, from their own random stream.

    Each side gets its own seed: two samplers run from one seed draw coupled answers (the same
    noise picks the same token from nearly the same distribution), which would hide a difference.
    """
    items = train_items(trial)
    torch.manual_seed(seed)
    out = []
    for _ in range(rounds):
        for agent_idx in (0, 1):
            out.append(
                generate_batched(trial.trainer, agent_idx, items)
                if batched
                else per_prompt_rollouts(trial.trainer, items, agent_idx)
            )
    return out


def test_sampled_rollouts_have_one_distribution_batched_or_one_prompt_at_a_time(tiny_study, tmp_path):
    # 30 rounds x 2 agents x 5 prompts x 8 answers = 2,400 answers a way, at fixed (initial) weights.
    # Agent 0 and 1 have different weights; pooling them keeps their mix the same on both sides.
    trial = window_trial(tiny_study, tmp_path, temperature=1.0, top_p=1.0)
    # The batched side draws through CandidateSampler (HF's default top-k of 50 applies), the
    # per-prompt side through HF's own sampler: this also holds the one against the other.
    assert candidate_sampling(trial.trainer.decoding[0].decoder(), 1.0, 1.0, None) is not None
    single = answer_counts(draw(trial, 30, batched=False, seed=1))
    batched = answer_counts(draw(trial, 30, batched=True, seed=2))
    assert sum(single[0].values()) == sum(batched[0].values()) == 2400
    # The answers vary: a test over one category would pass whatever the sampler did.
    assert len({n for _, n in single[0]}) >= 3 and len(single[1]) >= 20
    for kind, a, b in (("answer length", single[0], batched[0]), ("first token", single[1], batched[1])):
        assert p_value(a, b) > 0.001, kind
    # The same test sees a sampler that differs: top_p 0.8 instead of 1.0, one call per prompt
    # (the random-init agent's distribution is nearly flat: it drops a fifth of the tokens).
    truncated = window_trial(tiny_study, tmp_path, temperature=1.0, top_p=0.8)
    other = answer_counts(draw(truncated, 30, batched=False, seed=3))
    assert p_value(single[1], other[1]) < 1e-6
