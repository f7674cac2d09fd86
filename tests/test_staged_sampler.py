"""search.sampler: staged, through Ray's OptunaSearch as a search uses it (no training): the learning
rate on its grid first, coarse points first, then each other value moved off its default at the best
learning rate, then the best values with the learning rate moved within half a grid step."""

from __future__ import annotations

import math

import pytest

from conftest import REPO
from ratiotune.core.objective import OBJECTIVE
from ratiotune.core.study import StudyError, load_study
from ratiotune.search.launch import make_searcher, param_space
from ratiotune.search.staged_sampler import coarse_first


def drive(study, score) -> list[dict]:
    """Ask the study's searcher for every trial, one at a time, telling each its score(config)."""
    searcher = make_searcher(study)
    searcher.set_search_properties(OBJECTIVE, study.search.mode, param_space(study))
    configs = []
    for n in range(study.search.num_samples):
        config = searcher.suggest(f"t{n}")
        configs.append(config)
        searcher.on_trial_complete(f"t{n}", {OBJECTIVE: score(config)})
    return configs


def test_the_grid_comes_first_then_one_value_at_a_time_at_the_best_learning_rate():
    study = load_study(REPO / "studies" / "smoke.yaml", ["search.num_samples=16"])

    def score(config):  # peaks at lr 2.75e-3 (a grid point), 4 generations, 16 tokens
        return (
            -abs(math.log(config["learning_rate"] / 2.75e-3))
            + 0.3 * (config["num_generations"] == 4)
            + 0.2 * (config["max_new_tokens"] == 16)
        )

    configs = drive(study, score)
    assert configs[0] == {"learning_rate": 5e-5, "num_generations": 8, "max_new_tokens": 32}  # the baseline, enqueued
    grid = [c["learning_rate"] for c in configs[1:11]]
    assert grid[:3] == [pytest.approx(3e-5), pytest.approx(1e-2), pytest.approx(3.9664e-4, rel=1e-3)]  # ends, then the middle
    assert len({round(lr, 9) for lr in grid}) == 10 and all(
        (c["num_generations"], c["max_new_tokens"]) == (8, 32) for c in configs[1:11]
    )
    moves = configs[11:14]
    assert all(c["learning_rate"] == pytest.approx(2.750e-3, rel=1e-3) for c in moves)
    assert [(c["num_generations"], c["max_new_tokens"]) for c in moves] == [(2, 32), (4, 32), (8, 16)]
    # Then the best value of each parameter at that learning rate, the learning rate within half a grid step.
    for c in configs[14:]:
        assert (c["num_generations"], c["max_new_tokens"]) == (4, 16)
        assert abs(math.log(c["learning_rate"] / 2.750e-3)) <= 0.5 * math.log(1e-2 / 3e-5) / 9 + 1e-9


def test_the_simulator_and_a_search_draw_the_same_configs():
    """bench/simulate.py asks make_sampler through Optuna's ask/tell; Ray's OptunaSearch wraps the same sampler."""
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    from ratiotune.search.launch import make_sampler

    study = load_study(REPO / "studies" / "smoke.yaml")
    searched = drive(study, lambda c: -abs(math.log(c["learning_rate"] / 1e-3)))
    ot = optuna.create_study(sampler=make_sampler(study), direction="maximize")
    ot.enqueue_trial(study.baseline())
    distributions = OptunaSearch.convert_search_space(param_space(study))
    asked = []
    for _ in range(study.search.num_samples):
        trial = ot.ask(fixed_distributions=distributions)
        asked.append(trial.params)
        ot.tell(trial, -abs(math.log(trial.params["learning_rate"] / 1e-3)))
    assert asked == searched


def test_coarse_first_covers_the_range_early_and_every_point_once():
    assert coarse_first(10) == [0, 9, 4, 2, 6, 1, 3, 5, 7, 8]
    assert coarse_first(3) == [0, 2, 1] and coarse_first(2) == [0, 1]
    for n in range(2, 20):
        assert sorted(coarse_first(n)) == list(range(n))


def test_a_staged_study_needs_a_learning_rate_to_sweep_and_lr_points_needs_staged(tiny_study):
    from ratiotune.core.study import validate_study

    tiny_study["search"].update(sampler="staged", space={"num_generations": {"type": "choice", "values": [2, 4]}})
    tiny_study["search"].pop("baseline", None)
    with pytest.raises(StudyError, match=r"sampler: staged sweeps the learning rate first, so space needs learning_rate"):
        validate_study(tiny_study)
    tiny_study["search"]["space"] = {}  # nothing searched (a `train` run): the sampler does not matter
    validate_study(tiny_study)
    tiny_study["search"].update(
        sampler="tpe", lr_points=5, space={"learning_rate": {"type": "loguniform", "low": 1e-4, "high": 1e-2}}
    )
    with pytest.raises(StudyError, match=r"lr_points: 5 is used only by sampler staged; sampler is 'tpe'"):
        validate_study(tiny_study)
