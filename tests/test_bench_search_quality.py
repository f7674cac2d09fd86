"""Plumbing of bench/search_quality.py without running a search: every method's study is valid
and differs from smoke.yaml only where the method says (no Ray, well under a second)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ratiotune.study import validate_study

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("search_quality", REPO / "bench" / "search_quality.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_method_studies_validate_and_spend_the_budget(bench):
    budget = 32
    studies = {m: validate_study(bench.method_study(m, seed=1, budget=budget, epochs=None)) for m in bench.METHODS}
    seed_config = studies["seed-config"]
    assert seed_config.search.space == {} and seed_config.train.epochs == budget
    assert (seed_config.train.learning_rate, seed_config.train.num_generations, seed_config.train.max_new_tokens) == (5e-5, 8, 32)
    random = studies["random"]
    assert random.search.sampler == "random" and random.search.scheduler.type == "fifo"
    assert random.search.num_samples * random.train.epochs >= budget
    assert studies["qmc"].search.sampler == "qmc"
    for method in ("default", "qmc"):
        # Enough trials that ASHA's early stops still leave the budget spent.
        assert studies[method].search.num_samples * studies[method].train.epochs > budget
    assert all(s.train.seed == 1 for s in studies.values())


def test_best_so_far_value_at_budget(bench):
    assert bench.value_at([0.0, 0.2, 0.2, 0.5], 2) == 0.2
    assert bench.value_at([0.0, 0.2], 5) == 0.2  # a run that spent less keeps its final best
