"""Compare the trials of an experiment: `python analysis/compare_trials.py EXPERIMENT_DIR [--out DIR] [--metric M]`.

The same code as `ratiotune report` (ratiotune.results.report); writes trials.csv, curves.csv,
PNG plots and report.md into DIR (default EXPERIMENT_DIR/report/).
"""

import sys

from ratiotune.cli import main

if __name__ == "__main__":
    sys.exit(main(["report", *sys.argv[1:]]))
