"""The race's policy (intensify.py) on known per-seed values: no Ray, no training.

Each test drives the policy the way race.py and bench/simulate.py do: ask for a batch, look
every run's value up in a table, record it, until the race is done.
"""

from __future__ import annotations

import numpy as np
import pytest

from ratiotune.core.intensify import Intensifier, PlanError, gate, plan
from ratiotune.core.study import RaceSpec

SEEDS = list(range(101, 121))


def drive(policy: Intensifier, table: dict[str, list[float | None]]) -> list[list[tuple[str, int]]]:
    """Run the race on table[contender][seed index]; return the batches it asked for."""
    batches = []
    while not policy.done:
        batch = policy.next_runs()
        if not batch:
            break
        batches.append(batch)
        for name, seed in batch:
            policy.record(name, seed, table[name][SEEDS.index(seed)])
    return batches


def test_every_contender_runs_the_same_seeds_in_order_and_the_first_round_has_min_seeds():
    spec = RaceSpec(min_seeds=2, max_seeds=4, cut_level=0.01)  # nothing is cut at this level below 7 seeds
    table = {"base": [0.3] * 20, "a": [0.4] * 20, "b": [0.2] * 20}
    policy = Intensifier(["base", "a", "b"], spec, SEEDS, budget=100, worst=0.0)
    batches = drive(policy, table)
    assert sorted(batches[0]) == sorted((n, s) for n in table for s in SEEDS[:2])
    assert sorted(batches[1]) == sorted((n, s) for n in table for s in SEEDS[2:4])
    assert len(batches) == 2 and policy.stop_reason == "every contender left has max_seeds (4)"
    assert policy.winner == "a"  # the challenger with the better mean on the incumbent's seeds takes over
    assert policy.trace[0].incumbent_changed and policy.trace[0].cut == []


def test_a_dominated_challenger_is_cut_only_after_two_paired_seeds():
    # Sign test at 2 of 2 seeds lost: p = 0.25. cut_level 0.25 allows that cut, and no earlier one.
    spec = RaceSpec(min_seeds=2, max_seeds=8, cut_level=0.25)
    table = {"base": [0.5] * 20, "bad": [0.1] * 20, "close": [0.5, 0.6, 0.4, 0.6, 0.4, 0.6, 0.4, 0.6] + [0.5] * 12}
    policy = Intensifier(["base", "bad", "close"], spec, SEEDS, budget=100, worst=0.0)
    batch = policy.next_runs()
    assert {seed for _, seed in batch} == set(SEEDS[:2])  # no decision is taken on one seed
    for name, seed in batch:
        policy.record(name, seed, table[name][SEEDS.index(seed)])
    assert policy.trace[0].cut == ["bad"]
    cut_row = next(r for r in policy.trace[0].standings if r.contender == "bad")
    assert cut_row.vs_incumbent == {"seeds": 2, "wins": 0, "losses": 2, "ties": 0, "p_worse": 0.25}
    drive(policy, table)
    assert "bad" not in policy.survivors() and "close" in policy.survivors()


def test_a_collapse_weighs_one_lost_seed_not_a_mean_and_ties_at_zero_are_dropped():
    spec = RaceSpec(min_seeds=2, max_seeds=4, cut_level=0.1)
    # "risky" wins 2 seeds narrowly and collapses on one (a -0.3 difference a t test would be driven by);
    # both collapse on the 4th.
    table = {"base": [0.30, 0.30, 0.30, 0.0] + [0.3] * 16, "risky": [0.35, 0.0, 0.35, 0.0] + [0.3] * 16}
    policy = Intensifier(["base", "risky"], spec, SEEDS, budget=100, worst=0.0)
    drive(policy, table)
    test = policy.paired("risky", "base")
    assert test == {"seeds": 4, "wins": 2, "losses": 1, "ties": 1, "p_worse": 0.875}
    # Not cut (p 0.875), and behind on the mean (0.175 vs 0.225): the incumbent stays first.
    assert policy.survivors() == ["base", "risky"] and policy.winner == "base"


