"""`ratiotune retrain` end to end on a tiny experiment: real Ray, comlrl and builtin:tiny."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import run_cli as _run_cli
from conftest import tiny_study_dict
from ratiotune.cli import main
from ratiotune.core.stats import describe as t_interval
from ratiotune.core.experiment import load_experiment
from ratiotune.core.study import validate_study


def run_cli(*args, **kwargs):
    # A fresh local Ray per command: without an address, ray.init() joins a cluster another
    # process started with `ray start` on this machine, and dies with it.
    return _run_cli(*args, env={"RAY_ADDRESS": "local"}, **kwargs)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """A 3-trial, 2-epoch search on builtin:tiny, shared by every test here."""
    root = tmp_path_factory.mktemp("retrain")
    study = tiny_study_dict(root / "prompts", search={"num_samples": 3}, checkpoint={"num_to_keep": 2})
    path = root / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    done = run_cli("search", str(path), "--storage", str(root / "results"), "--name", "tiny")
    assert done.returncode == 0, done.stderr[-3000:]
    assert not any(t.error for t in load_experiment(root / "results" / "tiny").trials), done.stdout[-3000:]
    return root / "results" / "tiny"


@pytest.fixture(scope="module")
def retrained(experiment):
    output = experiment.parent / "retrain-top2"
    done = run_cli("retrain", str(experiment), "--top-k", "2", "--seeds", "2", "--epochs", "2", "--output", str(output))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Winner: rank" in done.stdout
    return output


def test_two_configs_select_on_some_seeds_and_the_winner_reports_on_others(experiment, retrained):
    summary = json.loads((retrained / "summary.json").read_text())
    ranked = load_experiment(experiment).ranked()
    # No race in this experiment: the candidates are the search's top two, and the summary says so.
    assert summary["candidates_from"] == "search"
    assert [c["search_trial"] for c in summary["configs"]] == [t.name for t in ranked[:2]]
    assert summary["eval_protocol"]["samples_per_prompt"] == 4 * summary["eval_protocol"]["search_samples_per_prompt"]
    assert summary["selection_seeds"] == [1, 2] and summary["report_seeds"] == [3, 4]
    for config in summary["configs"]:
        runs = config["selection"]["runs"]
        assert [run["seed"] for run in runs] == [1, 2]
        assert all(run["error"] is None and run["epoch"] == 2 for run in runs)
        for metric in ("eval/in_range_fraction", "eval/mean_reward", "test/in_range_fraction", "test/mean_reward"):
            values = [run[metric] for run in runs]
            assert config["selection"]["stats"][metric] == t_interval(values, (0.0, 1.0))  # same floats, same order: exact
        assert config["search"]["eval/in_range_fraction"] is not None
    winner = summary["winner"]
    means = [c["selection"]["stats"]["eval/in_range_fraction"]["mean"] for c in summary["configs"]]
    assert means[winner["rank"] - 1] == max(means)
    # Only the winner trains on the report seeds; its figures come from those alone.
    reported = [c for c in summary["configs"] if c["runs"]]
    assert [c["rank"] for c in reported] == [winner["rank"]]
    assert [r["seed"] for r in reported[0]["runs"]] == [3, 4] and winner["seed"] in (3, 4)
    table = (retrained / "summary.md").read_text()
    assert table.count("\n| ") == 3  # header + one row per config
    assert "Selected on seeds 1, 2" in table and "reported on seeds 3, 4" in table and "±" not in table


def test_final_agents_load_and_generate(retrained):
    for agent in ("agent_0", "agent_1"):
        directory = retrained / "final" / agent
        tokenizer = AutoTokenizer.from_pretrained(directory)
        model = AutoModelForCausalLM.from_pretrained(directory)
        inputs = tokenizer("Tell a joke about owls:", return_tensors="pt")
        with torch.no_grad():
            output = model.generate(**inputs, max_new_tokens=4, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        assert output.shape[1] > inputs["input_ids"].shape[1]


def test_final_config_is_a_study_that_fixes_the_winner(retrained):
    summary = json.loads((retrained / "summary.json").read_text())
    study = validate_study(yaml.safe_load((retrained / "final" / "config.yaml").read_text()))
    winner = next(c for c in summary["configs"] if c["rank"] == summary["winner"]["rank"])
    assert study.search.space == {}
    assert study.hyperparameters({}) == pytest.approx(winner["hyperparameters"])
    assert study.train.seed == summary["winner"]["seed"]
    assert study.train.epochs == 2


def test_from_checkpoint_continues_at_the_checkpoints_epoch(experiment):
    best = load_experiment(experiment).ranked()[0]
    start = best.best_checkpoint("eval/in_range_fraction", "max")
    start_epoch = json.loads((start / "meta.json").read_text())["epoch"]
    output = experiment.parent / "retrain-continued"
    done = run_cli("retrain", str(experiment), "--seeds", "2", "--epochs", "1", "--from-checkpoint", "--output", str(output))
    assert done.returncode == 0, done.stderr[-3000:]
    runs = load_experiment(output / "runs")
    assert len(runs.trials) == 2
    for run in runs.trials:
        assert [row["epoch"] for row in run.rows] == [start_epoch + 1]
        assert run.config["start_checkpoint"] == str(start)
    summary = json.loads((output / "summary.json").read_text())
    assert summary["configs"][0]["start_checkpoint"] == str(start)
    # Different seeds after the same checkpoint (which restores its RNG): the runs are not copies.
    # Weights alone could tie when every tiny group is flat (zero advantage), so compare the samples too.
    samples = [{k: v for k, v in t.rows[0].items() if k.startswith(("train/", "eval/"))} for t in runs.trials]
    weights = [AutoModelForCausalLM.from_pretrained(t.latest_checkpoint() / "agent_0") for t in runs.trials]
    same_weights = all(torch.equal(a, b) for a, b in zip(weights[0].parameters(), weights[1].parameters()))
    assert samples[0] != samples[1] or not same_weights


def test_errors_exit_2_without_traceback(experiment, tmp_path, capsys):
    cases = [
        (["retrain", str(tmp_path / "missing")], "no such experiment folder"),
        (["retrain", str(tmp_path)], "not a ratiotune experiment"),
        (["retrain", str(experiment), "--top-k", "4"], "has only 3 config(s)"),
    ]
    # An experiment whose trials never reported: copy the study file alone.
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "study.yaml").write_text((experiment / "study.yaml").read_text())
    cases.append((["retrain", str(empty)], "no finished trial reported eval/in_range_fraction"))
    # In-process: these checks all run before Ray starts, and an escaping exception fails the test.
    for args, message in cases:
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert message in err, (args, err)


def test_t_interval_matches_a_known_case():
    # Values 1, 2, 3: mean 2, sd 1, t(0.975, 2) = 4.303, half width 4.303 / sqrt(3).
    stats = t_interval([1.0, 2.0, 3.0])
    assert stats["mean"] == 2.0 and stats["sd"] == pytest.approx(1.0)
    assert stats["ci95"] == pytest.approx([2 - 4.302653 / 3**0.5, 2 + 4.302653 / 3**0.5])
    assert t_interval([0.5])["ci95"] is None


def test_a_diverged_seed_counts_as_the_worst_value_and_a_retried_crash_counts(tiny_study, tmp_path):
    """summarize on hand-made runs: a diverged run's NaN never reaches the statistics, it scores 0
    (the metric's worst) and counts in n; a run that Ray restarted after a crash (error.txt) and
    that reached its epochs is a result like any other."""
    from ratiotune.core.experiment import Experiment, TrialResult
    from ratiotune.search.retrain import RANK_KEY, Candidate, RetrainPlan, summarize
    from ratiotune.core.study import SEED_KEY

    study = validate_study(tiny_study)  # 2 epochs

    def row(epoch, eval_value, test_value=None):
        values = {"epoch": epoch, "eval/in_range_fraction": eval_value, "eval/mean_reward": eval_value}
        if test_value is not None:
            values.update({"test/in_range_fraction": test_value, "test/mean_reward": test_value})
        return values

    runs = Experiment(
        tmp_path,
        study,
        [
            TrialResult(
                "rank1_seed1",
                tmp_path,
                {RANK_KEY: 1, SEED_KEY: 1},
                [row(1, 0.1), row(2, 0.5, 0.4)],
                error="Failure # 1 (occurred at 2026-12-03)\nRuntimeError: the worker died",
                max_failures=2,
            ),
            TrialResult(
                "rank1_seed2",
                tmp_path,
                {RANK_KEY: 1, SEED_KEY: 2},
                [row(1, 0.2), {**row(2, float("nan")), "infeasible": 1, "infeasible_reason": "non-finite loss"}],
            ),
            TrialResult("rank1_seed3", tmp_path, {RANK_KEY: 1, SEED_KEY: 3}, [row(1, 0.3), row(2, 0.7, 0.2)]),
        ],
    )
    candidate = Candidate(1, runs.trials[0], {"learning_rate": 1e-3}, {"eval/in_range_fraction": 0.9}, None)
    plan = RetrainPlan(Experiment(tmp_path, study, []), study, [candidate], [1, 2, 3], tmp_path / "out", False)
    summary = summarize(plan, runs)
    (config,) = summary["configs"]
    assert [r["error"] for r in config["runs"]] == [None, "non-finite loss", None]
    assert config["stats"]["test/in_range_fraction"] == t_interval([0.4, 0.0, 0.2], (0.0, 1.0))
    assert config["stats"]["eval/in_range_fraction"]["mean"] == pytest.approx(0.4)  # (0.5 + 0 + 0.7) / 3
    assert summary["winner"]["collapse"] == {"collapsed": 1, "n": 3}
    # The shipped seed is picked on eval (0.7 > 0.5), not on test (where seed 1 is better).
    assert summary["winner"]["seed"] == 3


def test_retrain_counts_a_final_figure_of_zero_as_a_collapse_as_the_race_does(tiny_study, tmp_path):
    """A run whose test in-range fraction ends at 0.000 while its rewards do not (agent 2 too long:
    exp(-distance) > 0) collapsed for a user; `retrain` printed 'collapsed 0 of 12' beside four such runs."""
    from ratiotune.core.experiment import Experiment, TrialResult
    from ratiotune.core.study import SEED_KEY
    from ratiotune.search.retrain import RANK_KEY, Candidate, RetrainPlan, summarize

    study = validate_study(tiny_study)

    def run(seed, in_range, reward):
        rows = [
            {"epoch": 1, "eval/in_range_fraction": 0.1},
            {"epoch": 2, "eval/in_range_fraction": 0.2, "test/in_range_fraction": in_range, "test/mean_reward": reward},
        ]
        return TrialResult(f"rank1_seed{seed}", tmp_path, {RANK_KEY: 1, SEED_KEY: seed}, rows)

    runs = Experiment(tmp_path, study, [run(1, 0.0, 0.368), run(2, 0.6, 0.9), run(3, 0.0, 0.0), run(4, 0.5, 0.8)])
    candidate = Candidate(1, runs.trials[0], {"learning_rate": 1e-3}, {"eval/in_range_fraction": 0.9}, None)
    plan = RetrainPlan(Experiment(tmp_path, study, []), study, [candidate], [1, 2, 3, 4], tmp_path / "out", False)
    assert summarize(plan, runs)["winner"]["collapse"] == {"collapsed": 2, "n": 4}


def test_best_without_a_race_says_its_figure_is_a_selection_figure(experiment):
    done = run_cli("best", str(experiment), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "# no honest figure: no fresh-seed confirmation (race.enabled: false)" in done.stdout
    assert "# selection figure (optimistic" in done.stdout
    best = load_experiment(experiment).ranked()[0]
    assert f"# best trial: {best.name}" in done.stdout
