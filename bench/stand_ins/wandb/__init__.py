"""A stand-in for wandb on a GPU node, which has none (bench/gpu_wheels.sh says why it does not travel).

comlrl imports wandb at import time but calls it only when a trainer has a wandb_config, and
ratiotune passes None; Ray Tune imports it only for `--wandb`. Put this folder on PYTHONPATH
(the window does: Ray's trial processes inherit it) and anything that tries to log raises.
It has no distribution metadata, so transformers' and accelerate's is_wandb_available() answer False.
"""

__ratiotune_stand_in__ = True
run = None


def _refuse(*args, **kwargs):
    raise RuntimeError("wandb is a stand-in here (bench/stand_ins/wandb): nothing may log to it")


init = log = finish = login = _refuse
