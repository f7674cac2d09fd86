"""bench/simulate.py replays studies against a table with the pipeline's own pieces: checked on a
hand-made table (ASHA's stops, the sampler's proposals, the compute count) and, when the committed
table is there, on a few real replays. No training, no Ray session; seconds."""

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


def write_table(path: Path, seeds=range(6), diverge: tuple | None = None) -> Path:
    """Every grid point of smoke's space on LRS: eval curves that rise to their level (a different
    shape per config, so ASHA's rung values differ from the final ones)."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["learning_rate", "num_generations", "max_new_tokens", "seed", *[f"e{i}" for i in range(1, 13)],
                         "test_in_range", "collapsed", "diverged_epoch", "seconds"])
        for lr in LRS:
            for gens in (2, 4, 8):
                for tokens in (16, 32):
                    for seed in seeds:
                        top = level(lr, gens, tokens, seed)
                        curve = [top * min(1.0, e / (4 + gens)) for e in range(1, 13)]
                        diverged = ""
                        if diverge == (lr, gens, tokens, seed):
                            curve, diverged = curve[:5], 6
                        test = "" if diverged else f"{top:.4f}"
                        writer.writerow([lr, gens, tokens, seed, *[f"{v:.4f}" for v in curve] + [""] * (12 - len(curve)),
                                         test, int(bool(diverged)), diverged, 1.0])
    return path


def test_the_table_maps_configs_to_the_nearest_grid_point_and_counts_collapse_as_zero(sim, tmp_path):
    table = sim.load_table(write_table(tmp_path / "t.csv", diverge=(1e-3, 8, 32, 2)))
    assert table.point({"learning_rate": 2.9e-4, "num_generations": 4, "max_new_tokens": 16}) == (1e-4, 4, 16)
    assert table.point({"learning_rate": 3.3e-4, "num_generations": 4, "max_new_tokens": 16}) == (1e-3, 4, 16)
    assert table.seeds == list(range(6)) and table.epochs == 12
    diverged = table.run((1e-3, 8, 32), 2)
    assert diverged.test == 0.0 and diverged.collapsed and len(diverged.curve) == 5
    expected = np.mean([0 if s == 2 else level(1e-3, 8, 32, s) for s in range(6)])
    assert table.true_value((1e-3, 8, 32)) == pytest.approx(expected, abs=1e-4)


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
    design = sim.Design("one-at-a-time", ("search.max_concurrent_trials=1", "search.num_samples=10",
                                          "search.scheduler.grace_period=2", "search.scheduler.reduction_factor=2"))
    study = sim.design_study(design, 3)
    trials = sim.simulate_search(study, table, lambda n: 0)
    curves = [[trailing_mean(table.run(t.key, 0).curve[:e], 4) for e in range(1, 13)] for t in trials]
    assert [t.epoch for t in trials] == asha_stops(2, 2, 12, curves)
    assert any(t.epoch < 12 for t in trials) and any(t.epoch == 12 for t in trials)


def test_a_diverged_trial_ends_at_its_nan_epoch(sim, tmp_path):
    table = sim.load_table(write_table(tmp_path / "t.csv", diverge=(1e-4, 8, 32, 0)))
    study = sim.design_study(sim.Design("fifo", ("search.scheduler.type=fifo", "search.num_samples=3", "race.enabled=false")), 0)
    trials = sim.simulate_search(study, table, lambda n: 0)
    baseline = trials[0]  # lr 5e-5 / 8 / 32 maps to (1e-4, 8, 32), the diverged run
    assert baseline.key == (1e-4, 8, 32) and baseline.diverged and baseline.epoch == 6 and math.isnan(baseline.objective)
    assert all(t.epoch == 12 for t in trials[1:])


def test_the_simulated_sampler_proposes_what_the_real_search_proposes(sim, tmp_path):
    """The same study seed gives the same configs as search.make_searcher's OptunaSearch told the
    same values: start-up draws and the model-based ones after them."""
    from ratiotune.core.objective import OBJECTIVE
    from ratiotune.search.launch import make_searcher, param_space

    table = sim.load_table(write_table(tmp_path / "t.csv"))
    design = sim.Design("seq", ("search.max_concurrent_trials=1", "search.num_samples=7", "search.startup_trials=3",
                                "search.scheduler.type=fifo", "race.enabled=false"))
    study = sim.design_study(design, 11)
    simulated = sim.simulate_search(study, table, lambda n: 0)
    searcher = make_searcher(study)
    searcher.set_search_properties(OBJECTIVE, "max", param_space(study))
    for trial in simulated:
        config = searcher.suggest(f"t{trial.number}")
        assert config == trial.optuna_trial.params
        searcher.on_trial_complete(f"t{trial.number}", {OBJECTIVE: trial.objective})
    assert simulated[0].config["learning_rate"] == 5e-5  # the baseline first
    assert len({t.config["learning_rate"] for t in simulated}) == 7


def test_a_study_counts_its_compute_in_trial_epochs_and_the_race_keeps_to_its_share(sim, tmp_path):
    table = sim.load_table(write_table(tmp_path / "t.csv", seeds=range(10)))
    for seed in range(4):
        record = sim.simulate_study(sim.Design("shipped", as_shipped=True), table, seed)
        study = sim.design_study(sim.Design("shipped", as_shipped=True), seed)
        assert record["search_epochs"] <= study.search.num_samples * study.train.epochs
        assert record["trial_epochs"] == record["search_epochs"] + record["race_epochs"]
        # The race fitted to race.max_share of the study, the search counted as it really ran (intensify.plan);
        # the gate's second look (winner and baseline on race.second_look_seeds more seeds) comes on top.
        plan = study.race_plan(search_epochs=record["search_epochs"])
        second = 2 * study.race.second_look_seeds * study.train.epochs if record["extended"] else 0
        assert 0 < record["race_epochs"] - second <= plan.runs * study.train.epochs
        assert (record["race_epochs"] - second) / (record["trial_epochs"] - second) <= study.race.max_share + 1e-9
        assert sim.simulate_study(sim.Design("shipped", as_shipped=True), table, seed) == record  # deterministic


def test_the_gate_ships_the_baseline_when_no_challenger_is_shown_better(sim, tmp_path):
    """On a table where every config is worth the same on every seed, nothing beats the baseline."""
    path = write_table(tmp_path / "t.csv", seeds=range(10))
    rows = path.read_text().splitlines()
    flat = [rows[0]] + [",".join(r.split(",")[:4] + ["0.3000"] * 12 + ["0.3000", "0", "", "1.0"]) for r in rows[1:]]
    path.write_text("\n".join(flat) + "\n")
    table = sim.load_table(path)
    for seed in range(3):
        record = sim.simulate_study(sim.Design("shipped", as_shipped=True), table, seed)
        assert record["passed_gate"] is False and record["shipped"] == (1e-4, 8, 32)  # the baseline's grid point
        # Nothing collapsed: the margin's bound kept the baseline, against a winner worth the same.
        assert record["refused_for"] == "margin" and record["refused_winner_true"] == pytest.approx(0.3)


def test_why_the_gate_kept_the_baseline_is_counted(sim, tmp_path):
    """Challengers that learn in the search but end at 0 on every test run are refused for the collapse
    bound, and --refusals' line counts them apart from the margin's refusals."""
    path = write_table(tmp_path / "t.csv", seeds=range(10))
    rows = path.read_text().splitlines()
    out = [rows[0]]
    for row in rows[1:]:
        cells = row.split(",")
        # lr 1e-3 (the search's top: higher eval levels) ends at 0 on the test prompts; lr 1e-4, the baseline's, does not.
        if float(cells[0]) == 1e-3:
            cells[16], cells[17] = "0.0000", "1"  # test figure 0, collapsed
        out.append(",".join(cells))
    path.write_text("\n".join(out) + "\n")
    table = sim.load_table(path)
    # Without the fallback (race.fallbacks 0) the collapsing winner's refusal is the verdict.
    no_fallback = sim.Design("shipped-fallback0", as_shipped=True, fallback=0)
    records = [sim.simulate_study(no_fallback, table, seed) for seed in range(3)]
    assert all(r["refused_for"] == "collapse" and r["shipped"] == (1e-4, 8, 32) for r in records), records
    line = sim.refusal_line("shipped-fallback0", records, table.true_value((1e-4, 8, 32)))
    assert "kept the baseline in 3 of 3 studies: 3 for the collapse bound, 0 for the margin's bound" in line
    # As shipped, the race hands over to the search's next configs: here lr 1e-4 ones that do not
    # collapse but are no better than the baseline (the best lr 1e-4 point), so the baseline still ships.
    records = [sim.simulate_study(sim.Design("shipped", as_shipped=True), table, seed) for seed in range(3)]
    assert all(r["shipped"] == (1e-4, 8, 32) for r in records), records
    assert any(r["raced_winner"][0] == 1e-4 and r["refused_for"] == "margin" for r in records), records


def test_random_search_at_equal_compute_runs_full_length_trials(sim, tmp_path):
    table = sim.load_table(write_table(tmp_path / "t.csv"))
    design = {d.name: d for d in sim.designs(budget=240)}["random"]
    record = sim.simulate_study(design, table, 0)
    assert record["trial_epochs"] == 240 and record["race_epochs"] == 0


COMMITTED = REPO / "bench" / "table" / "smoke_table.csv"


@pytest.mark.skipif(not COMMITTED.exists(), reason="bench/table/smoke_table.csv is not in this checkout yet")
def test_replays_against_the_committed_table(sim):
    table = sim.load_table(COMMITTED)
    assert len(table.keys) == 60 and len(table.seeds) >= 8
    for seed in range(3):
        record = sim.simulate_study(sim.Design("shipped", as_shipped=True), table, seed)
        assert 0 <= record["ratio"] <= 1 and record["trial_epochs"] <= 8 * 12 / (1 - 0.65) + 1 + 2 * 4 * 12  # + a second look
        assert record["shipped"] in table.keys


def test_the_sampler_settings_are_validated_and_reach_optuna(sim):
    from ratiotune.search.launch import make_sampler
    from ratiotune.core.study import StudyError

    study = sim.design_study(sim.Design("shipped", as_shipped=True), 0)
    sampler = make_sampler(study)
    assert type(sampler).__name__ == "TPESampler"
    assert sampler._n_startup_trials == study.search.startup_trials == 3 and sampler._multivariate
    with pytest.raises(StudyError, match=r"startup_trials: 3 is used only by sampler tpe or gp; sampler 'random'"):
        sim.design_study(sim.Design("bad", ("search.sampler=random", "search.startup_trials=3")), 0)
    with pytest.raises(StudyError, match=r"multivariate: true is a tpe option; sampler is 'qmc'"):
        sim.design_study(sim.Design("bad", ("search.sampler=qmc", "search.multivariate=true")), 0)
