"""Plumbing of bench/search_quality.py without running a search: every method's study is valid
and differs from smoke.yaml only where the method says (no Ray, well under a second)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from ratiotune.core.study import validate_study

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("search_quality", REPO / "bench" / "search_quality.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_method_studies_validate_and_differ_from_smoke_only_where_the_method_says(bench):
    smoke = validate_study(yaml.safe_load((REPO / "studies" / "smoke.yaml").read_text()))
    default = validate_study(bench.method_study("default", seed=1, epochs=None))
    assert default.train.seed == 100 and default.race == smoke.race and default.search == smoke.search
    random = validate_study(bench.method_study("random", seed=1, epochs=8, budget=250))
    assert random.search.sampler == "random" and random.search.scheduler.type == "fifo"
    assert not random.race.enabled and random.baseline() is None
    # Equal compute: as many whole trials as the default's trial-epochs allow.
    assert random.search.num_samples == 250 // 8 and random.train.epochs == 8
    assert random.search.space == smoke.search.space


def test_retrain_seeds_are_fresh_for_every_search_and_race(bench):
    """The seeds themselves, not a count of runs: every seed the search and the race of search seed
    s can use lies below the bench's retrain seeds for s, and those below search seed s + 1's."""
    from ratiotune.search.race import fresh_seeds

    for s in range(4):
        smoke = validate_study(bench.smoke_study(s, None))
        race_seeds = fresh_seeds(smoke, 0, smoke.race.max_seeds + smoke.race.confirm_seeds)  # selection, then confirmation
        used = {smoke.train.seed, *race_seeds}
        retrain = [s * bench.SEED_STRIDE + bench.RETRAIN_OFFSET + i for i in range(6)]
        assert max(used) < min(retrain) and max(retrain) < (s + 1) * bench.SEED_STRIDE
        assert not used & set(retrain)


def test_place_values_the_real_choices_in_the_table_it_is_given(bench, tmp_path):
    """--place: the configs real default studies shipped are valued in the table given (a widened one),
    placed in a prediction, and counted below / above its median; other methods' rows are left out."""
    import csv

    sim = bench.simulate_module()
    table = sim.load_table(REPO / "bench" / "table" / "smoke_table.csv")
    best = max(table.keys, key=table.mean)
    on_grid = f"{{learning_rate: {best[0]}, max_new_tokens: {best[2]}, num_generations: {best[1]}, reward_scale: 100.0}}"
    between = "{learning_rate: 5.0e-05, max_new_tokens: 32, num_generations: 8, reward_scale: 100.0}"
    calibration = tmp_path / "calibration.csv"
    with calibration.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["method", "config", "trial_epochs"])
        writer.writeheader()
        writer.writerows(
            [
                {"method": "default", "config": on_grid, "trial_epochs": 480},
                {"method": "random", "config": on_grid, "trial_epochs": 480},
                {"method": "default", "config": between, "trial_epochs": 600},
            ]
        )
    low = table.mean_value(table.point({"learning_rate": 5e-5, "num_generations": 8, "max_new_tokens": 32}))
    prediction = {"values": [low + 0.01] * 4 + [table.mean(best) - 0.01] * 4, "best": table.mean(best), "share_85": 0.5}
    prediction["trial_epochs"] = 480
    bench.place(sim, table, prediction, calibration, None)
    text = (tmp_path / "calibration_placed.md").read_text()
    assert f"{table.mean(best):.3f} (percentile 100)" in text and f"{low:.3f} (percentile 0)" in text
    assert "in 1 of 2 real studies" in text and "below / above the simulated median 1 / 1" in text
