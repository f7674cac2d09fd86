"""Retrain: the race's winner (or its top-k survivors) over fresh seeds; ship the agents the figure describes.

Candidates: the race's recommendation first (its winner when the gate confirmed it, else the
baseline), then the race's other survivors (`--top-k`); an experiment without a finished race
falls back to the search's ranking, and says so. Every run trains from scratch (or continues
a checkpoint) through the same Ray Tune trainable as the search, on seeds the search and the
race never used, and is scored at its final epoch on a larger protocol.

Select on some seeds, report on others (Eimer et al. 2023): with more than one candidate,
each trains on the selection seeds (OUTPUT/select/) and the best mean on the eval prompts
wins; the winner then trains on further report seeds (OUTPUT/runs/), whose test-prompt
figures are the ones reported: nothing was selected on them. With one candidate there is
nothing to select and every seed reports. A diverged or errored run scores the metric's
worst value and counts in n. The shipped agents (OUTPUT/final/) are the report run best on
the eval prompts; the report figure describes a run of the config.

Flow: plan_retrain (validate everything, no Ray) -> run_seeds (a Tuner over candidate x seed)
for the selection, then for the report -> summarize (plain tables) -> write_outputs.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ratiotune.core.experiment import ERRORED, INFEASIBLE, Experiment, TrialResult, error_summary, load_experiment
from ratiotune.core.race_summary import ended_collapsed, honest_metric, load_summary, race_dir, searched_values
from ratiotune.core.stats import describe
from ratiotune.core.study import (
    SEARCHABLE,
    SEED_KEY,
    START_KEY,
    TEST_KEY,
    Study,
    StudyError,
    apply_overrides,
    check_launch,
    validate_study,
    write_study,
)
from ratiotune.core.values import final_row, finite, worst_end
from ratiotune.search.retrain_text import summary_markdown
from ratiotune.search.seed_grid import run_seed_grid

# The retrain eval protocol samples this many times more answer pairs per prompt than the
# search's: the search only needs to rank configs, the retrain has to measure them.
EVAL_SAMPLES_FACTOR = 4


# Reported per config, mean / sd / 95% interval over seeds. eval/ (the selection prompts) picks
# the winner and the seed whose agents ship; test/ (prompts that selected nothing) reports them.
def headline_metrics(study: Study) -> tuple[str, ...]:
    """What every retrain summary tracks: the task's headline metric and the mean reward, on eval and test
    (length-ratio: eval/in_range_fraction, eval/mean_reward, test/in_range_fraction, test/mean_reward)."""
    names = dict.fromkeys((study.metrics().headline, "mean_reward"))
    return (*(f"eval/{n}" for n in names), *(f"test/{n}" for n in names))


RANK_KEY = "rank"
RUNS_DIR = "runs"  # the report runs
SELECT_DIR = "select"  # the selection runs (more than one candidate)
PLAN_FILE = "retrain.json"  # the experiment and options a retrain started with: what `resume` replans from


@dataclass(frozen=True)
class Candidate:
    """One of the experiment's top configs, as the search saw it."""

    rank: int
    trial: TrialResult | None  # the search trial (None for the race's baseline, which may have none)
    config: dict[str, Any]  # the trial's searched values (what Ray sampled)
    search_figures: dict[str, float | None]  # the search's row for it: its best epoch by the metric
    start_checkpoint: Path | None  # --from-checkpoint: its best kept checkpoint


@dataclass(frozen=True)
class RetrainPlan:
    experiment: Experiment
    study: Study  # the retrain study: overrides, epochs and the larger eval protocol applied
    candidates: list[Candidate]
    seeds: list[int]  # report seeds: the figures come from these
    output: Path
    from_checkpoint: bool
    select_seeds: list[int] = ()  # selection seeds (more than one candidate), never reported on
    source: str = "search"  # where the candidates come from: "race" or "search" (no finished race)


