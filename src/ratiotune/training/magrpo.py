"""The comlrl adapter: the one module that touches MAGRPOTrainer's internals.

comlrl's `train()` runs all epochs, returns nothing and logs only to W&B. A trial
needs one epoch at a time, the raw (unscaled) rewards of every rollout, and the
number of generated tokens, so this module drives the trainer's own epoch body
(`_train_step_returns` + `_drain_ready_buffers`, as in comlrl 1.4.3's
`_train_checkpoint_epochs`) and wraps the reward function to record what it saw.

It also replaces comlrl's per-sample policy-gradient loss with a batched one (same
math, same gradients to float rounding; policy_loss.py), because comlrl's version runs
one forward per completion and one full-vocabulary log_softmax per generated token, which
dominates the update with Qwen's 151,936-token vocabulary.

Rollouts and eval decode through one `generation.Decoding` per agent (train.generation:
eager, or a kept static KV cache, compiled or not; train.decode_dtype: from the float32 masters
or a bf16 copy). The prompts that are sampled from the same weights (one update window,
train.rollout_buffer_size) are decoded in one generate() call per agent (`_prefetch_rollouts`,
rollouts.generate_batched). The reward function that records what it scored is
rollouts.RecordingReward.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from pathlib import Path
from typing import Any

import torch
from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
from comlrl.utils.distributed import unwrap_model
from comlrl.utils.reward_processor import RewardProcessors
from datasets import Dataset
from safetensors.torch import load_file

from ratiotune.training.generation import Decoding
from ratiotune.training.policy_loss import batched_policy_loss
from ratiotune.training.rollouts import RecordingReward, generate_batched
from ratiotune.tasks import Task

# The comlrl release whose internals this module was written and tested against.
COMLRL_VERSION = "1.4.3"

# Searchable hyperparameters that are MAGRPOConfig fields (reward_scale is the reward processor's).
CONFIG_FIELDS = {
    "learning_rate": "agent_learning_rate",
    "num_generations": "num_generations",
    "max_new_tokens": "max_new_tokens",
}

# What comlrl 1.4.3's _compute_loss_with_gradients returns in place of a NaN/inf loss.
NONFINITE_STANDIN = float(torch.tensor(0.1))


def is_nonfinite_sampling(exc: BaseException) -> bool:
    """torch.multinomial's error (wrapped by comlrl) for a NaN/inf/negative distribution."""
    return isinstance(exc, (ValueError, RuntimeError)) and "probability tensor contains" in str(exc)


