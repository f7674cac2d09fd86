"""The race: after the search, name a winner the study stands behind, or say the baseline stands.

A search ranks configs by one noisy run each (one seed, sampled rollouts, 48 eval pairs),
so its best figure is the maximum of many noisy numbers: optimistic. Measured on the smoke
task, one config's final figure spans 0.06-0.67 over seeds, and about 1 run in 4 at high
learning rates collapses to 0. The race runs in two steps; the rules live in intensify.py
(pure: bench/simulate.py replays them on tables), this file runs them with Ray Tune:

1. Selection on fresh seeds, by intensification against the baseline (SMAC3's intensifier,
   irace's F-race): the baseline is the incumbent from the start, the search's top configs
   challenge it on the same seeds (paired), a contender worse than the incumbent by a paired
   sign test is cut after >= race.min_seeds seeds, and the runs saved go to more seeds for the
   rest, up to race.max_seeds, within race.max_share of the study's trial-epochs (the search
   counted as it really ran: ASHA stops trials early). A race too big for a small study is
   fitted (fewer contenders or seeds) and one line says so.
2. Confirmation and the gate (Eimer et al. 2023: tune on some seeds, report on others): the
   winner and the baseline train on race.confirm_seeds further paired seeds; each run's final
   epoch is scored on the test prompts (never trained on, never selected on) with
   race.test_samples_factor x the search's eval pairs. A diverged or errored run scores the
   metric's worst value and counts in n. The winner is recommended only if the one-sided 90%
   lower bound of its paired margin over the baseline is > 0 and its collapse share is at most
   race.max_collapse_share; when that falls short but the winner leads on the mean, both train
   on race.second_look_seeds more paired seeds (round confirm-2) and the gate decides on all of
   them. A winner refused for its collapses hands over to the search's next config (one that did
   not race), trained on the same paired seeds beside the baseline's runs and gated in turn, up
   to race.fallbacks configs (round fallback-1, ...); otherwise "not confirmed: the baseline
   stands". The confirmation
   runs keep their final agents: those are what the figure describes, and what `best` names.

Each round is a Ray Tune run of its own under EXPERIMENT/race/ (round-0, round-1, ...,
confirm), readable by core/experiment.py like any experiment, so `resume` continues a race that was
interrupted: the policy is deterministic given the values, so finished rounds are read back
and replayed, an interrupted one is restored.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ratiotune.core.intensify import Intensifier, RacePlan, gate
from ratiotune.core.experiment import ERRORED, INFEASIBLE, Experiment, TrialResult, load_experiment
from ratiotune.core.stats import describe, format_interval, format_share, predict_mean
from ratiotune.core.study import SEED_KEY, TEST_KEY, Study, write_study

RACE_DIR = "race"
SUMMARY_FILE = "summary.json"
ROUND_FILE = "round.json"  # written when a round has ended: resume reads it instead of re-running
# A re-run a user might make to check the figure: the prediction interval of its mean is printed.
REPRODUCE_SEEDS = 12
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


def summary_range(summary: dict[str, Any]) -> tuple[float, float] | None:
    """The honest metric's range a race or retrain summary recorded; summaries from before tasks were
    plug-ins (length-ratio only) have none: that task's table answers."""
    if "honest_range" in summary:
        return tuple(summary["honest_range"]) if summary["honest_range"] else None
    from ratiotune.core.metrics import MetricTable
    from ratiotune.tasks import load_task

    # By name through the task registry: this layer imports no concrete task.
    return MetricTable(load_task("length-ratio")).value_range(summary["honest_metric"])


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


# --------------------------------------------------------------------------- planning


