"""The race: after the search, name a winner the study stands behind, or say the baseline stands.

A search ranks configs by one noisy run each (one seed, sampled rollouts, 48 eval pairs), so its
best figure is the maximum of many noisy numbers: optimistic. The race's rules are one object,
core/race_protocol.Race (selection on paired fresh seeds, confirmation on the test prompts, a
second look, fallbacks, the gate, the race's error spent over its looks: its docstring and
docs/search-pipeline.md). This file only runs what that object asks for with Ray Tune, one stage
at a time, tells it each run's figure, and writes what it decided: race/summary.json (built by
core/race_summary.py) and summary.md (in search/race_text.py's words, the lines `best` prints too).

Each stage is a Ray Tune run of its own (search/seed_grid.py) under EXPERIMENT/race/ (round-0, ..., confirm,
confirm-2, fallback-1, ...), readable by core/experiment.py like any experiment, so `resume`
continues a race that was interrupted: the protocol is deterministic given the figures, so
finished stages are read back and told again, an interrupted one is restored. The confirmation
runs keep their final agents: those are what the figure describes, and what `best` names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ratiotune.core.experiment import ERRORED, INFEASIBLE, Experiment, TrialResult, load_experiment
from ratiotune.core.race_setup import RaceSetup, race_setup, start_race
from ratiotune.core.race_summary import (
    BASELINE,
    CONTENDER_KEY,
    SUMMARY_FILE,
    Contender,
    compute,
    confirmation_value,
    load_summary,
    race_dir,
    run_value,
    searched_values,
    summarize,
    worst_value,
)
from ratiotune.core.study import SEED_KEY, TEST_KEY, Study
from ratiotune.search.race_text import label, stage_line, summary_markdown
from ratiotune.search.seed_grid import run_seed_grid

# --------------------------------------------------------------------------- planning


def fresh_seeds(study: Study, start: int, count: int) -> list[int]:
    """Seeds the search never used: every search trial trained with train.seed."""
    return [study.train.seed + 1 + start + i for i in range(count)]


# --------------------------------------------------------------------------- running


def run_round(study: Study, folder: Path, runs: list[dict[str, Any]], contenders: list[Contender]) -> Experiment:
    """Train every run (contender index, seed, test pairs) as one Ray Tune trial; read them back.

    A round that ended is read as it is; an interrupted one is restored, its finished runs kept,
    the rest continued from their checkpoints (seed_grid.StageInterrupted when stopped again).
    Ray must be initialised.
    """
    configs = {i: c.config for i, c in enumerate(contenders)}
    labels = {i: label(c.name, contenders) for i, c in enumerate(contenders)}
    run_seed_grid(study, folder, runs, configs, CONTENDER_KEY, prefix="c", labels=labels, reuse_actors=True)
    return load_experiment(folder)


def plan_race(experiment: Experiment, explicit: frozenset[str] = frozenset()) -> tuple[RaceSetup, list[Contender]]:
    """The race fitted to what the search really spent (core/race_setup.py), and the search's
    challengers then runners-up as contenders, best first.

    After the search nothing is refused (the search's compute would be wasted): numbers set in
    the study were checked at load against the search's most (num_samples x epochs); if ASHA
    spent less, the race is fitted all the same and its line says so.
    """
    study = experiment.study
    metric, window = study.search.metric, study.search.objective_window
    clean = [t for t in experiment.ranked() if t.status(study.train.epochs) not in (ERRORED, INFEASIBLE)]
    spent = sum(t.epochs for t in experiment.trials)
    trials = [(t.name, t.config, t.score(metric, window)) for t in clean]
    setup = race_setup(study, trials, search_epochs=spent, explicit=explicit)
    by_name = {t.name: t for t in clean}
    searched = [
        Contender(n, searched_values(study, by_name[n].config), by_name[n].score(metric, window))
        for n in (*setup.challengers, *setup.runners_up)
    ]
    return setup, searched


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
    setup, searched = plan_race(experiment)
    plan = setup.plan
    if not setup.challengers:
        raise RaceError(f"{experiment.directory}: no trial ran cleanly and reported {study.search.metric}; nothing to race")
    log(plan.line())
    if plan.fitted:
        log(plan.fitted)
    baseline_values = study.baseline()
    # The contenders (an index into this list is CONTENDER_KEY): the baseline, the challengers, then
    # the search's next configs that a fallback may confirm in a refused winner's place.
    baseline = [] if baseline_values is None else [Contender(BASELINE, searched_values(study, baseline_values), None)]
    contenders = [*baseline, *searched]
    names = [c.name for c in contenders]
    worst = worst_value(study, study.search.metric, experiment.trials)
    protocol = start_race(study, setup, worst=worst, seed=lambda j: fresh_seeds(study, j, 1)[0])
    test_pairs = study.race.test_samples_factor * study.task.eval_samples_per_prompt
    selection_runs: list[TrialResult] = []
    confirmation: list[TrialResult] = []
    while (stage := protocol.ask()) is not None:
        planned = [
            {CONTENDER_KEY: names.index(r.contender), SEED_KEY: r.seed, TEST_KEY: test_pairs if r.test else 0}
            for r in stage.requests
        ]
        log(stage_line(stage, protocol, contenders))
        runs = run_round(study, folder / stage.name, planned, contenders).trials
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
            log(
                f"race {stage.name}: incumbent {label(last.incumbent, contenders)}"
                + (f"; cut {', '.join(label(c, contenders) for c in last.cut)}" if last.cut else "")
            )
    result = protocol.result()
    summary = summarize(study, contenders, result, confirmation, plan, test_pairs, worst)
    summary["compute"] = compute(experiment, [*selection_runs, *confirmation])
    (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    (folder / "summary.md").write_text(summary_markdown(summary))
    return summary


class RaceError(Exception):
    """The race cannot run (nothing to race)."""
