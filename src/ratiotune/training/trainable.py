"""One trial: build two agents and a trainer, then train epoch by epoch, reporting metrics.

`Trial` holds the training loop's pieces and is shared by every command that trains
(search trials, `train`, `retrain`), so there is one training code path. `tune_trainable`
is the Ray Tune function trainable and the one place that calls tune.report /
tune.get_checkpoint.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers.utils import logging as hf_logging

from ratiotune.training.magrpo import build_trainer, is_nonfinite_sampling
from ratiotune.training.models import load_agents
from ratiotune.core.objective import OBJECTIVE, trailing_mean
from ratiotune.tasks import TaskError, call_reward

from ratiotune.core.metrics import measure
from ratiotune.core.experiment import TASK_ERROR_KEY, checkpoint_is_complete
from ratiotune.core.storage import STAGING_PREFIX
from ratiotune.core.study import SEED_KEY, START_KEY, TEST_KEY, Study

# Per-checkpoint "Writing model shards" bars would flood the trial logs.
hf_logging.disable_progress_bar()

# Offset so the eval protocol's sampling stream never coincides with training's.
EVAL_SEED_OFFSET = 1_000_003


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Trial:
    """Everything one configuration needs to train, evaluate and checkpoint."""

    def __init__(
        self,
        study: Study,
        config: dict[str, Any],
        *,
        seed: int | None = None,
        epochs: int | None = None,
        devices: list[str] | None = None,
    ):
        self.study = study
        self.hyperparameters = study.hyperparameters(config)
        self.seed = study.train.seed if seed is None else seed
        self.epoch = 0
        # The study metric of every epoch so far (restored with a checkpoint): the objective's window.
        self.history: list[float] = []
        seed_everything(self.seed)
        # devices: agent 0's and agent 1's (see placement.choose_devices); CPU unless told.
        self.devices = devices or ["cpu", "cpu"]
        agents, tokenizer = load_agents(study.model.name)
        # Made once per process from the study's task section (a Task never travels through pickling).
        self.task = study.get_task()
        # The records the study carries (read once at launch): no file is read on the worker.
        self.eval_prompts = study.prompts("eval")
        self.trainer = build_trainer(
            agents,
            tokenizer,
            study.prompts("train"),
            hyperparameters=self.hyperparameters,
            train=study.train,
            task=self.task,
            # comlrl refuses to load a checkpoint past num_train_epochs, so continued runs pass their end.
            epochs=epochs or study.train.epochs,
            devices=self.devices,
            autocast_dtype=getattr(torch, study.model.compute_dtype(on_gpu=self.devices[0].startswith("cuda"))),
        )

    def run_epoch(self) -> dict[str, float]:
        """Train one epoch, evaluate, and return the epoch's metrics (namespaced)."""
        tokens_before = self.trainer.generated_tokens
        start = time.perf_counter()
        self.trainer.run_epoch()
        train_seconds = time.perf_counter() - start
        tokens = self.trainer.generated_tokens - tokens_before
        groups, rewards = self.trainer.reward_func.take_groups()
        metrics = {f"train/{k}": v for k, v in measure(self.task, groups, rewards).items()}
        reason = self.divergence(metrics)
        if reason is None:
            start = time.perf_counter()
            try:
                eval_metrics = self.evaluate()
            except (ValueError, RuntimeError) as exc:
                if not is_nonfinite_sampling(exc):
                    raise
                reason = f"non-finite sampling distribution in eval ({exc})"
        if reason is not None:
            # A diverged model cannot be evaluated (sampling from NaN logits raises), and its
            # score must not look like a result: NaN makes Optuna record the trial as failed.
            self.epoch += 1
            return {
                **metrics,
                **{f"eval/{k}": float("nan") for k in self.study.metrics().measured},
                OBJECTIVE: float("nan"),
                "epoch": self.epoch,
                "system/epoch_seconds": train_seconds,
                "infeasible": 1,
                "infeasible_reason": reason,
            }
        metrics.update({f"eval/{k}": v for k, v in eval_metrics.items()})
        self.epoch += 1
        metrics.update(
            {
                "epoch": self.epoch,
                "system/epoch_seconds": train_seconds,
                "system/eval_seconds": time.perf_counter() - start,
                "system/tokens_per_second": tokens / train_seconds if train_seconds > 0 else 0.0,
                # What the optimizer actually used: under PBT it follows the mutated config.
                "system/optimizer_lr": self.trainer.optimizers[0].param_groups[0]["lr"],
                "infeasible": 0,
            }
        )
        self.history.append(float(metrics[self.study.search.metric]))
        metrics[OBJECTIVE] = trailing_mean(self.history, self.study.search.objective_window)
        return metrics

    def task_error_row(self, error: TaskError) -> dict[str, Any]:
        """The last row of a trial the task's own code stopped: no score (NaN: Optuna records the
        trial as failed, the race scores it as diverged) and the error's one line."""
        return {
            **{f"eval/{k}": float("nan") for k in self.study.metrics().measured},
            OBJECTIVE: float("nan"),
            "epoch": self.epoch + 1,  # the epoch it failed in
            "infeasible": 1,
            "infeasible_reason": f"task error: {error}",
            TASK_ERROR_KEY: str(error),
        }

    def test(self, samples_per_prompt: int) -> dict[str, float]:
        """The honest measurement: the test prompts (never trained or selected on), `test/...` names."""
        records = self.study.prompts("test")
        return {f"test/{k}": v for k, v in self.evaluate(samples_per_prompt, records).items()}

    def divergence(self, metrics: dict[str, Any]) -> str | None:
        """Why this trial has diverged, or None. Checked after every epoch.

        comlrl replaces a non-finite loss by the constant 0.1 and trains on, so a
        diverged trial would never error by itself; it would waste its whole budget.
        """
        if self.trainer.nonfinite_losses:
            return f"non-finite loss in {self.trainer.nonfinite_losses} update(s) (comlrl replaces it by 0.1)"
        if self.trainer.nonfinite_sampling:
            return f"non-finite sampling distribution ({self.trainer.nonfinite_sampling})"
        parameter = self.trainer.first_nonfinite_parameter()
        if parameter is not None:
            return f"non-finite parameters ({parameter})"
        for name, value in metrics.items():
            if name.startswith("train/") and not np.isfinite(value):
                return f"non-finite {name}: {value}"
        return None

    def evaluate(self, samples_per_prompt: int | None = None, records: list[dict[str, Any]] | None = None) -> dict[str, float]:
        """The fixed eval protocol: the same seeded number of answer pairs per held-out record.

        Independent of num_generations, so trials that differ in it compare fairly; the
        RNG is forked so evaluating never changes the training stream. Agent i answers
        task.formatters[i](record); the reward is called once per record's group of pairs.
        """
        n = samples_per_prompt or self.study.task.eval_samples_per_prompt
        max_new_tokens = self.hyperparameters["max_new_tokens"]
        records = records or self.eval_prompts
        prompts = [[formatter(r) for r in records] for formatter in self.task.formatters]
        # Fork the CUDA generators too when on GPU, or eval sampling would move training's stream.
        cuda_indices = sorted({torch.device(d).index or 0 for d in self.devices if d.startswith("cuda")})
        with torch.random.fork_rng(devices=cuda_indices):
            torch.manual_seed(self.seed + EVAL_SEED_OFFSET)
            first = self.trainer.sample_answers(prompts[0], 0, n, max_new_tokens)
            second = self.trainer.sample_answers(prompts[1], 1, n, max_new_tokens)
        groups = [[(r, x, y) for x, y in zip(a, b)] for r, a, b in zip(records, first, second)]
        rewards = [
            call_reward(self.task.reward, [prompt] * len(a), a, b, batch_items=[r])
            for r, prompt, a, b in zip(records, prompts[0], first, second)
        ]
        return measure(self.task, groups, rewards)

    def save(self, directory: Path, metrics: dict[str, Any] | None = None) -> None:
        """agent_0/, agent_1/ (HF format), trainer_state/ (resume) and meta.json (plain facts).

        meta.json lists every file with its size, so a checkpoint cut short while Ray
        copied it into the experiment folder is recognisable (see checkpoint_is_complete).
        """
        directory.mkdir(parents=True, exist_ok=True)
        self.trainer.save_state(directory, self.epoch)
        files = {str(p.relative_to(directory)): p.stat().st_size for p in sorted(directory.rglob("*")) if p.is_file()}
        meta = {
            "epoch": self.epoch,
            "hyperparameters": self.hyperparameters,
            "metrics": metrics or {},
            "history": self.history,
            "files": files,
        }
        (directory / "meta.json").write_text(json.dumps(meta, indent=2))

    def restore(self, directory: Path) -> None:
        """Continue from a checkpoint, possibly another trial's (PBT): this trial's config wins."""
        if not checkpoint_is_complete(directory):
            raise RuntimeError(f"checkpoint {directory} is incomplete (files missing or cut short); not resuming from it")
        meta = json.loads((directory / "meta.json").read_text())
        self.epoch = self.trainer.load_state(directory, saved_hyperparameters=meta["hyperparameters"])
        self.history = [float(v) for v in meta.get("history", [])][: self.epoch]


