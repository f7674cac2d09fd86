"""Ray Tune's W&B callback, minus one C++ error line on the terminal per search.

Ray 2.60's WandbLoggerCallback starts each trial's logging actor with max_restarts=-1; its
constructor arguments live in the object store, so Ray's core worker prints an ERROR line
("... has constructor arguments in the object store and max_restarts > 0 ...", ray#53727) to
the driver's stderr, past any Python logging setting. A logging actor that is not restarted
costs nothing here: if it dies, that trial's W&B run stops and the trial trains on.
"""

from __future__ import annotations

import os

import ray
from ray.air.integrations.wandb import WANDB_ENV_VAR, WandbLoggerCallback
from ray.air.util.node import _force_on_current_node


class WandbLogger(WandbLoggerCallback):
    def _start_logging_actor(self, trial, exclude_results, **wandb_init_kwargs):
        if not self._remote_logger_class:  # what Ray builds here, with max_restarts=0
            env_vars = {WANDB_ENV_VAR: os.environ[WANDB_ENV_VAR]} if WANDB_ENV_VAR in os.environ else {}
            self._remote_logger_class = ray.remote(
                num_cpus=0,
                **_force_on_current_node(),
                runtime_env={"env_vars": env_vars},
                max_restarts=0,
            )(self._logger_actor_cls)
        super()._start_logging_actor(trial, exclude_results, **wandb_init_kwargs)
