"""How the searched hyperparameters are written in one line: their short names, a config, a space."""

from __future__ import annotations

from typing import Any

# Short names for the four searched values in one-line summaries (progress lines, the race, `retrain`'s table).
SHORT_NAMES = {"learning_rate": "lr", "num_generations": "gens", "max_new_tokens": "tokens", "reward_scale": "scale"}


# reward_scale under advantage normalization, as `ratiotune check studies/smoke.yaml` measures it: one
# update at scale 1 and at 100 from the same seeds, ||weights(1) - weights(100)|| / the update's norm
# (0 to the bit on builtin:tiny; ~1e-6 where float32 rounding of the std differs).
SCALE_CANCELS_FIGURE = "0 (to the bit)"


def held_values(study) -> dict[str, Any]:
    """Values the study lists in search.space that the search holds at their default, because they are
    known to change nothing: reward_scale while train.advantage_normalization is on (it cancels in the
    normalized advantage). Every trial still records them; with normalization off they are searched."""
    spec = study.search.space.get("reward_scale")
    if spec is None or not study.train.advantage_normalization:
        return {}
    return {"reward_scale": float(spec.default if spec.default is not None else study.train.reward_scale)}


def config_text(config: dict[str, Any], names: list[str] | None = None) -> str:
    """'lr 0.00275, gens 8, tokens 32': `names` of `config` (default: all of it, in its order)."""
    return ", ".join(
        f"{SHORT_NAMES.get(name, name)} {_value_text(config.get(name))}" for name in (config if names is None else names)
    )


def space_text(spec) -> str:
    """A searched value's space (a study's ParamSpec): 'choice 4/8', 'loguniform [1e-05, 0.01]'."""
    if spec.type == "choice":
        return "choice " + "/".join(f"{v:g}" for v in spec.values)
    return f"{spec.type} [{spec.low:g}, {spec.high:g}]"


def _value_text(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
