"""The tabulated benchmark is real: bench/table/smoke_table.csv is what bench/table.py writes from its
runs, and a row of it is what training gives.

The simulator (bench/simulate.py) chooses the shipped search design by replaying studies
against this table, so the table must be what `trainable.Trial` produces today: one of its
rows is retrained here and compared to the 4 decimals the table keeps. The table holds
reward_scale 100 only: under advantage normalization (smoke's setting) the scale cancels, checked
here to the bit (the same seed at scale 1 and 100 gives the same metrics, epoch by epoch).
"""

from __future__ import annotations

import csv
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "studies" / "smoke.yaml"
TABLE = REPO / "bench" / "table" / "smoke_table.csv"


def load_bench():
    spec = importlib.util.spec_from_file_location("table", REPO / "bench" / "table.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["table"] = module
    spec.loader.exec_module(module)
    return module


def test_the_runs_give_the_committed_table(tmp_path):
    """`bench/table.py studies/smoke.yaml --write-only` from the committed runs rewrites the committed CSV to the byte."""
    bench = load_bench()
    shutil.copy(TABLE.with_name("smoke_runs.jsonl"), tmp_path / "smoke_runs.jsonl")
    assert bench.main([str(SMOKE), "--write-only", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "smoke_table.csv").read_bytes() == TABLE.read_bytes()


def test_table_covers_the_grid():
    bench = load_bench()
    rows = list(csv.DictReader(TABLE.open()))
    configs = {(float(r["learning_rate"]), int(r["num_generations"]), int(r["max_new_tokens"])) for r in rows}
    grid = {(c["learning_rate"], c["num_generations"], c["max_new_tokens"]) for c in bench.grid(SMOKE, 10)}
    assert configs == grid
    seeds = {}
    for r in rows:
        seeds.setdefault((r["learning_rate"], r["num_generations"], r["max_new_tokens"]), set()).add(int(r["seed"]))
    assert min(len(s) for s in seeds.values()) >= 8


@pytest.mark.parametrize("lr", ["0.00144"])
def test_a_row_reproduces(lr, monkeypatch):
    """The cheapest config that learns (2 generations, 16 tokens) retrained on seed 1: same curve, test figure and collapse."""
    from ratiotune.training.magrpo import TrialMAGRPOTrainer

    # The table was trained with one generate() call per prompt (before issue 44): the same random stream.
    monkeypatch.setattr(TrialMAGRPOTrainer, "batched_rollouts", False)
    bench = load_bench()
    row = next(
        r
        for r in csv.DictReader(TABLE.open())
        if r["learning_rate"] == lr and r["num_generations"] == "2" and r["max_new_tokens"] == "16" and r["seed"] == "1"
    )
    config = {"learning_rate": float(lr), "num_generations": 2, "max_new_tokens": 16, "reward_scale": 100.0}
    import torch

    threads = torch.get_num_threads()
    try:
        run = bench.run_one((str(SMOKE), config, 1))  # sets one torch thread, as the table's workers had
    finally:
        torch.set_num_threads(threads)
    epochs = len(run["curve"])
    assert [f"{v:.4f}" for v in run["curve"]] == [row[f"e{i}"] for i in range(1, epochs + 1)]
    assert f"{run['test']:.4f}" == row["test_value"] and str(int(run["collapsed"])) == row["collapsed"]


def curves(study, scale: float) -> list[dict[str, float]]:
    from ratiotune.training.trainable import Trial

    config = {"learning_rate": 2.0e-3, "num_generations": 2, "max_new_tokens": 16, "reward_scale": scale}
    trial = Trial(study, config, seed=3)
    rows = []
    for _ in range(2):
        metrics = trial.run_epoch()
        # Timings differ run to run; comlrl's own reward numbers are scaled by design (not ours: raw).
        rows.append({k: v for k, v in metrics.items() if k.startswith(("train/", "eval/"))})
    return rows


def test_reward_scale_changes_nothing_under_advantage_normalization(tmp_path):
    from ratiotune.core.study import read_prompts

    study = load_bench().load(SMOKE)  # the table's study: smoke.yaml's task and training
    assert study.train.advantage_normalization
    # Smaller only where the scale plays no part: 4 training prompts, 1 eval pair per prompt.
    prompts = tmp_path / "train.txt"
    prompts.write_text("\n".join(r["prompt"] for r in study.prompts("train")[:4]) + "\n")
    study = study.model_copy(
        update={"task": study.task.model_copy(update={"train_prompts": str(prompts), "eval_samples_per_prompt": 1})}
    )
    study = read_prompts(study)
    one, hundred = curves(study, 1.0), curves(study, 100.0)
    assert one[0] and set(one[0]) == set(hundred[0])
    assert any(k.startswith("train/") for k in one[0]) and "eval/in_range_fraction" in one[0]
    assert one == hundred  # bit-identical floats, every train/ and eval/ metric, both epochs


def test_landscape_answers_from_the_runs_file(tmp_path, capsys):
    """bench/landscape.py on a made-up runs file whose figure depends on the learning rate alone."""
    import json

    spec = importlib.util.spec_from_file_location("landscape", REPO / "bench" / "landscape.py")
    landscape = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(landscape)
    runs = []
    for lr, value, chars in ((1e-5, 0.4, [40.0, 40.0]), (1e-3, 0.8, [40.0, 20.0]), (1e-2, 0.0, [0.0, 0.0])):
        for gens in (2, 4):
            for seed in (0, 1):
                evals = [{"eval/mean_chars_agent1": c, "eval/mean_chars_agent2": 45.0, "eval/mean_ratio": 1.5} for c in chars]
                runs.append(
                    {"learning_rate": lr, "num_generations": gens, "max_new_tokens": 8, "seed": seed, "test": value}
                    | {"collapsed": value == 0.0, "eval": evals}
                )
    path = tmp_path / "made_runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    assert landscape.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "learning_rate 100%, num_generations 0%, max_new_tokens 0%, seed 0%" in out
    assert "lr 0.001: 0.800 [0.800, 0.800] | 0 of 4 | 20.0 / 45.0 (1.50)" in out
    assert "lr 0.01: 0.000 [0.000, 0.000] | 4 of 4" in out and "collapsed 4 of 12" in out
    assert "lr 0.001: agent 1 40.0 -> 20.0; agent 2 45.0" in out
    # Selection by measurement on a table without noise: the best mean is always a best config (2 of 6
    # configs, both at lr 1e-3); 2 seeds a config is all the file has, so k = 4 and 8 are left out.
    assert "6 configs x 2 seeds (24 trial-epochs): >= 85% of best in 100%, mean ratio 1.00" in out
    assert "configs within 85% of the best: 2 of 6" in out and "x 4 seeds" not in out
    assert landscape.main([str(tmp_path / "absent_runs.jsonl")]) == 2