def plan_retrain(
    experiment_dir: str | Path,
    *,
    top_k: int = 1,
    seeds: int = 3,
    epochs: int | None = None,
    output: str | Path | None = None,
    eval_prompts: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    from_checkpoint: bool = False,
    select_seeds: int | None = None,
    resuming: bool = False,
) -> RetrainPlan:
    """Check everything that can be checked before Ray starts; raise StudyError on bad input.

    seeds: report seeds per winner; select_seeds: selection seeds per candidate (default: seeds),
    used only with more than one candidate. resuming: the output is an interrupted retrain's
    (resume_plan): the same inputs give the same plan, so its finished runs are kept."""
    experiment = load_experiment(experiment_dir)
    base = experiment.study
    metric, mode = base.search.metric, base.search.mode
    if top_k < 1:
        raise StudyError(f"--top-k {top_k}: must be >= 1")
    if seeds < 1:
        raise StudyError(f"--seeds {seeds}: must be >= 1 (2 or more to get a spread)")
    if epochs is not None and epochs < 1:
        raise StudyError(f"--epochs {epochs}: must be >= 1")
    # A trial Ray retried to completion after a crash has an error.txt and is finished all the same.
    ranked = [t for t in experiment.ranked() if t.status(base.train.epochs) not in (ERRORED, INFEASIBLE)]
    picks, source = race_candidates(experiment, ranked)
    if not picks:
        raise StudyError(f"{experiment.directory}: no finished trial reported {metric}; nothing to retrain")
    if top_k > len(picks):
        what = "the race kept" if source == "race" else "the experiment has only"
        raise StudyError(
            f"--top-k {top_k}: {what} {len(picks)} config(s) "
            + ("(its recommendation and survivors)" if source == "race" else f"in finished trial(s) that reported {metric}")
            + f"; use --top-k {len(picks)} or fewer"
        )
    if top_k > 1 and select_seeds is not None and select_seeds < 1:
        raise StudyError(f"--select-seeds {select_seeds}: must be >= 1")
    output = Path(output).expanduser().resolve() if output else experiment.directory.resolve() / "retrain"
    if output.exists() and not resuming:
        if (output / PLAN_FILE).is_file() and not (output / "summary.json").is_file():
            raise StudyError(f"{output} holds a retrain that was interrupted; continue it with: ratiotune resume {output}")
        raise StudyError(f"{output} already exists; pass another --output (retrain results are never overwritten)")

    # The retrain study: the experiment's study, then --set, then the flags, validated once.
    # Its prompt paths point into the experiment folder (prompts/), wherever it was copied to.
    raw = base.model_dump(mode="json", exclude_none=True)
    apply_overrides(raw, overrides)
    if epochs is not None:
        raw["train"]["epochs"] = epochs
    if eval_prompts is not None:
        raw["task"]["eval_prompts"] = str(Path(eval_prompts).expanduser().resolve())
    raw["task"]["eval_samples_per_prompt"] = EVAL_SAMPLES_FACTOR * int(raw["task"]["eval_samples_per_prompt"])
    study = validate_study(raw, source="retrain study (experiment study + --set/--epochs/--eval-prompts)")
    check_launch(study)  # the prompts can be read (their texts go to the runs), the model can be had

    candidates = []
    for rank, (trial, config) in enumerate(picks[:top_k], start=1):
        start = trial.best_checkpoint(metric, mode) if from_checkpoint and trial is not None else None
        if from_checkpoint and start is None:
            raise StudyError(
                f"--from-checkpoint: config {rank} ({trial.name if trial else 'the baseline'}) kept no checkpoint with {metric}"
            )
        candidates.append(
            Candidate(
                rank=rank,
                trial=trial,
                config=config,
                search_figures=search_figures(trial, study, metric, mode) if trial is not None else {},
                start_checkpoint=start,
            )
        )
    # Fresh seeds: every search trial ran with train.seed and the race with the seeds after it;
    # selection seeds first, then the report seeds, disjoint.
    first = base.train.seed + 1 + race_seeds_used(experiment)
    n_select = (select_seeds if select_seeds is not None else seeds) if len(candidates) > 1 else 0
    select_list = [first + i for i in range(n_select)]
    seed_list = [first + n_select + i for i in range(seeds)]
    return RetrainPlan(experiment, study, candidates, seed_list, output, from_checkpoint, select_list, source)