def test_a_diverged_run_scores_the_worst_value_and_counts_in_n():
    spec = RaceSpec(min_seeds=2, max_seeds=2, cut_level=0.25)
    table = {"base": [0.2, 0.2] + [0.2] * 18, "flaky": [0.9, None] + [0.9] * 18}
    policy = Intensifier(["base", "flaky"], spec, SEEDS, budget=100, worst=0.0)
    drive(policy, table)
    row = next(r for r in policy.summary().final if r.contender == "flaky")
    assert row.values == [0.9, 0.0] and row.diverged == [SEEDS[1]]
    assert row.mean == pytest.approx(0.45)  # not 0.9: the diverged seed counts
    assert policy.spent == 4


def test_compute_saved_on_a_cut_contender_buys_the_survivors_more_seeds():
    spec = RaceSpec(min_seeds=2, max_seeds=8, cut_level=0.25)
    good = [0.5, 0.6, 0.4, 0.6, 0.5, 0.55, 0.45, 0.5] + [0.5] * 12
    base = [0.45, 0.65, 0.35, 0.62, 0.5, 0.5, 0.5, 0.5] + [0.5] * 12
    with_bad = {"base": base, "good": good, "bad": [0.0] * 20}
    # 3 contenders x 2 seeds = 6 runs, then 'bad' is cut; 10 runs left: 2 more seeds each (4), then the
    # doubling to 8 is capped by the budget at 7 (6 runs left = 3 more seeds each).
    policy = Intensifier(["base", "good", "bad"], spec, SEEDS, budget=16, worst=0.0)
    drive(policy, with_bad)
    assert "bad" not in policy.survivors()
    assert {len(r.seeds) for r in policy.summary().final if r.contender != "bad"} == {7}
    assert policy.spent <= 16
    # Without the cut (a level nothing reaches) the same budget gives each of the three 5 seeds (2, 4, then 1 more).
    strict = Intensifier(["base", "good", "bad"], RaceSpec(min_seeds=2, max_seeds=8, cut_level=0.01), SEEDS, budget=16, worst=0.0)
    drive(strict, with_bad)
    assert {len(r.seeds) for r in strict.summary().final} == {5} and strict.spent == 15


def test_the_budget_is_never_exceeded_and_a_too_small_one_is_refused():
    spec = RaceSpec(min_seeds=2, max_seeds=8, cut_level=0.01)
    table = {n: [0.3] * 20 for n in ("a", "b", "c")}
    for budget in range(6, 30):
        policy = Intensifier(["a", "b", "c"], spec, SEEDS, budget=budget, worst=0.0)
        drive(policy, table)
        assert policy.done and policy.spent <= budget
    with pytest.raises(ValueError, match="budget 5 runs cannot give 3 contenders min_seeds"):
        Intensifier(["a", "b", "c"], spec, SEEDS, budget=5, worst=0.0)


def test_a_single_contender_goes_straight_to_the_gate():
    policy = Intensifier(["base"], RaceSpec(), SEEDS, budget=0, worst=0.0)
    assert policy.done and policy.next_runs() == [] and policy.winner == "base"


# --------------------------------------------------------------------------- the gate


def test_the_gate_recommends_a_winner_that_beats_the_baseline_on_every_seed():
    result = gate(
        [0.40, 0.35, 0.45, 0.38],
        [0.10, 0.12, 0.08, 0.11],
        collapsed=[False] * 4,
        worst=0.0,
        max_collapse_share=0.25,
        confidence=0.9,
    )
    assert result.recommend and result.margin_lower > 0.2 and not result.second_look
    d = np.array([0.30, 0.23, 0.37, 0.27])  # the 90% one-sided t bound: mean - t(0.90, 3)·sd/sqrt(4)
    assert result.confidence == 0.9 and result.margin_lower == pytest.approx(d.mean() - 1.637744 * d.std(ddof=1) / 2)


def test_the_gate_refuses_a_collapsed_winner_even_with_a_positive_margin():
    result = gate(
        [0.9, 0.0, 0.9, 0.0],
        [0.1, 0.1, 0.1, 0.1],
        collapsed=[False, True, False, True],
        worst=0.0,
        max_collapse_share=0.25,
        confidence=0.9,
    )
    assert not result.recommend
    assert "collapsed on 2 of 4 seeds" in result.reason
    assert result.collapse.share == 0.5 and result.collapse.wilson95[0] < 0.5 < result.collapse.wilson95[1]


