"""What a trial trains with: the searched names in column order, one trial's four values, and the baseline."""

from __future__ import annotations

from typing import Any

from ratiotune.core.study.config_keys import SEARCHABLE
from ratiotune.core.study.errors import StudyError
from ratiotune.core.study.search_section import SearchSpec, spec_contains
from ratiotune.core.study.sections import TrainSpec


def baseline_values(search: SearchSpec, train: TrainSpec) -> dict[str, Any] | None:
    """The searched values of the hand-picked config (None when nothing is searched or it is off)."""
    if not search.space or not search.start_with_baseline or search.scheduler.type == "pbt":
        return None
    values = dict(search.baseline or {})
    values.update({name: getattr(train, name) for name in search.space if name not in values})
    # Values taken from train: that lie outside the space mean "no baseline" (train: then
    # serves `ratiotune train`, not the search); an explicit search.baseline was checked above.
    if not all(spec_contains(search.space[name], value) for name, value in values.items()):
        return None
    return values


def searched_names(search: SearchSpec) -> list[str]:
    """The searched hyperparameters, in SEARCHABLE's order (the column order of every table and plot)."""
    return [name for name in SEARCHABLE if name in search.space]


def trial_hyperparameters(train: TrainSpec, config: dict[str, Any]) -> dict[str, Any]:
    """The four searchable values for one trial: the trial's config over the study's fixed ones."""
    values = {name: getattr(train, name) for name in SEARCHABLE}
    values.update({k: v for k, v in config.items() if k in SEARCHABLE})
    for name, value in values.items():
        # A number, or its text: never train on anything else (a restored Ray run once handed
        # its trials the placeholders of its sample_from functions, ("__fn_ph", hash)).
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise StudyError(f"trial config {name} = {value!r}: not a number; this run is not trained")
    for name in ("num_generations", "max_new_tokens"):
        values[name] = int(values[name])
    for name in ("learning_rate", "reward_scale"):
        values[name] = float(values[name])
    return values
