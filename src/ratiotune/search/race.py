"""The race: after the search, name a winner the study stands behind, or say the baseline stands.

A search ranks configs by one noisy run each (one seed, sampled rollouts, 48 eval pairs), so its
best figure is the maximum of many noisy numbers: optimistic. The race's rules are one object,
core/race_protocol.Race (selection on paired fresh seeds, confirmation on the test prompts, a
second look, fallbacks, the gate, the race's error spent over its looks: its docstring and
docs/search-pipeline.md). This file only runs what that object asks for with Ray Tune, one stage
at a time, tells it each run's figure, and writes what it decided: race/summary.json, summary.md,
and the lines `best` prints.

Each stage is a Ray Tune run of its own under EXPERIMENT/race/ (round-0, round-1, ..., confirm,
confirm-2, fallback-1, ...), readable by core/experiment.py like any experiment, so `resume`
continues a race that was interrupted: the protocol is deterministic given the figures, so
finished stages are read back and told again, an interrupted one is restored. The confirmation
runs keep their final agents: those are what the figure describes, and what `best` names.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ratiotune.core.intensify import RacePlan
from ratiotune.core.race_protocol import Race, Stage, pick_contenders
from ratiotune.core.experiment import ERRORED, INFEASIBLE, Experiment, TrialResult, load_experiment
from ratiotune.core.stats import describe, format_interval, format_prediction, format_share, predict_run
from ratiotune.core.study import SEED_KEY, TEST_KEY, Study, write_study

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
    baseline = study.baseline()
    clean = [t for t in experiment.ranked() if t.status(study.train.epochs) not in (ERRORED, INFEASIBLE)]
    names = pick_contenders([(t.name, searched_values(study, t.config)) for t in clean],
                            searched_values(study, baseline) if baseline is not None else None, top_k)
    by_name = {t.name: t for t in clean}
    return [Contender(n, searched_values(study, by_name[n].config), by_name[n].score(metric, window)) for n in names]


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
            run_config=seed_runs_config(study, folder.name, str(folder.parent), [CONTENDER_KEY, SEED_KEY], len(runs),
                                        {CONTENDER_KEY: {i: label(c.name, contenders_) for i, c in enumerate(contenders_)}}),
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
    """Run (or continue) the race for a finished search; write and return race/summary.json.

    core/race_protocol.Race decides everything; this function trains the runs it asks for, one
    Ray Tune run per stage (folder race/<stage>), and tells it their figures.
    """
    study = experiment.study
    folder = race_dir(experiment.directory)
    done = load_summary(experiment.directory)
    if done is not None:
        return done
    plan, challengers = plan_race(experiment)
    if not challengers:
        raise RaceError(f"{experiment.directory}: no trial ran cleanly and reported {study.search.metric}; nothing to race")
    log(plan.line())
    if plan.fitted:
        log(plan.fitted)
    baseline_values = study.baseline()
    # The contenders (an index into this list is CONTENDER_KEY): the baseline, the challengers, then
    # the search's next configs that a fallback may confirm in a refused winner's place.
    runners_up = [c for c in contenders(experiment, top_k=len(challengers) + study.race.fallbacks)
                  if c.name not in {x.name for x in challengers}]
    field = ([Contender(BASELINE, searched_values(study, baseline_values), None)] if baseline_values is not None else [])
    field += [*challengers, *runners_up]
    names = [c.name for c in field]
    worst = worst_value(study, study.search.metric, experiment.trials)
    protocol = Race(
        [c.name for c in field[: len(field) - len(runners_up)]], runners_up=[c.name for c in runners_up],
        settings=study.race, plan=plan, baseline=BASELINE if baseline_values is not None else None,
        seed=lambda j: fresh_seeds(study, j, 1)[0], worst=worst, mode=study.search.mode,
    )
    test_pairs = study.race.test_samples_factor * study.task.eval_samples_per_prompt
    selection_runs: list[TrialResult] = []
    confirmation: list[TrialResult] = []
    while (stage := protocol.ask()) is not None:
        planned = [{CONTENDER_KEY: names.index(r.contender), SEED_KEY: r.seed, TEST_KEY: test_pairs if r.test else 0}
                   for r in stage.requests]
        log(stage_line(stage, protocol, field))
        runs = run_round(study, folder / stage.name, planned, field).trials
        by_key = {(r.config[CONTENDER_KEY], r.config[SEED_KEY]): r for r in runs}
        for request in stage.requests:
            run = by_key.get((names.index(request.contender), request.seed))
            if request.test:
                value, collapsed = confirmation_value(study, run)
                protocol.tell(request, value, collapsed)
            else:
                protocol.tell(request, None if run is None else run_value(study, run))
        (confirmation if stage.requests[0].test else selection_runs).extend(runs)
        if not stage.requests[0].test:
            last = protocol.selection.trace[-1]
            log(f"race {stage.name}: incumbent {label(last['incumbent'], field)}"
                + (f"; cut {', '.join(label(c, field) for c in last['cut'])}" if last["cut"] else ""))
    result = protocol.result()
    summary = summarize(study, field, result, confirmation, plan, test_pairs, worst)
    summary["compute"] = compute(experiment, [*selection_runs, *confirmation])
    (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    (folder / "summary.md").write_text(summary_markdown(summary))
    return summary


def label(name: str, field: list[Contender]) -> str:
    """How a log line names a contender: the baseline, or a challenger by its values."""
    if name == BASELINE:
        return "the baseline"
    config = next(c.config for c in field if c.name == name)
    return f"challenger {config_text(config)}"


def stage_line(stage: Stage, protocol: Race, field: list[Contender]) -> str:
    seeds = sorted({r.seed for r in stage.requests})
    who = sorted({r.contender for r in stage.requests}, key=[c.name for c in field].index)
    what = {"confirm": "confirmation on the test prompts", "confirm-2": "second look: the first fell short, the winner "
            "leads on the mean"}.get(stage.name, "fallback: the refused winner collapsed too often; the search's next config"
                                     if stage.name.startswith("fallback") else "selection")
    return (f"race {stage.name} ({what}): {'; '.join(label(n, field) for n in who)} x seeds "
            f"{', '.join(map(str, seeds))} = {len(stage.requests)} runs")


def confirmation_value(study: Study, run: TrialResult | None) -> tuple[float | None, bool]:
    """A confirmation run's final test figure (None: diverged or errored) and whether it collapsed."""
    if run is None:
        return None, True
    last = max(run.rows, key=lambda row: row.get("epoch", 0), default={})
    value = last.get(honest_metric(study.search.metric))
    if run.status(study.train.epochs) in (ERRORED, INFEASIBLE) or run.infeasible_reason is not None or not _finite(value):
        return None, True
    return float(value), ended_collapsed(study, float(value), last.get("test/mean_reward"))


