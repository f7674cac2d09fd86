"""A real study through the CLI: Ray Tune + Optuna + comlrl on builtin:tiny, W&B offline."""

import json
import re

import pytest
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import SMALL_RACE, run_cli
from ratiotune.core.experiment import load_experiment

METRICS = ("train/mean_reward", "train/in_range_fraction", "eval/mean_reward", "eval/in_range_fraction")


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """3 trials x 2 epochs, searched learning rate, --wandb in offline mode, then the race:
    the baseline and the top two challengers on fresh seeds 1 and 2 (paired: the selection; one
    challenger would have nothing to be chosen from), then the winner (or, if the baseline held,
    the best challenger) and the baseline on seeds 3 and 4 (10 runs)."""
    from conftest import tiny_study_dict
    import yaml

    root = tmp_path_factory.mktemp("search")
    study = tiny_study_dict(
        root / "prompts",
        search={"num_samples": 3, "max_concurrent_trials": 2, "objective_window": 2},
        # One look (second_look_seeds 0): the seeds asserted below stay fixed; test_race.py covers the second look.
        race=SMALL_RACE,
    )
    (root / "study.yaml").write_text(yaml.safe_dump(study))
    wandb_dir = root / "wandb"
    wandb_dir.mkdir()
    result = run_cli(
        "search",
        str(root / "study.yaml"),
        "--storage",
        str(root / "results"),
        "--name",
        "exp",
        "--wandb",
        "--wandb-project",
        "ratiotune-tests",
        env={"WANDB_MODE": "offline", "WANDB_DIR": str(wandb_dir)},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {
        "dir": root / "results" / "exp",
        "stdout": result.stdout,
        "stderr": result.stderr,
        "wandb": wandb_dir,
        "study": root / "study.yaml",
    }


def trial_dirs(experiment_dir):
    return sorted(d for d in experiment_dir.iterdir() if (d / "params.json").is_file())


def rows(trial_dir):
    return [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]


def test_every_trial_reports_the_four_metrics_every_epoch(experiment):
    trials = trial_dirs(experiment["dir"])
    assert len(trials) == 3
    for trial in trials:
        results = rows(trial)
        assert [r["epoch"] for r in results] == [1, 2]
        for result in results:
            for name in METRICS:
                assert 0.0 <= result[name] <= 1.0, (trial.name, name, result[name])


def test_ray_reads_the_experiment(experiment):
    from ray.tune import ExperimentAnalysis

    analysis = ExperimentAnalysis(str(experiment["dir"]))
    assert len(analysis.trials) == 3
    assert all("eval/in_range_fraction" in df.columns for df in analysis.trial_dataframes.values())


def test_each_trial_keeps_at_most_num_to_keep_checkpoints(experiment):
    for trial in trial_dirs(experiment["dir"]):
        kept = [p for p in trial.iterdir() if p.name.startswith("checkpoint_")]
        assert 1 <= len(kept) <= 1, (trial.name, kept)


def test_every_epoch_reports_the_objective_as_the_trailing_mean(experiment):
    for trial in trial_dirs(experiment["dir"]):
        values = [r["eval/in_range_fraction"] for r in rows(trial)]
        objectives = [r["search/objective"] for r in rows(trial)]
        # objective_window 2: epoch 1 alone, then the mean of epochs 1 and 2.
        assert objectives == pytest.approx([values[0], (values[0] + values[1]) / 2]), trial.name


def test_the_baseline_is_a_trial_of_the_search(experiment):
    configs = [json.loads((t / "params.json").read_text()) for t in trial_dirs(experiment["dir"])]
    assert {"learning_rate": 1e-3} in [{k: v for k, v in c.items() if k == "learning_rate"} for c in configs]


def test_best_prints_the_verdict_both_configs_and_the_recommended_agents(experiment):
    summary = json.loads((experiment["dir"] / "race" / "summary.json").read_text())
    result = run_cli("best", str(experiment["dir"]))
    assert result.returncode == 0, result.stderr
    confirmed_ = summary["gate"]["recommend"]
    verdict = "# confirmed: " if confirmed_ else "# not confirmed: the baseline stands ("
    assert result.stdout.startswith(verdict), result.stdout
    assert re.search(r"search trial (\S+)\)", result.stdout).group(1) == summary["winner"]["search_trial"]
    for label, entry in (
        ("winner" if not summary["race_kept_baseline"] else "best challenger", summary["winner"]),
        ("baseline", summary["baseline"]),
    ):
        stats = entry["stats"]
        assert f"# {label} (" in result.stdout
        assert f"mean {stats['mean']:.3f}, sd {stats['sd']:.3f}, 95% CI of the mean" in result.stdout, result.stdout
    assert "a new run collapses with chance" in result.stdout and "Wilson interval" in result.stdout and "±" not in result.stdout
    assert "PI" not in result.stdout  # no normal-theory interval of one bimodal run
    assert "# selection figure (optimistic" in result.stdout
    fragment = yaml.safe_load("\n".join(line for line in result.stdout.splitlines() if not line.startswith("#")))
    shipped = summary["winner"] if confirmed_ else summary["baseline"]
    assert fragment["train"]["learning_rate"] == pytest.approx(shipped["hyperparameters"]["learning_rate"])

    # The agents `best` names are the recommended config's confirmation runs: what the figure describes.
    agents = re.findall(r"^#   (\S+)$", result.stdout, flags=re.MULTILINE)
    assert agents and agents == summary["recommended"]["agents"]
    confirm_dir = experiment["dir"] / "race" / "confirm"
    for checkpoint in agents:
        assert str(confirm_dir) in checkpoint
        for agent in ("agent_0", "agent_1"):
            model = AutoModelForCausalLM.from_pretrained(f"{checkpoint}/{agent}")
            tokenizer = AutoTokenizer.from_pretrained(f"{checkpoint}/{agent}")
            prompt = tokenizer(["Tell a joke about penguins:"], return_tensors="pt")
            out = model.generate(**prompt, max_new_tokens=5, do_sample=False)
            assert out.shape[1] > prompt.input_ids.shape[1]
    # An ended stage keeps each run's final agents and drops what only continuing it needs (seed_grid).
    race_checkpoints = list((experiment["dir"] / "race").glob("*/*/checkpoint_*"))
    assert race_checkpoints and all((c / "agent_0").is_dir() and (c / "agent_1").is_dir() for c in race_checkpoints)
    assert not [p for c in race_checkpoints for p in [*c.glob("optimizer_*.pt"), c / "trainer_state"] if p.exists()]


def test_the_race_object_replayed_on_the_recorded_runs_gives_the_recorded_verdict(experiment):
    """core/race_protocol.Race, told the figures of the runs this race recorded on disk, asks for exactly
    those runs and reaches the verdict summary.json holds: the rules live in that one object."""
    from ratiotune.core.intensify import RacePlan
    from ratiotune.core.race_protocol import Race
    from ratiotune.core.study import SEED_KEY
    from ratiotune.core.race_summary import BASELINE, CONTENDER_KEY, confirmation_value, run_value
    from ratiotune.search.race import fresh_seeds

    directory = experiment["dir"]
    study = load_experiment(directory).study
    summary = json.loads((directory / "race" / "summary.json").read_text())
    names = list(summary["selection"]["contenders"])  # in CONTENDER_KEY order: baseline, challengers, runners-up
    recorded = {}
    for folder in sorted(p for p in (directory / "race").iterdir() if p.is_dir()):
        for run in load_experiment(folder).trials:
            recorded[(names[run.config[CONTENDER_KEY]], run.config[SEED_KEY])] = run
    plan = RacePlan(**summary["plan"])
    race = Race(
        names[: 1 + plan.challengers],
        runners_up=names[1 + plan.challengers :],
        settings=study.race,
        plan=plan,
        baseline=BASELINE,
        seed=lambda j: fresh_seeds(study, j, 1)[0],
        worst=0.0,
    )
    asked = []
    while (stage := race.ask()) is not None:
        for request in stage.requests:
            run = recorded[(request.contender, request.seed)]
            asked.append((request.contender, request.seed))
            if request.test:
                race.tell(request, *confirmation_value(study, run))
            else:
                race.tell(request, run_value(study, run))
    result = race.result()
    assert sorted(asked) == sorted(recorded)  # every recorded run, no other
    assert result.recommend == summary["gate"]["recommend"] and result.shown == summary["winner"]["search_trial"]
    assert result.gate.margin_lower == summary["gate"]["margin_lower"]
    assert summary["recommended"]["which"] == ("winner" if result.recommend else "baseline")


def test_a_run_prints_a_short_progress_view_without_tracebacks(experiment):
    """The search and its race (with a checkpoint every epoch) as a newcomer sees them: a
    header, one line per trial event, the result; no Ray table, warning, error or traceback.

    A checkpoint used to be staged in Ray's trial folder, which Ray's experiment-state sync copies
    while the checkpoint is written or removed: a FileNotFoundError traceback, three in a run like
    this one (trainable.checkpoint_staging_dir). Ray's own log goes to ray.log instead."""
    output = experiment["stdout"] + experiment["stderr"]
    assert "Traceback" not in output and "ERROR" not in output and "WARNING" not in output, output
    # Nor a line of Ray's C++ log ("[2026-12-05 06:49:04,731 E 4595 4595] core_worker.cc:2465: Actor with class
    # name: '_WandbLoggingActor' ..." reached the terminal under --wandb: search/wandb_logger.py).
    assert not re.search(r"^\[[\d-]+ [\d:,]+ [DIWEF] \d+ \d+\]", output, re.M), output
    assert "== Status ==" not in output and "Trial status" not in output, output
    lines = output.splitlines()
    assert len(lines) < 70, output  # 233 before (stdout + stderr)
    assert lines[0].startswith("study exp (") and any(line.startswith("plan: 3 trials (tpe sampler") for line in lines), output
    started = [line for line in lines if re.match(r"\[\d+:\d\d\] trial_\w+ started \(\d of 3\): lr ", line)]
    finished = [line for line in lines if re.match(r"\[\d+:\d\d\] trial_\w+ finished at epoch 2: objective ", line)]
    assert len(started) == 3 and len(finished) == 3, output
    assert all(" done, " in line and " | best " in line for line in finished), output
    # One line per race run that ended, naming the baseline or the challenger by its values.
    race_runs = json.loads((experiment["dir"] / "race" / "summary.json").read_text())["compute"]["race_runs"]
    run_lines = [line for line in lines if re.search(r"(the baseline|challenger lr \S+), seed \d+: epoch 2, objective ", line)]
    assert len(run_lines) == race_runs > 0 and any("the baseline, seed" in line for line in run_lines), output
    assert "contender" not in output, output
    # The plan states the race's ceiling; the verdict is printed once (`best` prints the figures).
    assert any(
        re.match(r"race plan: .* at most \d+ runs \(\d+ trial-epochs\) with a second look and fallbacks", line) for line in lines
    ), output
    assert len([line for line in lines if re.match(r"\s*(not )?confirmed: ", line)]) == 1, output
    log = (experiment["dir"] / "ray.log").read_text()
    assert "Started a local Ray instance" in log
    assert not list(experiment["dir"].rglob(".checkpoint-staging*"))  # each trial removed its own


def test_search_prints_the_best_trials_and_checkpoint(experiment):
    assert "best checkpoint:" in experiment["stdout"]
    assert "trial_" in experiment["stdout"]


def test_the_race_confirms_on_seeds_and_prompts_that_selected_nothing(experiment):
    from ratiotune.core.experiment import load_experiment

    race = experiment["dir"] / "race"
    summary = json.loads((race / "summary.json").read_text())
    selection = load_experiment(race / "round-0")
    confirmation = load_experiment(race / "confirm")
    # Paired: the baseline (c0) and the challengers (c1, c2) on the same fresh seeds.
    assert sorted(t.name for t in selection.trials) == [f"c{c}_seed{s}" for c in range(3) for s in (1, 2)]
    assert summary["seeds"] == {"selection": [1, 2], "confirmation": [3, 4]}
    assert len(confirmation.trials) == 4  # the winner (or the challenger beside a baseline that held) and the baseline
    assert {t.config["seed"] for t in confirmation.trials} == {3, 4}  # never the search's 0 nor the selection's
    for run in confirmation.trials:
        last = max(run.rows, key=lambda r: r["epoch"])
        assert last["epoch"] == 2 and 0.0 <= last["test/in_range_fraction"] <= 1.0
        assert all("test/in_range_fraction" not in r for r in run.rows if r["epoch"] < 2)
        assert run.config["test_samples_per_prompt"] == 4 * 2  # 4x the search's eval pairs
        assert (run.latest_checkpoint() / "agent_0").is_dir()  # the final agents are kept
    per_seed = summary["winner"]["per_seed"]
    assert [s["seed"] for s in per_seed] == [3, 4]
    assert summary["winner"]["stats"]["mean"] == pytest.approx(sum(s["scored"] for s in per_seed) / 2)
    assert summary["protocol"]["prompts"] == "builtin:test"
    assert summary["margin"]["n"] == 2 and summary["baseline"]["config"] == {"learning_rate": 1e-3}
    assert "on fresh seeds" in experiment["stdout"] and "optimistic" in experiment["stdout"]
    assert "confirmed" in experiment["stdout"]


def test_resume_finishes_a_race_that_was_cut_short(experiment, tmp_path):
    """A copy whose confirmation round never ran: `resume` runs only that round, reads round 0 back."""
    import shutil

    copy = tmp_path / "exp"
    shutil.copytree(experiment["dir"], copy)
    shutil.rmtree(copy / "race" / "confirm")
    (copy / "race" / "summary.json").unlink()
    round0 = (copy / "race" / "round-0").stat().st_mtime_ns
    result = run_cli("resume", str(copy))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "race confirm (confirmation on the test prompts)" in result.stdout and "race round-0 (selection)" in result.stdout
    before = json.loads((experiment["dir"] / "race" / "summary.json").read_text())
    after = json.loads((copy / "race" / "summary.json").read_text())
    assert after["winner"]["search_trial"] == before["winner"]["search_trial"]
    assert [s["seed"] for s in after["winner"]["per_seed"]] == [3, 4]
    assert after["gate"]["recommend"] == before["gate"]["recommend"]
    assert (copy / "race" / "round-0").stat().st_mtime_ns == round0  # read back, not re-run
    again = run_cli("resume", str(copy), timeout=120)
    assert again.returncode == 0 and "nothing to resume" in again.stdout


def test_retrain_starts_from_the_race_recommendation_on_seeds_the_race_never_used(experiment):
    output = experiment["dir"].parent / "retrain"
    done = run_cli("retrain", str(experiment["dir"]), "--seeds", "2", "--epochs", "1", "--output", str(output))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    race = json.loads((experiment["dir"] / "race" / "summary.json").read_text())
    summary = json.loads((output / "summary.json").read_text())
    assert summary["candidates_from"] == "race"
    (config,) = summary["configs"]
    assert config["hyperparameters"] == race["recommended"]["hyperparameters"]
    # The race used seeds 1-2 (selection) and 3-4 (confirmation): one candidate, nothing to select.
    assert summary["selection_seeds"] == [] and summary["report_seeds"] == [5, 6]
    assert "reported on seeds 5, 6" in done.stdout
    assert (output / "final" / "agent_0").is_dir() and (output / "final" / "agent_1").is_dir()


def test_wandb_offline_writes_one_run_per_trial_with_the_metric(experiment):
    runs = sorted(experiment["wandb"].rglob("offline-run-*"))
    assert len(runs) == 3, runs
    for run in runs:
        payload = b"".join(p.read_bytes() for p in run.glob("*.wandb"))
        assert b"eval/in_range_fraction" in payload


def test_an_existing_experiment_is_never_overwritten(experiment):
    before = sorted(p.name for p in experiment["dir"].iterdir())
    result = run_cli("search", str(experiment["study"]), "--storage", str(experiment["dir"].parent), "--name", "exp", timeout=60)
    assert result.returncode == 2
    assert "already exists" in result.stderr and "--name" in result.stderr
    assert sorted(p.name for p in experiment["dir"].iterdir()) == before


def test_best_on_a_folder_that_is_not_an_experiment(tmp_path):
    result = run_cli("best", str(tmp_path), timeout=60)
    assert result.returncode == 2 and "not a ratiotune experiment" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_optuna_study_holds_the_trials_and_the_race_winner(experiment):
    """optuna.journal (docs/dashboard.md): every trial, and the race's winner and honest figure as study attrs."""
    import optuna

    from ratiotune.search.optuna_study import open_storage, read_record

    location, name = read_record(experiment["dir"])
    assert (name, location) == ("exp", str(experiment["dir"] / "optuna.journal"))
    study = optuna.load_study(study_name=name, storage=open_storage(location))
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3
    summary = json.loads((experiment["dir"] / "race" / "summary.json").read_text())
    assert study.user_attrs["race_winner"] == summary["winner"]["search_trial"]
    assert "on fresh seeds" in study.user_attrs["honest_figure"]
