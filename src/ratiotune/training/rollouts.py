"""Rollouts: the reward that records every answer pair it scores, and a window's rollouts decoded in one call.

The prompts that are sampled from the same weights (the rollout_buffer_size prompts between two
updates) are decoded in one generate() call per agent (`generate_batched`, through
TrialMAGRPOTrainer._prefetch_rollouts): a decode step reads every weight once whatever its rows,
so one 16-row call takes about the time of one 8-row call (on CPU and GPU alike).
"""

from __future__ import annotations

from typing import Any

import torch
from comlrl.trainers.reinforce import MAGRPOTrainer
from comlrl.utils.distributed import unwrap_model
from comlrl.utils.reward_utils import resolve_reward_range
from comlrl.utils.tokenizer_utils import apply_tokenizer_specials

from ratiotune.tasks import Sample, call_reward
from ratiotune.training.sampling import candidate_sampling


class RecordingReward:
    """The task's reward that also remembers every (record, agent 1, agent 2) sample it scored, and the raw reward.

    comlrl applies `reward_processor` (the scale factor) before it logs anything, so
    its own numbers grow with the scale; metrics come from these raw rewards instead.
    Samples are grouped per prompt (one `start_group()` per training step). The signature
    names `batch_items` (and `prompts`) so that comlrl's call_reward_function passes them;
    the task's reward is called through `call_reward` (either form; a raise or a non-finite
    reward becomes a TaskError naming the answer pair).
    """

    def __init__(self, reward: Any):
        self.reward = reward
        self.groups: list[list[Sample]] = []
        self.rewards: list[list[float]] = []
        declared = resolve_reward_range(reward)
        if declared is not None:
            self.reward_range = declared  # comlrl's declared range, passed through

    def start_group(self) -> None:
        self.groups.append([])
        self.rewards.append([])

    def __call__(
        self, completions1: list[str], completions2: list[str], *, batch_items: list[Any] | None = None, prompts: Any = None
    ) -> list[float]:
        if not self.groups:
            self.start_group()
        # TaskError (not retried, names the answer pair) when the task's reward raises or is non-finite.
        rewards = call_reward(self.reward, list(prompts or []), completions1, completions2, batch_items)
        items = list(batch_items or [])
        if len(items) != len(completions1):  # comlrl: one record for the group's answers
            items = [items[0] if items else {}] * len(completions1)
        self.groups[-1].extend((dict(r), a, b) for r, a, b in zip(items, completions1, completions2))
        self.rewards[-1].extend(rewards)
        return rewards

    def take_groups(self) -> tuple[list[list[Sample]], list[list[float]]]:
        """The samples and raw rewards since the last call, per prompt group (empty groups dropped)."""
        kept = [(g, r) for g, r in zip(self.groups, self.rewards) if g]
        self.groups, self.rewards = [], []
        return [g for g, _ in kept], [r for _, r in kept]


def generate_batched(trainer: MAGRPOTrainer, agent_idx: int, items: list[Any]) -> list[dict[str, Any]]:
    """num_generations rollouts of each item from one left-padded generate() call, in comlrl's per-prompt format.

    trainer is a magrpo.TrialMAGRPOTrainer (its `decoding` and `autocast`); the call runs on the
    agent's decode copy if it keeps one (generation.Decoding.decoder).

    Each item's dict is what comlrl 1.4.3's _generate_completions returns for that item alone:
    its own (unpadded) prompt ids, and completions cut where its own call would have stopped
    (the step at which the last of its rows emitted EOS, or max_new_tokens), so the loss scores
    the same tokens, trailing pads included. The sampling arguments are comlrl's.
    """
    decoding, tokenizer = trainer.decoding[agent_idx], trainer.tokenizers[agent_idx]
    # The pad/eos ids go into the agent's config and the decode copy's (comlrl sets the agent's only).
    apply_tokenizer_specials(tokenizer, [unwrap_model(trainer.agents[agent_idx])])
    model = decoding.decoder()
    apply_tokenizer_specials(tokenizer, [model])
    device = next(model.parameters()).device
    gens, max_new = int(trainer.args.num_generations), int(trainer.args.max_new_tokens)
    prompts = [trainer.formatters[agent_idx](item) for item in items]
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    try:
        batch = tokenizer(prompts, padding=True, truncation=True, return_tensors="pt").to(device)
    finally:
        tokenizer.padding_side = side
    width = batch.input_ids.shape[1]
    # comlrl's sampling settings (top_k only when set), drawn among the top-k candidates (sampling.py)
    # where that applies: then each prompt's rows are repeated here, as generate() would repeat them.
    top_k = getattr(trainer.args, "top_k", None)
    sampling = candidate_sampling(model, trainer.args.temperature, trainer.args.top_p, top_k)
    if sampling is None:
        sampling = {"do_sample": True, "temperature": trainer.args.temperature, "top_p": trainer.args.top_p, "num_beams": 1,
                    "num_return_sequences": gens, **({"top_k": top_k} if top_k is not None else {})}  # fmt: skip
        input_ids, attention_mask = batch.input_ids, batch.attention_mask
    else:
        input_ids, attention_mask = batch.input_ids.repeat_interleave(gens, 0), batch.attention_mask.repeat_interleave(gens, 0)
    with torch.inference_mode(), trainer.autocast(device):
        sequences = model.generate(
            input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=max_new, return_dict_in_generate=True,
            **sampling, **decoding.generate_kwargs("rollout", len(items) * gens, width, max_new),
        ).sequences  # fmt: skip
    completions = sequences[:, width:]
    eos = model.generation_config.eos_token_id
    eos = torch.tensor([eos] if isinstance(eos, int) else list(eos or []), device=device)
    agent = unwrap_model(trainer.agents[agent_idx])
    outputs = []
    for index, prompt in enumerate(prompts):
        rows = completions[index * gens : (index + 1) * gens]
        # Where this item's own call would have stopped: all its rows finished (EOS) or max_new_tokens.
        stopped = torch.isin(rows, eos) if eos.numel() else torch.zeros_like(rows, dtype=torch.bool)
        ends = [int(r.nonzero()[0]) + 1 if r.any() else rows.shape[1] for r in stopped]
        rows = rows[:, : max(ends)]
        own = tokenizer([prompt], padding=True, truncation=True, return_tensors="pt").to(device)
        tokens = [row for row in rows]
        lens = []
        for row in tokens:
            pads = (row == tokenizer.pad_token_id).nonzero()
            lens.append(int(pads[0]) if pads.shape[0] > 0 else row.shape[0])
        full = torch.cat([own.input_ids.expand(gens, -1), rows], dim=1)
        outputs.append({
            "prompts": [prompt], "batch_items": [items[index]],
            "prompt_input_ids": own.input_ids, "prompt_attention_mask": own.attention_mask,
            "completions": [[tokenizer.decode(t[:n], skip_special_tokens=True) for t, n in zip(tokens, lens)]],
            "completion_input_ids": [tokens],
            "completion_attention_mask": [[torch.ones(len(t), device=device) for t in tokens]],
            "response_lens": lens,
            "reference_kls": trainer._reference_kl_values(
                agent_idx, agent, full, torch.ones_like(full), own.input_ids.shape[1], lens
            ),
        })  # fmt: skip
    return outputs
