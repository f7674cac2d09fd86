"""A config's value pooled over its neighbours: what the staged sampler steers by and the race ranks by.

Why: one trial is one seed, and on the smoke table one seed's figure ranks configs at Spearman
0.46-0.53 against their true values; the best of 20 such figures is mostly the luckiest. Neighbouring
configs share most of their value (the learning rate explains 71% of its variance), so a kernel
average over every finished trial, one config's own run weighted most, ranks better than the run
alone: each figure borrows the seeds of the configs around it (Nadaraya-Watson regression).

The kernel, per searched value:
- a range (loguniform in log space, uniform and int linearly): Gaussian, BANDWIDTH grid steps wide,
  a grid step being the range over `steps` (the staged sampler's lr_points - 1: its grid's step);
- a choice: CHOICE_WEIGHT for a different value, 1 for the same one.
The numbers were chosen on the smoke table's study seeds 0-299 (bench/simulate.py --defaults all,
docs/search-quality.md); the figures are reported on seeds 1000-1599 and on the headline table.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ratiotune.core.study import ParamSpec

BANDWIDTH = 1.5
CHOICE_WEIGHT = 0.5


def pooled_values(
    space: Mapping[str, ParamSpec],
    points: Sequence[Mapping[str, Any]],
    values: Sequence[float],
    *,
    steps: int,
    at: Sequence[Mapping[str, Any]] | None = None,
) -> list[float]:
    """The kernel-weighted mean of `values` (one per config in `points`) at each config of `at`
    (default: at `points` themselves); a range's grid step is its width over `steps`. A value
    missing from a config counts as differing."""
    at = points if at is None else at
    coordinates = [_coordinates(space, p, steps) for p in points]
    out = []
    for target in at:
        here = _coordinates(space, target, steps)
        weights = [_weight(space, here, there) for there in coordinates]
        total = sum(weights)
        out.append(sum(w * v for w, v in zip(weights, values)) / total if total > 0 else math.nan)
    return out


def _coordinates(space: Mapping[str, ParamSpec], config: Mapping[str, Any], steps: int) -> dict[str, Any]:
    out = {}
    for name, spec in space.items():
        value = config.get(name)
        if value is None or spec.type == "choice":
            out[name] = value
        else:
            x = math.log(float(value)) if spec.type == "loguniform" else float(value)
            low = math.log(spec.low) if spec.type == "loguniform" else spec.low
            high = math.log(spec.high) if spec.type == "loguniform" else spec.high
            out[name] = (x - low) / ((high - low) / steps)  # in grid steps
    return out


def _weight(space: Mapping[str, ParamSpec], a: dict[str, Any], b: dict[str, Any]) -> float:
    w = 1.0
    for name, spec in space.items():
        if a[name] is None or b[name] is None:
            w *= CHOICE_WEIGHT if a[name] != b[name] else 1.0
        elif spec.type == "choice":
            w *= 1.0 if a[name] == b[name] else CHOICE_WEIGHT
        else:
            w *= math.exp(-0.5 * ((a[name] - b[name]) / BANDWIDTH) ** 2)
    return w
