"""Small statistics over a handful of seeds, each number named for what it is.

Per config the race and `retrain` print:
- mean and sd: the sample mean and the sample standard deviation of the per-seed values
  (sd describes the spread of single runs; it is not an error bar);
- ci95: the 95% Student-t interval of the *mean*: where the mean of many more seeds would lie,
  clipped to the metric's range when that is known (a share's mean cannot be below 0);
- what one new run will do (`predict_run`): outcomes here are bimodal (a run learns the ratio or
  collapses to 0 for good), so a normal-theory interval of one run says nothing ([0, 1] on the
  smoke task). Instead: the chance that a run collapses (the collapse share with its 95% Wilson
  interval) and, for a run that does not, the range of the runs that did not, which holds an
  exchangeable new run with chance (m - 1) / (m + 1) for m such runs (no distribution assumed).

Quantiles, the Wilson interval and the sign test come from scipy.stats.
"""

from __future__ import annotations

import math
from typing import Any


def t_quantile(df: int, one_sided: bool = False, confidence: float = 0.95) -> float:
    """t(confidence, df) one-sided, or the two-sided quantile t((1 + confidence) / 2, df)."""
    from scipy.stats import t

    return float(t.ppf(confidence if one_sided else (1 + confidence) / 2, df))


def describe(values: list[float], value_range: tuple[float, float] | None = None) -> dict[str, Any]:
    """n, mean, sd and ci95 (the mean's 95% t interval, clipped to value_range).

    Below two values there is no spread: sd and ci95 are None.
    """
    n = len(values)
    out: dict[str, Any] = {"n": n, "mean": None, "sd": None, "ci95": None}
    if n == 0:
        return out
    mean = sum(values) / n
    out["mean"] = mean
    if n < 2:
        return out
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(n - 1) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    if value_range is not None:
        low, high = max(low, value_range[0]), min(high, value_range[1])
    out.update(sd=sd, ci95=[low, high])
    return out


def predict_run(values: list[float | None], collapsed: list[bool]) -> dict[str, Any]:
    """What one new run of a config will do, from its runs (value None = diverged, a collapse).

    collapse: the share of runs that collapsed, with its 95% Wilson interval: the chance a new run
    does. landing: [min, max] of the m runs that did not collapse; a new run that does not collapse
    falls inside with chance (m - 1) / (m + 1) (`landing_chance`), whatever the distribution, for
    exchangeable runs (m < 2: no range).
    """
    n = len(collapsed)
    k = sum(collapsed)
    kept = sorted(v for v, c in zip(values, collapsed) if not c and v is not None)
    m = len(kept)
    return {
        "n": n,
        "collapsed": k,
        "collapse_share": k / n if n else None,
        "collapse_wilson95": wilson(k, n),
        "landing": [kept[0], kept[-1]] if m >= 2 else None,
        "landing_chance": (m - 1) / (m + 1) if m >= 2 else None,
    }


def format_prediction(p: dict[str, Any]) -> str:
    """'a new run collapses with chance 3 of 10 (95% Wilson [11%, 60%]); one that does not lands in
    [0.474, 0.750] (the range of the 7 that did not: it holds a new run with chance 75%)'."""
    if not p["n"]:
        return "a new run: n/a (no runs)"
    low, high = p["collapse_wilson95"]
    text = f"a new run collapses with chance {p['collapsed']} of {p['n']} (95% Wilson [{low:.0%}, {high:.0%}])"
    m = p["n"] - p["collapsed"]
    if p["landing"] is None:
        return text + f"; {m} run(s) did not collapse: too few for a range"
    return (
        text + f"; one that does not lands in [{p['landing'][0]:.3f}, {p['landing'][1]:.3f}] (the range of the {m} "
        f"that did not: it holds a new run with chance {p['landing_chance']:.0%})"
    )


def lower_bound(values: list[float], confidence: float) -> float | None:
    """One-sided lower bound of the mean: mean - t(confidence, n-1)·sd/sqrt(n) (None below two values)."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean - t_quantile(n - 1, one_sided=True, confidence=confidence) * sd / math.sqrt(n)


def wilson(successes: int, n: int) -> list[float] | None:
    """95% Wilson score interval of a share (None for n = 0): scipy.stats.binomtest's proportion_ci."""
    if n == 0:
        return None
    from scipy.stats import binomtest

    interval = binomtest(successes, n).proportion_ci(confidence_level=0.95, method="wilson")
    return [float(interval.low), float(interval.high)]


def sign_test_p(wins: int, losses: int) -> float:
    """Exact one-sided sign test: P(at least `losses` losses in wins + losses fair coin flips).

    Small p = the losses are unlikely if neither config were better on a random seed.
    """
    n = wins + losses
    if n == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(losses, n, 0.5, alternative="greater").pvalue)


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def format_interval(stats: dict[str, Any]) -> str:
    """'mean 0.412, sd 0.081, 95% CI of the mean [0.301, 0.523] (n=4)'."""
    if stats.get("mean") is None:
        return "n/a"
    if stats.get("sd") is None:
        return f"mean {stats['mean']:.3f} (n=1: no spread)"
    return (
        f"mean {stats['mean']:.3f}, sd {stats['sd']:.3f}, 95% CI of the mean "
        f"[{_f(stats['ci95'][0])}, {_f(stats['ci95'][1])}] (n={stats['n']})"
    )


def format_share(collapsed: int, n: int) -> str:
    """'collapsed 1 of 4 (25%, 95% Wilson interval [5%, 70%])'."""
    if n == 0:
        return "collapsed: n/a (no runs)"
    low, high = wilson(collapsed, n)
    return f"collapsed {collapsed} of {n} ({collapsed / n:.0%}, 95% Wilson interval [{low:.0%}, {high:.0%}])"
