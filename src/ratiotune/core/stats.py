"""Small statistics over a handful of seeds, each number named for what it is.

Per config the race and `retrain` print:
- mean and sd: the sample mean and the sample standard deviation of the per-seed values
  (sd describes the spread of single runs; it is not an error bar);
- ci95: the 95% Student-t interval of the *mean*: where the mean of many more seeds would lie;
- pi95: the 95% prediction interval for *one new run*: mean ± t(0.975, n-1)·sd·sqrt(1 + 1/n),
  where a user's own re-run of the config should land. It is clipped to the metric's range
  when that is known (a share cannot be below 0); the clipping is said where it is printed;
- the collapse share (runs that ended with every reward 0, or diverged) with its 95% Wilson
  interval (Wilson, not the normal approximation: it stays inside [0, 1] and is sane at 0/4).

Outcomes here are skewed and bimodal (a run learns the ratio or collapses to 0 for good), so
the t intervals are approximations: tests/test_stats.py measures the prediction interval's
coverage on a simulated bimodal distribution, and every per-seed value is printed beside them.
No scipy: the quantiles come from tables (the readers of results stay light).
"""

from __future__ import annotations

import math
from typing import Any

# Student-t quantiles for df = 1..30: two-sided 95% (t 0.975) and one-sided 95% (t 0.95).
T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)
T_95 = (
    6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
    1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725,
    1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697,
)
# One-sided 90% (t 0.90): the gate's bound (intensify.gate).
T_90 = (
    3.078, 1.886, 1.638, 1.533, 1.476, 1.440, 1.415, 1.397, 1.383, 1.372,
    1.363, 1.356, 1.350, 1.345, 1.341, 1.337, 1.333, 1.330, 1.328, 1.325,
    1.323, 1.321, 1.319, 1.318, 1.316, 1.315, 1.314, 1.313, 1.311, 1.310,
)
Z_975, Z_95, Z_90 = 1.959964, 1.644854, 1.281552


def t_quantile(df: int, one_sided: bool = False, confidence: float = 0.95) -> float:
    """t(0.975, df), or t(confidence, df) when one_sided (confidence 0.95 or 0.90); beyond the table
    a Cornish-Fisher step from z (< 0.1% off)."""
    if not one_sided:
        table, z = T_975, Z_975
    elif confidence in (0.95, 0.90):
        table, z = (T_95, Z_95) if confidence == 0.95 else (T_90, Z_90)
    else:
        raise ValueError(f"one-sided confidence: 0.95 or 0.90 (the tables held); got {confidence}")
    if df <= len(table):
        return table[df - 1]
    return z + (z**3 + z) / (4 * df)


def describe(values: list[float], value_range: tuple[float, float] | None = None) -> dict[str, Any]:
    """n, mean, sd, ci95 (the mean's interval) and pi95 (one new run's), pi95 clipped to value_range.

    Below two values there is no spread: sd, ci95 and pi95 are None.
    """
    n = len(values)
    out: dict[str, Any] = {"n": n, "mean": None, "sd": None, "ci95": None, "pi95": None}
    if n == 0:
        return out
    mean = sum(values) / n
    out["mean"] = mean
    if n < 2:
        return out
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    t = t_quantile(n - 1)
    half_ci, half_pi = t * sd / math.sqrt(n), t * sd * math.sqrt(1 + 1 / n)
    low, high = mean - half_pi, mean + half_pi
    if value_range is not None:
        low, high = max(low, value_range[0]), min(high, value_range[1])
    out.update(sd=sd, ci95=[mean - half_ci, mean + half_ci], pi95=[low, high])
    return out


