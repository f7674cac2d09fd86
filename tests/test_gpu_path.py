"""The GPU code paths, checked on CPU: mixed precision, placement for train/check, two-device
("mp") training, and checkpoints that hold each tensor once.

None of these defects can show on CPU in plain float32, so each test forces the GPU setup
(bf16 autocast, two device names, a staged checkpoint) on CPU.
"""

from __future__ import annotations

import torch
from conftest import run_cli

from ratiotune.training import magrpo
from ratiotune.training.placement import PlacementError, choose_devices, local_devices
from ratiotune.core.study import validate_study
from ratiotune.training.trainable import Trial


def parameters(trial: Trial) -> list[tuple[str, torch.Tensor]]:
    return [(f"{i}.{n}", p.detach().clone()) for i, a in enumerate(trial.trainer.agents) for n, p in a.named_parameters()]


def unchanged(before: list[tuple[str, torch.Tensor]], trial: Trial, which: str) -> list[str]:
    after = dict(parameters(trial))
    return [name for name, p in before if which in name and torch.equal(p, after[name])]


def test_bf16_training_keeps_float32_masters_so_a_tiny_learning_rate_still_moves_them(tiny_study):
    """lr 1e-6 (the Qwen study's low end) with the GPU's bf16: every weight must move.

    The control puts the same agents in pure bf16 (what `dtype: bfloat16` loaded before):
    the same step then rounds away for the norm weights (1.0 moves in steps of 7.8e-3)
    and for most others, so this test fails on a pure-bf16 setup.
    """
    tiny_study["model"]["dtype"] = "bfloat16"  # autocast on CPU, as `auto` does on a GPU
    tiny_study["train"]["learning_rate"] = 1e-6
    # A weight moves only if some group's rewards differ (else every advantage is 0). The random-init
    # agent rarely stops early at temperature 0.6 / top_p 0.6 (5 of 180 rows), so that was left to the
    # random stream; at 1.0 / 1.0, 18% of rows hold a special token (it decodes to no characters), and
    # with 8 answers a prompt all 3 groups tie with chance ~1e-4. Passed on train.seed 0-5.
    tiny_study["train"].update(temperature=1.0, top_p=1.0, num_generations=8)
    study = validate_study(tiny_study)

    trial = Trial(study, {})
    assert trial.trainer.autocast_dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for a in trial.trainer.agents for p in a.parameters())
    before = parameters(trial)
    trial.trainer.run_epoch()
    assert unchanged(before, trial, "") == []  # every tensor of both agents moved
    moments = [s["exp_avg_sq"] for o in trial.trainer.optimizers for s in o.state.values()]
    assert moments and all(m.dtype == torch.float32 for m in moments)
    assert all(p.grad is None for a in trial.trainer.agents for p in a.parameters())  # freed after each step

    control = Trial(study, {})
    for agent in control.trainer.agents:
        agent.to(torch.bfloat16)  # pure bf16 weights (AdamW then keeps bf16 moments too)
    control.trainer.autocast_dtype = None
    before = parameters(control)
    control.trainer.run_epoch()
    norms = [name for name, _ in before if "norm" in name]
    assert set(norms) <= set(unchanged(before, control, "norm"))  # not one norm weight moved
    total = sum(p.numel() for _, p in before)
    moved = sum((p != dict(parameters(control))[n]).sum().item() for n, p in before)
    assert moved < 0.5 * total  # most weights did not move either


def test_train_and_check_place_agents_as_a_search_trial_does():
    assert local_devices(0) == choose_devices(0, torch.cuda.is_available()) == ["cpu", "cpu"]
    if torch.cuda.is_available():
        assert local_devices(0.25) == local_devices(1) == ["cuda:0", "cuda:0"]
    else:
        for gpu in (0.25, 1, 2):
            try:
                local_devices(gpu)
            except PlacementError as exc:
                assert "torch sees no CUDA device" in str(exc)
            else:
                raise AssertionError(f"resources.gpu={gpu} without CUDA must fail")