def record_plan(plan: RetrainPlan, options: dict[str, Any]) -> None:
    """OUTPUT/PLAN_FILE: the experiment and plan_retrain's options, written before the first run trains."""
    plan.output.mkdir(parents=True)
    options = {**options, "output": str(plan.output)}
    if options.get("eval_prompts"):  # resume may run from another working directory
        options["eval_prompts"] = str(Path(options["eval_prompts"]).expanduser().resolve())
    record = {"experiment": str(plan.experiment.directory.resolve()), "options": options}
    (plan.output / PLAN_FILE).write_text(json.dumps(record, indent=2) + "\n")


def is_retrain(folder: Path) -> bool:
    return (folder / PLAN_FILE).is_file()


def is_finished(folder: Path) -> bool:
    return (folder / "summary.json").is_file()


def resume_plan(output: Path) -> RetrainPlan:
    """The plan of the interrupted retrain in `output`, made again from what it recorded."""
    record = json.loads((output / PLAN_FILE).read_text())
    return plan_retrain(record["experiment"], **record["options"], resuming=True)


def race_candidates(experiment: Experiment, ranked: list[TrialResult]) -> tuple[list[tuple[TrialResult | None, dict]], str]:
    """(search trial or None, searched values) of each candidate, best first, and where they came from.

    After a finished race: its recommendation first (the winner if the gate confirmed it, else the
    baseline), then its other surviving challengers. Without one: the search's ranking.
    """
    study = experiment.study
    summary = load_summary(experiment.directory)
    if summary is None:
        return [(t, {k: v for k, v in t.config.items() if k in SEARCHABLE}) for t in ranked], "search"
    by_config = {}
    for trial in experiment.trials:
        by_config.setdefault(json.dumps(searched_values(study, trial.config), sort_keys=True), trial)
    configs = []
    if summary["recommended"]["config"] is not None:
        configs.append(summary["recommended"]["config"])
    configs += [s["config"] for s in summary["survivors"]]
    picks, seen = [], []
    for config in configs:
        if config in seen:
            continue
        seen.append(config)
        picks.append((by_config.get(json.dumps(config, sort_keys=True)), config))
    return picks, "race"


def race_seeds_used(experiment: Experiment) -> int:
    """How many fresh seeds the experiment's race took (0 without a race)."""
    seeds = {
        int(json.loads(p.read_text()).get(SEED_KEY, experiment.study.train.seed))
        for p in race_dir(experiment.directory).glob("*/*/params.json")
    }
    return max(seeds) - experiment.study.train.seed if seeds else 0


def tracked_metrics(study: Study) -> list[str]:
    """headline_metrics, plus the study's own metric (and its test twin) when it ranks by something else."""
    metric = study.search.metric
    return list(dict.fromkeys([*headline_metrics(study), metric, honest_metric(metric)]))


def search_figures(trial: TrialResult, study: Study, metric: str, mode: str) -> dict[str, float | None]:
    """The tracked metrics from the row the search ranked this trial by (its best epoch)."""
    best = trial.best(metric, mode)
    row = next(r for r in trial.rows if r.get(metric) == best)
    return {name: row.get(name) for name in tracked_metrics(study)}


# --------------------------------------------------------------------------- run


def run_seeds(plan: RetrainPlan, candidates: list[Candidate], seeds: list[int], folder: str = RUNS_DIR) -> Experiment:
    """Train every (candidate, seed) pair as one Ray Tune trial under OUTPUT/folder; returns the runs.

    The runs folder is itself an experiment (study.yaml + Ray trial folders), so core/experiment.py
    reads it like any search. Ray must already be initialised (the CLI does it).
    """
    from ratiotune.search.launch import check_resources, largest_node_gpus

    study = plan.study
    # The cluster's largest node, not this machine's CUDA count: a run must fit on one node.
    check_resources(study, largest_node_gpus())
    runs_dir = plan.output / folder
    # Every rank x seed; the final epoch is also scored on the test prompts, with the retrain's (4x) eval pairs.
    runs = [
        {
            RANK_KEY: c.rank,
            SEED_KEY: seed,
            TEST_KEY: study.task.eval_samples_per_prompt,
            **({START_KEY: str(c.start_checkpoint)} if plan.from_checkpoint else {}),
        }
        for c in candidates
        for seed in seeds
    ]
    run_seed_grid(study, runs_dir, runs, {c.rank: c.config for c in candidates}, RANK_KEY, prefix="rank")
    return load_experiment(runs_dir)


