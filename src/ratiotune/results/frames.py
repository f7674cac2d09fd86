"""The Python API for your own analysis: an experiment folder as pandas DataFrames.

    import ratiotune
    exp = ratiotune.read_experiment("results/smoke")
    exp.trials             # one row per search trial, best first: searched values, status, objective, figures
    exp.hyperparameters    # which columns of exp.trials are the searched hyperparameters
    exp.curves             # one row per trial per epoch: every metric the trial reported
    exp.ranked("system/epoch_seconds")   # trials ranked by any metric, in that metric's own direction
    exp.recommended()      # what `ratiotune best` prints: the verdict, config, figures, agent paths
    exp.diagnostics()      # what `ratiotune report` warns about: importance, the winner against the noise, warnings
    exp.race_runs()        # the race's runs: config, seed, final figures, collapsed
    exp.retrain_runs()     # `ratiotune retrain`'s runs, when it has run
    exp.optuna_study()     # the search's Optuna study (a read-only copy): trials_dataframe(), visualization
    exp.write_report()     # `ratiotune report`, ranked as exp.trials is
    exp.race               # the race's summary (dict), or None

The same tables `ratiotune report` writes as trials.csv and curves.csv (core/experiment.py builds
both), read straight from the folder: only JSON/CSV/YAML and Optuna's journal, never a pickle, so it
is safe on folders you did not write. Read-only: nothing in the folder changes. Ray's own anchor for
this is `ResultGrid.get_dataframe()`, which needs the pickled tuner state instead; Optuna's is
`Study.trials_dataframe()`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ratiotune.core.experiment import Experiment, curve_table, load_experiment, metric_direction, trial_table
from ratiotune.core import race_summary
from ratiotune.core.study import SEED_KEY, StudyError
from ratiotune.core.values import finite


@dataclass(frozen=True)
class ExperimentFrames:
    path: Path
    study: dict[str, Any]  # the study as it ran (study.yaml, validated)
    trials: pd.DataFrame  # best first by `metric` in its own direction; index = trial name
    curves: pd.DataFrame  # long format: columns trial, epoch, one per metric
    race: dict[str, Any] | None  # race/summary.json: the winner, its honest figure, every round
    hyperparameters: list[str]  # the searched hyperparameters: these columns of `trials`
    rank_metric: str  # what `trials` is ranked by
    rank_mode: str  # ... and in which direction ("max" or "min")

    @property
    def name(self) -> str:
        return self.study["name"]

    def _experiment(self) -> Experiment:
        return load_experiment(self.path)

    def metric(self, name: str) -> pd.DataFrame:
        """One metric over epochs, wide: one column per trial, one row per epoch."""
        if name not in self.curves.columns:
            known = [c for c in self.curves.columns if "/" in c]
            raise KeyError(f"{name!r} is not a reported metric of {self.path}; known: {', '.join(known)}")
        return self.curves.pivot(index="epoch", columns="trial", values=name)

    def ranked(self, metric: str, mode: str | None = None) -> pd.DataFrame:
        """The trials table ranked by `metric`'s objective (its trailing mean), best first, in the
        metric's own direction unless `mode` says otherwise (system/epoch_seconds: lowest first)."""
        return _trials(self._experiment(), metric, mode)[0]

    def recommended(self):
        """What the experiment recommends: the object `ratiotune best` prints (results/recommended.py)."""
        from ratiotune.results.recommended import recommended

        return recommended(self._experiment())

    def diagnostics(self, metric: str | None = None, mode: str | None = None):
        """What `ratiotune report` says beyond the tables (results/diagnostics.py): hyperparameter importance,
        whether the top trial leads the runner-up by more than the noise, and the report's warnings, for the
        trials ranked by `metric` (default: rank_metric, in rank_mode unless `mode` says otherwise)."""
        from ratiotune.results.diagnostics import diagnose

        metric = metric or self.rank_metric
        return diagnose(self._experiment(), metric, mode or (self.rank_mode if metric == self.rank_metric else None))

    def race_runs(self) -> pd.DataFrame:
        """Every run the race trained, one row each: round folder, phase ("selection": the paired rounds
        on eval prompts; "confirmation": fresh seeds on the test prompts), contender (a search trial or
        the baseline), its searched values, seed, status, `objective` (what the race recorded: the search
        metric's trailing mean; None when the run diverged or failed), the final test/ figure and
        `collapsed` (confirmation runs: as the gate counts them), the final agents. Empty without a race."""
        experiment = self._experiment()
        study = experiment.study
        names = list((self.race or {}).get("selection", {}).get("contenders", {}))
        honest = race_summary.honest_metric(study.search.metric)
        folder = race_summary.race_dir(self.path)
        rows = []
        rounds = (
            sorted((p for p in folder.iterdir() if p.is_dir()), key=lambda p: (not p.name.startswith("round-"), p.name))
            if folder.is_dir()
            else []
        )
        for round_dir in rounds:
            try:
                runs = load_experiment(round_dir)
            except StudyError:
                continue
            selection = round_dir.name.startswith("round-")
            for run in sorted(
                runs.trials, key=lambda r: (r.config.get(race_summary.CONTENDER_KEY, 0), r.config.get(SEED_KEY, 0))
            ):
                index = run.config.get(race_summary.CONTENDER_KEY)
                last = max(run.rows, key=lambda row: row.get("epoch", 0), default={})
                value = race_summary.run_value(study, run)
                figure = last.get(honest) if finite(last.get(honest)) and value is not None else None
                checkpoint = run.latest_checkpoint()
                rows.append(
                    {
                        "round": round_dir.name,
                        "phase": "selection" if selection else "confirmation",
                        "run": run.name,
                        "contender": names[index] if isinstance(index, int) and index < len(names) else index,
                        **race_summary.searched_values(study, run.config),
                        "seed": run.config.get(SEED_KEY),
                        "status": run.status(study.train.epochs),
                        "epochs": run.epochs,
                        "objective": value,
                        honest: figure,
                        "collapsed": None
                        if selection
                        else (figure is None or race_summary.ended_collapsed(study, figure, last.get("test/mean_reward"))),
                        "agents": str(checkpoint) if checkpoint is not None and value is not None else None,
                    }
                )
        return pd.DataFrame(rows)

    def retrain_runs(self, output: str | Path | None = None) -> pd.DataFrame:
        """`ratiotune retrain`'s runs (OUTPUT/summary.json; default EXPERIMENT/retrain): one row per run,
        with its candidate's rank, search trial and hyperparameters, the phase ("selection" among several
        candidates, "report" for the winner's figures), seed, final figures and error. Empty when none."""
        path = Path(output) if output is not None else self.path / "retrain"
        summary_file = path / "summary.json"
        if not summary_file.is_file():
            return pd.DataFrame()
        summary = json.loads(summary_file.read_text())
        rows = []
        for candidate in summary.get("configs", []):
            keys = {"rank": candidate["rank"], "search_trial": candidate["search_trial"], **candidate["hyperparameters"]}
            phases = [("selection", (candidate.get("selection") or {}).get("runs", [])), ("report", candidate["runs"])]
            for phase, runs in phases:
                rows += [{**keys, "phase": phase, **run} for run in runs]
        return pd.DataFrame(rows)

    def write_report(self, out: str | Path | None = None) -> Path:
        """`ratiotune report` ranked as this table is (rank_metric, rank_mode): report.md, trials.csv,
        curves.csv and the figures into `out` (default EXPERIMENT/report/). Returns report.md's path."""
        from ratiotune.results.report import write_report

        return write_report(self.path, out, self.rank_metric, self.rank_mode)

    def optuna_study(self):
        """The search's Optuna study, copied into memory from its storage (the journal in the folder, or
        search.optuna_storage): `trials_dataframe()`, `optuna.visualization.*` work on it; nothing done to
        it reaches the folder. StudyError when the search kept no Optuna study (PBT, nothing searched)."""
        import optuna

        from ratiotune.core.storage import open_storage, read_record

        record = read_record(self.path)
        if record is None:
            raise StudyError(f"{self.path}: no Optuna study (PBT, or nothing searched)")
        location, name = record
        if "://" not in location and not Path(location).is_file():
            raise StudyError(f"{self.path}: its Optuna journal {location} is missing")
        copy = optuna.storages.InMemoryStorage()
        verbosity = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "A new study created in memory" line
        try:
            optuna.copy_study(from_study_name=name, from_storage=open_storage(location), to_storage=copy)
        finally:
            optuna.logging.set_verbosity(verbosity)
        return optuna.load_study(study_name=name, storage=copy)


