"""Compare two (or more) experiments' trials: `python analysis/compare_experiments.py EXP_A EXP_B [--out FIGURE.png]`.

Prints one summary row per experiment (trials, trial-epochs, best objective, the race's
winner and its honest figure) and the top trials of each, and draws every trial's objective
per experiment side by side. Uses only the documented API, `ratiotune.read_experiment`.
"""

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import ratiotune  # noqa: E402


def summary_row(exp) -> dict:
    objectives = exp.trials["objective"].dropna() if len(exp.trials) else []
    row = {
        "experiment": exp.path.name,
        "trials": len(exp.trials),
        "trial-epochs": int(exp.trials["epochs"].sum()) if len(exp.trials) else 0,
        # In the study's own direction: a study that minimises has its best at the bottom.
        "best objective": (objectives.max() if exp.rank_mode == "max" else objectives.min()) if len(objectives) else None,
        "mode": exp.rank_mode,
    }
    if exp.race:
        rec = exp.recommended()
        # The honest figure is the recommended config's: the baseline's when the gate kept it,
        # never the best challenger's beside it.
        row["recommended"] = rec.which or "nothing (no baseline, gate not passed)"
        row["config"] = ", ".join(f"{k}={v:.3g}" for k, v in rec.config.items())
        row[f"honest mean ({rec.figures['metric']})"] = rec.figures["mean"] if rec.which else None
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("experiments", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("compare_experiments.png"))
    parser.add_argument("--top", type=int, default=3, help="trials listed per experiment")
    args = parser.parse_args(argv)
    experiments = [ratiotune.read_experiment(path) for path in args.experiments]

    import pandas as pd

    print(pd.DataFrame([summary_row(e) for e in experiments]).to_string(index=False))
    for exp in experiments:
        print(f"\n{exp.path.name}: top {args.top} by objective ({exp.rank_metric}, {exp.rank_mode})")
        print(exp.trials[[*exp.hyperparameters, "status", "epochs", "objective"]].head(args.top).to_string())

    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(experiments), 3.6))
    for i, exp in enumerate(experiments):
        values = exp.trials["objective"].dropna()
        ax.scatter([i] * len(values), values, alpha=0.7)
    ax.set_xticks(range(len(experiments)), [e.path.name for e in experiments], rotation=15)
    ax.set_ylabel("search/objective per trial")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
