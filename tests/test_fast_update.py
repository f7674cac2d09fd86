"""The batched policy-gradient loss (train.fast_update) against comlrl's own loss.

Three layers: comlrl's stock loss still computes what comlrl 1.4.3 computed (so the
fast path is still a faithful copy), the fast loss has the stock loss's gradients for
every advantage mode with normalisation on and off, and a whole epoch ends with the
same parameters either way.
"""

from __future__ import annotations

import importlib.metadata

import pytest
import torch
from comlrl.trainers.reinforce import MAGRPOTrainer

from ratiotune.training import magrpo
from ratiotune.training.magrpo import build_trainer
from ratiotune.training.models import load_agents
from ratiotune.training.policy_loss import batched_policy_loss
from ratiotune.core.study import TrainSpec, validate_study
from ratiotune.tasks.length_ratio import make_task
from ratiotune.training.trainable import Trial

ADVANTAGE_MODES = ("mean", "raw", "max", "rloo")
# Completion lengths of one fake sample: unequal (which generate() never produces, but
# the loss must handle), one too short to score (1) and one with a single target (2).
LENGTHS = (9, 6, 1, 12, 2)


@pytest.fixture(scope="module")
def setup():
    """A trainer on builtin:tiny and one sample: a prompt, completions, returns."""
    agents, tokenizer = load_agents("builtin:tiny")
    trainer = build_trainer(
        agents,
        tokenizer,
        [{"prompt": "Tell a joke about dinosaurs:"}],
        hyperparameters={"learning_rate": 1e-3, "num_generations": 2, "max_new_tokens": 8, "reward_scale": 1.0},
        train=TrainSpec(),
        task=make_task(),
        epochs=1,
    )
    generator = torch.Generator().manual_seed(0)
    vocab = agents[0].config.vocab_size
    prompt = torch.randint(3, vocab, (1, 7), generator=generator)
    completions = [torch.randint(0, vocab, (n,), generator=generator) for n in LENGTHS]
    completions[0][-3:] = tokenizer.pad_token_id  # trailing padding is scored too
    data = {"prompt_input_ids": prompt, "completion_input_ids": [completions]}
    returns = [0.3, 1.0, 0.0, 0.7, 0.25]
    return trainer, data, returns


def loss_and_grads(trainer, loss_fn, data, returns):
    model = trainer.agents[0]
    model.zero_grad(set_to_none=True)
    loss = loss_fn(trainer, model, data, returns)
    loss.backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters()])
    model.zero_grad(set_to_none=True)
    return loss.detach(), grads


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


def comlrl_1_4_3_loss(trainer, model, data, returns):
    """comlrl 1.4.3's per-sample loss, written out independently of both implementations."""
    r = torch.tensor(returns, dtype=torch.float)
    mode = trainer.advantage_mode
    if mode == "mean":
        adv = r - r.mean()
    elif mode == "raw":
        adv = r
    elif mode == "max":
        adv = r - r.max()
    else:  # rloo: each return minus the mean of the others
        adv = (r * len(r) - r.sum()) / (len(r) - 1)
    if trainer.args.advantage_normalization:
        adv = (adv - adv.mean()) / adv.std(unbiased=False).clamp(min=1e-6)
    prompt = data["prompt_input_ids"][0]
    terms = []
    for completion, a in zip(data["completion_input_ids"][0], adv):
        if len(completion) < 2:
            continue  # nothing to score: only the last position, which comlrl skips
        ids = torch.cat([prompt, completion[:-1]])
        logits = model(input_ids=ids[None], use_cache=False).logits[0]
        log_probs = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
        terms.append(-log_probs.gather(1, completion[:-1, None]).sum() * a)
    return torch.stack(terms).mean()


def stock_loss(trainer, model, data, returns):
    return MAGRPOTrainer._compute_loss_with_gradients(trainer, model, data, returns)


def test_comlrl_is_the_version_the_fast_loss_copies():
    assert importlib.metadata.version("comlrl") == magrpo.COMLRL_VERSION, (
        "comlrl changed: re-check ratiotune.training.policy_loss.batched_policy_loss against the new "
        "_compute_loss_with_gradients before bumping COMLRL_VERSION"
    )


@pytest.mark.parametrize("mode", ADVANTAGE_MODES)
def test_comlrl_stock_loss_still_has_1_4_3_math(setup, mode):
    """Fails loudly if comlrl's own loss changes (the fast path would then be wrong)."""
    trainer, data, returns = setup
    trainer.advantage_mode, trainer.args.advantage_normalization = mode, True
    ref_loss, ref_grads = loss_and_grads(trainer, comlrl_1_4_3_loss, data, returns)
    loss, grads = loss_and_grads(trainer, stock_loss, data, returns)
    assert torch.allclose(loss, ref_loss, rtol=1e-5, atol=1e-6), (loss, ref_loss)
    assert relative_error(grads, ref_grads) <= 1e-5