# Where checkpoints are staged before tune.report copies them into the experiment folder.
STAGING_ENV = "RATIOTUNE_CHECKPOINT_STAGING"


def checkpoint_staging_dir() -> str:
    """Where this trial writes a checkpoint before tune.report copies it into the experiment folder.

    $RATIOTUNE_CHECKPOINT_STAGING if set; else EXPERIMENT/.checkpoint-staging-TRIAL when the storage
    is a folder (local or shared: NFS), else Ray's trial working directory (an s3:// storage).

    Not Ray's trial folder (get_trial_dir(), the driver's staging folder): Ray's experiment-state
    sync copies that folder to storage while a checkpoint is being written or removed there, and
    the copy failed with a FileNotFoundError traceback on the terminal. Ray only copies *into* the
    experiment folder (ray/train/_internal/storage.py, StorageContext: driver_artifacts/ ->
    experiment folder; a restore reads back only its top-level .json/.pkl files), so a folder there
    is never read while it changes. Not the system temp folder either: it is often a RAM-backed
    tmpfs, and a Qwen2.5-0.5B checkpoint is ~12 GB (float32 master weights + AdamW moments of two
    agents); the experiment folder is on the storage's own disk.
    """
    import pyarrow.fs
    from ray import tune

    directory = os.environ.get(STAGING_ENV)
    if not directory:
        storage = tune.get_context().get_storage()
        if isinstance(storage.storage_filesystem, pyarrow.fs.LocalFileSystem):
            directory = os.path.join(storage.experiment_fs_path, STAGING_PREFIX + storage.trial_dir_name)
        else:
            directory = storage.trial_working_directory  # not synced (SyncConfig.sync_artifacts is off)
    os.makedirs(directory, exist_ok=True)
    return directory