def contenders(experiment: Experiment, top_k: int | None = None) -> list[Contender]:
    """The search's top_k challengers by objective (trials that ran cleanly), best first; distinct
    configs only, the baseline's left out (it races as the incumbent)."""
    study = experiment.study
    metric, window = study.search.metric, study.search.objective_window
    top_k = study.race.top_k if top_k is None else top_k
    picked: list[Contender] = []
    baseline = study.baseline()
    seen: list[dict[str, Any]] = [searched_values(study, baseline)] if baseline is not None else []
    for trial in experiment.ranked():
        if trial.status(study.train.epochs) in (ERRORED, INFEASIBLE):
            continue
        config = searched_values(study, trial.config)
        if config in seen:
            continue  # the baseline can also be drawn by the sampler: it races once, as the incumbent
        seen.append(config)
        picked.append(Contender(trial.name, config, trial.score(metric, window)))
        if len(picked) == top_k:
            break
    return picked


def searched_values(study: Study, config: dict[str, Any]) -> dict[str, Any]:
    values = study.hyperparameters(config)
    return {name: values[name] for name in study.searched()}


def fresh_seeds(study: Study, start: int, count: int) -> list[int]:
    """Seeds the search never used: every search trial trained with train.seed."""
    return [study.train.seed + 1 + start + i for i in range(count)]


# --------------------------------------------------------------------------- running


def run_round(
    study: Study, folder: Path, runs: list[dict[str, Any]], contenders_: list[Contender]
) -> Experiment:
    """Train every run (contender index, seed, test pairs) as one Ray Tune trial; read them back.

    A finished round (ROUND_FILE) is read as it is; an interrupted one is restored, its
    finished runs kept, the rest continued from their checkpoints. Ray must be initialised.
    """
    from ray import tune

    from ratiotune.search.launch import make_trainable, seed_runs_config

    if (folder / ROUND_FILE).is_file():
        return load_experiment(folder)
    trainable = make_trainable(study)
    if tune.Tuner.can_restore(str(folder)):
        tuner = tune.Tuner.restore(str(folder), trainable=trainable, resume_unfinished=True, resume_errored=True)
    else:
        folder.mkdir(parents=True, exist_ok=True)
        write_study(folder, study)  # study.yaml and the prompt texts: the round reads like an experiment
        param_space: dict[str, Any] = {"run": tune.grid_search(list(range(len(runs))))}
        for key in (CONTENDER_KEY, SEED_KEY, TEST_KEY):
            param_space[key] = tune.sample_from(lambda spec, key=key: runs[spec.config["run"]][key])
        for name in contenders_[0].config:
            param_space[name] = tune.sample_from(
                lambda spec, name=name: contenders_[runs[spec.config["run"]][CONTENDER_KEY]].config[name]
            )
        tuner = tune.Tuner(
            trainable,
            param_space=param_space,
            tune_config=tune.TuneConfig(
                max_concurrent_trials=study.search.max_concurrent_trials,
                # The worker process is reused from run to run: saves a Python + torch start (~5 s) each.
                reuse_actors=True,
                # From `runs`: the sample_from values are not resolved yet when Ray names the folder.
                trial_dirname_creator=lambda t: "c{contender}_seed{seed}".format(
                    contender=runs[t.config["run"]][CONTENDER_KEY], seed=runs[t.config["run"]][SEED_KEY]
                ),
            ),
            run_config=seed_runs_config(study, folder.name, str(folder.parent), [CONTENDER_KEY, SEED_KEY], len(runs)),
        )
    grid = tuner.fit()
    if grid.num_terminated + grid.num_errors < len(grid):
        raise RaceInterrupted(folder)  # Ray caught a Ctrl-C and saved the round: `resume` continues it
    experiment = load_experiment(folder)
    (folder / ROUND_FILE).write_text(json.dumps({"runs": len(experiment.trials)}) + "\n")
    return experiment


def run_value(study: Study, run: TrialResult) -> float | None:
    """What a run delivered: its objective at its last epoch; None if it diverged or failed."""
    if run.status(study.train.epochs) in (ERRORED, INFEASIBLE):
        return None
    return run.score(study.search.metric, study.search.objective_window)


