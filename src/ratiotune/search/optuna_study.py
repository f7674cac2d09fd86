"""The search's Optuna study in a real Optuna storage: what optuna-dashboard (or a team's database) reads.

Ray's OptunaSearch keeps its study in memory, pickled into Ray's searcher state, unless it is
given `storage=`: then every ask, report and tell lands in that storage as it happens, so the
study can be watched while it runs. By default the storage is a journal file in the
experiment folder (JOURNAL_FILE: one append-only file, safe for several processes, nothing to
set up); `search.optuna_storage` names any Optuna RDB URL instead (sqlite:///studies.db, a
team's PostgreSQL). The study's name is the experiment's. OPTUNA_FILE records where the study
is, so `dashboard` finds it without unpickling anything (core/storage.py reads it and opens the storage).

StoredOptunaSearch fixes what Ray's OptunaSearch gets wrong once the storage outlives the driver:
- states that mean what they say: COMPLETE for a trial that trained all its epochs, PRUNED for
  one ASHA stopped early (Optuna then keeps its last intermediate value as its value), FAIL for
  an errored or diverged (infeasible, NaN objective) trial; Ray would record both early stops
  and NaN as COMPLETE;
- resume: Ray re-runs set_search_properties before it restores the saved searcher, which would
  enqueue the baseline a second time; and a driver killed between asking Optuna for a trial
  and saving its state leaves that trial RUNNING in the storage, unknown to the saved state.
  The baseline is enqueued only into a new study, and such orphans are handed to the next
  trials Ray asks for, so the storage holds exactly num_samples trials;
- a resumed trial re-reports the epochs since its checkpoint: the later value replaces the
  earlier one (as core/experiment.py keeps the later row), where Optuna's Trial.report keeps the first.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ray.tune.search.optuna import OptunaSearch

from ratiotune.core.storage import OPTUNA_FILE, open_storage, read_record

JOURNAL_FILE = "optuna.journal"


def storage_location(optuna_storage: str | None, experiment_dir: Path | str) -> str | None:
    """Where a search keeps its study: the study's URL (a relative sqlite path made absolute, so
    `resume` and `dashboard` find it from any folder), else the journal file in a local experiment
    folder; None for an experiment on a URI without a URL (a journal needs a local file)."""
    from ratiotune.core.storage import is_uri

    if optuna_storage:
        prefix = "sqlite:///"
        if optuna_storage.startswith(prefix) and not optuna_storage[len(prefix) :].startswith("/"):
            return prefix + str(Path(optuna_storage[len(prefix) :]).resolve())
        return optuna_storage
    if is_uri(experiment_dir):
        return None
    return str(Path(experiment_dir) / JOURNAL_FILE)


def study_exists(location: str, study_name: str) -> bool:
    import optuna

    if "://" not in location and not Path(location).exists():
        return False  # do not create an empty journal just to look
    return study_name in {s.study_name for s in optuna.get_all_study_summaries(open_storage(location))}


def write_record(experiment_dir: Path, location: str, study_name: str) -> None:
    """OPTUNA_FILE: the journal relative to the folder (a copied folder still finds it), a URL as is."""
    inside = Path(location).parent == experiment_dir if "://" not in location else False
    record = {"storage": Path(location).name if inside else location, "study_name": study_name}
    (experiment_dir / OPTUNA_FILE).write_text(json.dumps(record, indent=2) + "\n")


def record_race(experiment_dir: Path, winner_trial: str, headline: list[str]) -> None:
    """After the race: its winner and honest figure as the study's user attrs, so the dashboard shows
    them beside the search's (optimistic) values. On the study: a finished trial cannot be changed."""
    import optuna

    record = read_record(experiment_dir)
    if record is None:
        return
    from ratiotune.core.study import StudyError

    try:
        study = optuna.load_study(study_name=record[1], storage=open_storage(record[0]))
    except KeyError:
        raise StudyError(f"no study named {record[1]!r} in {record[0]}") from None
    study.set_user_attr("race_winner", winner_trial)
    # The same words as `best` and the race summary: the verdict, then the figures on fresh seeds
    # (mean, sd, 95% CI of the mean, collapse share with its Wilson interval).
    study.set_user_attr("race_verdict", headline[0])
    study.set_user_attr("honest_figure", " ".join(line.strip() for line in headline[1:4]))
    study.set_user_attr("race_summary", headline)


