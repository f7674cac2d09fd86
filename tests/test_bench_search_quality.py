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
