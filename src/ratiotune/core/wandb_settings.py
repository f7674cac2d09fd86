"""Where W&B logging goes: the `--wandb`, `--wandb-project`, `--wandb-entity` flags as one value.

`search`/`resume` log one W&B run per trial through Ray's WandbLoggerCallback (grouped by
experiment); `train` logs its one run itself. WANDB_MODE and WANDB_DIR from the environment
are honoured by both (WANDB_MODE=offline works with no network).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WandbSettings:
    project_name: str | None = None
    entity: str | None = None

    @property
    def project(self) -> str:
        return self.project_name or "ratiotune"