def remove_staging_dir(directory: str) -> None:
    """The trial's staging folder, once the trial has ended (empty then: each checkpoint's folder is
    removed once tune.report has copied it). Only a folder checkpoint_staging_dir named: never the
    user's $RATIOTUNE_CHECKPOINT_STAGING or Ray's working directory."""
    if os.path.basename(directory).startswith(STAGING_PREFIX):
        shutil.rmtree(directory, ignore_errors=True)


def tune_trainable(config: dict[str, Any], study: Study) -> None:
    """Ray Tune function trainable: restore if Ray hands us a checkpoint, then loop and report."""
    import ray
    from ray import tune

    from ratiotune.training.placement import trial_devices

    start = Path(config[START_KEY]) if config.get(START_KEY) else None
    end_epoch = study.train.epochs
    if start is not None:
        end_epoch += json.loads((start / "meta.json").read_text())["epoch"]
    # Before anything heavy: a trial given GPUs on a node without CUDA fails here, at once.
    trial = Trial(study, config, seed=config.get(SEED_KEY), epochs=end_epoch, devices=trial_devices())
    if start is not None:
        trial.restore(start)
        # The checkpoint restored the RNG of the run that wrote it; reseed so seeds differ.
        seed_everything(trial.seed)
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as directory:
            if checkpoint_is_complete(Path(directory)):
                trial.restore(Path(directory))
            else:
                # Cut short on disk (a kill while it was written, a full disk): retrying it would fail
                # the same way every time. The run is seeded, so training it again from the start
                # gives the figures it would have had; its repeated rows are read as the later ones.
                print(f"ratiotune: checkpoint {directory} is incomplete; training this run again from its start", flush=True)
    # Which Ray node trained each epoch (a hex string; Ray's own node_ip is the same for every
    # node of a one-machine cluster). A plain key without "/": never a numeric metric column.
    node = {"node_id": ray.get_runtime_context().get_node_id()}
    staging = checkpoint_staging_dir()
    try:
        while trial.epoch < end_epoch:
            try:
                metrics = trial.run_epoch()
                if config.get(TEST_KEY) and trial.epoch == end_epoch and not metrics["infeasible"]:
                    metrics.update(trial.test(int(config[TEST_KEY])))
            except TaskError as exc:
                # A bug in the task's reward or measure, not a crash: raising would make Ray restart
                # the trial (search.max_failures) into the same bug. Report it and end; the trial's
                # folder stays as the evidence, and the study stops (search/stop.py).
                tune.report({**trial.task_error_row(exc), **node})
                return
            if metrics["infeasible"]:
                # No checkpoint: the diverged weights are worth nothing, and the trial ends here.
                tune.report({**metrics, **node})
                return
            with tempfile.TemporaryDirectory(prefix="ratiotune-ckpt-", dir=staging) as tmp:
                trial.save(Path(tmp), metrics)
                # Ray delivers a result at least once: the driver logs this row, then asks the
                # worker for its checkpoint in a separate `save` call and registers it only when
                # that call returns (ray.tune.execution.tune_controller: _process_trial_result ->
                # _schedule_trial_save -> _process_trial_save). A worker lost in between restarts
                # from the previous checkpoint and reports this epoch again; results.load_trial
                # keeps the later row.
                tune.report({**metrics, **node}, checkpoint=tune.Checkpoint.from_directory(tmp))
    finally:
        remove_staging_dir(staging)
