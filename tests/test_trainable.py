"""The training code path shared by every trial: metrics, checkpoints, restore."""

import torch

from ratiotune.core.study import validate_study
from ratiotune.training.trainable import Trial


def optimizer_tensors(trial: Trial) -> list[torch.Tensor]:
    return [
        value
        for optimizer in trial.trainer.optimizers
        for state in optimizer.state_dict()["state"].values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    ]


def test_trial_trains_and_restores_at_the_next_epoch(tiny_study, tmp_path):
    study = validate_study(tiny_study)
    trial = Trial(study, {"learning_rate": 1e-3})
    start = [p.detach().clone() for p in trial.trainer.agents[0].parameters()]
    metrics = trial.run_epoch()
    assert metrics["epoch"] == 1
    for name in ("train/mean_reward", "train/in_range_fraction", "eval/mean_reward", "eval/in_range_fraction"):
        assert 0.0 <= metrics[name] <= 1.0, name
    assert metrics["system/tokens_per_second"] > 0
    # Every number an epoch reports is in the one metrics table (test/ ones only in confirmation
    # runs), and the table names nothing an epoch does not report.
    reported = set(metrics) - {"infeasible"}
    assert reported == {name for name in study.metrics().reported if not name.startswith("test/")}
    changed = any(not torch.equal(a, b) for a, b in zip(start, trial.trainer.agents[0].parameters()))
    assert changed, "one epoch must update agent 0"

    trial.save(tmp_path / "ckpt", metrics)
    assert {p.name for p in (tmp_path / "ckpt").iterdir()} >= {"agent_0", "agent_1", "trainer_state", "meta.json"}

    saved_optimizer = [t.clone() for t in optimizer_tensors(trial)]
    # The uninterrupted run's second epoch, for comparison with the restored one.
    reference = trial.run_epoch()

    restored = Trial(study, {"learning_rate": 1e-3})
    restored.restore(tmp_path / "ckpt")
    assert restored.epoch == 1
    loaded_optimizer = optimizer_tensors(restored)
    assert saved_optimizer and len(saved_optimizer) == len(loaded_optimizer)
    assert all(torch.equal(a, b) for a, b in zip(saved_optimizer, loaded_optimizer))

    # Weights, optimizer and RNG are restored, so the continued epoch matches exactly.
    continued = restored.run_epoch()
    assert continued["epoch"] == 2
    assert continued["train/mean_reward"] == reference["train/mean_reward"]
    for live, loaded in zip(trial.trainer.agents[0].parameters(), restored.trainer.agents[0].parameters()):
        assert torch.equal(live, loaded)


def test_eval_protocol_is_fixed_and_independent_of_num_generations(tiny_study):
    """Same seeds, different num_generations: identical eval metrics before training."""
    study = validate_study(tiny_study)
    two = Trial(study, {"num_generations": 2}).evaluate()
    four = Trial(study, {"num_generations": 4}).evaluate()
    assert two == four
    # Evaluating does not move the training RNG stream.
    trial = Trial(study, {})
    before = torch.get_rng_state()
    trial.evaluate()
    assert torch.equal(before, torch.get_rng_state())


# Recorded before tasks became plug-ins (commit b61e27a, task.py's batch_metrics on strings), from
# the same seeds: a Trial on the length-ratio task must still give these numbers to the bit.
BEFORE_PLUGINS = [
    {
        "eval/flat_group_fraction": 0.5,
        "eval/in_range_fraction": 0.041666666666666664,
        "eval/mean_chars_agent1": 11.416666666666666,
        "eval/mean_chars_agent2": 10.583333333333334,
        "eval/mean_ratio": 0.958270202020202,
        "eval/mean_reward": 0.5800293880337812,
        "search/objective": 0.041666666666666664,
        "train/flat_group_fraction": 1.0,
        "train/in_range_fraction": 0.0,
        "train/mean_chars_agent1": 12.0,
        "train/mean_chars_agent2": 12.0,
        "train/mean_ratio": 1.0,
        "train/mean_reward": 0.6065306597126335,
    },
    {
        "eval/flat_group_fraction": 0.3333333333333333,
        "eval/in_range_fraction": 0.125,
        "eval/mean_chars_agent1": 11.041666666666666,
        "eval/mean_chars_agent2": 11.083333333333334,
        "eval/mean_ratio": 1.059054834054834,
        "eval/mean_reward": 0.638353564904908,
        "search/objective": 0.08333333333333333,
        "train/flat_group_fraction": 0.9,
        "train/in_range_fraction": 0.0,
        "train/mean_chars_agent1": 11.95,
        "train/mean_chars_agent2": 12.0,
        "train/mean_ratio": 1.0045454545454544,
        "train/mean_reward": 0.6094168188702167,
    },
]


def test_length_ratio_figures_are_those_recorded_before_tasks_were_plugins(tiny_study):
    """The old study form (band at task level), builtin prompt sets, lr 2e-3, 12 tokens, seed 3: two epochs."""
    from ratiotune.core.study import read_prompts

    tiny_study["task"].update(train_prompts="builtin:tutorial", eval_prompts="builtin:eval", target_min=1.5, target_max=2.5)
    study = read_prompts(validate_study(tiny_study))
    trial = Trial(study, {"learning_rate": 2e-3, "num_generations": 2, "max_new_tokens": 12}, seed=3)
    # The figures were recorded with one generate() call per prompt: the same random stream.
    trial.trainer.batched_rollouts = False
    rows = [trial.run_epoch() for _ in range(2)]
    assert [{k: v for k, v in row.items() if k in expected} for row, expected in zip(rows, BEFORE_PLUGINS)] == BEFORE_PLUGINS