class TrialMAGRPOTrainer(MAGRPOTrainer):
    """The MAGRPOTrainer one trial drives (any task): it runs one epoch on request, counts generated tokens,
    checkpoints and restores its state, and (with `fast_update`, the default) computes the policy-gradient
    loss batched.
    """

    generated_tokens: int = 0
    fast_update: bool = True
    # Per-sample losses that came out NaN/inf. comlrl silently trains on 0.1 instead,
    # hiding a diverged run; the fast path returns the non-finite loss unchanged and both
    # paths count it here, so the trial stops (trainable.Trial.divergence).
    nonfinite_losses: int = 0
    # Set by run_epoch when sampling from the agents failed on a NaN/inf distribution:
    # weights that grew huge but finite overflow in the forward pass.
    nonfinite_sampling: str | None = None

    # bfloat16/float16 = run forward passes under torch.autocast in that dtype; None = plain
    # float32. The weights, gradients and AdamW moments always stay float32 (see models.py:
    # a bf16 weight of ~0.02 moves in steps of ~1.2e-4, so a pure-bf16 AdamW step of lr < ~6e-5
    # rounds away for most weights, and always for norm weights of ~1).
    autocast_dtype: torch.dtype | None = None
    # One per agent (build_trainer); None = comlrl's own generate() call, unchanged.
    decoding: list[Decoding] | None = None
    # False = comlrl's one generate() call per prompt (see batches_rollouts); only benchmarks turn it off.
    batched_rollouts: bool = True
    # Rollouts decoded ahead by _prefetch_rollouts, per (agent, id(dataset item)); taken by _generate_completions.
    _prefetched: dict[tuple[int, int], dict[str, Any]] | None = None

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # With parallel_training="mp" comlrl runs each agent's generation and update in its
        # own thread; the counters below are shared between them.
        self._counter_lock = threading.Lock()
        # Agents whose weights an optimizer step changed since run_epoch last checked them for NaN/inf.
        self._stepped: set[int] = set()

    def _count(self, name: str, n: int) -> None:
        with self._counter_lock:
            setattr(self, name, getattr(self, name) + n)

    def autocast(self, device: torch.device | str) -> contextlib.AbstractContextManager:
        """Mixed precision for one forward pass (generation or the loss) on `device`."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(torch.device(device).type, dtype=self.autocast_dtype)

    def first_nonfinite_parameter(self, agent_indices: list[int] | None = None) -> str | None:
        """The first NaN/inf weight of the given agents (default both), as 'agent i name'; None if all are finite."""
        for agent_idx, agent in enumerate(self.agents):
            if agent_indices is not None and agent_idx not in agent_indices:
                continue
            params = list(agent.parameters())
            # One reduction and one device sync per agent (a per-tensor .item() would sync
            # once per tensor, ~290 times for Qwen2.5-0.5B); the name is looked up only on failure.
            if torch.stack([p.detach().isfinite().all() for p in params]).all().item():
                continue
            for name, param in agent.named_parameters():
                if not torch.isfinite(param).all():
                    return f"agent {agent_idx} {name}"
        return None

    def _generate_completions(
        self,
        agent: Any,
        batch_items: list[Any],
        agent_idx: int = 0,
        num_return_sequences: int = 1,
        max_new_tokens: int = 128,
        **kwargs: Any,
    ) -> dict[str, Any]:
        plain_prompts = kwargs.get("prompts_override") is None and kwargs.get("external_prompts") is None
        if plain_prompts and len(batch_items) == 1 and self._prefetched:
            output = self._prefetched.pop((agent_idx, id(batch_items[0])), None)
            if output is not None:
                self._count("generated_tokens", sum(output["response_lens"]))
                return output
        if self.decoding is not None and plain_prompts:
            # Sample from the agent's decode copy if it keeps one (generation.Decoding.decoder).
            agent = self.decoding[agent_idx].decoder()
            if self.decoding[agent_idx].mode != "eager":
                # comlrl tokenizes the prompts inside; the cache is sized from the same padded
                # batch (single-turn prompts: the formatter of the item, as comlrl formats it).
                # Other prompts (multi-turn, never used here) decode eagerly.
                prompts = [self.formatters[agent_idx](item) for item in batch_items]
                prompt_tokens = self.tokenizers[agent_idx](prompts, padding=True, truncation=True).input_ids
                kwargs.update(
                    self.decoding[agent_idx].generate_kwargs(
                        "rollout", len(batch_items) * num_return_sequences, max(map(len, prompt_tokens)), max_new_tokens
                    )
                )
        with self.autocast(next(unwrap_model(agent).parameters()).device):
            output = super()._generate_completions(
                agent,
                batch_items,
                agent_idx=agent_idx,
                num_return_sequences=num_return_sequences,
                max_new_tokens=max_new_tokens,
                **kwargs,
            )
        self._count("generated_tokens", sum(output["response_lens"]))
        return output

    def _prefetch_rollouts(self, items: list[Any]) -> None:
        """Decode every item's rollouts in one generate() call per agent (both agents at once with "mp")."""
        outputs = self._run_agent_tasks(lambda agent_idx: generate_batched(self, agent_idx, items))
        self._prefetched = {
            (agent_idx, id(item)): out for agent_idx, per_item in enumerate(outputs) for item, out in zip(items, per_item)
        }

    def _update_from_samples(self, agent_idx: int, samples: list[Any]) -> None:
        super()._update_from_samples(agent_idx, samples)
        if samples:
            self._stepped.add(agent_idx)
        if self.decoding is not None:
            self.decoding[agent_idx].refresh()  # the bf16 decode copy follows the optimizer step
        # Free this agent's gradients now rather than at its next update: with the agents
        # updating one after the other, only one agent's float32 gradients are alive at a time.
        self.optimizers[agent_idx].zero_grad(set_to_none=True)

    def batches_rollouts(self) -> bool:
        """Whether the prompts between two updates are decoded in one call per agent (single-turn only).

        A decode step reads every weight once whatever its rows, so one call over the window's
        prompts costs about the steps of one prompt's call. The weights do not change inside a
        window, so the batched call draws from the same distribution as one call per prompt, from
        another random stream (tests/test_batched_rollouts.py checks both). `batched_rollouts =
        False` keeps comlrl's one call per prompt: bench/generation_speed.py's "per-prompt" path.
        """
        return self.batched_rollouts and self.decoding is not None and int(self.args.num_turns) == 1

    def run_epoch(self) -> None:
        """One pass over the training prompts, updating whenever a rollout buffer fills."""
        for agent in self.agents:
            agent.train()
        items = [batch[0] for batch in self.get_train_dataloader()]
        # Single-turn, every prompt adds one sample to each agent's buffer, and both agents update
        # when rollout_buffer_size samples are in (the buffers are empty at an epoch's start):
        # the prompts of one window are all sampled from the same weights.
        window = int(self.args.rollout_buffer_size) if self.batches_rollouts() else 1
        for start in range(0, len(items), window):
            group = items[start : start + window]
            try:
                if self.batches_rollouts():
                    # Also a window of one: its generate() call is comlrl's, on the decode copy.
                    self._prefetch_rollouts(group)
                for item in group:
                    self.reward_func.start_group()
                    self._train_step_returns(item)
                    # Stop at the first sign of divergence instead of training on. Weights change only
                    # at an optimizer step, so only the agents that stepped are read (a read of every
                    # weight: ~0.4 s an agent for SmolLM2 on this CPU).
                    stepped, self._stepped = sorted(self._stepped), set()
                    if self.nonfinite_losses or (stepped and self.first_nonfinite_parameter(stepped)):
                        return
            except (ValueError, RuntimeError) as exc:
                if not is_nonfinite_sampling(exc):
                    raise
                self.nonfinite_sampling = str(exc)
                return
            finally:
                self._prefetched = None
        # Flush partial buffers so every epoch ends at a clean, checkpointable boundary.
        self._drain_ready_buffers([i for i, buffer in enumerate(self.rollout_buffers) if buffer])

    def _compute_loss_with_gradients(self, agent, completions_data, returns):
        # The backward pass runs outside autocast (as torch recommends); it follows the
        # forward's dtypes and leaves float32 gradients on the float32 weights.
        with self.autocast(next(unwrap_model(agent).parameters()).device):
            if self.fast_update:
                loss = batched_policy_loss(self, agent, completions_data, returns)
            else:
                loss = super()._compute_loss_with_gradients(agent, completions_data, returns)
        if self.fast_update:
            if not torch.isfinite(loss):
                self._count("nonfinite_losses", 1)
        # comlrl swaps a NaN/inf loss for a fresh constant 0.1 leaf; a real loss always has
        # a grad_fn, so this tells the two apart and still counts the divergence.
        elif loss.grad_fn is None and len(returns) and loss.item() == NONFINITE_STANDIN:
            self._count("nonfinite_losses", 1)
        return loss

    @torch.no_grad()
    def sample_answers(self, prompts: list[str], agent_idx: int, n: int, max_new_tokens: int) -> list[list[str]]:
        """n sampled answers of one agent to each prompt, with the training sampling settings.

        One left-padded generate() call for all prompts: comlrl generates one prompt at a
        time, which on small models costs ~prompts x the per-step overhead.
        """
        agent = self.agents[agent_idx]
        tokenizer = self.tokenizers[agent_idx]
        device = next(agent.parameters()).device
        side, tokenizer.padding_side = tokenizer.padding_side, "left"
        try:
            batch = tokenizer(prompts, return_tensors="pt", padding=True).to(device)
        finally:
            tokenizer.padding_side = side
        rows, prompt_tokens = len(prompts) * n, batch.input_ids.shape[1]
        decoding = self.decoding[agent_idx].generate_kwargs("eval", rows, prompt_tokens, max_new_tokens) if self.decoding else {}
        decoder = self.decoding[agent_idx].decoder() if self.decoding else agent
        was_training = agent.training
        agent.eval()
        try:
            with self.autocast(device):
                sequences = decoder.generate(
                    **batch,
                    do_sample=True,
                    temperature=self.args.temperature,
                    top_p=self.args.top_p,
                    top_k=self.args.top_k,
                    max_new_tokens=max_new_tokens,
                    num_return_sequences=n,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                    **decoding,
                )
        finally:
            agent.train(was_training)
        completions = sequences[:, batch.input_ids.shape[1] :]
        texts = [self._decode_answer(tokenizer, tokens) for tokens in completions]
        return [texts[i * n : (i + 1) * n] for i in range(len(prompts))]

    @staticmethod
    def _decode_answer(tokenizer: Any, tokens: torch.Tensor) -> str:
        """Text up to the first pad/eos, as comlrl decodes training completions."""
        stops = {tokenizer.pad_token_id, tokenizer.eos_token_id}
        end = next((i for i, t in enumerate(tokens.tolist()) if t in stops), len(tokens))
        return tokenizer.decode(tokens[:end], skip_special_tokens=True)

    def save_state(self, directory: Path, epoch: int) -> None:
        """Both agents (HF format + tokenizer), their optimizers and the trainer state, each tensor once.

        agent_0/, agent_1/: the float32 master weights (save_pretrained); optimizer_0.pt,
        optimizer_1.pt: AdamW's state_dict (float32 moments); trainer_state/: comlrl's
        atomic save_checkpoint (config/dataset/tokenizer fingerprints, RNG, our epoch cursor;
        loads with weights_only) with agents and optimizers hidden. comlrl's checkpoint would
        store the weights a second time and copy every optimizer tensor to host memory before
        writing (+8 GB of RAM for Qwen2.5-0.5B's moments); torch.save writes them directly.
        Per checkpoint for Qwen2.5-0.5B: 2 x 4 x 494M B = 4 GB weights + 8 GB moments.
        """
        self._checkpoint_progress = {"kind": "magrpo", "epoch": int(epoch)}
        self.save_model(str(directory))
        for index, optimizer in enumerate(self.optimizers):
            torch.save(optimizer.state_dict(), directory / f"optimizer_{index}.pt")
        with self._comlrl_state_only():
            self.save_checkpoint(str(directory / "trainer_state"))

    @contextlib.contextmanager
    def _comlrl_state_only(self):
        """comlrl's checkpoint without agents and optimizers (saved next to it, see save_state).

        comlrl records which device each agent's RNG stream lives on from the agents;
        `_checkpoint_rng_devices_override` (its hook for that) keeps those routes, so
        CUDA RNG state still restores to the right GPU.
        """
        agents, optimizers = self.agents, self.optimizers
        self._checkpoint_rng_devices_override = {
            f"agents.{i}": str(next(unwrap_model(a).parameters()).device) for i, a in enumerate(agents)
        }
        self.agents = self.optimizers = None
        try:
            yield
        finally:
            self.agents, self.optimizers = agents, optimizers
            del self._checkpoint_rng_devices_override

    def load_agent_weights(self, directory: Path) -> None:
        """Load agent_i/*.safetensors into the live agents, strictly (a tied lm_head is not saved)."""
        for index, agent in enumerate(self.agents):
            agent = unwrap_model(agent)
            files = sorted((directory / f"agent_{index}").glob("*.safetensors"))
            if not files:
                raise FileNotFoundError(f"no safetensors weights in {directory / f'agent_{index}'}")
            state: dict[str, torch.Tensor] = {}
            for file in files:
                state.update(load_file(str(file)))
            missing, unexpected = agent.load_state_dict(state, strict=False)
            tied = {"lm_head.weight"} if agent.config.tie_word_embeddings else set()
            if unexpected or set(missing) - tied:
                raise ValueError(
                    f"agent_{index} in {directory} does not match the model: missing {sorted(set(missing) - tied)}, "
                    f"unexpected {sorted(unexpected)}"
                )
            if self.decoding is not None:
                self.decoding[index].refresh()

    def load_state(self, directory: Path, saved_hyperparameters: dict[str, Any] | None = None) -> int:
        """Restore agents (agent_i/), optimizers (optimizer_i.pt) and RNG; returns the number of completed epochs.

        The checkpoint may come from a trial with other hyperparameters (a PBT exploit
        copies a better trial's checkpoint into a trial whose config was just mutated).
        comlrl refuses a checkpoint whose saved MAGRPOConfig differs from `self.args`, so
        load it under the saved values, then put this trial's values back. Only the
        searchable fields may differ; anything else still has to match. Values read at
        construction only (num_generations, max_new_tokens, reward_scale) already come
        from this trial's config; the learning rate lives in the optimizers too, and
        load_state_dict just restored the saved one, so set ours in every param group.
        """
        current = self.args
        if saved_hyperparameters:
            saved = {field: saved_hyperparameters[name] for name, field in CONFIG_FIELDS.items()}
            self.args = copy.copy(current)  # a plain copy: no __post_init__ re-normalisation
            for field, value in saved.items():
                setattr(self.args, field, value)
        try:
            with self._comlrl_state_only():
                progress = self.load_checkpoint(str(directory / "trainer_state"))
        finally:
            self.args = current
        self.load_agent_weights(directory)
        for index, optimizer in enumerate(self.optimizers):
            # load_state_dict checks the parameter groups and counts, and moves each tensor
            # to its parameter's device; the loaded CPU tensors are used as they are on CPU.
            optimizer.load_state_dict(torch.load(directory / f"optimizer_{index}.pt", map_location="cpu", weights_only=True))
        for optimizer in self.optimizers:
            for group in optimizer.param_groups:
                group["lr"] = current.agent_learning_rate
        return int(progress.get("epoch", 0))


