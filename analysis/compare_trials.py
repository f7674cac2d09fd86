"""Compare the trials of an experiment: `python analysis/compare_trials.py EXPERIMENT_DIR [--out DIR] [--metric M]`.

Prints the trials ranked by the metric (in its own direction: system/epoch_seconds lowest first)
and writes the report ranked the same way (report.md, trials.csv, curves.csv, PNG plots) into DIR
(default EXPERIMENT_DIR/report/). Uses only the documented API, `ratiotune.read_experiment`.
"""

import argparse
import sys
from pathlib import Path

import ratiotune


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("experiment", type=Path)
    parser.add_argument("--out", type=Path, help="report folder (default: EXPERIMENT_DIR/report/)")
    parser.add_argument("--metric", help="rank by this reported metric (default: the study's search.metric)")
    parser.add_argument("--mode", choices=["max", "min"], help="ranking direction (default: the metric's own)")
    parser.add_argument("--top", type=int, default=5, help="trials printed")
    args = parser.parse_args(argv)
    try:
        exp = ratiotune.read_experiment(args.experiment, metric=args.metric, mode=args.mode)
        report = exp.write_report(args.out)
    except ratiotune.StudyError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    columns = [*exp.hyperparameters, "status", "epochs", "objective"]
    print(
        f"{exp.name}: {len(exp.trials)} trials ranked by {exp.rank_metric} ({exp.rank_mode}; objective = its "
        "mean over each trial's last search.objective_window epochs)"
    )
    print(exp.trials[columns].head(args.top).to_string())
    print(f"report: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