def test_the_gate_refuses_a_winner_whose_margin_bound_is_not_above_zero():
    # The bench's seed-2 case: the recommended config scored 0 on all 4 confirmation seeds.
    result = gate(
        [0.0, 0.0, 0.0, 0.0], [0.1, 0.05, 0.2, 0.1], collapsed=[True] * 4, worst=0.0, max_collapse_share=0.25, confidence=0.9
    )
    assert not result.recommend and "lower bound" in result.reason and not result.second_look  # behind: no second look
    # A mean margin of +0.1 on 4 noisy seeds is not shown either: lower bound below 0.
    noisy = gate(
        [0.6, 0.1, 0.5, 0.2], [0.2, 0.3, 0.3, 0.2], collapsed=[False] * 4, worst=0.0, max_collapse_share=0.25, confidence=0.9
    )
    assert noisy.margin["mean"] == pytest.approx(0.1) and noisy.margin_lower < 0 and not noisy.recommend
    assert noisy.second_look  # ahead on the mean: more paired seeds may show it


def test_a_diverged_confirmation_run_counts_in_the_gate_as_the_worst_value():
    clean = gate(
        [0.4, 0.4, 0.45, 0.42], [0.2, 0.2, 0.22, 0.2], collapsed=[False] * 4, worst=0.0, max_collapse_share=0.3, confidence=0.9
    )
    flaky = gate(
        [0.4, None, 0.45, 0.42],
        [0.2, 0.2, 0.22, 0.2],
        collapsed=[False, True, False, False],
        worst=0.0,
        max_collapse_share=0.3,
        confidence=0.9,
    )
    assert clean.recommend and not flaky.recommend
    assert flaky.margin["n"] == 4 and flaky.margin["mean"] == pytest.approx((0.2 - 0.2 + 0.23 + 0.22) / 4)


def test_the_gate_says_the_baseline_stands_when_the_race_kept_it():
    result = gate(
        [0.2] * 4, [0.2] * 4, collapsed=[False] * 4, worst=0.0, max_collapse_share=0.25, winner_is_baseline=True, confidence=0.9
    )
    assert not result.recommend and "the race kept the baseline" in result.reason
    assert result.margin["mean"] == 0.0  # the figures beside it are still computed


# --------------------------------------------------------------------------- the plan


def test_a_study_with_room_races_the_plan_as_set():
    p = plan(RaceSpec(), search_epochs=20 * 12, run_epochs=12, available=6, baseline=True)
    assert (p.challengers, p.select, p.confirm_seeds, p.fitted) == (4, True, 5, None)
    share = RaceSpec().max_share
    assert p.budget == min(int(240 * share / (1 - share) / 12) - 10, 5 * 8) == 14 and p.share <= share
    # The ceiling: the selection's 14, the confirmation's 2 x 5, a second look's 2 x 5, a fallback on all 10 seeds.
    assert p.ceiling == 14 + 10 + 10 + 10 and f"at most {p.ceiling} runs ({p.ceiling * 12} trial-epochs)" in p.line()


def test_one_challenger_beside_the_baseline_has_no_selection():
    # Room for one challenger's selection (2 contenders x 2 seeds) but nothing to choose between:
    # the challenger goes straight to the confirmation, which compares it with the baseline anyway.
    p = plan(RaceSpec(top_k=1), search_epochs=20 * 12, run_epochs=12, available=6, baseline=True)
    assert (p.challengers, p.select, p.budget, p.runs) == (1, False, 0, 2 * RaceSpec().confirm_seeds)


def test_a_small_study_is_fitted_and_says_so_in_one_line():
    # search.num_samples=4, train.epochs=2 on the smoke study; ASHA stopped one trial after its first epoch.
    p = plan(RaceSpec(), search_epochs=7, run_epochs=2, available=3, baseline=True)
    assert p.fitted is not None and "\n" not in p.fitted and "race fitted to the budget" in p.fitted
    assert p.challengers == 1 and p.confirm_seeds >= 2


def test_numbers_set_explicitly_that_cannot_fit_are_refused_naming_field_value_and_fix():
    with pytest.raises(PlanError) as caught:
        plan(
            RaceSpec(top_k=4, confirm_seeds=8),
            search_epochs=8,
            run_epochs=2,
            available=3,
            baseline=True,
            explicit={"top_k", "confirm_seeds"},
        )
    message = str(caught.value)
    assert "race.top_k 4" in message and "race.confirm_seeds 8" in message and "search.num_samples" in message
