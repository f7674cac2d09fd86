"""Where a trial's two agents live: on the GPUs Ray assigned to the trial, or on CPU.

Ray gives each trial `resources.gpu` GPUs and sets CUDA_VISIBLE_DEVICES in the
trial's process to exactly those, so inside the trial they are cuda:0 (and cuda:1).
A fractional request (0.25) still shows one whole device: Ray only does the
bookkeeping, the trials share the memory, so the packing is the user's to size
(see ratiotune.training.memory).
"""

from __future__ import annotations


class PlacementError(RuntimeError):
    """A trial that cannot be placed as Ray assigned it (e.g. GPUs without CUDA)."""


def choose_devices(assigned_gpus: int, cuda_available: bool) -> list[str]:
    """The devices of agent 0 and agent 1 for a trial that Ray gave `assigned_gpus` GPUs.

    0 GPUs -> both on CPU; 1 (a whole GPU or a share of one) -> both on cuda:0;
    2 -> one GPU per agent (magrpo.build_trainer then uses comlrl's parallel_training="mp").
    """
    if assigned_gpus == 0:
        return ["cpu", "cpu"]
    if not cuda_available:
        # Fail now rather than train silently on CPU at a fraction of the expected speed.
        raise PlacementError(
            f"Ray assigned this trial {assigned_gpus} GPU(s), but torch sees no CUDA device here "
            "(torch.cuda.is_available() is False: a CPU-only torch build, or no driver on this node). "
            "Set resources.gpu: 0 to train on CPU, or install a CUDA build of torch on every node."
        )
    if assigned_gpus == 1:
        return ["cuda:0", "cuda:0"]
    return ["cuda:0", "cuda:1"]


def trial_devices() -> list[str]:
    """choose_devices for the current Ray trial (reads the GPU ids Ray assigned)."""
    import ray
    import torch

    return choose_devices(len(ray.get_gpu_ids()), torch.cuda.is_available())


def local_devices(gpu: float) -> list[str]:
    """choose_devices for a run outside Ray Tune (`ratiotune train`, `ratiotune check`).

    The study's resources.gpu as Ray would assign it to one trial (a fraction or 1 -> one
    GPU, 2 -> two), so these commands place the agents exactly as a search trial does.
    """
    import torch

    assigned = 0 if gpu == 0 else 2 if gpu >= 2 else 1
    devices = choose_devices(assigned, torch.cuda.is_available())
    if assigned > 1 and torch.cuda.device_count() < assigned:
        raise PlacementError(
            f"resources.gpu: {gpu:g} puts one agent per GPU, but torch sees {torch.cuda.device_count()} CUDA device(s) here; "
            "set resources.gpu: 1 (both agents on one GPU) or run on a machine with two GPUs"
        )
    return devices
