"""Retrain: re-run an experiment's top-k configs over fresh seeds, pick the winner, ship its agents.

A search ranks configs by one noisy run each (one seed, sampled rollouts, a small eval
set), so its best figure is optimistic. Here every top config is trained again from
scratch (or continued from its best checkpoint) with S fresh seeds, through the same
Ray Tune trainable as the search, and every run is scored on a larger fixed eval
protocol. The winner is the config with the best mean over seeds; its best seed's
final agents go to OUTPUT/final/.

Flow: plan_retrain (validate everything, no Ray) -> run_retrain (Tuner over a grid of
rank x seed) -> summarize (plain tables) -> write_outputs.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ratiotune.race import honest_metric
from ratiotune.results import ERRORED, INFEASIBLE, STUDY_FILE, Experiment, TrialResult, error_summary, load_experiment
from ratiotune.stats import format_interval, t_interval
from ratiotune.study import (
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

# The retrain eval protocol samples this many times more answer pairs per prompt than the
# search's: the search only needs to rank configs, the retrain has to measure them.
EVAL_SAMPLES_FACTOR = 4
# Reported per config, mean / sd / 95% interval over seeds. eval/ (the selection prompts) picks
# the winner and the seed whose agents ship; test/ (prompts that selected nothing) reports them.
METRICS = ("eval/in_range_fraction", "eval/mean_reward", "test/in_range_fraction", "test/mean_reward")
RANK_KEY = "rank"
RUNS_DIR = "runs"



@dataclass(frozen=True)
class Candidate:
    """One of the experiment's top configs, as the search saw it."""

    rank: int
    trial: TrialResult
    config: dict[str, Any]  # the trial's searched values (what Ray sampled)
    search_figures: dict[str, float | None]  # the search's row for it: its best epoch by the metric
    start_checkpoint: Path | None  # --from-checkpoint: its best kept checkpoint


@dataclass(frozen=True)
class RetrainPlan:
    experiment: Experiment
    study: Study  # the retrain study: overrides, epochs and the larger eval protocol applied
    candidates: list[Candidate]
    seeds: list[int]
    output: Path
    from_checkpoint: bool


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
) -> RetrainPlan:
    """Check everything that can be checked before Ray starts; raise StudyError on bad input."""
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
    if not ranked:
        raise StudyError(f"{experiment.directory}: no finished trial reported {metric}; nothing to retrain")
    if top_k > len(ranked):
        raise StudyError(
            f"--top-k {top_k}: the experiment has only {len(ranked)} finished trial(s) that reported {metric}; "
            f"use --top-k {len(ranked)} or fewer"
        )
    output = Path(output).expanduser().resolve() if output else experiment.directory.resolve() / "retrain"
    if output.exists():
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
    for rank, trial in enumerate(ranked[:top_k], start=1):
        start = trial.best_checkpoint(metric, mode) if from_checkpoint else None
        if from_checkpoint and start is None:
            raise StudyError(f"--from-checkpoint: trial {trial.name} (rank {rank}) kept no checkpoint with {metric}")
        candidates.append(
            Candidate(
                rank=rank,
                trial=trial,
                config={k: v for k, v in trial.config.items() if k in SEARCHABLE},
                search_figures=search_figures(trial, metric, mode),
                start_checkpoint=start,
            )
        )
    # Fresh seeds: every search trial ran with train.seed and the race with the seeds after it.
    first = base.train.seed + 1 + race_seeds_used(experiment)
    seed_list = [first + i for i in range(seeds)]
    return RetrainPlan(experiment, study, candidates, seed_list, output, from_checkpoint)


def race_seeds_used(experiment: Experiment) -> int:
    """How many fresh seeds the experiment's race took (0 without a race)."""
    from ratiotune.race import race_dir

    seeds = {
        int(json.loads(p.read_text()).get(SEED_KEY, experiment.study.train.seed))
        for p in race_dir(experiment.directory).glob("*/*/params.json")
    }
    return max(seeds) - experiment.study.train.seed if seeds else 0


def tracked_metrics(metric: str) -> list[str]:
    """METRICS, plus the study's own metric (and its test twin) when it ranks by something else."""
    return list(dict.fromkeys([*METRICS, metric, honest_metric(metric)]))


def search_figures(trial: TrialResult, metric: str, mode: str) -> dict[str, float | None]:
    """The tracked metrics from the row the search ranked this trial by (its best epoch)."""
    best = trial.best(metric, mode)
    row = next(r for r in trial.rows if r.get(metric) == best)
    return {name: row.get(name) for name in tracked_metrics(metric)}


