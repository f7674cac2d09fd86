"""How much does one config's outcome vary with the seed? Train configs on the smoke study over
seeds, score each run's final epoch on the test prompts.

    .venv/bin/python bench/seed_spread.py                       # the 4 configs of docs/search-quality.md, seeds 1-3
    .venv/bin/python bench/seed_spread.py --set train.temperature=1.0 --set train.top_p=1.0

One process, one torch thread per run (like a 1-CPU trial), no Ray: `ratiotune.trainable.Trial`
directly. Prints one JSON line per run (config, seed, final test in-range fraction, eval curve).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from ratiotune.study import load_study
from ratiotune.trainable import Trial

REPO = Path(__file__).resolve().parents[1]
CONFIGS = [(4e-3, 4, 32), (2e-3, 8, 32), (1e-3, 8, 32), (1e-2, 8, 32)]  # lr, generations, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--test-pairs", type=int, default=16, help="answer pairs per test prompt")
    args = parser.parse_args()
    torch.set_num_threads(1)
    study = load_study(REPO / "studies" / "smoke.yaml", args.overrides)
    test_prompts = study.prompts("test")
    for lr, generations, tokens in CONFIGS:
        for seed in args.seeds:
            start = time.perf_counter()
            trial = Trial(study, {"learning_rate": lr, "num_generations": generations, "max_new_tokens": tokens}, seed=seed)
            curve = [round(trial.run_epoch()["eval/in_range_fraction"], 2) for _ in range(study.train.epochs)]
            test = trial.evaluate(args.test_pairs, test_prompts)["in_range_fraction"]
            print(json.dumps({"lr": lr, "generations": generations, "tokens": tokens, "seed": seed, "test": round(test, 3),
                              "eval_curve": curve, "seconds": round(time.perf_counter() - start)}), flush=True)


if __name__ == "__main__":
    main()