def worst_value(study: Study, metric: str, runs: list[TrialResult] = ()) -> float:
    """What a diverged or errored run scores: the metric's worst value (0 for shares and rewards);
    for an unbounded metric, the worst any search trial reported."""
    bounds = study.metrics().value_range(metric)
    if bounds is not None:
        return bounds[0] if study.search.mode == "max" else bounds[1]
    seen = [row[metric] for run in runs for row in run.rows if _finite(row.get(metric))]
    if not seen:
        return 0.0
    return min(seen) if study.search.mode == "max" else max(seen)


def plan_race(experiment: Experiment, explicit: frozenset[str] = frozenset()) -> tuple[RacePlan, list[Contender]]:
    """The race fitted to what the search really spent, and its challengers.

    After the search nothing is refused (the search's compute would be wasted): numbers set in
    the study were checked at load against the search's most (num_samples x epochs); if ASHA
    spent less, the race is fitted all the same and its line says so.
    """
    study = experiment.study
    available = contenders(experiment, top_k=study.race.top_k)
    spent = sum(t.epochs for t in experiment.trials)
    plan = study.race_plan(search_epochs=spent, available=len(available), explicit=explicit)
    return plan, available[: plan.challengers]


def race(experiment: Experiment, *, log=print) -> dict[str, Any]:
    """Run (or continue) the race for a finished search; write and return race/summary.json."""
    study = experiment.study
    folder = race_dir(experiment.directory)
    done = load_summary(experiment.directory)
    if done is not None:
        return done
    plan, challengers = plan_race(experiment)
    if not challengers:
        raise RaceError(f"{experiment.directory}: no trial ran cleanly and reported {study.search.metric}; nothing to race")
    if plan.fitted:
        log(plan.fitted)
    baseline_values = study.baseline()
    field = list(challengers)
    if baseline_values is not None:
        field.insert(0, Contender(BASELINE, searched_values(study, baseline_values), None))
    metric, mode = study.search.metric, study.search.mode
    worst = worst_value(study, metric, experiment.trials)
    selection_seeds = fresh_seeds(study, 0, study.race.max_seeds)
    names = [c.name for c in field]
    all_runs: list[TrialResult] = []

    # 1. Selection: the policy asks for batches; each batch is one Ray Tune run.
    if plan.select:
        policy = Intensifier(names, study.race, selection_seeds, budget=plan.budget, worst=worst, mode=mode)
    else:  # no room for a selection: the search's top config goes straight to the confirmation
        policy = Intensifier([challengers[0].name], study.race, selection_seeds, budget=0, worst=worst, mode=mode)
    number = 0
    while True:
        batch = policy.next_runs()
        if not batch:
            break
        planned = [{CONTENDER_KEY: names.index(name), SEED_KEY: seed, TEST_KEY: 0} for name, seed in batch]
        log(f"race round {number}: {len(policy.alive())} configs x seeds {sorted({s for _, s in batch})} = {len(planned)} runs")
        result = run_round(study, folder / f"round-{number}", planned, field)
        all_runs.extend(result.trials)
        by_key = {(r.config[CONTENDER_KEY], r.config[SEED_KEY]): r for r in result.trials}
        for name, seed in batch:
            run = by_key.get((names.index(name), seed))
            policy.record(name, seed, None if run is None else run_value(study, run))
        last = policy.trace[-1]
        log(f"race round {number}: incumbent {last['incumbent']}" + (f"; cut {', '.join(last['cut'])}" if last["cut"] else ""))
        number += 1
    winner_name = policy.winner
    winner = names.index(winner_name)

    # 2. Confirmation: the winner and the baseline on further paired fresh seeds, test prompts.
    # When the race kept the baseline, the best challenger left runs beside it, so both are shown.
    has_baseline = baseline_values is not None
    if has_baseline and winner_name == BASELINE:
        sign = 1 if mode == "max" else -1
        raced = [row for row in policy.summary()["final"] if row["contender"] != BASELINE]
        other = max(raced, key=lambda row: sign * row["mean"])["contender"] if raced else None
        confirm = [names.index(other), 0] if other else [0]
    else:
        confirm = [winner] + ([0] if has_baseline else [])
    seeds = fresh_seeds(study, study.race.max_seeds, plan.confirm_seeds)
    test_pairs = study.race.test_samples_factor * study.task.eval_samples_per_prompt
    planned = [{CONTENDER_KEY: i, SEED_KEY: s, TEST_KEY: test_pairs} for i in confirm for s in seeds]
    log(f"race confirmation: {len(confirm)} config(s) x {len(seeds)} fresh seeds {seeds}, test prompts, {test_pairs} pairs each")
    confirmation = run_round(study, folder / "confirm", planned, field).trials
    summary = summarize(study, field, winner, confirm, confirmation, policy, plan, test_pairs, worst, seeds)
    more = study.race.second_look_seeds
    if summary["gate"]["second_look"] and more > 0:
        # The gate fell short but the winner leads on the mean: more paired seeds, then decide on all.
        extra = fresh_seeds(study, study.race.max_seeds + len(seeds), more)
        log(f"race second look: {summary['gate']['reason']}; winner and baseline x {more} more fresh seeds {extra}")
        planned = [{CONTENDER_KEY: i, SEED_KEY: s, TEST_KEY: test_pairs} for i in confirm for s in extra]
        confirmation = [*confirmation, *run_round(study, folder / "confirm-2", planned, field).trials]
        seeds = [*seeds, *extra]
        summary = summarize(study, field, winner, confirm, confirmation, policy, plan, test_pairs, worst, seeds)
        summary["gate"]["looks"] = 2
    # 3. Fallback: a winner refused for its collapses hands over to the search's next configs, each
    # trained on the same paired seeds (the baseline's runs reused) and gated in turn.
    refused: list[dict[str, Any]] = []
    runners_up = [c for c in contenders(experiment, top_k=len(field) + study.race.fallbacks) if c.name not in names]
    while refused_for_collapse(summary, study) and has_baseline and len(refused) < study.race.fallbacks and runners_up:
        refused.append(refusal(summary))
        field.append(runners_up.pop(0))
        names.append(field[-1].name)
        winner = len(field) - 1
        confirm = [winner, 0]
        log(f"race fallback {len(refused)}: {summary['gate']['reason']}; the search's next config "
            f"({config_text(field[winner].config)}) x the same {len(seeds)} seeds {seeds}")
        planned = [{CONTENDER_KEY: winner, SEED_KEY: s, TEST_KEY: test_pairs} for s in seeds]
        runs = run_round(study, folder / f"fallback-{len(refused)}", planned, field).trials
        confirmation = [*confirmation, *runs]
        summary = summarize(study, field, winner, confirm, confirmation, policy, plan, test_pairs, worst, seeds)
    summary["fallbacks"] = refused
    if refused:  # `retrain --top-k`'s candidates: not the configs passed over for their collapses
        passed = {r["search_trial"] for r in refused}
        summary["survivors"] = [s for s in summary["survivors"] if s["search_trial"] not in passed] or [
            {"search_trial": summary["winner"]["search_trial"], "config": summary["winner"]["config"]}]
    summary["compute"] = compute(experiment, [*all_runs, *confirmation])
    (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    (folder / "summary.md").write_text(summary_markdown(summary))
    return summary


def refused_for_collapse(summary: dict[str, Any], study: Study) -> bool:
    """The gate kept the baseline because the winner (a challenger) collapsed too often."""
    collapse = summary["gate"].get("collapse") or {}
    share = collapse.get("share")
    return (not summary["gate"]["recommend"] and not summary["race_kept_baseline"]
            and share is not None and share > study.race.max_collapse_share)


def refusal(summary: dict[str, Any]) -> dict[str, Any]:
    """What `best` says of a winner the fallback passed over."""
    w = summary["winner"]
    return {"search_trial": w["search_trial"], "config": w["config"], "stats": w["stats"],
            "collapse": w["collapse"], "reason": summary["gate"]["reason"]}


class RaceError(Exception):
    """The race cannot run (nothing to race)."""


class RaceInterrupted(Exception):
    """A round was stopped (Ctrl-C, SIGTERM) and saved; `ratiotune resume` continues it."""


# --------------------------------------------------------------------------- summary


def confirmed(study: Study, runs: list[TrialResult], index: int, worst: float) -> dict[str, Any]:
    """One config's confirmation: per-seed final-epoch test figures, their statistics, collapses, agents.

    A diverged or errored run has value None, is scored `worst` in the statistics and counts in n.
    """
    metric = honest_metric(study.search.metric)
    per_seed = []
    for run in sorted((r for r in runs if r.config[CONTENDER_KEY] == index), key=lambda r: r.config[SEED_KEY]):
        last = max(run.rows, key=lambda row: row.get("epoch", 0), default={})
        value = last.get(metric)
        failed = run.status(study.train.epochs) in (ERRORED, INFEASIBLE)
        diverged = failed or run.infeasible_reason is not None or not _finite(value)
        checkpoint = run.latest_checkpoint()
        per_seed.append(
            {
                "seed": run.config[SEED_KEY],
                "run": run.name,
                "epoch": last.get("epoch"),
                "value": None if diverged else float(value),
                "scored": worst if diverged else float(value),
                "collapsed": diverged or ended_collapsed(study, float(value), last.get("test/mean_reward")),
                "diverged": diverged,
                # The final agents this figure describes (agent_0/, agent_1/ inside).
                "agents": str(checkpoint) if checkpoint is not None and not diverged else None,
            }
        )
    collapsed = sum(s["collapsed"] for s in per_seed)
    return {
        "per_seed": per_seed,
        "stats": describe([s["scored"] for s in per_seed], study.metrics().value_range(metric)),
        "collapse": {"collapsed": collapsed, "n": len(per_seed)},
        "collapsed_fraction": collapsed / len(per_seed) if per_seed else None,
    }


def ended_collapsed(study: Study, value: float | None, mean_reward: float | None) -> bool:
    """A run's final test figure sits at its worst end (what `best` prints as 0.000: it learned
    nothing a user can use, however its rewards look), or every test reward sits at the reward's
    floor (length-ratio: agent 1 answers empty; the group baseline then has no signal and the run
    never recovers). The race's gate and `retrain` count these (and diverged runs) as collapsed."""
    bounds = study.metrics().value_range(honest_metric(study.search.metric))
    figure_floor = None if bounds is None else (bounds[0] if study.search.mode == "max" else bounds[1])
    return mean_reward == study.metrics().collapsed_reward() or (
        figure_floor is not None and value is not None and value == figure_floor)


def summarize(
    study: Study, field: list[Contender], winner: int, confirm: list[int], confirmation: list[TrialResult],
    policy: Intensifier, plan: RacePlan, test_pairs: int, worst: float, confirm_seeds: list[int],
) -> dict[str, Any]:
    """race/summary.json: the plan, every selection round, the confirmation, the gate, the recommendation."""
    metric = honest_metric(study.search.metric)
    kept_baseline = field[winner].name == BASELINE
    shown = confirm[0]  # the winner, or (the race kept the baseline) the best challenger beside it
    result = confirmed(study, confirmation, shown, worst)
    selection = policy.summary()
    race_score = next((row["mean"] for row in selection["final"] if row["contender"] == field[shown].name), None)
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
        "seeds": {"selection": sorted({s for row in selection["final"] for s in row["seeds"]}), "confirmation": confirm_seeds},
        "selection": {**selection, "contenders": {c.name: {"config": c.config, "search_score": c.search_score} for c in field}},
        "race_kept_baseline": kept_baseline,
        "winner": {
            "search_trial": field[shown].name,
            "config": field[shown].config,
            "hyperparameters": study.hyperparameters(field[shown].config),
            # Optimistic: the figures the config was selected on.
            "search_score": field[shown].search_score,
            "race_score": race_score,
            **result,
        },
        # The challengers never cut, best first: `retrain`'s candidates.
        "survivors": [
            {"search_trial": name, "config": next(c.config for c in field if c.name == name)}
            for name in selection["survivors"] if name != BASELINE
        ] or [{"search_trial": field[shown].name, "config": field[shown].config}],
    }
    baseline_index = next((i for i in confirm if field[i].name == BASELINE), None)
    base = None
    if baseline_index is not None:
        base = confirmed(study, confirmation, baseline_index, worst)
        summary["baseline"] = {"config": field[baseline_index].config,
                               "hyperparameters": study.hyperparameters(field[baseline_index].config), **base}
    by_seed = {s["seed"]: s["scored"] for s in base["per_seed"]} if base else {}
    paired = [s for s in result["per_seed"] if s["seed"] in by_seed]
    decision = gate(
        [s["value"] for s in paired] if base else [s["value"] for s in result["per_seed"]],
        [by_seed[s["seed"]] for s in paired] if base else None,
        collapsed=[s["collapsed"] for s in result["per_seed"]],
        worst=worst,
        max_collapse_share=study.race.max_collapse_share,
        mode=study.search.mode,
        winner_is_baseline=kept_baseline,
    )
    summary["gate"] = decision
    summary["margin"] = decision["margin"]
    if decision["recommend"]:
        which, entry = "winner", summary["winner"]
    elif base is not None:
        which, entry = "baseline", summary["baseline"]
    else:
        which, entry = None, None
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


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def config_text(config: dict[str, Any]) -> str:
    names = {"learning_rate": "lr", "num_generations": "gens", "max_new_tokens": "tokens", "reward_scale": "scale"}
    return ", ".join(f"{names.get(k, k)} {v:.3g}" if isinstance(v, float) else f"{names.get(k, k)} {v}" for k, v in config.items())


