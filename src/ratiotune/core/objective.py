"""The one score a study optimises: the study metric averaged over a trial's last k epochs.

One eval of 48 answer pairs has a binomial standard error of ~0.07, and at high learning
rates the per-epoch curve swings by ±0.3; the best epoch of a few hundred such numbers sits
~0.2 above what the config delivers. A trailing mean is what a config delivers on
average near the end of its training: an oscillating config scores its average, a collapsed
one its zeros. The trainable reports it every epoch as OBJECTIVE, and the searcher (Optuna),
the scheduler (ASHA), the kept checkpoints and the trial ranking all read that one value.
"""

from __future__ import annotations

import math
from typing import Sequence

OBJECTIVE = "search/objective"


def trailing_mean(values: Sequence[float], window: int) -> float:
    """Mean of the last `window` values (all of them while fewer exist); NaN if any is NaN.

    NaN on purpose: a diverged epoch makes the trial infeasible, never merely "lower".
    """
    if not values:
        return float("nan")
    tail = list(values)[-window:]
    if any(not math.isfinite(v) for v in tail):
        return float("nan")
    return sum(tail) / len(tail)