class RaceError(Exception):
    """The race cannot run (nothing to race)."""


class RaceInterrupted(Exception):
    """A round was stopped (Ctrl-C, SIGTERM) and saved; `ratiotune resume` continues it."""


# --------------------------------------------------------------------------- summary


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
    bounds = study.metrics().value_range(honest_metric(study.search.metric))
    figure_floor = None if bounds is None else (bounds[0] if study.search.mode == "max" else bounds[1])
    return mean_reward == study.metrics().collapsed_reward() or (
        figure_floor is not None and value is not None and value == figure_floor)


def summarize(
    study: Study, field: list[Contender], result: dict[str, Any], confirmation: list[TrialResult],
    plan: RacePlan, test_pairs: int, worst: float,
) -> dict[str, Any]:
    """race/summary.json from the protocol's result (Race.result()) and the confirmation runs: the plan,
    every selection round, the confirmation, the gate as the protocol applied it, the recommendation."""
    metric = honest_metric(study.search.metric)
    names = [c.name for c in field]
    shown = names.index(result["shown"])  # the confirmed challenger (beside a kept baseline: shown only)
    winner = confirmed(study, confirmation, shown, worst)
    selection = result["selection"]
    race_score = next((row["mean"] for row in selection["final"] if row["contender"] == field[shown].name), None)
    passed = {p["contender"] for p in result["passed_over"]}
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
        "seeds": {"selection": sorted({s for row in selection["final"] for s in row["seeds"]}),
                  "confirmation": result["confirm_seeds"]},
        "selection": {**selection, "contenders": {c.name: {"config": c.config, "search_score": c.search_score} for c in field}},
        "race_kept_baseline": result["kept_baseline"],
        "winner": {
            "search_trial": field[shown].name,
            "config": field[shown].config,
            "hyperparameters": study.hyperparameters(field[shown].config),
            # Optimistic: the figures the config was selected on.
            "search_score": field[shown].search_score,
            "race_score": race_score,
            **winner,
        },
        # The challengers never cut nor passed over, best first: `retrain`'s candidates.
        "survivors": [
            {"search_trial": name, "config": field[names.index(name)].config}
            for name in selection["survivors"] if name != BASELINE and name not in passed
        ] or [{"search_trial": field[shown].name, "config": field[shown].config}],
        "fallbacks": [
            {"search_trial": p["contender"], "config": field[names.index(p["contender"])].config, "reason": p["reason"],
             **confirmed(study, confirmation, names.index(p["contender"]), worst, p["seeds"])}
            for p in result["passed_over"]
        ],
        "gate": result["gate"],
        "margin": result["gate"]["margin"],
    }
    if BASELINE in result["confirmed"]:
        base = names.index(BASELINE)
        summary["baseline"] = {"config": field[base].config, "hyperparameters": study.hyperparameters(field[base].config),
                               **confirmed(study, confirmation, base, worst)}
    which = result["which"]
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


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def config_text(config: dict[str, Any]) -> str:
    names = {"learning_rate": "lr", "num_generations": "gens", "max_new_tokens": "tokens", "reward_scale": "scale"}
    return ", ".join(f"{names.get(k, k)} {v:.3g}" if isinstance(v, float) else f"{names.get(k, k)} {v}" for k, v in config.items())


