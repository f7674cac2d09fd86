"""stats.py: the intervals mean what they are named, measured on simulated runs (fixed numpy seed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ratiotune.core.stats import (
    describe,
    format_interval,
    format_prediction,
    format_share,
    lower_bound,
    predict_run,
    sign_test_p,
    t_quantile,
    wilson,
)

REPETITIONS = 4000


def smoke_like(rng: np.random.Generator, size: int) -> np.ndarray:
    """Bimodal and skewed, as on the smoke task: 1 run in 4 collapses to 0, the rest ~ Beta(2, 4) (mean 0.33)."""
    collapsed = rng.random(size) < 0.25
    return np.where(collapsed, 0.0, rng.beta(2.0, 4.0, size))


@pytest.mark.parametrize("n", [6, 10])
def test_what_a_new_run_will_do_holds_on_bimodal_runs(n):
    """The collapse chance's Wilson interval covers the true 25% in ~95% of repetitions, and a new run
    that does not collapse lands inside the non-collapsed runs' range at the stated (m - 1) / (m + 1)."""
    rng = np.random.default_rng(20261205 + n)
    collapse_covered, landed, stated = 0, [], []
    for _ in range(REPETITIONS):
        values = [float(v) for v in smoke_like(rng, n)]
        p = predict_run(values, [v == 0.0 for v in values])
        collapse_covered += p["collapse_wilson95"][0] <= 0.25 <= p["collapse_wilson95"][1]
        if p["landing"] is not None:
            new = float(rng.beta(2.0, 4.0))  # a new run that did not collapse
            landed.append(p["landing"][0] <= new <= p["landing"][1])
            stated.append(p["landing_chance"])
    assert collapse_covered / REPETITIONS >= 0.90, collapse_covered / REPETITIONS
    assert abs(np.mean(landed) - np.mean(stated)) <= 0.02, (np.mean(landed), np.mean(stated))


def test_the_prediction_of_the_issue_31_winner_reads_as_what_it_is():
    values = [0.750, 0.516, 0.677, 0.474, 0.0, 0.0, 0.0, 0.484, 0.625, 0.542]
    p = predict_run(values, [v == 0.0 for v in values])
    assert (p["collapsed"], p["n"], p["landing"], p["landing_chance"]) == (3, 10, [0.474, 0.75], 6 / 8)
    assert format_prediction(p) == (
        "a new run collapses with chance 3 of 10 (95% Wilson [11%, 60%]); one that does not "
        "lands in [0.474, 0.750] (the range of the 7 that did not: it holds a new run with chance 75%)"
    )


def test_the_interval_of_the_mean_is_not_where_one_new_run_lands():
    # Why both are printed: the mean's 95% interval covers far fewer single new runs than 95%.
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(REPETITIONS):
        low, high = describe([float(v) for v in smoke_like(rng, 8)])["ci95"]
        covered += low <= float(smoke_like(rng, 1)[0]) <= high
    assert covered / REPETITIONS < 0.6


def test_describe_names_each_figure_and_keeps_the_mean_interval_in_range():
    stats = describe([0.0, 0.1, 0.9, 0.3], value_range=(0.0, 1.0))
    assert stats["n"] == 4 and stats["mean"] == pytest.approx(0.325)
    assert stats["sd"] == pytest.approx(np.std([0.0, 0.1, 0.9, 0.3], ddof=1))
    half = 3.182446 * stats["sd"] / 2
    assert stats["ci95"] == pytest.approx([0.0, 0.325 + half])  # 0.325 - half < 0: clipped to the share's range
    assert describe([0.0, 0.1, 0.9, 0.3])["ci95"] == pytest.approx([0.325 - half, 0.325 + half])
    assert describe([0.5])["sd"] is None and describe([])["mean"] is None
    text = format_interval(stats)
    assert "sd 0.40" in text and "95% CI of the mean [0.000," in text and "PI" not in text and "±" not in text


def test_quantiles_bounds_and_shares():
    assert t_quantile(3) == pytest.approx(3.182446) and t_quantile(3, one_sided=True) == pytest.approx(2.353363)
    assert t_quantile(5, one_sided=True, confidence=0.975) == pytest.approx(2.570582)  # any level
    values = [0.3, 0.2, 0.25, 0.35]
    assert lower_bound(values, 0.95) == pytest.approx(0.275 - 2.353363 * np.std(values, ddof=1) / 2)
    low, high = wilson(0, 4)
    assert low == 0.0 and high == pytest.approx(0.490, abs=0.001)
    assert sign_test_p(0, 4) == 1 / 16 and sign_test_p(4, 0) == 1.0 and sign_test_p(0, 0) == 1.0
    assert format_share(1, 4) == "collapsed 1 of 4 (25%, 95% Wilson interval [5%, 70%])"


def test_wilson_and_the_sign_test_are_the_textbook_formulas():
    # scipy.stats does both; these are the closed forms they replaced, at k = 0, k = n and between.
    z = 1.959963984540054  # z(0.975)
    for n in range(1, 13):
        for k in range(n + 1):
            p = k / n
            centre = (p + z * z / (2 * n)) / (1 + z * z / n)
            half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
            assert wilson(k, n) == pytest.approx([max(0.0, centre - half), min(1.0, centre + half)], abs=1e-12)
            assert sign_test_p(n - k, k) == sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n  # exact
    assert wilson(0, 5)[0] == 0.0 and wilson(5, 5)[1] == 1.0 and wilson(0, 0) is None
