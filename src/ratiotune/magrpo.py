"""The comlrl adapter: the one module that touches MAGRPOTrainer's internals.

comlrl's `train()` runs all epochs, returns nothing and logs only to W&B. A trial
needs one epoch at a time, the raw (unscaled) rewards of every rollout, and the
number of generated tokens, so this module drives the trainer's own epoch body
(`_train_step_returns` + `_drain_ready_buffers`, as in comlrl 1.4.3's
`_train_checkpoint_epochs`) and wraps the reward function to record what it saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
from comlrl.utils.reward_processor import RewardProcessors
from datasets import Dataset

from ratiotune.task import LengthRatioReward

# The comlrl release whose internals this module was written and tested against.
COMLRL_VERSION = "1.4.3"

# What comlrl 1.4.3's _compute_loss_with_gradients returns in place of a NaN/inf loss.
NONFINITE_STANDIN = float(torch.tensor(0.1))


def is_nonfinite_sampling(exc: BaseException) -> bool:
    """torch.multinomial's error (wrapped by comlrl) for a NaN/inf/negative distribution."""
    return isinstance(exc, (ValueError, RuntimeError)) and "probability tensor contains" in str(exc)


class RecordingReward:
    """The length-ratio reward that also remembers every (agent 1, agent 2) pair it scored.

    comlrl applies `reward_processor` (the scale factor) before it logs anything, so
    its own numbers grow with the scale; metrics come from these raw pairs instead.
    Pairs are grouped per prompt (one `start_group()` per training step).
    """

    def __init__(self, reward: LengthRatioReward):
        self.reward = reward
        self.groups: list[list[tuple[str, str]]] = []

    def start_group(self) -> None:
        self.groups.append([])

    def __call__(self, completions1: list[str], completions2: list[str]) -> list[float]:
        if not self.groups:
            self.start_group()
        self.groups[-1].extend(zip(completions1, completions2))
        return self.reward(completions1, completions2)

    def take_groups(self) -> list[list[tuple[str, str]]]:
        groups, self.groups = [g for g in self.groups if g], []
        return groups