def verdict(summary: dict[str, Any]) -> str:
    """One line: what the study recommends, and why."""
    g = summary["gate"]
    if g["recommend"]:
        return f"confirmed: {config_text(summary['winner']['config'])} ({g['reason']})"
    if summary["recommended"]["which"] == "baseline":
        return f"not confirmed: the baseline stands ({g['reason']})"
    return f"not confirmed: {g['reason']} (the study has no baseline to fall back on)"


def headline(summary: dict[str, Any]) -> list[str]:
    """The lines every command prints: the verdict, then each config's figures named for what they are."""
    w = summary["winner"]
    protocol = summary["protocol"]
    metric = summary["honest_metric"]
    where = (f"final epoch {protocol['epoch']}, {protocol['prompts']}, {protocol['samples_per_prompt']} pairs/prompt, "
             f"seeds {', '.join(map(str, summary['seeds']['confirmation']))}")
    lines = [verdict(summary), f"{metric} on fresh seeds ({where}); diverged runs score the worst value and count in n:"]
    for number, passed in enumerate(summary.get("fallbacks", []), start=1):
        # A winner refused for its collapses; the search's next config took its place on the same seeds.
        collapse = passed["collapse"]
        lines.append(f"passed over ({number}): {config_text(passed['config'])}: mean {passed['stats']['mean']:.3f}, "
                     f"{format_share(collapse['collapsed'], collapse['n'])}; the search's next config raced in its place")

    def config_lines(label: str, entry: dict[str, Any]) -> list[str]:
        values = ", ".join("diverged" if s["value"] is None else f"{s['value']:.3f}" for s in entry["per_seed"])
        collapse = entry["collapse"]
        return [
            f"{label} ({config_text(entry['config'])}): {format_interval(entry['stats'])}",
            f"  per seed: {values}; {format_share(collapse['collapsed'], collapse['n'])}",
        ]

    lines += config_lines("winner" if not summary.get("race_kept_baseline") else "best challenger", w)
    if "baseline" in summary:
        lines += config_lines("baseline", summary["baseline"])
    recommended = summary.get("recommended", {}).get("which")
    if recommended:
        entry = summary[recommended]
        band = predict_mean(entry["stats"], REPRODUCE_SEEDS, summary_range(summary))
        if band is not None:
            lines.append(f"re-run the {recommended} on {REPRODUCE_SEEDS} new seeds: 95% PI of their mean [{band[0]:.3f}, {band[1]:.3f}]")
    if summary.get("margin"):
        gate_ = summary["gate"]
        low = gate_.get("margin_lower", gate_.get("margin_lower95"))  # margin_lower95: races before the 90% gate
        level = f"{gate_.get('confidence', 0.95):.0%}"
        lines.append(
            f"margin over the baseline (paired by seed): {format_interval(summary['margin'])}; one-sided {level} lower bound "
            + ("n/a" if low is None else f"{low:.3f}")
            + (" (after a second look)" if gate_.get("looks") == 2 else "")
        )
    if w["search_score"] is not None:
        lines.append(
            f"selection figure (optimistic: the value it was picked on): search {summary['metric']} objective "
            f"{w['search_score']:.3f}" + (f", race mean {w['race_score']:.3f}" if w.get("race_score") is not None else "")
        )
    if summary["plan"].get("fitted"):
        lines.append(summary["plan"]["fitted"])
    return lines