class StoredOptunaSearch(OptunaSearch):
    """Ray's OptunaSearch on a persistent storage, with honest states and a clean resume (module doc)."""

    def __init__(
        self, *, location: str, study_name: str, baseline: dict[str, Any] | None, epochs: int, experiment_dir: str, **kwargs
    ):
        # Ray's points_to_evaluate are not passed on: they would be enqueued again on every resume.
        super().__init__(storage=open_storage(location), study_name=study_name, **kwargs)
        self._baseline = baseline
        self._epochs = epochs
        self._experiment_dir = experiment_dir
        self._orphans: list[int] = []

    def _setup_study(self, mode):
        super()._setup_study(mode)
        # Any trial at all (even one only enqueued) means this is a resume: the baseline is in already.
        if self._baseline and not self._ot_study.get_trials(deepcopy=False):
            self._ot_study.enqueue_trial(self._baseline)

    def restore(self, checkpoint_path: str):
        from optuna.trial import TrialState

        super().restore(checkpoint_path)
        known = {ot_trial._trial_id for ot_trial in self._ot_trials.values()}
        running = self._ot_study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        self._orphans = [t._trial_id for t in running if t._trial_id not in known]

    def suggest(self, trial_id: str):
        import optuna

        if trial_id not in self._ot_trials and self._orphans:
            # Asked by a driver that died before saving it: its sampled params become this trial's.
            self._ot_trials[trial_id] = optuna.Trial(self._ot_study, self._orphans.pop(0))
        config = super().suggest(trial_id)
        ot_trial = self._ot_trials[trial_id]
        ot_trial.set_user_attr("ray_trial_id", trial_id)
        ot_trial.set_user_attr("trial_dir", f"{self._experiment_dir.rstrip('/')}/trial_{trial_id}")
        return config

    def on_trial_result(self, trial_id: str, result: dict):
        ot_trial = self._ot_trials.get(trial_id)
        if ot_trial is None or trial_id in self._completed_trials or self._told(ot_trial):
            return
        self._report(ot_trial, result)

    def _report(self, ot_trial, result: dict) -> None:
        value = result.get(self.metric)
        if value is not None and "training_iteration" in result:
            ot_trial.storage.set_trial_intermediate_value(ot_trial._trial_id, int(result["training_iteration"]), float(value))

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False):
        from optuna.trial import TrialState

        ot_trial = self._ot_trials.get(trial_id)
        if ot_trial is None or trial_id in self._completed_trials:
            return
        self._completed_trials.add(trial_id)
        if self._told(ot_trial):
            return  # told before the driver was killed; Ray's saved state did not know yet
        result = result or {}
        # A trial's last result (its final epoch, or the one ASHA stopped it at) comes here, not to on_trial_result.
        self._report(ot_trial, result)
        value = result.get(self.metric)
        # An errored trial comes without a result: its epochs are the ones it reported.
        reported = ot_trial.storage.get_trial(ot_trial._trial_id).intermediate_values
        epochs = int(result.get("training_iteration", max(reported, default=0)))
        ot_trial.set_user_attr("epochs", epochs)
        if error:
            ot_trial.set_user_attr("failure", "errored: see error.txt in trial_dir")
            self._ot_study.tell(ot_trial, state=TrialState.FAIL)
        elif value is not None and not math.isfinite(value):
            ot_trial.set_user_attr("failure", result.get("infeasible_reason") or f"{self.metric} is {value}")
            self._ot_study.tell(ot_trial, state=TrialState.FAIL)
        elif value is None or epochs < self._epochs:
            # Stopped early (ASHA, or before its first report): Optuna keeps its last intermediate value.
            self._ot_study.tell(ot_trial, state=TrialState.PRUNED)
        else:
            self._ot_study.tell(ot_trial, float(value), state=TrialState.COMPLETE)

    def _told(self, ot_trial) -> bool:
        return ot_trial.storage.get_trial(ot_trial._trial_id).state.is_finished()