def decision_text(gate_: dict[str, Any]) -> str:
    """The figure the gate decided on, named with its level: 'one-sided 97.5% lower bound of the paired
    margin 0.012 on 6 seeds (look 1 of up to 4: the whole race errs at most 10%)'."""
    low = gate_.get("margin_lower", gate_.get("margin_lower95"))  # margin_lower95: races before the 90% gate
    if gate_.get("margin") is None:
        return "no baseline to compare with"
    level = f"{gate_.get('confidence', 0.95):.1%}".replace(".0%", "%")
    text = (f"one-sided {level} lower bound of the paired margin over the baseline "
            + ("n/a" if low is None else f"{low:.3f}") + f" on {gate_['margin']['n']} seeds")
    if "race_confidence" in gate_:
        text += (f" (look {gate_['look']} of up to {gate_['max_looks']}: the whole race confirms a config no better "
                 f"than the baseline at most {1 - gate_['race_confidence']:.0%} of the time)")
    return text


def verdict(summary: dict[str, Any]) -> str:
    """One line: what the study recommends, and the figure the decision used."""
    g = summary["gate"]
    if g["recommend"]:
        return f"confirmed: {config_text(summary['winner']['config'])}: {decision_text(g)} > 0"
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
    if recommended and summary[recommended].get("prediction"):
        lines.append(f"re-run the {recommended} once: {format_prediction(summary[recommended]['prediction'])}")
    if summary.get("margin"):
        margin = summary["margin"]
        lines.append(f"margin over the baseline (paired by seed): mean {margin['mean']:.3f} (n={margin['n']})"
                     + ("" if summary["gate"]["recommend"] else f"; {decision_text(summary['gate'])}"))
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
