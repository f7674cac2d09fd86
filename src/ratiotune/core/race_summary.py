"""The race's summary (race/summary.json): what each run scored, how the runs become the summary, where it is kept.

No Ray and no writing: search/race.py runs the stages with Ray Tune and hands their runs and
core/race_protocol.Race's result to summarize, which reads nothing but the runs' checkpoint metadata
(core/experiment.TrialResult); load_summary reads the file back for results/ and `retrain`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ratiotune.core.experiment import ERRORED, INFEASIBLE, Experiment, TrialResult
from ratiotune.core.intensify import RacePlan
from ratiotune.core.race_protocol import RaceResult, as_json
from ratiotune.core.stats import describe, predict_run
from ratiotune.core.study import SEED_KEY, Study
from ratiotune.core.values import final_row, finite, worst_end

RACE_DIR = "race"
SUMMARY_FILE = "summary.json"
CONTENDER_KEY = "contender"  # which config a run belongs to (an index into the race's contenders)
BASELINE = "baseline"


@dataclass(frozen=True)
class Contender:
    """A config in the race: one of the search's top trials, or the baseline."""

    name: str  # the search trial it came from, or BASELINE
    config: dict[str, Any]  # its searched values
    search_score: float | None  # its objective in the search (optimistic: it was selected on)


def honest_metric(metric: str) -> str:
    """The test-prompt twin of the study metric (`eval/in_range_fraction` -> `test/in_range_fraction`).

    Every train/ and eval/ metric of a task's table is measured on the test prompts too (metrics.MetricTable).
    """
    split, sep, name = metric.partition("/")
    return f"test/{name}" if sep and split in ("train", "eval") else metric


def race_dir(experiment_dir: Path) -> Path:
    return Path(experiment_dir) / RACE_DIR


def load_summary(experiment_dir: Path) -> dict[str, Any] | None:
    """The finished race's summary, or None (race off, not run yet, or interrupted)."""
    path = race_dir(experiment_dir) / SUMMARY_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError:
        return None


def searched_values(study: Study, config: dict[str, Any]) -> dict[str, Any]:
    values = study.hyperparameters(config)
    return {name: values[name] for name in study.searched()}


def run_value(study: Study, run: TrialResult) -> float | None:
    """What a run delivered: its objective at its last epoch; None if it diverged or failed."""
    if run.status(study.train.epochs) in (ERRORED, INFEASIBLE):
        return None
    return run.score(study.search.metric, study.search.objective_window)


def worst_value(study: Study, metric: str, runs: list[TrialResult] = ()) -> float:
    """What a diverged or errored run scores: the metric's worst value (0 for shares and rewards);
    for an unbounded metric, the worst any search trial reported."""
    worst = worst_end(study.metrics().value_range(metric), study.search.mode)
    if worst is not None:
        return worst
    seen = [row[metric] for run in runs for row in run.rows if finite(row.get(metric))]
    if not seen:
        return 0.0
    return min(seen) if study.search.mode == "max" else max(seen)


def confirmation_value(study: Study, run: TrialResult | None) -> tuple[float | None, bool]:
    """A confirmation run's final test figure (None: diverged or errored) and whether it collapsed."""
    if run is None:
        return None, True
    last = final_row(run.rows)
    value = last.get(honest_metric(study.search.metric))
    failed = run.status(study.train.epochs) in (ERRORED, INFEASIBLE) or run.infeasible_reason is not None
    if failed or not finite(value):
        return None, True
    return float(value), ended_collapsed(study, float(value), last.get("test/mean_reward"))


def confirmed(study: Study, runs: list[TrialResult], index: int, worst: float, seeds: list[int] | None = None) -> dict[str, Any]:
    """One config's confirmation: per-seed final-epoch test figures, their statistics, collapses, what
    a new run will do, and the agents. A diverged or errored run has value None, is scored `worst`
    in the statistics and counts in n. seeds: only these (a config passed over before a second look)."""
    metric = honest_metric(study.search.metric)
    per_seed = []
    mine = [r for r in runs if r.config[CONTENDER_KEY] == index and (seeds is None or r.config[SEED_KEY] in seeds)]
    for run in sorted(mine, key=lambda r: r.config[SEED_KEY]):
        value, collapsed = confirmation_value(study, run)
        checkpoint = run.latest_checkpoint()
        per_seed.append(
            {
                "seed": run.config[SEED_KEY],
                "run": run.name,
                "epoch": max((row.get("epoch", 0) for row in run.rows), default=None),
                "value": value,
                "scored": worst if value is None else value,
                "collapsed": collapsed,
                "diverged": value is None,
                # The final agents this figure describes (agent_0/, agent_1/ inside).
                "agents": str(checkpoint) if checkpoint is not None and value is not None else None,
            }
        )
    collapsed = sum(s["collapsed"] for s in per_seed)
    return {
        "per_seed": per_seed,
        "stats": describe([s["scored"] for s in per_seed], study.metrics().value_range(metric)),
        "collapse": {"collapsed": collapsed, "n": len(per_seed)},
        "collapsed_fraction": collapsed / len(per_seed) if per_seed else None,
        "prediction": predict_run([s["value"] for s in per_seed], [s["collapsed"] for s in per_seed]),
    }


