"""bench/simulate.py replays studies against a table with the shipping code (sampler, ASHA, the race
object): checked on hand-made tables (the truth/draw split, ASHA's stops, the event queue, the
race's ceiling) and on the committed table (the race's error rate under the null). No training."""

from __future__ import annotations

import csv
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
LRS = (1.0e-4, 1.0e-3)


@pytest.fixture(scope="module")
def sim():
    spec = importlib.util.spec_from_file_location("simulate", REPO / "bench" / "simulate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["simulate"] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def level(lr: float, gens: int, tokens: int, seed: int) -> float:
    """A hand-made config's eval level: distinct for every grid point and seed, so rankings have no ties."""
    return 0.05 + 0.3 * LRS.index(lr) + 0.1 * (gens // 4) + 0.05 * (tokens // 32) + 0.013 * seed


def write_table(path: Path, seeds=range(6), diverge: tuple | None = None, seconds=lambda gens: 1.0) -> Path:
    """Every grid point of smoke's space on LRS: eval curves that rise to their level (a different
    shape per config, so ASHA's rung values differ from the final ones). diverge: a grid point that
    diverges at epoch 6 on every seed."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "learning_rate",
                "num_generations",
                "max_new_tokens",
                "seed",
                *[f"e{i}" for i in range(1, 13)],
                "test_in_range",
                "collapsed",
                "diverged_epoch",
                "seconds",
            ]
        )
        for lr in LRS:
            for gens in (2, 4, 8):
                for tokens in (16, 32):
                    for seed in seeds:
                        top = level(lr, gens, tokens, seed)
                        curve = [top * min(1.0, e / (4 + gens)) for e in range(1, 13)]
                        diverged = ""
                        if diverge == (lr, gens, tokens):
                            curve, diverged = curve[:5], 6
                        test = "" if diverged else f"{top:.4f}"
                        writer.writerow(
                            [
                                lr,
                                gens,
                                tokens,
                                seed,
                                *[f"{v:.4f}" for v in curve] + [""] * (12 - len(curve)),
                                test,
                                int(bool(diverged)),
                                diverged,
                                seconds(gens),
                            ]
                        )
    return path


def test_the_truth_comes_from_seeds_no_study_draws(sim, tmp_path):
    table = sim.load_table(write_table(tmp_path / "t.csv", diverge=(1e-3, 8, 32)))
    # Between two grid learning rates: both neighbours, weighted linearly in log lr; on or outside the grid: one.
    (low, w_low), (high, w_high) = table.point({"learning_rate": 2.9e-4, "num_generations": 4, "max_new_tokens": 16})
    assert (
        (low, high) == ((1e-4, 4, 16), (1e-3, 4, 16))
        and w_high == pytest.approx(math.log10(2.9))
        and w_low + w_high == pytest.approx(1)
    )
    assert table.point({"learning_rate": 1e-3, "num_generations": 4, "max_new_tokens": 16}) == (((1e-3, 4, 16), 1.0),)
    assert table.point({"learning_rate": 5e-5, "num_generations": 4, "max_new_tokens": 16}) == (((1e-4, 4, 16), 1.0),)
    mixed = table.point({"learning_rate": 2.9e-4, "num_generations": 4, "max_new_tokens": 16})
    assert table.true_value(mixed) == pytest.approx(w_low * table.true_value(low) + w_high * table.true_value(high))
    key = (1e-3, 4, 16)
    view = table.split(5)  # study 5's own split: half the seeds define the truth, the study draws from the rest
    truth, drawable = view.truth_seeds[key], view.draw_seeds[key]
    assert len(truth) == len(drawable) == 3 and sorted(truth + drawable) == list(range(6)) and table.epochs == 12
    assert view.truth_seeds == {k: truth for k in view.keys}  # the same seeds for every config
    assert any(table.split(s).truth_seeds[key] != truth for s in range(6, 12))  # redrawn per study
    assert view.true_value(key) == pytest.approx(np.mean([level(1e-3, 4, 16, s) for s in truth]), abs=1e-4)
    draws = sim.Draws(view, study_seed=5)
    drawn = {draws.run(key, f"race/c{i}/{i}") for i in range(200)}
    assert drawn == {table.runs[key][s] for s in drawable}  # every draw seed, never a truth seed
    assert draws.run(key, "race/c1/7") == draws.run(key, "race/c1/7")  # one identity, one run
    diverged = table.runs[(1e-3, 8, 32)][2]
    assert diverged.test == 0.0 and diverged.collapsed and diverged.epochs == 6 and view.true_value((1e-3, 8, 32)) == 0.0


def test_runs_in_one_world_share_a_seed_as_a_real_study_does(sim, tmp_path):
    """A real study trains every search trial on train.seed and every contender of race seed j on seed j:
    the simulator deals each world one of the table's draw seeds, the same for every config in it."""
    table = sim.load_table(write_table(tmp_path / "t.csv")).split(5)
    draws = sim.Draws(table, study_seed=5)
    keys = table.keys[:4]
    search = {k: draws.run(k, f"search/{i}", world="search") for i, k in enumerate(keys)}
    seed = draws.world_seed("search")
    assert seed in table.draw_seeds[keys[0]] and all(search[k] == table.runs[k][seed] for k in keys)
    race = [draws.world_seed(f"race/{j}") for j in range(len(table.world_seeds) - 1)]
    assert sorted([seed, *race]) == sorted(table.world_seeds)  # each world its own seed until they run out
    assert draws.world_seed("race/99") is None  # past the dealt seeds: an independent draw
    assert draws.run(keys[1], "race/c1/0", world="race/0") == table.runs[keys[1]][race[0]]
    again = sim.Draws(table, study_seed=5)
    assert again.world_seed("search") == seed  # a study deals the same way every time


def asha_stops(grace: int, factor: float, epochs: int, trials: list[list[float]]) -> list[int]:
    """The asynchronous successive-halving rule (Li et al. 2020; Ray's _Bracket), written out for
    trials that run one after another: at each rung a trial continues only if its objective is
    at least the (1 - 1/factor) quantile of what earlier trials recorded there."""
    rungs = [grace * factor**k for k in range(int(math.log(epochs / grace) / math.log(factor) + 1))]
    recorded: dict[float, list[float]] = {r: [] for r in rungs}
    stopped = []
    for objectives in trials:
        stop = epochs
        for epoch in range(1, epochs + 1):
            if epoch in recorded:
                earlier = recorded[epoch]
                cut = np.percentile(earlier, (1 - 1 / factor) * 100) if earlier else None
                recorded[epoch].append(objectives[epoch - 1])
                if cut is not None and objectives[epoch - 1] < cut:
                    stop = epoch
                    break
        stopped.append(stop)
    return stopped


def test_asha_stops_the_trials_the_rule_says_on_a_hand_made_table(sim, tmp_path):
    from ratiotune.core.objective import trailing_mean

    table = sim.load_table(write_table(tmp_path / "t.csv"))
    design = sim.Design(
        "one-at-a-time",
        (
            "search.max_concurrent_trials=1",
            "search.num_samples=10",
            "search.scheduler.type=asha",
            "search.scheduler.grace_period=2",
            "search.scheduler.reduction_factor=2",
        ),
    )
    trials = sim.simulate_search(sim.design_study(design, 3), sim.Draws(table, 3))
    curves = [[trailing_mean(t.run.curve[:e], 4) for e in range(1, 13)] for t in trials]
    assert [t.epoch for t in trials] == asha_stops(2, 2, 12, curves)
    assert any(t.epoch < 12 for t in trials) and any(t.epoch == 12 for t in trials)


def test_a_diverged_trial_ends_at_its_nan_epoch(sim, tmp_path):
    table = sim.load_table(write_table(tmp_path / "t.csv", diverge=(1e-4, 8, 32)))
    study = sim.design_study(sim.Design("fifo", ("search.scheduler.type=fifo", "search.num_samples=3", "race.enabled=false")), 0)
    trials = sim.simulate_search(study, sim.Draws(table, 0))
    baseline = trials[0]  # lr 5e-5 / 8 / 32 maps to (1e-4, 8, 32), which diverges on every seed
    assert (
        baseline.key == (((1e-4, 8, 32), 1.0),) and baseline.diverged and baseline.epoch == 6 and math.isnan(baseline.objective)
    )
    assert all(t.epoch == 12 for t in trials[1:] if t.key != baseline.key)


def test_trials_finish_in_the_order_their_recorded_seconds_say(sim, tmp_path):
    """Two at a time: a slot freed by a fast trial is refilled while the slow one still runs, as under Ray."""
    table = sim.load_table(write_table(tmp_path / "t.csv", seconds=lambda gens: 12.0 * gens))  # 8 gens: 4x 2 gens
    design = sim.Design(
        "fifo", ("search.sampler=random", "search.scheduler.type=fifo", "search.num_samples=6", "race.enabled=false")
    )
    trials = sim.simulate_search(sim.design_study(design, 4), sim.Draws(table, 4))
    ended = {t.number: t.ended_at for t in trials}
    assert [t.started_at for t in trials[:2]] == [0.0, 0.0]
    # Every later trial starts when one ends; each ends started + 12 epochs x its config's epoch seconds.
    assert all(t.started_at in ended.values() for t in trials[2:])
    assert all(t.ended_at == pytest.approx(t.started_at + t.run.seconds) for t in trials)
    assert sorted(ended, key=ended.get) != sorted(ended)  # not in the order they were asked for


def test_a_fallback_study_stays_within_the_plans_ceiling(sim, tmp_path):
    """Challengers that learn in the search but end at 0 on every test run are refused for the collapse
    bound; the race hands over to the search's next configs and never trains past the ceiling that the
    plan line states."""
    path = write_table(tmp_path / "t.csv", seeds=range(10))
    rows = path.read_text().splitlines()
    out = [rows[0]]
    for row in rows[1:]:
        cells = row.split(",")
        if float(cells[0]) == 1e-3:  # the search's top (higher eval levels) ends at 0 on the test prompts
            cells[16], cells[17] = "0.0000", "1"
        out.append(",".join(cells))
    path.write_text("\n".join(out) + "\n")
    table = sim.load_table(path)
    shipped = sim.Design("shipped")
    records = [sim.simulate_study(shipped, table, seed) for seed in range(4)]
    assert any(r["fallbacks"] > 0 for r in records), records
    for r in records:
        assert r["trial_epochs"] - r["search_epochs"] <= r["ceiling_epochs"], r
        assert all(key[0] == 1e-4 for key, _ in r["shipped"])  # a collapsing lr 1e-3 config never ships
    no_fallback = [sim.simulate_study(sim.Design("f0", ("race.fallbacks=0",)), table, seed) for seed in range(4)]
    assert all(r["fallbacks"] == 0 and r["shipped"] == (((1e-4, 8, 32), 1.0),) for r in no_fallback)  # the baseline stands


def test_the_simulated_sampler_proposes_what_the_real_search_proposes(sim, tmp_path):
    """The same study seed gives the same configs as search.make_searcher's OptunaSearch told the
    same values: start-up draws and the model-based ones after them."""
    from ratiotune.core.objective import OBJECTIVE
    from ratiotune.search.launch import make_searcher, param_space

    table = sim.load_table(write_table(tmp_path / "t.csv"))
    design = sim.Design(
        "seq",
        (
            "search.sampler=tpe",
            "search.max_concurrent_trials=1",
            "search.num_samples=7",
            "search.startup_trials=3",
            "search.scheduler.type=fifo",
            "race.enabled=false",
        ),
    )
    study = sim.design_study(design, 11)
    simulated = sim.simulate_search(study, sim.Draws(table, 11))
    searcher = make_searcher(study)
    searcher.set_search_properties(OBJECTIVE, "max", param_space(study))
    for trial in simulated:
        config = searcher.suggest(f"t{trial.number}")
        assert config == trial.optuna_trial.params
        searcher.on_trial_complete(f"t{trial.number}", {OBJECTIVE: trial.objective})
    assert simulated[0].config["learning_rate"] == 5e-5  # the baseline first
    assert len({t.config["learning_rate"] for t in simulated}) == 7


def test_random_search_at_equal_compute_runs_full_length_trials(sim, tmp_path):
    table = sim.load_table(write_table(tmp_path / "t.csv"))
    design = {d.name: d for d in sim.designs(budget=240)}["random"]
    record = sim.simulate_study(design, table, 0)
    assert record["trial_epochs"] == 240 and record["passed_gate"] is None


COMMITTED = REPO / "bench" / "table" / "smoke_table.csv"


def test_under_the_null_the_whole_race_confirms_at_most_at_its_stated_level(sim):
    """Baseline and challengers are one config of the committed table (independent runs each), so every
    confirmation is a false one. Second look and fallbacks included, the shipped race confirms in at
    most 1 - race.confidence of 300 studies; with each of its 3 looks at 90% (confidence 0.7 spent over
    3 looks), as the race before issue 31 decided, it confirms more than that."""
    table = sim.load_table(COMMITTED)
    level = 1 - sim.design_study(sim.Design("shipped"), 0).race.confidence
    rates = sim.error_rates(sim.Design("shipped"), table, studies=300, strong=())
    assert rates["null"] / rates["studies"] <= level, rates
    per_look_90 = sim.error_rates(sim.Design("per-look-90%", ("race.confidence=0.7",)), table, studies=300, strong=())
    assert per_look_90["null"] / per_look_90["studies"] > level, per_look_90


def test_the_sampler_settings_are_validated_and_reach_optuna(sim):
    from ratiotune.search.launch import make_sampler
    from ratiotune.core.study import StudyError

    study = sim.design_study(sim.Design("shipped"), 0)
    sampler = make_sampler(study)
    assert type(sampler).__name__ == "StagedSampler" and len(sampler.grid) == study.search.lr_points == 10
    tpe = make_sampler(sim.design_study(sim.Design("tpe", ("search.sampler=tpe", "search.startup_trials=3")), 0))
    assert type(tpe).__name__ == "TPESampler" and tpe._n_startup_trials == 3
    with pytest.raises(StudyError, match=r"startup_trials: 3 is used only by sampler tpe or gp; sampler 'random'"):
        sim.design_study(sim.Design("bad", ("search.sampler=random", "search.startup_trials=3")), 0)


def test_across_defaults_replays_every_combination_and_ends_with_the_pooled_line(sim, tmp_path, capsys):
    """--defaults all: one row per gens/tokens default combination (reward_scale is held, not a
    combination), the issue's summary line last, and the rows kept beside the other outputs."""
    import re

    assert len(sim.default_combinations(sim.SMOKE)) == 6
    table = write_table(tmp_path / "t.csv")
    out = tmp_path / "sim"
    assert sim.main(["--table", str(table), "--studies", "4", "--first", "0", "--defaults", "all", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    printed = [line for line in lines if line.startswith("shipped: num_generations=")]
    assert len(printed) == 6
    kept = (tmp_path / "sim_defaults.md").read_text().splitlines()
    assert kept[-2] == lines[-1] and all(line in kept for line in printed)
    shape = (
        r"across defaults: mean ratio \d\.\d\d \(worst \d\.\d\d\), >= 85% of best in \d+% \(worst \d+%\), "
        r"vs random [+-]\d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\] \(worst cell lo [+-]\d\.\d{3}\) at \d+ trial-epochs"
    )
    assert re.fullmatch(shape, lines[-1]), lines[-1]
    # The staged sampler ignores what the user wrote as default: every combination ships the same configs.
    assert len({line.split(": ", 2)[2] for line in printed}) == 1