# --------------------------------------------------------------------------- run


def run_retrain(plan: RetrainPlan) -> Experiment:
    """Train every (config, seed) pair as one Ray Tune trial; returns the runs as an experiment.

    The runs folder is itself an experiment (study.yaml + Ray trial folders), so results.py
    reads it like any search. Ray must already be initialised (the CLI does it).
    """
    from ray import tune

    from ratiotune.search import check_resources, largest_node_gpus, make_trainable, seed_runs_config

    study = plan.study
    # The cluster's largest node, not this machine's CUDA count: a run must fit on one node.
    check_resources(study, largest_node_gpus())
    runs_dir = plan.output / RUNS_DIR
    runs_dir.mkdir(parents=True)
    write_study(runs_dir, study, STUDY_FILE)

    by_rank = {c.rank: c for c in plan.candidates}
    # grid_search makes the rank x seed product; sample_from then fills each run's searched
    # values (and start checkpoint) from its rank, so params.json shows the full config.
    param_space: dict[str, Any] = {
        RANK_KEY: tune.grid_search(list(by_rank)),
        SEED_KEY: tune.grid_search(plan.seeds),
    }
    for name in plan.candidates[0].config:
        param_space[name] = tune.sample_from(lambda spec, name=name: by_rank[spec.config[RANK_KEY]].config[name])
    # The final epoch is also scored on the test prompts, with the retrain's (4x) eval pairs.
    param_space[TEST_KEY] = study.task.eval_samples_per_prompt
    if plan.from_checkpoint:
        param_space[START_KEY] = tune.sample_from(
            lambda spec: str(by_rank[spec.config[RANK_KEY]].start_checkpoint)
        )

    tuner = tune.Tuner(
        make_trainable(study),
        param_space=param_space,
        tune_config=tune.TuneConfig(
            max_concurrent_trials=study.search.max_concurrent_trials,
            trial_dirname_creator=lambda t: f"rank{t.config[RANK_KEY]}_seed{t.config[SEED_KEY]}",
        ),
        run_config=seed_runs_config(study, RUNS_DIR, str(plan.output), [RANK_KEY, SEED_KEY]),
    )
    tuner.fit()
    return load_experiment(runs_dir)


# --------------------------------------------------------------------------- summarize


