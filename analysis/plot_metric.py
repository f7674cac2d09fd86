"""One metric across an experiment's trials: `python analysis/plot_metric.py EXP [--metric M] [--out FIGURE.png]`.

One line per trial over epochs (the study's metric unless --metric), the top 3 by objective
labelled (ranked in the metric's own direction). Uses only the documented API, `ratiotune.read_experiment`.
"""

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import ratiotune  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("experiment", type=Path)
    parser.add_argument("--metric", help="a reported metric, e.g. train/mean_reward (default: the study's)")
    parser.add_argument("--out", type=Path, default=Path("metric.png"))
    args = parser.parse_args(argv)
    exp = ratiotune.read_experiment(args.experiment)
    metric = args.metric or exp.rank_metric
    try:
        wide = exp.metric(metric)
    except KeyError as error:
        print(f"error: --metric {error.args[0]}", file=sys.stderr)
        return 2
    # The top 3 by this metric's objective, in its own direction (lowest first for epoch_seconds).
    top = list(exp.ranked(metric).index[:3])
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for trial in wide.columns:
        series = wide[trial].dropna()
        ax.plot(
            series.index,
            series.values,
            alpha=0.9 if trial in top else 0.3,
            lw=2 if trial in top else 1,
            label=trial if trial in top else None,
        )
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric)
    ax.set_title(exp.path.name)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"{metric}: {wide.shape[1]} trials, epochs {int(wide.index.min())}-{int(wide.index.max())} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
