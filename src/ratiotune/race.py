"""The confirmation race: after the search, name a winner whose figure a user would reproduce.

A search ranks configs by one noisy run each (one seed, sampled rollouts, 48 eval pairs),
so its best figure is the maximum of many noisy numbers: optimistic. Measured on the smoke
task, the search's pick retrained over fresh seeds scored about half of what the search
reported. The race removes both sources of that optimism:

1. Selection on fresh seeds (successive halving, as in SMAC's intensifier and irace): the
   search's top `race.top_k` configs each train on `race.first_seeds` seeds the search
   never used; the better half by mean objective continue on as many *new* seeds again
   (so seeds per config double: 1, 2, 4, ...), every survivor on the same seeds, until one
   config is left.
2. Confirmation on other fresh seeds and other prompts (Eimer et al. 2023: tune on some
   seeds, report on others): the winner, and the study's baseline beside it on the same
   seeds, train `race.confirm_seeds` more times; each run's final epoch is scored on the
   test prompts (never trained on, never selected on) with `race.test_samples_factor` x the
   search's eval pairs. That mean, with every per-seed value, its 95% interval and the share
   of seeds that collapsed, is the honest figure. Nothing selected on these runs.

Each round is a Ray Tune run of its own under EXPERIMENT/race/ (round-0, round-1, ...,
confirm), readable by results.py like any experiment, so `resume` continues a race that was
interrupted: finished rounds are read back, an interrupted one is restored.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ratiotune.results import ERRORED, INFEASIBLE, Experiment, TrialResult, load_experiment
from ratiotune.stats import t_interval
from ratiotune.metrics import TASK_METRICS
from ratiotune.study import SEED_KEY, TEST_KEY, Study, write_study

RACE_DIR = "race"
SUMMARY_FILE = "summary.json"
ROUND_FILE = "round.json"  # written when a round has ended: resume reads it instead of re-running
CONTENDER_KEY = "contender"  # which config a run belongs to (an index into the race's contenders)
BASELINE = "baseline"


@dataclass(frozen=True)
class Contender:
    """A config in the race: one of the search's top trials, or the baseline."""

    name: str  # the search trial it came from, or BASELINE
    config: dict[str, Any]  # its searched values
    search_score: float | None  # its objective in the search (optimistic: it was selected on)


def honest_metric(metric: str) -> str:
    """The test-prompt twin of the study metric (`eval/in_range_fraction` -> `test/in_range_fraction`)."""
    name = metric.split("/", 1)[-1]
    return f"test/{name}" if name in TASK_METRICS else metric


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


def contenders(experiment: Experiment) -> list[Contender]:
    """The search's top_k configs by objective (trials that ran cleanly), best first; distinct configs only."""
    study = experiment.study
    metric, window = study.search.metric, study.search.objective_window
    picked: list[Contender] = []
    seen: list[dict[str, Any]] = []
    for trial in experiment.ranked():
        if trial.status(study.train.epochs) in (ERRORED, INFEASIBLE):
            continue
        config = searched_values(study, trial.config)
        if config in seen:
            continue  # the baseline can also be drawn by the sampler; race it once
        seen.append(config)
        picked.append(Contender(trial.name, config, trial.score(metric, window)))
        if len(picked) == study.race.top_k:
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

    from ratiotune.search import make_trainable, seed_runs_config

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
            run_config=seed_runs_config(study, folder.name, str(folder.parent), [CONTENDER_KEY, SEED_KEY]),
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


def rank_contenders(
    study: Study, indices: list[int], runs: list[TrialResult]
) -> list[tuple[int, float | None, list[float | None]]]:
    """(contender, mean objective over its seeds, per-seed values), best first.

    A contender that diverged or failed on any seed ranks behind every one that did not:
    a config that sometimes does not train is not one to ship.
    """
    table = []
    for index in indices:
        values = [run_value(study, r) for r in sorted(runs, key=lambda r: r.config[SEED_KEY]) if r.config[CONTENDER_KEY] == index]
        finite = [v for v in values if v is not None]
        mean = sum(finite) / len(finite) if finite else None
        table.append((index, mean, values))
    sign = 1 if study.search.mode == "max" else -1

    def key(entry: tuple[int, float | None, list[float | None]]) -> tuple[int, float, int]:
        index, mean, values = entry
        failed = sum(v is None for v in values)
        return (failed, -sign * mean if mean is not None else math.inf, index)

    return sorted(table, key=key)


