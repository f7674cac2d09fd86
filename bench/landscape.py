"""What a table says about its landscape: `python bench/landscape.py bench/table/smollm2-cpu_runs.jsonl`.

Reads the runs a table trained (bench/table.py) and answers four questions, one block each:
- per learning rate: the final test figure (mean and range over runs), collapses, and the final
  eval answer lengths (agent 1, agent 2, their ratio): which learning rates learn;
- how much of the variance of the final test figure each axis explains alone (eta squared: the
  between-group sum of squares over the total), the seed included: does the learning rate dominate;
- the spread of the final test figure (quantiles, a 10-bin histogram, collapses): do runs
  collapse, and is the outcome bimodal;
- agent 1's answer length epoch by epoch per learning rate: how agent 1 learns to stop early;
- selection by measurement: with the N best configs known in advance, how often the best mean over k
  seeds each is a config within 85% of the best (by the mean over all its runs): what seed noise lets
  any search ship at a given compute, however it samples.
Eval figures per epoch need a runs file written since bench/table.py records them ("eval").
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

AXES = ("learning_rate", "num_generations", "max_new_tokens", "seed")


def load_runs(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_value(run: dict) -> float:
    """The run's final test figure; a diverged run (no figure) counts as 0, as the race scores it."""
    return run["test"] if run["test"] is not None else 0.0


def eta_squared(runs: list[dict], axis: str) -> float:
    """Share of the final test figure's variance that `axis` explains alone (0: none, 1: all)."""
    values = np.array([test_value(r) for r in runs])
    groups = defaultdict(list)
    for r, v in zip(runs, values):
        groups[r[axis]].append(v)
    total = ((values - values.mean()) ** 2).sum()
    between = sum(len(g) * (np.mean(g) - values.mean()) ** 2 for g in groups.values())
    return float(between / total) if total > 0 else 0.0


def final(run: dict, name: str) -> float | None:
    return run["eval"][-1].get(name) if run.get("eval") else None


def mean(values) -> float:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else float("nan")


def report(runs: list[dict], metric: str) -> list[str]:
    lines = [f"{len(runs)} runs; final test figure = the test twin of {metric}"]
    lines.append("per learning rate: test mean [min, max] | collapsed | final eval chars agent 1 / agent 2 (ratio)")
    by_lr = defaultdict(list)
    for r in runs:
        by_lr[r["learning_rate"]].append(r)
    for lr in sorted(by_lr):
        group = by_lr[lr]
        tests = [test_value(r) for r in group]
        c1, c2 = (mean(final(r, f"eval/mean_chars_agent{i}") for r in group) for i in (1, 2))
        ratio = mean(final(r, "eval/mean_ratio") for r in group)
        lines.append(
            f"  lr {lr:.3g}: {np.mean(tests):.3f} [{min(tests):.3f}, {max(tests):.3f}] | "
            f"{sum(r['collapsed'] for r in group)} of {len(group)} | {c1:.1f} / {c2:.1f} ({ratio:.2f})"
        )
    shares = ", ".join(f"{axis} {eta_squared(runs, axis):.0%}" for axis in AXES)
    lines.append(f"variance of the final test figure explained alone (eta squared): {shares}")
    tests = np.array([test_value(r) for r in runs])
    q = " / ".join(f"{v:.3f}" for v in np.quantile(tests, [0.1, 0.25, 0.5, 0.75, 0.9]))
    counts, edges = np.histogram(tests, bins=10)
    collapsed = int(sum(r["collapsed"] for r in runs))
    lines.append(f"final test figure quantiles 10/25/50/75/90%: {q}; collapsed {collapsed} of {len(runs)}")
    lines.append(f"histogram, 10 bins from {edges[0]:.3f} to {edges[-1]:.3f}: " + " ".join(map(str, counts)))
    if any(r.get("eval") for r in runs):
        epochs = max(len(r.get("eval", [])) for r in runs)
        lines.append("agent 1's eval answer length (characters) by epoch, mean over runs; agent 2's last:")
        for lr in sorted(by_lr):
            per_epoch = [
                mean(r["eval"][e]["eval/mean_chars_agent1"] for r in by_lr[lr] if len(r.get("eval", [])) > e)
                for e in range(epochs)
            ]
            last2 = mean(final(r, "eval/mean_chars_agent2") for r in by_lr[lr])
            lines.append(f"  lr {lr:.3g}: agent 1 " + " -> ".join(f"{v:.1f}" for v in per_epoch) + f"; agent 2 {last2:.1f}")
    return lines


def config(run: dict) -> tuple:
    return (run["learning_rate"], run["num_generations"], run["max_new_tokens"])


def scored(run: dict) -> float:
    """A run's figure as the race and bench/simulate.py score it: 0 when it collapsed or diverged."""
    return 0.0 if run["collapsed"] else test_value(run)


def selection_bound(runs: list[dict], tops=(10, 20, None), seeds=(1, 2, 4, 8), repeats: int = 2000) -> list[str]:
    """Pick the best mean over k runs (drawn without replacement) of each of the N best configs (by the
    mean over all their runs, scored(): the truth here); the share of picks within 85% of the best config, and
    the mean ratio to it. N None: every config. A bound on measurement alone: knowing the N best in
    advance is more than any search knows."""
    by_config = defaultdict(list)
    for r in runs:
        by_config[config(r)].append(scored(r))
    truth = sorted(((float(np.mean(v)), k) for k, v in by_config.items()), reverse=True)
    best = truth[0][0]
    epochs = max(len(r.get("curve") or r.get("eval") or [0]) for r in runs)
    rng = np.random.default_rng(0)
    lines = ["selection by measurement (the N best configs known in advance; the best mean over k seeds each ships):"]
    for top in tops:
        chosen = truth[: top or len(truth)]
        for k in seeds:
            if k > min(len(by_config[key]) for _, key in chosen):
                continue
            picks = []
            for _ in range(repeats):
                means = [np.mean(rng.choice(by_config[key], k, replace=False)) for _, key in chosen]
                picks.append(chosen[int(np.argmax(means))][0] / best)
            picks = np.array(picks)
            lines.append(
                f"  {len(chosen)} configs x {k} seeds ({len(chosen) * k * epochs} trial-epochs): "
                f">= 85% of best in {np.mean(picks >= 0.85):.0%}, mean ratio {picks.mean():.2f}"
            )
    within = sum(v >= 0.85 * best for v, _ in truth)
    lines.append(f"  configs within 85% of the best: {within} of {len(truth)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", type=Path, help="a table's <name>_runs.jsonl")
    args = parser.parse_args(argv)
    if not args.runs.is_file():
        print(f"landscape: {args.runs} does not exist", file=sys.stderr)
        return 2
    runs = load_runs(args.runs)
    meta = args.runs.with_name(args.runs.name.replace("_runs.jsonl", "_table.json"))
    metric = json.loads(meta.read_text()).get("metric", "the study's metric") if meta.is_file() else "the study's metric"
    print("\n".join(report(runs, metric)))
    if len({config(r) for r in runs}) > 1:
        print("\n".join(selection_bound(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
