"""stats.py: the intervals mean what they are named, measured on simulated runs (fixed numpy seed)."""

from __future__ import annotations

import numpy as np
import pytest

from ratiotune.core.stats import describe, format_interval, format_share, lower_bound_95, predict_mean, sign_test_p, t_quantile, wilson

REPETITIONS = 4000


def smoke_like(rng: np.random.Generator, size: int) -> np.ndarray:
    """Bimodal and skewed, as on the smoke task: 1 run in 4 collapses to 0, the rest ~ Beta(2, 4) (mean 0.33)."""
    collapsed = rng.random(size) < 0.25
    return np.where(collapsed, 0.0, rng.beta(2.0, 4.0, size))


@pytest.mark.parametrize("n", [4, 8, 12])
def test_the_prediction_interval_covers_95_percent_of_new_runs(n):
    rng = np.random.default_rng(20261204 + n)
    covered = 0
    for _ in range(REPETITIONS):
        stats = describe([float(v) for v in smoke_like(rng, n)], value_range=(0.0, 1.0))
        low, high = stats["pi95"]
        covered += low <= float(smoke_like(rng, 1)[0]) <= high
    assert abs(covered / REPETITIONS - 0.95) <= 0.03, covered / REPETITIONS


def test_the_interval_of_the_mean_is_not_where_one_new_run_lands():
    # Why both are printed: the mean's 95% interval covers far fewer single new runs than 95%.
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(REPETITIONS):
        low, high = describe([float(v) for v in smoke_like(rng, 8)])["ci95"]
        covered += low <= float(smoke_like(rng, 1)[0]) <= high
    assert covered / REPETITIONS < 0.6


def test_describe_names_each_figure_and_clips_only_the_prediction_interval():
    stats = describe([0.0, 0.1, 0.9, 0.3], value_range=(0.0, 1.0))
    assert stats["n"] == 4 and stats["mean"] == pytest.approx(0.325)
    assert stats["sd"] == pytest.approx(np.std([0.0, 0.1, 0.9, 0.3], ddof=1))
    half = 3.182 * stats["sd"] / 2
    assert stats["ci95"] == pytest.approx([0.325 - half, 0.325 + half])
    assert stats["pi95"][0] == 0.0  # clipped: 0.325 - 3.182 * sd * sqrt(1.25) < 0
    assert describe([0.5])["sd"] is None and describe([])["mean"] is None
    text = format_interval(stats)
    assert "sd 0.40" in text and "95% CI of the mean" in text and "95% PI of one new run" in text and "±" not in text


def test_quantiles_bounds_and_shares():
    assert t_quantile(3) == 3.182 and t_quantile(3, one_sided=True) == 2.353
    assert t_quantile(60) == pytest.approx(2.000, abs=0.002) and t_quantile(60, one_sided=True) == pytest.approx(1.671, abs=0.002)
    assert lower_bound_95([0.3, 0.2, 0.25, 0.35]) == pytest.approx(0.275 - 2.353 * np.std([0.3, 0.2, 0.25, 0.35], ddof=1) / 2)
    low, high = wilson(0, 4)
    assert low == 0.0 and high == pytest.approx(0.490, abs=0.001)
    assert sign_test_p(0, 4) == 1 / 16 and sign_test_p(4, 0) == 1.0 and sign_test_p(0, 0) == 1.0
    assert format_share(1, 4) == "collapsed 1 of 4 (25%, 95% Wilson interval [5%, 70%])"


def test_the_prediction_interval_of_a_12_seed_mean_covers_95_percent_of_such_means():
    rng = np.random.default_rng(12)
    covered = 0
    for _ in range(REPETITIONS):
        stats = describe([float(v) for v in smoke_like(rng, 4)])
        low, high = predict_mean(stats, 12, (0.0, 1.0))
        covered += low <= float(smoke_like(rng, 12).mean()) <= high
    assert abs(covered / REPETITIONS - 0.95) <= 0.03, covered / REPETITIONS
    assert predict_mean(describe([0.1, 0.3]), 1) == describe([0.1, 0.3])["pi95"]


def test_the_sign_flip_test_is_exact_and_weighs_differences_by_size():
    from ratiotune.core.stats import signflip_p

    # Every difference positive: only the observed pattern reaches the observed sum, p = 1/2**n.
    assert signflip_p([0.5, 0.4, 0.6, 0.5, 0.45, 0.55]) == 1 / 64
    # One small loss among wins: the observed pattern and the one with that loss flipped, p = 2/64.
    assert signflip_p([0.5, 0.5, 0.5, 0.5, 0.5, -0.1]) == 2 / 64
    # A large loss weighs more than a small one (the sign test would count both alike).
    assert signflip_p([0.5, 0.5, 0.5, 0.5, 0.5, -0.6]) > signflip_p([0.5, 0.5, 0.5, 0.5, 0.5, -0.1])
    # Its level is exact under the null: differences symmetric about 0.
    rng = np.random.default_rng(0)
    rejected = np.mean([signflip_p(list(rng.normal(size=6))) <= 0.0625 for _ in range(4000)])
    assert abs(rejected - 0.0625) < 0.015