def _trials(experiment: Experiment, metric: str | None, mode: str | None) -> tuple[pd.DataFrame, str, str]:
    metric = metric or experiment.study.search.metric
    mode = mode or metric_direction(experiment.study, metric)
    trials = pd.DataFrame(trial_table(experiment, metric, mode))
    if not trials.empty:
        trials = trials.set_index("trial")
    return trials, metric, mode


def read_experiment(path: str | Path, metric: str | None = None, mode: str | None = None) -> ExperimentFrames:
    """Read an experiment folder made by `ratiotune search`. `trials` is ranked by `metric` (default the
    study's search.metric) in its own direction (`mode` overrides it)."""
    experiment = load_experiment(path)
    trials, metric, mode = _trials(experiment, metric, mode)
    curves = pd.DataFrame(curve_table(experiment))
    if curves.empty:
        curves = pd.DataFrame(columns=["trial", "epoch"])
    return ExperimentFrames(
        path=experiment.directory,
        study=experiment.study.model_dump(mode="json", exclude_none=True),
        trials=trials,
        curves=curves.sort_values(["trial", "epoch"], ignore_index=True),
        race=race_summary.load_summary(experiment.directory),
        hyperparameters=experiment.study.searched(),
        rank_metric=metric,
        rank_mode=mode,
    )
