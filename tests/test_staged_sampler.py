"""search.sampler: staged, through Ray's OptunaSearch as a search uses it (no training): the learning
rate on its grid first, coarse points first, with every gens/tokens combination in turn; then the
grid's configs best first by their pooled objective (core/pooled.py), each once. What a user writes as
`default:` changes nothing it visits; a held reward_scale is recorded but never sampled."""

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


def score(config):  # peaks at lr 2.75e-3 (a grid point), 4 generations, 16 tokens
    return (
        -abs(math.log(config["learning_rate"] / 2.75e-3))
        + 0.3 * (config["num_generations"] == 4)
        + 0.2 * (config["max_new_tokens"] == 16)
    )


def test_the_grid_takes_every_combination_then_the_pooled_best_configs_each_once():
    study = load_study(REPO / "studies" / "smoke.yaml")
    configs = drive(study, score)
    assert configs[0] == {"learning_rate": 5e-5, "num_generations": 8, "max_new_tokens": 32}  # the baseline, enqueued
    grid = [c["learning_rate"] for c in configs[1:11]]
    assert grid[:3] == [pytest.approx(3e-5), pytest.approx(1e-2), pytest.approx(3.9664e-4, rel=1e-3)]  # ends, then the middle
    assert len({round(lr, 9) for lr in grid}) == 10
    # Every one of the six combinations runs on the grid (10 points: four of them twice).
    combos = [(c["num_generations"], c["max_new_tokens"]) for c in configs[1:11]]
    assert set(combos) == {(g, t) for g in (2, 4, 8) for t in (16, 32)}
    # Then the grid's configs best first by their pooled score: the peak (not run on the grid) within
    # the first two, next to the best grid run (2.75e-3 / 4 / 32); no config runs twice.
    after = configs[11:]
    assert {"learning_rate": pytest.approx(2.750e-3, rel=1e-3), "num_generations": 4, "max_new_tokens": 16} in after[:2]
    keys = [(round(c["learning_rate"], 9), c["num_generations"], c["max_new_tokens"]) for c in configs[1:]]
    assert len(keys) == len(set(keys))
    assert all(any(abs(c["learning_rate"] - g) < 1e-12 for g in grid) for c in after)  # on the grid


def test_what_the_user_writes_as_default_changes_nothing_the_search_visits():
    visited = {
        (gens, tokens): drive(
            load_study(
                REPO / "studies" / "smoke.yaml",
                [f"search.space.num_generations.default={gens}", f"search.space.max_new_tokens.default={tokens}"],
            ),
            score,
        )
        for gens, tokens in [(2, 16), (8, 32), (4, 32)]
    }
    first = visited[(2, 16)]
    assert all(configs == first for configs in visited.values())


def test_a_held_reward_scale_is_recorded_by_every_trial_and_searched_without_normalization():
    from ratiotune.core.hyperparameters import held_values
    from ratiotune.search.progress import header

    study = load_study(REPO / "studies" / "smoke.yaml")
    assert held_values(study) == {"reward_scale": 100.0}
    space = param_space(study)
    assert space["reward_scale"] == 100.0  # a constant of Ray's space: every trial's config has it
    assert all("reward_scale" not in c for c in drive(study, score))  # never sampled
    lines = header(study, "studies/smoke.yaml", "X", None)
    assert "reward_scale 100 (held)" in lines[1] and "learning_rate 10-point log grid [3e-05, 0.01]" in lines[1]
    note = "note: reward_scale held at 100: it cancels under train.advantage_normalization: true"
    assert any(line.startswith(note) for line in lines)

    searched = load_study(REPO / "studies" / "smoke.yaml", ["train.advantage_normalization=false"])
    assert held_values(searched) == {}
    assert {c.get("reward_scale") for c in drive(searched, score)[1:]} >= {1, 100}  # the combinations include it
    assert not any(line.startswith("note:") for line in header(searched, "s", "X", None))


def test_pooled_values_borrow_from_neighbours_and_weigh_a_config_by_its_distance():
    from ratiotune.core.pooled import pooled_values

    study = load_study(REPO / "studies" / "smoke.yaml")
    space = {n: s for n, s in study.search.space.items() if n != "reward_scale"}
    grid = [3e-5 * (1e-2 / 3e-5) ** (i / 9) for i in range(10)]
    points = [
        {"learning_rate": grid[5], "num_generations": 8, "max_new_tokens": 32},
        {"learning_rate": grid[6], "num_generations": 8, "max_new_tokens": 32},
        {"learning_rate": grid[0], "num_generations": 2, "max_new_tokens": 16},
    ]
    pooled = pooled_values(space, points, [1.0, 0.0, 0.0], steps=9)
    # A lone lucky run is pulled towards its neighbour; a far config barely feels either.
    assert 0.5 < pooled[0] < 1.0 and 0.0 < pooled[1] < 0.5 and pooled[0] > pooled[1]
    assert pooled[2] < 1e-3
    # Its own run weighs most: the same two runs, swapped, swap the order.
    assert pooled_values(space, points, [0.0, 1.0, 0.0], steps=9)[1] == pytest.approx(pooled[0], abs=1e-3)


def test_the_simulator_and_a_search_draw_the_same_configs():
    """bench/simulate.py asks make_sampler through Optuna's ask/tell; Ray's OptunaSearch wraps the same sampler."""
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    from ratiotune.search.launch import baseline_point, make_sampler

    study = load_study(REPO / "studies" / "smoke.yaml")
    searched = drive(study, lambda c: -abs(math.log(c["learning_rate"] / 1e-3)))
    ot = optuna.create_study(sampler=make_sampler(study), direction="maximize")
    ot.enqueue_trial(baseline_point(study))
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