def build_trainer(
    agents: list[torch.nn.Module],
    tokenizer: Any,
    records: list[dict[str, Any]],
    *,
    hyperparameters: dict[str, Any],
    train: Any,
    task: Task,
    epochs: int,
    devices: list[str] | None = None,
    autocast_dtype: torch.dtype | None = None,
) -> TrialMAGRPOTrainer:
    """A trainer for one trial on the task's `records`. `train` is the study's TrainSpec, `task` its Task.

    `train.generation` picks each agent's decoding on its device (generation.resolve).

    `autocast_dtype` (bfloat16/float16) runs the forward passes under autocast; the agents'
    weights must be float32 (models.load_agents), which they and AdamW's moments stay.
    """
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
    trainer = TrialMAGRPOTrainer(
        agents=agents,
        # One tokenizer per agent: with "mp" comlrl tokenizes from two threads, and a shared
        # fast tokenizer raises "Already borrowed" (sample_answers also flips padding_side).
        tokenizer=[tokenizer, copy.deepcopy(tokenizer)],
        train_dataset=Dataset.from_list(list(records)),
        formatters=list(task.formatters),
        reward_func=RecordingReward(task.reward),
        reward_processor=RewardProcessors.scale(factor=hyperparameters["reward_scale"]),
        args=config,
        wandb_config=None,
    )
    trainer.verbose = False  # silences comlrl's per-epoch tqdm bars inside trials
    if all(torch.device(d).type == "cpu" for d in devices):
        # comlrl builds torch's default AdamW, which on CPU loops over the tensors op by op; the fused
        # kernel makes the same update (torch's defaults, comlrl's lr) in one pass over weights,
        # gradients and moments: 0.19 vs 0.87 s a step for SmolLM2-135M on this CPU (one thread).
        # GPU trials keep comlrl's optimizer, as measured there.
        trainer.optimizers = [torch.optim.AdamW(agent.parameters(), lr=config.agent_learning_rate, fused=True)
                              for agent in agents]  # fmt: skip
    trainer.fast_update = train.fast_update
    trainer.autocast_dtype = None if autocast_dtype == torch.float32 else autocast_dtype
    threaded = parallel == "mp"  # comlrl then generates both agents at once, from two threads
    trainer.decoding = [
        Decoding(train.generation, agent, device, threaded, dtype=trainer.autocast_dtype, decode_dtype=train.decode_dtype)
        for agent, device in zip(agents, devices)
    ]
    for decoding in trainer.decoding:
        decoding.decoder()  # a decode copy is made now, once per trial (~1 s for SmolLM2), not in the first rollout
    return trainer
