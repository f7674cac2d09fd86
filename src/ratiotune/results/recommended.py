"""What an experiment recommends: the object `ratiotune best` prints and `exp.recommended()` returns.

The race's recommendation when the race has run (the config, its honest figures on fresh seeds and
test prompts, its final agents), else the search's top trial (selection figures only: optimistic).
One function builds it, so the command line and a notebook never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ratiotune.core.experiment import Experiment
from ratiotune.core.study import StudyError


@dataclass(frozen=True)
class Recommendation:
    source: str  # "race": confirmed on fresh seeds; "search": the search's top trial, no confirmation
    # race: "winner" (passed the gate), "baseline" (the gate kept it), None (nothing passed, no baseline);
    # search: "search's top"
    which: str | None
    hyperparameters: dict[str, Any]  # the four values, as a study's `train:` section takes them
    config: dict[str, Any]  # the searched values only
    search_trial: str | None  # the search trial the config came from (None: the baseline)
    honest: bool  # figures measured on fresh seeds and unseen prompts (the race's), not selection figures
    # race: metric (the test/ twin of search.metric), mean, sd, ci95, n, collapsed, per_seed;
    # search: metric, objective (trailing mean), best, best_epoch, epochs
    figures: dict[str, Any]
    agents: list[Path] = field(default_factory=list)  # race: final agents, one folder per confirmation seed
    checkpoint: Path | None = None  # search: the trial's best checkpoint (`ratiotune retrain` ships final agents)
    verdict: str | None = None  # race: the one-line verdict
    lines: tuple[str, ...] = ()  # the comment lines `ratiotune best` prints above the values

    def study_values(self) -> str:
        """The config as a study file's `train:` section (YAML)."""
        return yaml.safe_dump({"train": self.hyperparameters}, sort_keys=False)

    def __str__(self) -> str:
        return "".join(f"# {line}\n" for line in self.lines) + self.study_values()


def recommended(experiment: Experiment) -> Recommendation:
    """The experiment's recommendation (see the module docstring). StudyError when no trial has reported yet."""
    from ratiotune.core import race_summary
    from ratiotune.core.hyperparameters import config_text
    from ratiotune.search import race_text

    study = experiment.study
    metric, mode = study.search.metric, study.search.mode
    ranked = experiment.ranked()
    if not ranked:
        raise StudyError(f"{experiment.directory}: no trial reported {metric} yet")
    summary = race_summary.load_summary(experiment.directory)
    window = study.search.objective_window
    if summary is None:
        trial = ranked[0]
        why = study.race_skipped() or f"the race has not finished: ratiotune resume {experiment.directory}"
        checkpoint = trial.best_checkpoint(metric, mode)
        figures = {
            "metric": metric,
            "objective": trial.score(metric, window),
            "best": trial.best(metric, mode),
            "best_epoch": trial.best_epoch(metric, mode),
            "epochs": trial.epochs,
        }
        lines = (
            f"best trial: {trial.name}",
            f"no honest figure: no fresh-seed confirmation ({why})",
            f"selection figure (optimistic: the value it was picked on): {metric} objective "
            f"{figures['objective']:.4f} (mean of its last {window} epochs; best epoch "
            f"{figures['best']:.4f}) after {trial.epochs} epochs",
            f"checkpoint: {checkpoint} (the search trial's; `ratiotune retrain` ships final agents)",
        )
        return Recommendation(
            source="search",
            which="search's top",
            hyperparameters=study.hyperparameters(trial.config),
            config=race_summary.searched_values(study, trial.config),
            search_trial=trial.name,
            honest=False,
            figures=figures,
            checkpoint=checkpoint,
            lines=lines,
        )
    chosen = summary["recommended"]
    w = summary["winner"]
    lines = [
        race_text.verdict(summary),
        f"race winner: {'the baseline' if summary.get('race_kept_baseline') else config_text(w['config'])}"
        f" (figures below; best challenger: search trial {w['search_trial']})",
        *race_text.headline(summary)[1:],
    ]
    which = chosen["which"]
    if which is None:
        lines.append("nothing recommended: the study has no baseline and its winner did not pass the gate")
        entry, values = w, w["hyperparameters"]
    else:
        entry, values = summary[which], chosen["hyperparameters"]
        lines.append(f"recommended: the {which}; its final agents (agent_0/, agent_1/), one per confirmation seed:")
        lines += [f"  {path}" for path in chosen["agents"]]
    figures = {
        "metric": summary["honest_metric"],
        **entry["stats"],
        "collapsed": entry["collapse"]["collapsed"],
        "per_seed": entry["per_seed"],
    }
    return Recommendation(
        source="race",
        which=which,
        hyperparameters=values,
        config=entry["config"],
        search_trial=w["search_trial"] if entry is w else None,
        honest=True,
        figures=figures,
        agents=[Path(p) for p in chosen["agents"]],
        verdict=race_text.verdict(summary),
        lines=tuple(lines),
    )