def predict_mean(stats: dict[str, Any], k: int, value_range: tuple[float, float] | None = None) -> list[float] | None:
    """95% prediction interval for the mean of k new runs: mean ± t(0.975, n-1)·sd·sqrt(1/k + 1/n).

    k = 1 is pi95. What a user who re-runs the config on k seeds should see (clipped to value_range).
    """
    if stats.get("sd") is None:
        return None
    n = stats["n"]
    half = t_quantile(n - 1) * stats["sd"] * math.sqrt(1 / k + 1 / n)
    low, high = stats["mean"] - half, stats["mean"] + half
    if value_range is not None:
        low, high = max(low, value_range[0]), min(high, value_range[1])
    return [low, high]


# The name kept for older callers: the same figures.
t_interval = describe


def lower_bound(values: list[float], confidence: float = 0.95) -> float | None:
    """One-sided lower bound of the mean: mean - t(confidence, n-1)·sd/sqrt(n) (None below two values)."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean - t_quantile(n - 1, one_sided=True, confidence=confidence) * sd / math.sqrt(n)


def lower_bound_95(values: list[float]) -> float | None:
    """One-sided 95% lower bound of the mean: mean - t(0.95, n-1)·sd/sqrt(n) (None below two values)."""
    return lower_bound(values, 0.95)


def wilson(successes: int, n: int) -> list[float] | None:
    """95% Wilson score interval of a share (None for n = 0)."""
    if n == 0:
        return None
    z = Z_975
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def sign_test_p(wins: int, losses: int) -> float:
    """Exact one-sided sign test: P(at least `losses` losses in wins + losses fair coin flips).

    Small p = the losses are unlikely if neither config were better on a random seed.
    """
    n = wins + losses
    if n == 0:
        return 1.0
    return sum(math.comb(n, k) for k in range(losses, n + 1)) / 2**n


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def format_interval(stats: dict[str, Any]) -> str:
    """'mean 0.412, sd 0.081, 95% CI of the mean [0.301, 0.523], 95% PI one new run [0.17, 0.65] (n=4)'."""
    if stats.get("mean") is None:
        return "n/a"
    if stats.get("sd") is None:
        return f"mean {stats['mean']:.3f} (n=1: no spread)"
    text = f"mean {stats['mean']:.3f}, sd {stats['sd']:.3f}, 95% CI of the mean [{_f(stats['ci95'][0])}, {_f(stats['ci95'][1])}]"
    if stats.get("pi95") is not None:
        text += f", 95% PI of one new run [{_f(stats['pi95'][0])}, {_f(stats['pi95'][1])}]"
    return text + f" (n={stats['n']})"


def format_share(collapsed: int, n: int) -> str:
    """'collapsed 1 of 4 (25%, 95% Wilson interval [5%, 70%])'."""
    if n == 0:
        return "collapsed: n/a (no runs)"
    low, high = wilson(collapsed, n)
    return f"collapsed {collapsed} of {n} ({collapsed / n:.0%}, 95% Wilson interval [{low:.0%}, {high:.0%}])"


def signflip_p(diffs: list[float]) -> float:
    """Exact one-sided sign-flip (paired permutation) test that the mean paired difference is > 0.

    p = the share of the 2**n sign patterns s whose sum(s_i·|d_i|) is at least the observed
    sum(d_i): under the null that the two configs are exchangeable on every seed (each seed's
    difference as likely +|d| as -|d|), p is exact at any n, with no normality assumed. Unlike
    the sign test it weighs differences by size; unlike the t test one large loss (a collapse)
    cannot swamp several wins through the sd. The smallest p is 1/2**n (n = 6: 0.016). n <= 20.
    """
    n = len(diffs)
    if n == 0:
        return 1.0
    if n > 20:
        raise ValueError(f"signflip_p enumerates 2**n patterns; n = {n} (at most 20)")
    observed = sum(diffs)
    sizes = [abs(d) for d in diffs]
    # Tolerance: floating sums of the same numbers in another order differ in the last bits.
    tol = 1e-12 * max(1.0, sum(sizes))
    sums = [0.0]
    for size in sizes:
        sums = [s + size for s in sums] + [s - size for s in sums]
    return sum(s >= observed - tol for s in sums) / len(sums)