# --------------------------------------------------------------------------- summarize


def seed_rows(plan: RetrainPlan, runs: Experiment, rank: int) -> list[dict[str, Any]]:
    """One row per run of candidate `rank`: its final-epoch figures, or the error that ended it."""
    tracked = tracked_metrics(plan.study)
    rows = []
    for run in runs.trials:
        if run.config.get(RANK_KEY) != rank:
            continue
        # The final epoch, not the best: the agents shipped are the final ones, and picking
        # each run's best epoch would bring back the optimism this command removes.
        last = final_row(run.rows)
        status = run.status(plan.study.train.epochs)
        failed = status in (ERRORED, INFEASIBLE) or run.infeasible_reason is not None
        rows.append(
            {
                "seed": run.config[SEED_KEY],
                "run": run.name,
                "epoch": last.get("epoch"),
                # A crash Ray retried to completion is no error; a diverged run is one.
                "error": (run.infeasible_reason or error_summary(run.error) or status) if failed else None,
                **{name: last.get(name) if finite(last.get(name)) and not failed else None for name in tracked},
            }
        )
    return sorted(rows, key=lambda r: r["seed"])


def seed_stats(plan: RetrainPlan, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per tracked metric: describe() over the seeds, a failed run scored as the metric's worst value
    (no survivorship: it counts in n); a metric without a known range leaves failed runs out."""
    stats = {}
    for name in tracked_metrics(plan.study):
        bounds = plan.study.metrics().value_range(name)
        worst = worst_end(bounds, plan.study.search.mode)
        values = [worst if r["error"] else r.get(name) for r in rows]
        stats[name] = describe([v for v in values if v is not None], bounds)
    return stats


def summarize(plan: RetrainPlan, runs: Experiment, selection: Experiment | None = None) -> dict[str, Any]:
    """Per candidate: its selection runs (more than one candidate); for the winner, its report runs."""
    metric, mode = plan.study.search.metric, plan.study.search.mode
    honest = honest_metric(metric)
    sign = 1 if mode == "max" else -1
    configs = []
    for candidate in plan.candidates:
        picked = None
        if selection is not None:
            rows = seed_rows(plan, selection, candidate.rank)
            picked = {"runs": rows, "stats": seed_stats(plan, rows)}
        rows = seed_rows(plan, runs, candidate.rank)
        configs.append(
            {
                "rank": candidate.rank,
                "search_trial": candidate.trial.name if candidate.trial is not None else None,
                "hyperparameters": plan.study.hyperparameters(candidate.config),
                "search": candidate.search_figures,
                "start_checkpoint": str(candidate.start_checkpoint) if candidate.start_checkpoint else None,
                "selection": picked,
                "runs": rows,
                "stats": seed_stats(plan, rows),
            }
        )
    reported = [c for c in configs if c["runs"]]
    if len(reported) != 1 or reported[0]["stats"][metric]["mean"] is None:
        raise StudyError(f"no retrain run reported {metric}; see the trial logs under {plan.output / RUNS_DIR}")
    winner = reported[0]
    clean = [r for r in winner["runs"] if r["error"] is None and r.get(metric) is not None]
    if not clean:
        raise StudyError(f"every report run of the winner failed; see the trial logs under {plan.output / RUNS_DIR}")
    # The shipped run: best on the eval prompts (selection prompts), never on test.
    best_run = max(clean, key=lambda r: sign * r[metric])
    # As the race counts them: a failed run, or one that ended at its figure's worst end or the reward's floor.
    collapsed = sum(
        1 for r in winner["runs"] if r["error"] or ended_collapsed(plan.study, r.get(honest), r.get("test/mean_reward"))
    )
    return {
        "experiment": str(plan.experiment.directory.resolve()),
        "candidates_from": plan.source,
        "metric": metric,
        "mode": mode,
        "selection_seeds": list(plan.select_seeds),
        "report_seeds": plan.seeds,
        "seeds": plan.seeds,
        "epochs": plan.study.train.epochs,
        "from_checkpoint": plan.from_checkpoint,
        "honest_metric": honest,
        "eval_protocol": {
            "prompts": plan.study.task.eval_prompts,
            "test_prompts": plan.study.task.test_prompts,
            "samples_per_prompt": plan.study.task.eval_samples_per_prompt,
            "search_samples_per_prompt": plan.experiment.study.task.eval_samples_per_prompt,
        },
        "configs": configs,
        "winner": {
            "rank": winner["rank"],
            "search_trial": winner["search_trial"],
            "seed": best_run["seed"],
            "run": best_run["run"],
            "search_pick_holds": winner["rank"] == 1,
            "collapse": {"collapsed": collapsed, "n": len(winner["runs"])},
        },
    }


def pick_winner(plan: RetrainPlan, selection: Experiment) -> Candidate:
    """The candidate with the best mean on the eval prompts over the selection seeds (failed runs scored worst)."""
    metric = plan.study.search.metric
    sign = 1 if plan.study.search.mode == "max" else -1
    scored = []
    for candidate in plan.candidates:
        mean = seed_stats(plan, seed_rows(plan, selection, candidate.rank))[metric]["mean"]
        if mean is not None:
            scored.append((sign * mean, -candidate.rank, candidate))
    if not scored:
        raise StudyError(f"no selection run reported {metric}; see the trial logs under {plan.output / SELECT_DIR}")
    return max(scored, key=lambda item: item[:2])[2]


# --------------------------------------------------------------------------- outputs


def final_study(plan: RetrainPlan, summary: dict[str, Any]) -> Study:
    """A study that reproduces the winner: its values fixed in train:, nothing searched."""
    winner = next(c for c in summary["configs"] if c["rank"] == summary["winner"]["rank"])
    raw = plan.study.model_dump(mode="json", exclude_none=True)
    raw["name"] = f"{plan.study.name}-final"
    raw["train"].update(winner["hyperparameters"])
    raw["train"]["seed"] = summary["winner"]["seed"]
    if plan.from_checkpoint:
        # Continued runs trained checkpoint epochs + E in total; from scratch that is the budget.
        start = next(r for r in winner["runs"] if r["run"] == summary["winner"]["run"])
        raw["train"]["epochs"] = int(start["epoch"])
    raw["search"].update({"space": {}, "num_samples": 1, "max_concurrent_trials": 1, "scheduler": {"type": "fifo"}})
    raw["search"].pop("baseline", None)
    return validate_study(raw, source="final/config.yaml")


def write_outputs(plan: RetrainPlan, runs: Experiment, summary: dict[str, Any]) -> Path:
    """OUTPUT/final/{agent_0,agent_1,config.yaml}, OUTPUT/summary.json and summary.md."""
    final = plan.output / "final"
    run = next(t for t in runs.trials if t.name == summary["winner"]["run"])
    checkpoint = run.latest_checkpoint()
    if checkpoint is None:
        raise StudyError(f"winning run {run.name} kept no checkpoint under {run.directory}")
    shutil.rmtree(final, ignore_errors=True)  # a copy a kill cut short (summary.json, written last, is absent)
    final.mkdir(parents=True)
    for agent in ("agent_0", "agent_1"):
        shutil.copytree(checkpoint / agent, final / agent)
    write_study(final, final_study(plan, summary), "config.yaml")  # with final/prompts/
    summary["winner"]["final_dir"] = str(final)
    summary["winner"]["checkpoint"] = str(checkpoint)
    (plan.output / "summary.json").write_text(json.dumps(summary, indent=2))
    (plan.output / "summary.md").write_text(summary_markdown(summary))
    return final


def retrain(plan: RetrainPlan, log=print) -> dict[str, Any]:
    selection = None
    candidates = plan.candidates
    if len(candidates) > 1:
        log(f"retrain: selection: {len(candidates)} configs x seeds {plan.select_seeds}")
        selection = run_seeds(plan, candidates, plan.select_seeds, SELECT_DIR)
        candidates = [pick_winner(plan, selection)]
    log(f"retrain: report: rank {candidates[0].rank} x seeds {plan.seeds}")
    runs = run_seeds(plan, candidates, plan.seeds, RUNS_DIR)
    summary = summarize(plan, runs, selection)
    write_outputs(plan, runs, summary)
    return summary
