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
Z_975, Z_95 = 1.959964, 1.644854


def t_quantile(df: int, one_sided: bool = False) -> float:
    """t(0.975, df), or t(0.95, df) when one_sided; beyond the table a Cornish-Fisher step from z (< 0.1% off)."""
    table, z = (T_95, Z_95) if one_sided else (T_975, Z_975)
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


# The name kept for older callers: the same figures.
t_interval = describe


def lower_bound_95(values: list[float]) -> float | None:
    """One-sided 95% lower bound of the mean: mean - t(0.95, n-1)·sd/sqrt(n) (None below two values)."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean - t_quantile(n - 1, one_sided=True) * sd / math.sqrt(n)


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
