"""`search.sampler: staged`: the learning rate on a grid across every combination of the other
values, then the grid's configs best first by their value pooled over neighbours.

Why: on the smoke table the learning rate explains 71% of the variance of true values and one
seed's figure ranks configs badly, so a model-based sampler with 8-20 noisy points rarely lands
on the best learning rate. A grid covers the learning-rate axis evenly at a known cost. The other
values are not held at their defaults while it does: a user's defaults can be the worst
combination (on the smoke table 2 generations and 32 tokens reach 0.33 at best, against 0.44),
and a learning-rate sweep at them never met the right combination. So what a user writes as
`default:` changes nothing the search visits (bench/simulate.py --defaults all replays every
combination of defaults; docs/search-quality.md).

The stages, counted over the trials the sampler draws (an enqueued baseline is not one):
1. trials 0 .. lr_points-1: learning_rate on a log grid over the space (coarse points first, so a
   study cut short still saw the whole range), the choices' combinations in turn, in an order
   drawn with the sampler's seed;
2. then, one per trial: the grid's configs (its learning rates x every combination) best first by
   their pooled value (core/pooled.py: a kernel average over every finished trial, so a config is
   judged with its neighbours' seeds, not on one run), each config once; when all have run, the best again.
While no trial has finished (every slot still busy), stage 1's grid goes round again.
Only choices take part; any other parameter keeps its default (one without a `default` uses
train:'s value). launch.make_sampler leaves out a held value (search.held: reward_scale under
advantage normalization).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from ratiotune.core.pooled import pooled_values

LR = "learning_rate"


class StagedSampler(optuna.samplers.BaseSampler):
    def __init__(self, space: dict[str, Any], defaults: dict[str, Any], lr_points: int, seed: int):
        if LR not in space:
            raise ValueError("the staged sampler needs learning_rate in search.space")
        self.space, self.defaults, self.lr_points, self.seed = space, defaults, lr_points, seed
        spec = space[LR]
        grid = (
            np.geomspace(spec.low, spec.high, lr_points)
            if spec.type == "loguniform"
            else np.linspace(spec.low, spec.high, lr_points)
        )
        self.grid = [float(v) for v in grid]
        self.order = coarse_first(lr_points)
        names = [name for name, p in space.items() if name != LR and p.type == "choice"]
        self.combinations = [dict(zip(names, values)) for values in itertools.product(*(space[n].values for n in names))]
        # Stage 1's combinations: each as often as the grid allows, their order drawn with the seed.
        shuffled = np.random.default_rng([seed, 5]).permutation(lr_points)
        self.grid_combinations = [self.combinations[int(i) % len(self.combinations)] for i in shuffled]
        self._plans: dict[int, dict[str, Any]] = {}

    # Optuna's sampler interface: everything is drawn per parameter (no joint model).
    def infer_relative_search_space(self, study, trial) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        return {}

    def sample_independent(self, study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution) -> Any:
        if trial.number not in self._plans:
            self._plans[trial.number] = self.plan(study, trial.number)
        return self._plans[trial.number][param_name]

    def plan(self, study: optuna.Study, number: int) -> dict[str, Any]:
        """The values of trial `number`, from the trials before it."""
        earlier = [t for t in study.get_trials(deepcopy=False) if t.number < number]
        drawn = sum("fixed_params" not in t.system_attrs for t in earlier)  # an enqueued baseline is not drawn
        values = dict(self.defaults)
        done = [t for t in earlier if t.state == TrialState.COMPLETE and t.value is not None and math.isfinite(t.value)]
        if drawn < self.lr_points or not done:  # the grid (or, while every slot is still busy, the grid again)
            index = drawn % self.lr_points
            values[LR] = self.grid[self.order[index]]
            values.update(self.grid_combinations[index])
            return values
        sign = 1 if study.direction == optuna.study.StudyDirection.MAXIMIZE else -1
        candidates = [{**self.defaults, LR: lr, **c} for lr in self.grid for c in self.combinations]
        pooled = pooled_values(
            self.space, [t.params for t in done], [t.value for t in done], steps=self.lr_points - 1, at=candidates
        )
        ranked = sorted(range(len(candidates)), key=lambda i: -sign * pooled[i])
        run = [self.config_of(t) for t in earlier]
        for i in ranked:
            if self.config_of(candidates[i]) not in run:
                return candidates[i]
        return candidates[ranked[0]]

    def config_of(self, trial_or_values: FrozenTrial | dict[str, Any]) -> tuple[float, ...]:
        """A config as comparable numbers (a trial's params, or a candidate's values)."""
        params = getattr(trial_or_values, "params", trial_or_values)
        return tuple(round(float(params.get(n, self.defaults[n])), 12) for n in sorted(self.defaults))


def coarse_first(n: int) -> list[int]:
    """Grid indices in an order that covers the range early: ends, middle, then the midpoints between
    (0, 9, 4, 2, 6, 1, 3, 5, 7, 8 for n = 10)."""
    order: list[int] = []
    for index in [0, n - 1]:
        if index not in order and 0 <= index < n:
            order.append(index)
    pieces = [(0, n - 1)]
    while pieces and len(order) < n:
        next_pieces = []
        for low, high in pieces:
            if high - low < 2:
                continue
            mid = (low + high) // 2
            order.append(mid)
            next_pieces += [(low, mid), (mid, high)]
        pieces = next_pieces
    return order + [i for i in range(n) if i not in order]
