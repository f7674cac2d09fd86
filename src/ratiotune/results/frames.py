"""The Python API for your own analysis: an experiment folder as pandas DataFrames.

    import ratiotune
    exp = ratiotune.read_experiment("results/smoke")
    exp.trials          # one row per search trial: searched values, status, objective, best/final metrics
    exp.curves          # one row per trial per epoch: every metric the trial reported
    exp.race            # the confirmation race's summary (dict), or None

The same tables `ratiotune report` writes as trials.csv and curves.csv (core/experiment.py builds
both), read straight from the folder: only JSON/CSV/YAML, never a pickle, so it is safe on
folders you did not write. Read-only: nothing in the folder changes. Ray's own anchor for
this is `ResultGrid.get_dataframe()`, which needs the pickled tuner state instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ratiotune.core.experiment import curve_table, load_experiment, trial_table


@dataclass(frozen=True)
class ExperimentFrames:
    path: Path
    study: dict[str, Any]  # the study as it ran (study.yaml, validated)
    trials: pd.DataFrame  # best first by the study's objective; index = trial name
    curves: pd.DataFrame  # long format: columns trial, epoch, one per metric
    race: dict[str, Any] | None  # race/summary.json: the winner, its honest figure, every round

    @property
    def name(self) -> str:
        return self.study["name"]

    def metric(self, name: str) -> pd.DataFrame:
        """One metric over epochs, wide: one column per trial, one row per epoch."""
        if name not in self.curves.columns:
            known = [c for c in self.curves.columns if "/" in c]
            raise KeyError(f"{name!r} is not a reported metric of {self.path}; known: {', '.join(known)}")
        return self.curves.pivot(index="epoch", columns="trial", values=name)


def read_experiment(path: str | Path, metric: str | None = None) -> ExperimentFrames:
    """Read an experiment folder made by `ratiotune search` (trials ranked by `metric`, default the study's)."""
    from ratiotune.search.race import load_summary

    experiment = load_experiment(path)
    trials = pd.DataFrame(trial_table(experiment, metric))
    if not trials.empty:
        trials = trials.set_index("trial")
    curves = pd.DataFrame(curve_table(experiment))
    if curves.empty:
        curves = pd.DataFrame(columns=["trial", "epoch"])
    return ExperimentFrames(
        path=experiment.directory,
        study=experiment.study.model_dump(mode="json", exclude_none=True),
        trials=trials,
        curves=curves.sort_values(["trial", "epoch"], ignore_index=True),
        race=load_summary(experiment.directory),
    )
