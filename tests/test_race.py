"""The confirmation race's rules, on hand-made trial results (no Ray): the plan, the ranking,
the honest figure. tests/test_search.py runs a real race after a real search."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratiotune.race import CONTENDER_KEY, confirmed, honest_metric, rank_contenders
from ratiotune.results import TrialResult
from ratiotune.study import RaceSpec, StudyError, validate_study
from ratiotune.study import SEED_KEY


def run(contender: int, seed: int, values: list[float], test: dict | None = None, infeasible: bool = False) -> TrialResult:
    rows = [{"epoch": e, "eval/in_range_fraction": v} for e, v in enumerate(values, start=1)]
    if test:
        rows[-1].update(test)
    if infeasible:
        rows.append({"epoch": len(rows) + 1, "eval/in_range_fraction": float("nan"), "infeasible": 1,
                     "infeasible_reason": "non-finite loss"})
    return TrialResult(f"c{contender}_seed{seed}", Path("."), {CONTENDER_KEY: contender, SEED_KEY: seed}, rows)


def test_successive_halving_doubles_the_seeds_of_the_better_half():
    spec = RaceSpec(top_k=4, first_seeds=1)
    assert spec.rounds(4) == [(4, 1), (2, 1)]  # then one left: 1 and 2 seeds per config
    assert spec.rounds(8) == [(8, 1), (4, 1), (2, 2)]  # 1, 2, 4 seeds
    assert RaceSpec(first_seeds=2).rounds(3) == [(3, 2), (2, 2)]
    assert spec.rounds(1) == []  # a single config goes straight to confirmation
    assert spec.runs(4, baseline=True) == 4 + 2 + 2 * 4
    assert spec.runs(4, baseline=False) == 4 + 2 + 4


def test_a_race_above_its_compute_share_is_refused_naming_the_fields(tiny_study):
    tiny_study["race"] = {"enabled": True, "top_k": 2, "confirm_seeds": 8}
    with pytest.raises(StudyError) as caught:
        validate_study(tiny_study)
    message = str(caught.value)
    assert "race.max_share" in message and "confirm_seeds 8" in message and "num_samples" in message


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


def test_contenders_rank_by_mean_objective_and_a_diverged_seed_ranks_last(tiny_study):
    tiny_study["search"]["objective_window"] = 2
    study = validate_study(tiny_study)
    runs = [
        run(0, 1, [0.0, 0.5, 0.7]),  # objective 0.6
        run(0, 2, [0.0, 0.2, 0.2]),  # 0.2 -> mean 0.4
        run(1, 1, [0.0, 0.9, 0.9]),  # 0.9
        run(1, 2, [0.5], infeasible=True),  # diverged: ranks behind every clean config
        run(2, 1, [0.3, 0.3, 0.3]),
        run(2, 2, [0.3, 0.3, 0.3]),  # 0.3
    ]
    ranking = rank_contenders(study, [0, 1, 2], runs)
    assert [index for index, _, _ in ranking] == [0, 2, 1]
    assert ranking[0][1] == pytest.approx(0.4) and ranking[0][2] == pytest.approx([0.6, 0.2])
    assert ranking[2][2][1] is None


def test_the_honest_figure_is_the_final_test_epoch_and_counts_collapses(tiny_study):
    study = validate_study(tiny_study)
    assert honest_metric("eval/in_range_fraction") == "test/in_range_fraction"
    assert honest_metric("system/epoch_seconds") == "system/epoch_seconds"
    runs = [
        run(0, 3, [0.1, 0.9], test={"test/in_range_fraction": 0.5, "test/mean_reward": 0.6}),
        run(0, 4, [0.0, 0.0], test={"test/in_range_fraction": 0.0, "test/mean_reward": 0.0}),  # collapsed
        run(0, 5, [0.3, 0.4], test={"test/in_range_fraction": 0.4, "test/mean_reward": 0.5}),
        run(0, 6, [0.2], infeasible=True),  # diverged: no value, counted as collapsed
        run(1, 3, [0.9, 0.9], test={"test/in_range_fraction": 0.9, "test/mean_reward": 0.9}),  # another config
    ]
    result = confirmed(study, runs, 0)
    assert [s["seed"] for s in result["per_seed"]] == [3, 4, 5, 6]
    assert [s["value"] for s in result["per_seed"]] == [0.5, 0.0, 0.4, None]
    assert result["stats"]["mean"] == pytest.approx(0.3) and result["stats"]["n"] == 3
    low, high = result["stats"]["ci95"]
    assert low < 0.3 < high
    assert result["collapsed_fraction"] == 0.5
