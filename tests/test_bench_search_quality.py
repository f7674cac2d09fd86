"""Plumbing of bench/search_quality.py without running a search: every method's study is valid
and differs from smoke.yaml only where the method says (no Ray, well under a second)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from ratiotune.study import validate_study

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
    smoke = validate_study(bench.smoke_study(0, None))
    race_seeds = smoke.race.runs(smoke.race.top_k, baseline=True)  # at most one new seed per run
    assert race_seeds < bench.RETRAIN_OFFSET < bench.SEED_STRIDE
