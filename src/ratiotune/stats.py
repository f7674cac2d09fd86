"""Small statistics over a handful of seeds: mean, sd and a 95% Student-t interval.

With 4-8 seeds a t interval is what Agarwal et al. 2021 would call optimistic for skewed
or bimodal outcomes (a run either learns the ratio or collapses to 0), so the race also
prints every per-seed value and the share that collapsed: the interval is not the whole story.
"""

from __future__ import annotations

import math
from typing import Any

# Two-sided 95% Student-t quantiles t(0.975, df) for df = 1..30; beyond 30 the normal 1.96
# is within 2%. (A table keeps scipy out of the readers of results.)
T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)


def t_interval(values: list[float]) -> dict[str, Any]:
    """Mean, sample sd and the 95% Student-t interval for the mean (None below two values)."""
    n = len(values)
    if n == 0:
        return {"n": 0, "mean": None, "sd": None, "ci95": None}
    mean = sum(values) / n
    if n < 2:
        return {"n": 1, "mean": mean, "sd": None, "ci95": None}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    t = T_975[n - 2] if n - 1 <= len(T_975) else 1.96
    half = t * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "sd": sd, "ci95": [mean - half, mean + half]}


def format_interval(stats: dict[str, Any]) -> str:
    """'0.412 ± 0.081 [0.301, 0.523] (n=4)': mean ± sd [95% interval], or what is missing."""
    if stats["mean"] is None:
        return "n/a"
    if stats["ci95"] is None:
        return f"{stats['mean']:.3f} (1 seed)"
    low, high = stats["ci95"]
    return f"{stats['mean']:.3f} ± {stats['sd']:.3f} [{low:.3f}, {high:.3f}] (n={stats['n']})"
