"""bench/anchors.py runs the HPO field's anchors (Optuna, SMAC3, Syne Tune) against a run table: each
stays within its trial-epoch budget and ships a config of the table. Needs the bench extras
(`pip install -e '.[test,bench]'`); skipped without them. Ray Tune's HyperBandForBOHB is left out
here: a real Ray Tune run per study takes minutes (bench/anchors.py --ray-studies)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("smac")
pytest.importorskip("syne_tune")

from test_simulate import LRS, write_table  # noqa: E402  (the hand-made table of tests/test_simulate.py)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def anchors():
    sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location("anchors", REPO / "bench" / "anchors.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["anchors"] = module
    spec.loader.exec_module(module)
    return module


def test_the_blackbox_counts_epochs_once_and_reads_the_trailing_mean(anchors, tmp_path):
    import simulate

    table = simulate.load_table(write_table(tmp_path / "t.csv", diverge=(1e-3, 8, 32)))
    box = anchors.Blackbox(table, study_seed=1, budget=20)
    config = {"learning_rate": 1e-3, "num_generations": 4, "max_new_tokens": 16}
    run = box.draws.run(table.point(config), "a/1")
    assert box.evaluate(config, 4, "a/1") == pytest.approx(sum(run.curve[:4]) / 4)
    assert box.evaluate(config, 12, "a/1") == pytest.approx(sum(run.curve[8:12]) / 4)  # resumed: 8 more epochs
    assert box.spent == 12 and not box.affordable("a/2", 12) and box.affordable("a/1", 12)
    with pytest.raises(RuntimeError, match="budget"):
        box.evaluate(config, 12, "a/2")
    diverged = {"learning_rate": 1e-3, "num_generations": 8, "max_new_tokens": 32}
    assert box.evaluate(diverged, 5, "a/3") > 0 and box.evaluate(diverged, 6, "a/3") == anchors.WORST


@pytest.mark.parametrize("name", ["optuna-tpe", "optuna-gp", "smac-hb", "smac-bo", "syne-asha", "syne-bohb"])
def test_each_anchor_stays_within_budget_and_ships_a_table_config(anchors, tmp_path, name):
    import simulate

    table = simulate.load_table(write_table(tmp_path / "t.csv", seeds=range(4)))
    record = anchors.study_record(name, table, study_seed=2, budget=96)
    assert 0 < record["trial_epochs"] <= 96
    assert simulate.nearest(record["shipped"]) in table.keys
    config = record["config"]
    assert 3e-5 <= config["learning_rate"] <= 1e-2 and config["num_generations"] in (2, 4, 8)
    assert config["max_new_tokens"] in (16, 32)
    assert min(LRS) <= simulate.nearest(record["shipped"])[0] <= max(LRS)
    assert record["true"] == pytest.approx(table.true_value(record["shipped"]))