@pytest.mark.parametrize("normalization", [True, False])
@pytest.mark.parametrize("mode", ADVANTAGE_MODES)
def test_fast_loss_has_comlrl_gradients(setup, mode, normalization):
    trainer, data, returns = setup
    trainer.advantage_mode, trainer.args.advantage_normalization = mode, normalization
    stock, stock_grads = loss_and_grads(trainer, stock_loss, data, returns)
    fast, fast_grads = loss_and_grads(trainer, batched_policy_loss, data, returns)
    assert stock_grads.norm() > 0
    assert torch.allclose(fast, stock, rtol=1e-5, atol=1e-6), (fast, stock)
    assert relative_error(fast_grads, stock_grads) <= 1e-5


def test_fast_loss_with_reference_kl_penalty(setup):
    """The KL-adjusted returns go through comlrl's own helper, as in the stock loss."""
    trainer, data, returns = setup
    trainer.advantage_mode, trainer.args.advantage_normalization = "mean", False
    without_kl, _ = loss_and_grads(trainer, stock_loss, data, returns)
    saved = trainer.args.reference_kl_enabled, trainer.args.reference_kl_coef
    trainer.args.reference_kl_enabled, trainer.args.reference_kl_coef = True, 0.5
    data = {**data, "reference_kls": [0.1, 0.0, 0.4, 0.2, 0.05]}
    try:
        stock, stock_grads = loss_and_grads(trainer, stock_loss, data, returns)
        fast, fast_grads = loss_and_grads(trainer, batched_policy_loss, data, returns)
    finally:
        trainer.args.reference_kl_enabled, trainer.args.reference_kl_coef = saved
    assert not torch.allclose(stock, without_kl)  # the penalty really applied
    assert torch.allclose(fast, stock, rtol=1e-5, atol=1e-6)
    assert relative_error(fast_grads, stock_grads) <= 1e-5


def test_nonfinite_loss_is_returned_and_counted(setup):
    trainer, data, returns = setup
    trainer.advantage_mode, trainer.args.advantage_normalization = "mean", True
    model = trainer.agents[0]
    weight = model.model.norm.weight
    saved = weight.detach().clone()
    trainer.nonfinite_losses = 0
    try:
        with torch.no_grad():
            weight[0] = float("nan")
        trainer.fast_update = True
        assert torch.isnan(trainer._compute_loss_with_gradients(model, data, returns))
        assert trainer.nonfinite_losses == 1
        # Stock comlrl hides it as a constant 0.1; the counter still sees it.
        trainer.fast_update = False
        assert trainer._compute_loss_with_gradients(model, data, returns).item() == pytest.approx(0.1)
        assert trainer.nonfinite_losses == 2
    finally:
        with torch.no_grad():
            weight.copy_(saved)
        trainer.fast_update, trainer.nonfinite_losses = True, 0


def test_one_epoch_fast_and_stock_end_with_the_same_parameters(tiny_study):
    """Real rollouts (3 prompts, 2 updates per agent), same seeds: parameters agree to float rounding."""
    results = {}
    for fast in (False, True):
        study = validate_study({**tiny_study, "train": {**tiny_study["train"], "fast_update": fast}})
        trial = Trial(study, {})
        assert trial.trainer.fast_update is fast
        initial = [torch.cat([p.detach().flatten() for p in agent.parameters()]) for agent in trial.trainer.agents]
        trial.trainer.run_epoch()
        final = [torch.cat([p.detach().flatten() for p in agent.parameters()]) for agent in trial.trainer.agents]
        results[fast] = (initial, final, trial.trainer.reward_func.take_groups())
    (init_s, final_s, groups_s), (init_f, final_f, groups_f) = results[False], results[True]
    assert groups_s == groups_f  # the same rollouts, so the same inputs to every update
    for a in range(2):
        assert torch.equal(init_s[a], init_f[a])
        moved = (final_s[a] - init_s[a]).norm()
        assert moved > 1e-3  # the epoch really trained
        assert (final_f[a] - final_s[a]).norm() <= 1e-4 * moved
        # Elementwise: AdamW divides each gradient by its own running magnitude, so an element whose
        # gradient is ~0 turns float rounding into a visible share of the lr (1e-3): the rollouts of
        # one window decoded together (seed 0) give one such element of 80,640 at 1.8e-5. Nearly all
        # elements agree to 1e-6, and none is off by a tenth of a step.
        diff = (final_f[a] - final_s[a]).abs()
        assert (diff > 1e-6).sum() <= 1e-4 * diff.numel()
        assert diff.max() <= 1e-4


def test_fast_update_is_the_default_and_can_be_turned_off():
    assert TrainSpec().fast_update is True
    assert TrainSpec(fast_update=False).fast_update is False
