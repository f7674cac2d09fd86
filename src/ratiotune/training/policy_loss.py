"""The batched policy-gradient loss: comlrl 1.4.3's per-sample loss, with all completions in one forward.

comlrl's version runs one forward per completion and one full-vocabulary log_softmax per
generated token, which dominates the update with Qwen's 151,936-token vocabulary; this one
has the same math and the same gradients to float rounding (TrialMAGRPOTrainer uses it with
train.fast_update, the default).
"""

from __future__ import annotations

from typing import Any

import torch
from comlrl.trainers.reinforce import MAGRPOTrainer
from comlrl.utils.distributed import unwrap_model


def batched_policy_loss(
    trainer: MAGRPOTrainer, agent: torch.nn.Module, completions_data: dict[str, Any], returns: list[float]
) -> torch.Tensor:
    """comlrl 1.4.3's `_compute_loss_with_gradients`, with all completions in one forward.

    The same math as comlrl, term by term:
    - advantages: returns minus the reference-KL penalty, then `_compute_advantages`
      (mean/raw/max/rloo), then optional normalisation (population std, clamped at 1e-6);
    - the input of completion c is prompt + c[:-1] and its targets are c[:-1]: comlrl
      scores every completion token *including* trailing pad/eos, but not the last
      position (its logits slice stops one short). A completion of length < 2 scores
      nothing and is left out of the mean;
    - loss = mean over scored completions of -(sum of token log-probs) * advantage.
    What differs is only how it is computed: completions are right-padded into one
    batch (causal attention, so a row's real positions never see its padding, and the
    padded positions are masked out of the sum), the LM head runs only on completion
    positions (`logits_to_keep`), and there is one float32 log_softmax and a gather
    instead of a full-vocabulary log_softmax per token kept for backward. A non-finite
    loss is returned as is (comlrl returns 0.1 instead).
    """
    device = next(unwrap_model(agent).parameters()).device
    if len(returns) == 0:
        return torch.tensor(0.0, device=device, requires_grad=True)

    returns_tensor = torch.tensor(returns, dtype=torch.float, device=device)
    advantages = trainer._compute_advantages(trainer._apply_reference_kl_to_returns(returns_tensor, completions_data))
    if trainer.args.advantage_normalization and advantages.numel() > 1:
        advantages = (advantages - advantages.mean()) / advantages.std(unbiased=False).clamp(min=1e-6)

    agent.train()
    prompt = completions_data["prompt_input_ids"][0].to(device)
    completions = completions_data["completion_input_ids"]
    if completions and isinstance(completions[0], list):
        completions = completions[0]
    # comlrl pairs completion i with advantage i and stops at the shorter of the two lists.
    scored = [(i, c.to(device)) for i, c in enumerate(completions[: advantages.numel()]) if len(c) >= 2]
    if not scored:
        return torch.tensor(0.0, device=device, requires_grad=True)

    # Completions of one generate() call all have the same length; pad anyway so that
    # any lengths work. Row r scores n_r = len(c) - 1 targets, predicted at positions
    # P-1 .. P+n_r-2, so its input is prompt + c[:n_r - 1].
    n_targets = [len(c) - 1 for _, c in scored]
    width = max(n_targets)
    prompt_len = prompt.numel()
    input_ids = torch.zeros(len(scored), prompt_len + width - 1, dtype=torch.long, device=device)
    targets = torch.zeros(len(scored), width, dtype=torch.long, device=device)
    mask = torch.zeros(len(scored), width, dtype=torch.bool, device=device)
    input_ids[:, :prompt_len] = prompt
    for row, ((_, c), n) in enumerate(zip(scored, n_targets)):
        input_ids[row, prompt_len : prompt_len + n - 1] = c[: n - 1]
        targets[row, :n] = c[:n]
        mask[row, :n] = True

    logits = agent(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        use_cache=False,
        logits_to_keep=width,
    ).logits
    token_log_probs = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    del logits  # only log_softmax's output is needed for backward
    sequence_log_probs = (token_log_probs * mask).sum(dim=-1)
    scored_advantages = advantages[torch.tensor([i for i, _ in scored], device=device)]
    return -(sequence_log_probs * scored_advantages).sum() / len(scored)