def test_train_and_check_with_gpus_but_no_cuda_fail_with_exit_2(tiny_study, write_study, tmp_path):
    tiny_study["resources"]["gpu"] = 1
    path = write_study(tiny_study)
    for args in (("train", str(path), "--set", "learning_rate=1e-3", "--output", str(tmp_path / "run")), ("check", str(path))):
        # CUDA_VISIBLE_DEVICES="" hides any GPU, so this checks the same thing on a GPU machine.
        result = run_cli(*args, timeout=300, env={"CUDA_VISIBLE_DEVICES": ""})
        assert result.returncode == 2, (args, result.stderr[-2000:])
        assert "torch sees no CUDA device" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_mp_epoch_with_two_devices_counts_tokens_and_trains(tiny_study):
    """comlrl's parallel_training="mp" (one thread per agent) on two CPU device names."""
    tiny_study["model"]["dtype"] = "bfloat16"
    study = validate_study(tiny_study)
    trial = Trial(study, {}, devices=["cpu", "cpu:0"])
    trainer = trial.trainer
    assert trainer.args.parallel_training == "mp"
    assert trainer.tokenizers[0] is not trainer.tokenizers[1]  # one per thread
    seen: list[int] = []
    generate = magrpo.generate_batched  # each window's rollouts, one call per agent (from its own thread)

    def counting(*args, **kwargs):
        outputs = generate(*args, **kwargs)
        seen.extend(sum(output["response_lens"]) for output in outputs)
        return outputs

    magrpo.generate_batched = counting
    try:
        before = parameters(trial)
        metrics = trial.run_epoch()
    finally:
        magrpo.generate_batched = generate
    # 3 prompts x 2 agents' rollouts, every token counted once despite two threads.
    assert len(seen) == 6 and trainer.generated_tokens == sum(seen) > 0
    assert trainer.nonfinite_losses == 0 and metrics["infeasible"] == 0
    # Both agents updated (the two sampling threads share torch's CPU RNG, so which rewards come
    # out varies from run to run; a group with equal rewards moves no weight, so check the steps).
    assert all(o.state and all(int(s["step"]) >= 1 for s in o.state.values()) for o in trainer.optimizers)
    assert unchanged(before, trial, "embed") == []  # the embeddings see AdamW's weight decay at least
    assert trainer.first_nonfinite_parameter() is None
    with torch.no_grad():
        trainer.agents[1].model.norm.weight[3] = float("nan")
    assert trainer.first_nonfinite_parameter() == "agent 1 model.norm.weight"


def test_checkpoint_holds_each_weight_once_and_restores_exactly(tiny_study, tmp_path):
    study = validate_study(tiny_study)
    trial = Trial(study, {})
    trial.run_epoch()
    trial.save(tmp_path / "ckpt")
    weights = sum(p.numel() for a in trial.trainer.agents for p in a.parameters())
    state = torch.load(next((tmp_path / "ckpt" / "trainer_state").glob("*.pt")), weights_only=True)
    assert sum(t.numel() for t in _tensors(state) if t.is_floating_point()) < 10_000  # RNG and bookkeeping only
    optimizers = [torch.load(tmp_path / "ckpt" / f"optimizer_{i}.pt", weights_only=True) for i in (0, 1)]
    # AdamW's two moments (plus one 0-d step count per tensor)
    assert sum(t.numel() for t in _tensors(optimizers) if t.dim() > 0) == 2 * weights

    saved = parameters(trial)
    reference = trial.run_epoch()  # the uninterrupted run's next epoch (before the restore reseeds)
    restored = Trial(study, {})
    restored.restore(tmp_path / "ckpt")
    for (name, p), (_, q) in zip(saved, parameters(restored)):
        assert torch.equal(p, q), name
    assert restored.run_epoch()["train/mean_reward"] == reference["train/mean_reward"]
    for (name, p), (_, q) in zip(parameters(trial), parameters(restored)):
        assert torch.equal(p, q), name


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