class RatioMAGRPOTrainer(MAGRPOTrainer):
    """MAGRPOTrainer that runs one epoch on request and counts generated tokens and bad losses."""

    generated_tokens: int = 0
    # Updates whose loss was NaN/inf. comlrl silently trains on 0.1 instead; the trial
    # checks this after every epoch (trainable.Trial.divergence). A batched loss sets it too.
    nonfinite_losses: int = 0
    # Set by run_epoch when sampling from the agents failed on a NaN/inf distribution:
    # weights that grew huge but finite overflow in the forward pass.
    nonfinite_sampling: str | None = None

    def _compute_loss_with_gradients(self, agent: Any, completions_data: Any, returns: Any) -> torch.Tensor:
        loss = super()._compute_loss_with_gradients(agent, completions_data, returns)
        # comlrl's stand-in for a NaN/inf loss is a fresh leaf tensor 0.1; a real loss has a grad_fn.
        if loss.grad_fn is None and len(returns) and loss.item() == NONFINITE_STANDIN:
            self.nonfinite_losses += 1
        return loss

    def first_nonfinite_parameter(self) -> str | None:
        for agent_idx, agent in enumerate(self.agents):
            for name, param in agent.named_parameters():
                if not torch.isfinite(param).all():
                    return f"agent {agent_idx} {name}"
        return None

    def _generate_completions(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        output = super()._generate_completions(*args, **kwargs)
        self.generated_tokens += sum(output["response_lens"])
        return output

    def run_epoch(self) -> None:
        """One pass over the training prompts, updating whenever a rollout buffer fills."""
        for agent in self.agents:
            agent.train()
        for batch in self.get_train_dataloader():
            self.reward_func.start_group()
            try:
                self._train_step_returns(batch[0])
            except (ValueError, RuntimeError) as exc:
                if not is_nonfinite_sampling(exc):
                    raise
                self.nonfinite_sampling = str(exc)
                return
            # Stop at the first sign of divergence instead of training on.
            if self.nonfinite_losses or self.first_nonfinite_parameter():
                return
        # Flush partial buffers so every epoch ends at a clean, checkpointable boundary.
        self._drain_ready_buffers([i for i, buffer in enumerate(self.rollout_buffers) if buffer])

    @torch.no_grad()
    def sample_answers(self, prompt: str, agent_idx: int, n: int, max_new_tokens: int) -> list[str]:
        """n sampled answers of one agent to one prompt, with the training sampling settings."""
        output = super()._generate_completions(
            self.agents[agent_idx],
            [{"prompt": prompt}],
            agent_idx=agent_idx,
            num_return_sequences=n,
            max_new_tokens=max_new_tokens,
        )
        return list(output["completions"][0])

    def save_state(self, directory: Path, epoch: int) -> None:
        """Both agents (HF format + tokenizer) and the resumable trainer state.

        comlrl's save_checkpoint writes atomically (stage + rename) and stores
        models, optimizers, RNG and our epoch cursor; it loads with weights_only.
        """
        self._checkpoint_progress = {"kind": "magrpo", "epoch": int(epoch)}
        self.stamp_configs()
        self.save_checkpoint(str(directory / "trainer_state"))
        self.save_model(str(directory))

    def stamp_configs(self) -> None:
        """Write into each agent's config what save_pretrained writes (dtype name, architectures).

        comlrl fingerprints the model config in save_checkpoint and refuses a load whose
        config differs; save_model (save_pretrained) mutates the live config, so without
        this every checkpoint after the first one fails to load in a fresh process.
        """
        for agent in self.agents:
            agent.config.dtype = str(agent.dtype).split(".")[1]
            agent.config.architectures = [agent.__class__.__name__]

    def load_state(self, directory: Path) -> int:
        """Restore agents, optimizers and RNG; returns the number of completed epochs."""
        self.stamp_configs()
        progress = self.load_checkpoint(str(directory / "trainer_state"))
        return int(progress.get("epoch", 0))


def build_trainer(
    agents: list[torch.nn.Module],
    tokenizer: Any,
    prompts: list[str],
    *,
    hyperparameters: dict[str, Any],
    train: Any,
    task: Any,
    epochs: int,
    devices: list[str] | None = None,
) -> RatioMAGRPOTrainer:
    """A trainer for one trial. `train` and `task` are the study's TrainSpec and TaskSpec."""
    devices = devices or ["cpu", "cpu"]
    parallel = "mp" if len(set(devices)) > 1 else "none"
    config = MAGRPOConfig(
        num_train_epochs=epochs,
        agent_learning_rate=hyperparameters["learning_rate"],
        num_generations=hyperparameters["num_generations"],
        max_new_tokens=hyperparameters["max_new_tokens"],
        temperature=train.temperature,
        top_p=train.top_p,
        top_k=train.top_k,
        num_turns=1,
        # comlrl's built-in eval is tiny and its result is discarded; we run our own.
        eval_interval=0,
        advantage_normalization=train.advantage_normalization,
        advantage_mode=train.advantage_mode,
        rollout_buffer_size=train.rollout_buffer_size,
        train_batch_size=train.train_batch_size,
        parallel_training=parallel,
        agent_devices=devices if parallel == "mp" else devices[0],
    )
    trainer = RatioMAGRPOTrainer(
        agents=agents,
        tokenizer=tokenizer,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        reward_func=RecordingReward(LengthRatioReward(task.target_min, task.target_max)),
        reward_processor=RewardProcessors.scale(factor=hyperparameters["reward_scale"]),
        args=config,
        wandb_config=None,
    )
    trainer.verbose = False  # silences comlrl's per-epoch tqdm bars inside trials
    return trainer
