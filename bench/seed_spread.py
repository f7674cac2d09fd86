"""How much does one config's outcome vary with the seed? Train configs on the smoke study over
seeds, score each run's final epoch on the design prompts.

    .venv/bin/python bench/seed_spread.py                       # the 4 configs of docs/search-quality.md, seeds 1001-1003
    .venv/bin/python bench/seed_spread.py --set train.temperature=1.0 --set train.top_p=1.0

One process, one torch thread per run (like a 1-CPU trial), no Ray: `ratiotune.training.trainable.Trial`
directly. Prints one JSON line per run (config, seed, final in-range fraction on the design
prompts, eval curve).

Design work stays apart from what the race measures: it scores on builtin:design (disjoint from
the train, eval and test sets) with seeds from 1001 up, never the race's fresh seeds (train.seed
+ 1, 2, ...) nor builtin:test. (Before this, the smoke space was designed with builtin:test and
seeds 1-3, which are race seeds: docs/search-quality.md's figures came from there.)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from ratiotune.core.study import load_study
from ratiotune.training.trainable import Trial

REPO = Path(__file__).resolve().parents[1]
CONFIGS = [(4e-3, 4, 32), (2e-3, 8, 32), (1e-3, 8, 32), (1e-2, 8, 32)]  # lr, generations, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1001, 1002, 1003])
    parser.add_argument("--prompts", default="builtin:design", help="prompt set the final epoch is scored on")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--test-pairs", type=int, default=16, help="answer pairs per design prompt")
    args = parser.parse_args()
    torch.set_num_threads(1)
    study = load_study(REPO / "studies" / "smoke.yaml", args.overrides)
    from ratiotune.tasks.records import load_records

    design_prompts = load_records(args.prompts, study.get_task().builtin_prompts)
    for lr, generations, tokens in CONFIGS:
        for seed in args.seeds:
            start = time.perf_counter()
            trial = Trial(study, {"learning_rate": lr, "num_generations": generations, "max_new_tokens": tokens}, seed=seed)
            curve = [round(trial.run_epoch()["eval/in_range_fraction"], 2) for _ in range(study.train.epochs)]
            test = trial.evaluate(args.test_pairs, design_prompts)["in_range_fraction"]
            print(
                json.dumps(
                    {
                        "lr": lr,
                        "generations": generations,
                        "tokens": tokens,
                        "seed": seed,
                        "prompts": args.prompts,
                        "final": round(test, 3),
                        "eval_curve": curve,
                        "seconds": round(time.perf_counter() - start),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