def summary_markdown(summary: dict[str, Any]) -> str:
    w = summary["winner"]
    selection = summary["selection"]
    lines = [
        "# Race",
        "",
        f"**{verdict(summary)}**",
        "",
        "Race winner: " + ("the baseline (no challenger beat it)" if summary.get("race_kept_baseline")
                           else f"{config_text(w['config'])} (search trial {w['search_trial']})") + ".",
        "",
        *[f"  - {line.strip()}" if line.startswith("  ") else f"- {line}" for line in headline(summary)[1:]],
        "",
        f"Gate: {summary['gate']['rule']}.",
        "",
        "## Selection (paired fresh seeds; cut = a paired sign test against the incumbent)",
        "",
        f"{selection['runs']} runs of a budget of {selection['budget']}; stopped: {selection['stop_reason']}.",
    ]
    if selection["rounds"]:
        lines += ["", "| round | config | search trial | status | seeds | mean | per seed | vs incumbent (wins/losses/ties, p) |",
                  "|---|---|---|---|---|---|---|---|"]
    contenders_ = selection["contenders"]
    for entry in selection["rounds"]:
        for row in entry["standings"]:
            name = row["contender"]
            mean = "n/a" if row["mean"] is None else f"{row['mean']:.3f}"
            per_seed = ", ".join(f"{v:.3f}" + ("*" if s in row["diverged"] else "") for s, v in zip(row["seeds"], row["values"]))
            status = "cut" if name in entry["cut"] else row["status"]
            vs = row.get("vs_incumbent")
            test = f"{vs['wins']}/{vs['losses']}/{vs['ties']}, p {vs['p_worse']:.3f}" if vs else ""
            lines.append(
                f"| {entry['round']} | {config_text(contenders_[name]['config'])} | {name} | {status} | "
                f"{', '.join(map(str, row['seeds']))} | {mean} | {per_seed} | {test} |"
            )
    if selection["rounds"]:
        lines += ["", "(* diverged or errored: scored as the worst value)"]
    agents = summary["recommended"]["agents"]
    if agents:
        lines += ["", f"## Agents ({summary['recommended']['which']}: its confirmation runs' final agents)", ""]
        lines += [f"- `{path}`" for path in agents]
    c = summary.get("compute")
    if c:
        lines += ["", f"Compute: search {c['search_trial_epochs']} trial-epochs, race {c['race_trial_epochs']} "
                  f"trial-epochs in {c['race_runs']} runs."]
    return "\n".join(lines) + "\n"
