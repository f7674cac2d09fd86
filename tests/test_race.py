"""The race's wiring, on hand-made trial results with known per-seed values (no Ray): the plan
checked before a search, the honest figure, and the gate as the summary applies it.
intensify.py's rules are tested in tests/test_intensify.py; tests/test_search.py runs a real
race after a real search."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratiotune.core.intensify import plan
from ratiotune.core.race_protocol import Race
from ratiotune.core.race_summary import BASELINE, CONTENDER_KEY, Contender, confirmed, honest_metric, summarize
from ratiotune.search.race_text import headline, verdict
from ratiotune.core.experiment import TrialResult
from ratiotune.core.study import RaceSpec, SEED_KEY, StudyError, check_race_budget, validate_study


def run(contender: int, seed: int, values: list[float], test: dict | None = None, infeasible: bool = False) -> TrialResult:
    rows = [{"epoch": e, "eval/in_range_fraction": v} for e, v in enumerate(values, start=1)]
    if test:
        rows[-1].update(test)
    if infeasible:
        rows.append(
            {
                "epoch": len(rows) + 1,
                "eval/in_range_fraction": float("nan"),
                "infeasible": 1,
                "infeasible_reason": "non-finite loss",
            }
        )
    return TrialResult(f"c{contender}_seed{seed}", Path("."), {CONTENDER_KEY: contender, SEED_KEY: seed}, rows)


def test_race_numbers_set_in_the_study_that_cannot_fit_are_refused_before_the_search(tiny_study):
    tiny_study["race"] = {"enabled": True, "top_k": 2, "confirm_seeds": 8}
    with pytest.raises(StudyError) as caught:
        check_race_budget(validate_study(tiny_study))
    message = str(caught.value)
    assert "race.top_k 2" in message and "race.confirm_seeds 8" in message and "search.num_samples" in message
    assert "\n" not in message


def test_a_race_left_at_its_defaults_is_fitted_not_refused(tiny_study):
    # 2 trials x 2 epochs: far too small for the default race; it runs a smaller one and says so.
    tiny_study["race"] = {"enabled": True}
    study = validate_study(tiny_study)
    check_race_budget(study)
    fitted = study.race_plan()
    assert fitted.fitted.startswith("race fitted to the budget") and fitted.confirm_seeds >= 2


def test_a_baseline_outside_the_space_is_refused(tiny_study):
    tiny_study["search"]["baseline"] = {"learning_rate": 0.5}
    with pytest.raises(StudyError, match=r"baseline\.learning_rate: 0\.5 lies outside the space \(loguniform"):
        validate_study(tiny_study)
    tiny_study["search"]["baseline"] = None
    assert validate_study(tiny_study).baseline() == {"learning_rate": 1e-3}  # train:'s value
    tiny_study["train"]["learning_rate"] = 0.5  # outside the space: no baseline, not an error
    assert validate_study(tiny_study).baseline() is None
    tiny_study["train"]["learning_rate"] = 1e-3
    tiny_study["search"]["start_with_baseline"] = False
    assert validate_study(tiny_study).baseline() is None


def test_pbt_and_unsearched_studies_run_no_race(tiny_study):
    tiny_study["race"] = {"enabled": True, "top_k": 2, "confirm_seeds": 2}
    tiny_study["search"]["num_samples"] = 3
    assert validate_study(tiny_study).race_skipped() is None
    tiny_study["search"]["scheduler"] = {"type": "pbt", "perturbation_interval": 1}
    assert "PBT winner is a schedule" in validate_study(tiny_study).race_skipped()
    tiny_study["search"].update(scheduler={"type": "fifo"}, space={})
    assert "nothing is searched" in validate_study(tiny_study).race_skipped()


def test_the_honest_figure_counts_a_diverged_run_as_the_worst_value_in_n(tiny_study):
    study = validate_study(tiny_study)
    assert honest_metric("eval/in_range_fraction") == "test/in_range_fraction"
    assert honest_metric("system/epoch_seconds") == "system/epoch_seconds"
    runs = [
        run(0, 3, [0.1, 0.9], test={"test/in_range_fraction": 0.5, "test/mean_reward": 0.6}),
        run(0, 4, [0.0, 0.0], test={"test/in_range_fraction": 0.0, "test/mean_reward": 0.0}),  # collapsed
        run(0, 5, [0.3, 0.4], test={"test/in_range_fraction": 0.4, "test/mean_reward": 0.5}),
        run(0, 6, [0.2], infeasible=True),  # diverged: scored 0, counted, and a collapse
        run(1, 3, [0.9, 0.9], test={"test/in_range_fraction": 0.9, "test/mean_reward": 0.9}),  # another config
    ]
    result = confirmed(study, runs, 0, worst=0.0)
    assert [s["seed"] for s in result["per_seed"]] == [3, 4, 5, 6]
    assert [s["value"] for s in result["per_seed"]] == [0.5, 0.0, 0.4, None]
    stats = result["stats"]
    assert stats["n"] == 4 and stats["mean"] == pytest.approx(0.225)  # not 0.3: no survivorship
    sd = stats["sd"]
    assert sd == pytest.approx(((0.275**2 + 0.225**2 + 0.175**2 + 0.225**2) / 3) ** 0.5)
    # The mean's interval, clipped to the share's range: 0.225 - 3.182·sd/2 < 0.
    assert 0.225 - 3.1824 * sd / 2 < 0 and stats["ci95"] == pytest.approx([0.0, 0.225 + 3.182446 * sd / 2])
    assert result["collapse"] == {"collapsed": 2, "n": 4} and result["collapsed_fraction"] == 0.5
    # One new run, stated as what it is: a collapse chance, and the range of the runs that learned.
    prediction = result["prediction"]
    assert (prediction["collapsed"], prediction["n"], prediction["landing"], prediction["landing_chance"]) == (
        2,
        4,
        [0.4, 0.5],
        1 / 3,
    )


def test_a_final_figure_of_zero_is_a_collapse_even_when_rewards_are_not(tiny_study):
    # A user reading "per seed: 0.646, 0.000, ..." must not see "collapsed 0 of ...": agent 2 writing
    # too much earns exp(-distance) > 0 per pair while no pair lands in the band.
    study = validate_study(tiny_study)
    runs = [
        run(0, 3, [0.4, 0.5], test={"test/in_range_fraction": 0.5, "test/mean_reward": 0.7}),
        run(0, 4, [0.1, 0.0], test={"test/in_range_fraction": 0.0, "test/mean_reward": 0.13}),
    ]
    result = confirmed(study, runs, 0, worst=0.0)
    assert [s["collapsed"] for s in result["per_seed"]] == [False, True]
    assert result["collapse"] == {"collapsed": 1, "n": 2}


def race_summary(tiny_study, winner_test: list[float], baseline_test: list[float]) -> dict:
    """summarize() on a race the protocol ran: one challenger beside the baseline, so no selection (nothing
    to choose between), then a hand-made confirmation on seeds 3-6 (one look: no second look, no fallback)."""
    tiny_study["search"]["space"]["num_generations"] = {"type": "choice", "values": [2, 4]}
    tiny_study["race"] = {"enabled": True, "max_seeds": 2, "confirm_seeds": 4, "second_look_seeds": 0, "fallbacks": 0}
    study = validate_study(tiny_study)
    field = [
        Contender(BASELINE, {"learning_rate": 1e-3, "num_generations": 2}, None),
        Contender("trial_a", {"learning_rate": 3e-3, "num_generations": 4}, 0.6),
    ]
    the_plan = plan(study.race, search_epochs=1000, run_epochs=2, available=1, baseline=True)
    protocol = Race(
        [BASELINE, "trial_a"],
        runners_up=[],
        settings=study.race,
        plan=the_plan,
        baseline=BASELINE,
        seed=lambda j: 1 + j,
        worst=0.0,
    )
    trials = []
    while (stage := protocol.ask()) is not None:
        for r in stage.requests:
            if not r.test:
                protocol.tell(r, 0.5 if r.contender == "trial_a" else 0.2)
                continue
            value = (winner_test if r.contender == "trial_a" else baseline_test)[r.seed - 3]
            trial = run(
                0 if r.contender == BASELINE else 1,
                r.seed,
                [0.3],
                test={"test/in_range_fraction": value, "test/mean_reward": value},
            )
            trials.append(trial)
            protocol.tell(r, value, value == 0.0)
    assert protocol.result().selection_winner == "trial_a" and protocol.result().confirm_seeds == [3, 4, 5, 6]
    return summarize(study, field, protocol.result(), trials, the_plan, 8, 0.0)


def test_a_collapsed_race_winner_is_not_recommended_and_the_baseline_stands(tiny_study):
    summary = race_summary(tiny_study, [0.9, 0.0, 0.0, 0.8], [0.2, 0.2, 0.2, 0.2])
    assert not summary["gate"]["recommend"]
    assert summary["recommended"]["which"] == "baseline"
    assert summary["recommended"]["hyperparameters"]["learning_rate"] == 1e-3
    assert verdict(summary).startswith("not confirmed: the baseline stands")
    lines = headline(summary)
    assert any(line.startswith("winner (lr 0.003, gens 4)") for line in lines)
    assert any(line.startswith("baseline (lr 0.001, gens 2)") for line in lines)  # both configs' figures
    assert any("collapsed 2 of 4 (50%" in line for line in lines)


def test_a_winner_that_beats_the_baseline_on_every_fresh_seed_is_confirmed(tiny_study):
    summary = race_summary(tiny_study, [0.45, 0.5, 0.4, 0.48], [0.2, 0.25, 0.15, 0.2])
    assert summary["gate"]["recommend"] and summary["recommended"]["which"] == "winner"
    assert summary["margin"]["mean"] == pytest.approx(0.2575) and summary["gate"]["margin_lower"] > 0
    assert verdict(summary).startswith("confirmed: lr 0.003, gens 4")
    assert summary["seeds"] == {"selection": [], "confirmation": [3, 4, 5, 6]}
    assert [s["search_trial"] for s in summary["survivors"]] == ["trial_a"]
    assert all("±" not in line for line in headline(summary))


def test_the_race_is_planned_on_the_trial_epochs_the_search_really_spent(tiny_study, tmp_path):
    from ratiotune.search.race import plan_race
    from ratiotune.core.experiment import Experiment

    tiny_study["race"] = {"enabled": True}
    tiny_study["search"]["num_samples"] = 3
    study = validate_study(tiny_study)

    def trial(name: str, lr: float, curve: list[float]) -> TrialResult:
        rows = [{"epoch": e, "eval/in_range_fraction": v, "search/objective": v} for e, v in enumerate(curve, start=1)]
        return TrialResult(name, tmp_path, {"learning_rate": lr}, rows, ray_status="TERMINATED")

    # ASHA stopped trial_b after 1 of 2 epochs: the search spent 5 trial-epochs, not 3 x 2.
    experiment = Experiment(
        tmp_path,
        study,
        [trial("trial_base", 1e-3, [0.1, 0.2]), trial("trial_a", 3e-3, [0.3, 0.5]), trial("trial_b", 5e-3, [0.05])],
    )
    setup, _ = plan_race(experiment)
    fitted = setup.plan
    assert list(setup.challengers) == ["trial_a"]  # the best challenger; the baseline is the incumbent
    assert "the search spent 5" in fitted.fitted
    assert fitted.share == pytest.approx(fitted.runs * 2 / (fitted.runs * 2 + 5))


# --------------------------------------------------------------------------- race() with a fake trainer


def fake_race(tiny_study, tmp_path, monkeypatch, table: dict[str, object], **race: object) -> tuple[dict, list[list[dict]]]:
    """race() end to end with run_round replaced by a lookup: table[config name](seed) is a run's value.
    The search ranked trial_good (0.6), trial_mid (0.5), trial_bad (0.4); `race` overrides race: keys."""
    from ratiotune.search import race as race_module
    from ratiotune.core.experiment import Experiment
    from ratiotune.core.study import TEST_KEY

    tiny_study["race"] = {"enabled": True, "cut_level": 0.25, "max_share": 0.95, **race}
    study = validate_study(tiny_study)
    # Learning rates far enough apart that the pooled ranking (core/pooled.py) keeps the search's order.
    lrs = {"baseline": 1e-3, "trial_good": 1e-2, "trial_mid": 1e-4, "trial_bad": 3e-4}
    search = [
        TrialResult(
            name,
            tmp_path,
            {"learning_rate": lr},
            [{"epoch": e, "eval/in_range_fraction": v, "search/objective": v} for e, v in ((1, 0.1), (2, score))],
            ray_status="TERMINATED",
        )
        for (name, lr), score in zip(lrs.items(), (0.1, 0.6, 0.5, 0.4))
    ]
    asked: list[list[dict]] = []

    def fake_round(study, folder, runs, field):
        folder.mkdir(parents=True, exist_ok=True)
        asked.append(runs)
        trials = []
        for run in runs:
            name, seed = field[run[CONTENDER_KEY]].name, run[SEED_KEY]
            value = table[name](seed)
            rows = [{"epoch": 1, "eval/in_range_fraction": 0.0}, {"epoch": 2, "eval/in_range_fraction": value}]
            if value is None:
                rows[-1] = {"epoch": 2, "eval/in_range_fraction": float("nan"), "infeasible": 1, "infeasible_reason": "nan"}
            elif run[TEST_KEY]:
                rows[-1].update({"test/in_range_fraction": value, "test/mean_reward": value})
            trials.append(TrialResult(f"c{run[CONTENDER_KEY]}_seed{seed}", folder, dict(run), rows, ray_status="TERMINATED"))
        return Experiment(folder, study, trials)

    monkeypatch.setattr(race_module, "run_round", fake_round)
    summary = race_module.race(Experiment(tmp_path, study, search), log=lambda line: None)
    return summary, asked


def test_race_cuts_dominated_configs_on_paired_seeds_and_confirms_a_clear_winner(tiny_study, tmp_path, monkeypatch):
    table = {
        "baseline": lambda s: 0.2,
        "trial_good": lambda s: 0.5 + 0.01 * (s % 3),
        "trial_mid": lambda s: 0.3,
        "trial_bad": lambda s: 0.0,
    }
    summary, asked = fake_race(tiny_study, tmp_path, monkeypatch, table)
    first = asked[0]
    # Round 0: every contender, the baseline included, on the same two fresh seeds.
    assert sorted((r[CONTENDER_KEY], r[SEED_KEY]) for r in first) == [(i, s) for i in range(4) for s in (1, 2)]
    assert summary["selection"]["rounds"][0]["cut"] == ["baseline", "trial_mid", "trial_bad"]
    confirm = asked[-1]
    # The confirmation's seeds follow the selection's max_seeds (1..8): race.confirm_seeds (default 5) more.
    assert {r[SEED_KEY] for r in confirm} == set(range(9, 9 + RaceSpec().confirm_seeds)) == {9, 10, 11, 12, 13}
    assert {r[CONTENDER_KEY] for r in confirm} == {0, 1}
    assert summary["gate"]["recommend"] and summary["recommended"]["which"] == "winner"
    assert summary["winner"]["search_trial"] == "trial_good"
    assert summary["gate"]["look"] == 1 and len(asked) == 2  # round 0, the confirmation: no second look


def test_a_winner_ahead_on_the_mean_but_not_shown_better_gets_a_second_look(tiny_study, tmp_path, monkeypatch):
    # Bimodal: 0.7 on most seeds, 0.05 on seeds 10, 12 and 14. On the 6 confirmation seeds (9-14)
    # the margin's bound is below 0 (mean 0.175: three of six at -0.15); the winner leads on the
    # mean, so both train on race.second_look_seeds (4 here) more seeds (15-18), and on all 10 the
    # bound (one-sided 98.3%: the race's 5% over its 3 looks) is 0.056 > 0.
    table = {
        "baseline": lambda s: 0.2,
        "trial_good": lambda s: 0.05 if s in (10, 12, 14) else 0.7,
        "trial_mid": lambda s: 0.1,
        "trial_bad": lambda s: 0.0,
    }
    summary, asked = fake_race(tiny_study, tmp_path, monkeypatch, table, confirm_seeds=6, second_look_seeds=4)
    assert {r[SEED_KEY] for r in asked[-2]} == set(range(9, 15))
    assert {r[SEED_KEY] for r in asked[-1]} == set(range(15, 19)) and {r[CONTENDER_KEY] for r in asked[-1]} == {0, 1}
    assert summary["gate"]["look"] == 2 and summary["seeds"]["confirmation"] == list(range(9, 19))
    assert summary["gate"]["margin"]["n"] == 10 and summary["gate"]["recommend"]
    assert summary["gate"]["confidence"] == pytest.approx(1 - 0.05 / 3) and summary["gate"]["margin_lower"] == pytest.approx(
        0.056, abs=0.001
    )
    assert (
        "one-sided 98.3% lower bound of the paired margin over the baseline 0.056 on 10 seeds (look 2 of up to 3"
        in headline(summary)[0]
    )
    assert summary["compute"]["race_runs"] == sum(len(a) for a in asked)


def test_race_that_keeps_the_baseline_confirms_the_best_challenger_beside_it(tiny_study, tmp_path, monkeypatch):
    table = {
        "baseline": lambda s: 0.4,
        "trial_good": lambda s: 0.3,
        "trial_mid": lambda s: 0.1,
        "trial_bad": lambda s: None,
    }  # diverges on every seed: scored 0, counted
    summary, asked = fake_race(tiny_study, tmp_path, monkeypatch, table)
    assert summary["race_kept_baseline"] and summary["selection"]["winner"] == "baseline"
    bad = next(r for r in summary["selection"]["final"] if r["contender"] == "trial_bad")
    assert bad["values"] == [0.0, 0.0] and bad["diverged"] == [1, 2]
    assert summary["winner"]["search_trial"] == "trial_good"  # the best challenger by race mean, shown beside it
    assert not summary["gate"]["recommend"] and summary["recommended"]["which"] == "baseline"
    assert verdict(summary).startswith("not confirmed: the baseline stands")


def test_a_winner_refused_for_its_collapses_hands_over_to_the_search_next_config(tiny_study, tmp_path, monkeypatch):
    # top_k 1: only trial_good races. It ends at 0 on every confirmation seed (collapsed 6 of 6), so
    # the gate refuses it for the collapse bound; trial_mid, the search's next config, trains on the
    # same six seeds (the baseline's runs reused) and is confirmed.
    table = {
        "baseline": lambda s: 0.2,
        "trial_good": lambda s: 0.0 if s >= 9 else 0.6,
        "trial_mid": lambda s: 0.5,
        "trial_bad": lambda s: 0.4,
    }
    summary, asked = fake_race(tiny_study, tmp_path, monkeypatch, table, top_k=1, confirm_seeds=6)
    fallback = asked[-1]
    assert sorted((r[CONTENDER_KEY], r[SEED_KEY]) for r in fallback) == [(2, s) for s in range(9, 15)]  # no baseline runs
    assert [f["search_trial"] for f in summary["fallbacks"]] == ["trial_good"]
    assert summary["fallbacks"][0]["collapse"] == {"collapsed": 6, "n": 6}
    assert summary["winner"]["search_trial"] == "trial_mid" and summary["gate"]["recommend"]
    assert summary["recommended"]["which"] == "winner"
    assert summary["recommended"]["hyperparameters"]["learning_rate"] == pytest.approx(1e-4)
    assert [s["search_trial"] for s in summary["survivors"]] == ["trial_mid"]  # retrain's candidates: not trial_good
    lines = headline(summary)
    assert lines[0].startswith("confirmed: lr 0.0001") and lines[2].startswith(
        "passed over (1): lr 0.01: mean 0.000, collapsed 6 of 6"
    )
    assert summary["compute"]["race_runs"] == sum(len(a) for a in asked)


def test_the_fallback_stops_after_race_fallbacks_configs_and_the_baseline_stands(tiny_study, tmp_path, monkeypatch):
    collapsing = lambda s: 0.0 if s >= 9 else 0.6  # noqa: E731  (learns on the selection's seeds, collapses after)
    table = {"baseline": lambda s: 0.2, "trial_good": collapsing, "trial_mid": collapsing, "trial_bad": collapsing}
    summary, asked = fake_race(tiny_study, tmp_path, monkeypatch, table, top_k=1, fallbacks=2, confirm_seeds=6)
    assert [f["search_trial"] for f in summary["fallbacks"]] == ["trial_good", "trial_mid"]  # race.fallbacks: 2
    assert summary["winner"]["search_trial"] == "trial_bad" and not summary["gate"]["recommend"]
    assert summary["recommended"]["which"] == "baseline"
    assert verdict(summary).startswith("not confirmed: the baseline stands")

    summary, asked = fake_race(tiny_study, tmp_path / "none", monkeypatch, table, top_k=1, fallbacks=0)
    assert summary["fallbacks"] == [] and summary["winner"]["search_trial"] == "trial_good"
    assert summary["recommended"]["which"] == "baseline"