def summarize(plan: RetrainPlan, runs: Experiment) -> dict[str, Any]:
    """Per config: every seed's final-epoch figures, their statistics, and the search's figure."""
    metric, mode = plan.study.search.metric, plan.study.search.mode
    tracked = tracked_metrics(metric)
    configs = []
    for candidate in plan.candidates:
        seed_runs = []
        for run in runs.trials:
            if run.config.get(RANK_KEY) != candidate.rank:
                continue
            # The final epoch, not the best: the agents shipped are the final ones, and picking
            # each run's best epoch would bring back the optimism this command removes.
            last = max(run.rows, key=lambda r: r.get("epoch", 0), default={})
            status = run.status(plan.study.train.epochs)
            failed = status in (ERRORED, INFEASIBLE)
            seed_runs.append(
                {
                    "seed": run.config[SEED_KEY],
                    "run": run.name,
                    "epoch": last.get("epoch"),
                    # A crash Ray retried to completion is no error; a diverged run is one (its NaN
                    # row would otherwise poison the mean and the interval).
                    "error": (run.infeasible_reason or error_summary(run.error) or status) if failed else None,
                    **{name: last.get(name) if _finite(last.get(name)) else None for name in tracked},
                }
            )
        seed_runs.sort(key=lambda r: r["seed"])
        done = [r for r in seed_runs if r["error"] is None and r.get(metric) is not None]
        configs.append(
            {
                "rank": candidate.rank,
                "search_trial": candidate.trial.name,
                "hyperparameters": plan.study.hyperparameters(candidate.config),
                "search": candidate.search_figures,
                "start_checkpoint": str(candidate.start_checkpoint) if candidate.start_checkpoint else None,
                "runs": seed_runs,
                "stats": {name: t_interval([r[name] for r in done if r.get(name) is not None]) for name in tracked},
            }
        )
    scored = [c for c in configs if c["stats"][metric]["mean"] is not None]
    if not scored:
        raise StudyError(f"no retrain run reported {metric}; see the trial logs under {plan.output / RUNS_DIR}")
    # Both picks on the selection prompts (eval/); the figures a user should expect are test/.
    pick = max if mode == "max" else min
    winner = pick(scored, key=lambda c: c["stats"][metric]["mean"])
    best_run = pick(
        (r for r in winner["runs"] if r["error"] is None and r.get(metric) is not None), key=lambda r: r[metric]
    )
    return {
        "experiment": str(plan.experiment.directory.resolve()),
        "metric": metric,
        "mode": mode,
        "seeds": plan.seeds,
        "epochs": plan.study.train.epochs,
        "from_checkpoint": plan.from_checkpoint,
        "honest_metric": honest_metric(metric),
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
        },
    }


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
    final.mkdir(parents=True)
    for agent in ("agent_0", "agent_1"):
        shutil.copytree(checkpoint / agent, final / agent)
    write_study(final, final_study(plan, summary), "config.yaml")  # with final/prompts/
    summary["winner"]["final_dir"] = str(final)
    summary["winner"]["checkpoint"] = str(checkpoint)
    (plan.output / "summary.json").write_text(json.dumps(summary, indent=2))
    (plan.output / "summary.md").write_text(summary_markdown(summary))
    return final


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def summary_markdown(summary: dict[str, Any]) -> str:
    metric = summary["metric"]
    honest = summary["honest_metric"]
    protocol = summary["eval_protocol"]
    names = {"learning_rate": "lr", "num_generations": "gens", "max_new_tokens": "tokens", "reward_scale": "scale"}
    header = ["rank", "search trial", *names.values(), f"search {metric} (optimistic)",
              f"retrain {metric} mean ± sd [95% CI] (selects)", f"retrain {honest} mean ± sd [95% CI] (reports)"]
    lines = [
        f"# Retrain of {summary['experiment']}",
        "",
        f"{len(summary['seeds'])} seeds ({', '.join(map(str, summary['seeds']))}) per config, "
        + (f"{summary['epochs']} more epochs from each trial's best checkpoint" if summary["from_checkpoint"]
           else f"{summary['epochs']} epochs from scratch")
        + f"; final epoch only, {protocol['samples_per_prompt']} answer pairs per prompt "
        f"(the search used {protocol['search_samples_per_prompt']}). The winner and its shipped seed are picked on "
        f"{protocol['prompts']} ({metric}); the figures to expect are on {protocol['test_prompts']} ({honest}), "
        "prompts that picked nothing. Search figures are the search's own row for the trial (its best epoch).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for c in summary["configs"]:
        hp = c["hyperparameters"]
        cells = [str(c["rank"]), c["search_trial"], f"{hp['learning_rate']:.3g}", str(hp["num_generations"]),
                 str(hp["max_new_tokens"]), f"{hp['reward_scale']:g}", _fmt(c["search"].get(metric)),
                 format_interval(c["stats"][metric]), format_interval(c["stats"][honest])]
        lines.append("| " + " | ".join(cells) + " |")
    w = summary["winner"]
    winner = next(c for c in summary["configs"] if c["rank"] == w["rank"])
    stats, figure = winner["stats"].get(honest), winner["search"].get(metric)
    failed = [r for c in summary["configs"] for r in c["runs"] if r["error"]]
    if failed:
        lines += ["", f"{len(failed)} run(s) failed and are left out of the statistics: "
                  + "; ".join(f"{r['run']}: {r['error']}" for r in failed)]
    lines += ["", f"Winner by mean {metric}: rank {w['rank']} ({w['search_trial']}); final agents from seed {w['seed']} ({w['run']}); "
              f"expect {honest} {format_interval(stats)} on unseen prompts."]
    lines.append(
        "The search's pick (rank 1) holds up: it is still the best by mean over seeds."
        if w["search_pick_holds"]
        else f"The search's pick (rank 1) does not hold up: rank {w['rank']} beats it by mean over seeds."
    )
    if stats and stats.get("ci95") and figure is not None:
        low, high = stats["ci95"]
        where = "above" if figure > high else "below" if figure < low else "inside"
        lines.append(
            f"The winner's search figure {figure:.3f} is {where} its retrain {honest} 95% interval [{low:.3f}, {high:.3f}]"
            + (" (the search was optimistic)." if where == "above" else ".")
        )
    return "\n".join(lines) + "\n"


def retrain(plan: RetrainPlan) -> dict[str, Any]:
    runs = run_retrain(plan)
    summary = summarize(plan, runs)
    write_outputs(plan, runs, summary)
    return summary