def race(experiment: Experiment, *, log=print) -> dict[str, Any]:
    """Run (or continue) the race for a finished search; write and return race/summary.json."""
    study = experiment.study
    folder = race_dir(experiment.directory)
    done = load_summary(experiment.directory)
    if done is not None:
        return done
    entrants = contenders(experiment)
    if not entrants:
        raise RaceError(f"{experiment.directory}: no trial ran cleanly and reported {study.search.metric}; nothing to race")
    baseline_values = study.baseline()
    field = list(entrants)
    if baseline_values is not None:
        baseline_values = searched_values(study, baseline_values)
    runs_per_round = []
    alive = list(range(len(entrants)))
    seeds_used = 0
    rounds = study.race.rounds(len(entrants))
    all_runs: list[TrialResult] = []
    for number, (configs, new_seeds) in enumerate(rounds):
        seeds = fresh_seeds(study, seeds_used, new_seeds)
        seeds_used += new_seeds
        planned = [{CONTENDER_KEY: i, SEED_KEY: s, TEST_KEY: 0} for i in alive for s in seeds]
        log(f"race round {number}: {len(alive)} configs x {new_seeds} new seed(s) {seeds} = {len(planned)} runs")
        result = run_round(study, folder / f"round-{number}", planned, field)
        all_runs.extend(result.trials)
        ranking = rank_contenders(study, alive, all_runs)
        runs_per_round.append(
            [
                {"contender": i, "config": field[i].config, "search_trial": field[i].name, "mean_objective": mean,
                 "seeds": sorted({r.config[SEED_KEY] for r in all_runs if r.config[CONTENDER_KEY] == i}), "values": values}
                for i, mean, values in ranking
            ]
        )
        alive = [i for i, _, _ in ranking[: (len(alive) + 1) // 2]]
    winner = alive[0]

    # Confirmation: the winner and the baseline on the same further fresh seeds, test prompts.
    confirm = [winner]
    if baseline_values is not None:
        if baseline_values == field[winner].config:
            pass  # the winner is the baseline: one set of runs measures both
        else:
            field.append(Contender(BASELINE, baseline_values, None))
            confirm.append(len(field) - 1)
    seeds = fresh_seeds(study, seeds_used, study.race.confirm_seeds)
    test_pairs = study.race.test_samples_factor * study.task.eval_samples_per_prompt
    planned = [{CONTENDER_KEY: i, SEED_KEY: s, TEST_KEY: test_pairs} for i in confirm for s in seeds]
    log(f"race confirmation: {len(confirm)} config(s) x {len(seeds)} fresh seeds {seeds}, test prompts, {test_pairs} pairs each")
    confirmation = run_round(study, folder / "confirm", planned, field)
    summary = summarize(study, field, winner, confirm, confirmation, runs_per_round, test_pairs, baseline_values)
    summary["compute"] = compute(experiment, [*all_runs, *confirmation.trials])
    (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    (folder / "summary.md").write_text(summary_markdown(summary))
    return summary


class RaceError(Exception):
    """The race cannot run (nothing to race)."""


class RaceInterrupted(Exception):
    """A round was stopped (Ctrl-C, SIGTERM) and saved; `ratiotune resume` continues it."""


# --------------------------------------------------------------------------- summary


def confirmed(study: Study, runs: list[TrialResult], index: int) -> dict[str, Any]:
    """One config's confirmation: per-seed final-epoch test figures, their interval, collapses."""
    metric = honest_metric(study.search.metric)
    per_seed = []
    for run in sorted((r for r in runs if r.config[CONTENDER_KEY] == index), key=lambda r: r.config[SEED_KEY]):
        last = max(run.rows, key=lambda row: row.get("epoch", 0), default={})
        value = last.get(metric)
        diverged = run.infeasible_reason is not None or not _finite(value)
        per_seed.append(
            {
                "seed": run.config[SEED_KEY],
                "run": run.name,
                "epoch": last.get("epoch"),
                "value": None if diverged else float(value),
                # Collapsed: every test reward is 0 (agent 1 answers empty); the group baseline
                # then has no signal and the run never recovers. A diverged run counts too.
                "collapsed": diverged or last.get("test/mean_reward") == 0,
                "diverged": diverged,
            }
        )
    values = [s["value"] for s in per_seed if s["value"] is not None]
    return {
        "per_seed": per_seed,
        "stats": t_interval(values),
        "collapsed_fraction": sum(s["collapsed"] for s in per_seed) / len(per_seed) if per_seed else None,
    }


def summarize(
    study: Study, field: list[Contender], winner: int, confirm: list[int], confirmation: Experiment,
    rounds: list[list[dict[str, Any]]], test_pairs: int, baseline_values: dict[str, Any] | None,
) -> dict[str, Any]:
    metric = honest_metric(study.search.metric)
    result = confirmed(study, confirmation.trials, winner)
    summary: dict[str, Any] = {
        "metric": study.search.metric,
        "honest_metric": metric,
        "mode": study.search.mode,
        "protocol": {
            "prompts": study.task.test_prompts,
            "samples_per_prompt": test_pairs,
            "search_samples_per_prompt": study.task.eval_samples_per_prompt,
            "epoch": study.train.epochs,
        },
        "winner": {
            "search_trial": field[winner].name,
            "config": field[winner].config,
            "hyperparameters": study.hyperparameters(field[winner].config),
            # Optimistic: the figures the config was selected on.
            "search_score": field[winner].search_score,
            "race_score": rounds[-1][0]["mean_objective"] if rounds else None,
            **result,
        },
        "rounds": rounds,
    }
    if baseline_values is not None:
        index = confirm[1] if len(confirm) > 1 else winner
        base = confirmed(study, confirmation.trials, index)
        summary["baseline"] = {"config": baseline_values, **base}
        # Paired by seed: both trained on the same fresh seeds, so seed luck cancels in the difference.
        by_seed = {s["seed"]: s["value"] for s in base["per_seed"]}
        differences = [
            s["value"] - by_seed[s["seed"]]
            for s in result["per_seed"]
            if s["value"] is not None and by_seed.get(s["seed"]) is not None
        ]
        summary["margin"] = t_interval(differences)
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


def headline(summary: dict[str, Any]) -> list[str]:
    """The lines every command prints for a winner: the honest figure first, the optimistic one labelled."""
    from ratiotune.stats import format_interval

    w = summary["winner"]
    protocol = summary["protocol"]
    values = ", ".join("diverged" if s["value"] is None else f"{s['value']:.3f}" for s in w["per_seed"])
    lines = [
        f"{summary['honest_metric']} on fresh seeds: {format_interval(w['stats'])} "
        f"(final epoch {protocol['epoch']}, {protocol['prompts']}, {protocol['samples_per_prompt']} pairs/prompt)",
        f"per seed: {values}; collapsed: {w['collapsed_fraction']:.0%} of seeds",
    ]
    if "baseline" in summary:
        b = summary["baseline"]
        lines.append(f"baseline ({config_text(b['config'])}) on the same seeds: {format_interval(b['stats'])}")
        lines.append(f"margin over the baseline (paired by seed): {format_interval(summary['margin'])}")
    if w["search_score"] is not None:
        lines.append(
            f"selection figure (optimistic: the value it was picked on): search {summary['metric']} objective "
            f"{w['search_score']:.3f}" + (f", race {w['race_score']:.3f}" if w.get("race_score") is not None else "")
        )
    return lines


def summary_markdown(summary: dict[str, Any]) -> str:
    w = summary["winner"]
    lines = [
        "# Confirmation race",
        "",
        f"Winner: **{config_text(w['config'])}** (search trial {w['search_trial']}).",
        "",
        *[f"- {line}" for line in headline(summary)],
        "",
        "## Rounds (selection on fresh seeds; mean objective over each config's seeds)",
        "",
        "| round | config | search trial | seeds | mean objective | per seed |",
        "|---|---|---|---|---|---|",
    ]
    for number, ranking in enumerate(summary["rounds"]):
        for entry in ranking:
            mean = "n/a" if entry["mean_objective"] is None else f"{entry['mean_objective']:.3f}"
            per_seed = ", ".join("failed" if v is None else f"{v:.3f}" for v in entry["values"])
            lines.append(
                f"| {number} | {config_text(entry['config'])} | {entry['search_trial']} | "
                f"{', '.join(map(str, entry['seeds']))} | {mean} | {per_seed} |"
            )
    c = summary.get("compute")
    if c:
        lines += ["", f"Compute: search {c['search_trial_epochs']} trial-epochs, race {c['race_trial_epochs']} "
                  f"trial-epochs in {c['race_runs']} runs."]
    return "\n".join(lines) + "\n"
