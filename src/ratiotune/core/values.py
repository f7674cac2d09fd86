"""What a run's reported values are worth: which are finite numbers, its final row, a metric's worst end."""

from __future__ import annotations

import math
from typing import Any


def finite(value: Any) -> bool:
    """A real number a figure can be computed from: not None, NaN, inf, a bool or a string."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def final_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A trial's row of its last epoch (an empty dict when it reported none)."""
    return max(rows, key=lambda row: row.get("epoch", 0), default={})


def worst_end(bounds: tuple[float, float] | None, mode: str) -> float | None:
    """The worst value in a metric's range (its low end when higher is better); None when unbounded."""
    if bounds is None:
        return None
    return bounds[0] if mode == "max" else bounds[1]