def ended_collapsed(study: Study, value: float | None, mean_reward: float | None) -> bool:
    """A run's final test figure sits at its worst end (what `best` prints as 0.000: it learned
    nothing a user can use, however its rewards look), or every test reward sits at the reward's
    floor (length-ratio: agent 1 answers empty; the group baseline then has no signal and the run
    never recovers). The race's gate and `retrain` count these (and diverged runs) as collapsed."""
    figure_floor = worst_end(study.metrics().value_range(honest_metric(study.search.metric)), study.search.mode)
    return mean_reward == study.metrics().collapsed_reward() or (
        figure_floor is not None and value is not None and value == figure_floor
    )


def summarize(
    study: Study,
    contenders: list[Contender],
    result: RaceResult,
    confirmation: list[TrialResult],
    plan: RacePlan,
    test_pairs: int,
    worst: float,
) -> dict[str, Any]:
    """race/summary.json from the protocol's result (Race.result()) and the confirmation runs: the plan,
    every selection round, the confirmation, the gate as the protocol applied it, the recommendation.
    Plain JSON values: the typed result's parts go in through race_protocol.as_json."""
    metric = honest_metric(study.search.metric)
    names = [c.name for c in contenders]
    shown = names.index(result.shown)  # the confirmed challenger (beside a kept baseline: shown only)
    winner = confirmed(study, confirmation, shown, worst)
    selection = result.selection
    race_score = next((row.mean for row in selection.final if row.contender == contenders[shown].name), None)
    passed = {p.contender for p in result.passed_over}
    summary: dict[str, Any] = {
        "metric": study.search.metric,
        "honest_metric": metric,
        # The metric's range (clips the printed intervals); null when unbounded.
        "honest_range": study.metrics().value_range(metric),
        "mode": study.search.mode,
        "protocol": {
            "prompts": study.task.test_prompts,
            "samples_per_prompt": test_pairs,
            "search_samples_per_prompt": study.task.eval_samples_per_prompt,
            "epoch": study.train.epochs,
        },
        "plan": dataclasses.asdict(plan),
        "seeds": {
            "selection": sorted({s for row in selection.final for s in row.seeds}),
            "confirmation": result.confirm_seeds,
        },
        "selection": {
            **as_json(selection),
            "contenders": {c.name: {"config": c.config, "search_score": c.search_score} for c in contenders},
        },
        "race_kept_baseline": result.kept_baseline,
        "winner": {
            "search_trial": contenders[shown].name,
            "config": contenders[shown].config,
            "hyperparameters": study.hyperparameters(contenders[shown].config),
            # Optimistic: the figures the config was selected on.
            "search_score": contenders[shown].search_score,
            "race_score": race_score,
            **winner,
        },
        # The challengers never cut nor passed over, best first: `retrain`'s candidates.
        "survivors": [
            {"search_trial": name, "config": contenders[names.index(name)].config}
            for name in selection.survivors
            if name != BASELINE and name not in passed
        ]
        or [{"search_trial": contenders[shown].name, "config": contenders[shown].config}],
        "fallbacks": [
            {
                "search_trial": p.contender,
                "config": contenders[names.index(p.contender)].config,
                "reason": p.reason,
                **confirmed(study, confirmation, names.index(p.contender), worst, p.seeds),
            }
            for p in result.passed_over
        ],
        "gate": as_json(result.gate),
        "margin": result.gate.margin,
    }
    if BASELINE in result.confirmed:
        base = names.index(BASELINE)
        summary["baseline"] = {
            "config": contenders[base].config,
            "hyperparameters": study.hyperparameters(contenders[base].config),
            **confirmed(study, confirmation, base, worst),
        }
    which = result.which
    entry = summary.get(which) if which else None
    summary["recommended"] = {
        "which": which,
        "config": entry["config"] if entry else None,
        "hyperparameters": entry["hyperparameters"] if entry else None,
        "agents": [s["agents"] for s in entry["per_seed"] if s["agents"]] if entry else [],
    }
    return summary


def compute(experiment: Experiment, race_runs: list[TrialResult]) -> dict[str, int]:
    """Trial-epochs spent: what the benchmark holds equal between methods."""
    search = sum(t.epochs for t in experiment.trials)
    race_epochs = sum(r.epochs for r in race_runs)
    return {"search_trial_epochs": search, "race_trial_epochs": race_epochs, "race_runs": len(race_runs)}
