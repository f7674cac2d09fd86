"""ratiotune: reproducible hyperparameter studies for two-agent MAGRPO (CoMLRL) tasks on Ray Tune + Optuna.

`ratiotune.read_experiment(path)` gives an experiment folder as pandas DataFrames (results/frames.py).
docs/development.md shows the layers: tasks/, core/, training/, search/, results/, then cli.py.
"""

__version__ = "0.2.0"


def __getattr__(name: str):
    # Lazy: `ratiotune` on the command line should not pay for pandas before it needs it.
    if name in ("read_experiment", "ExperimentFrames"):
        from ratiotune.results import frames

        return getattr(frames, name)
    if name == "StudyError":  # what the API raises for a folder it cannot read (one line, no traceback needed)
        from ratiotune.core.study import StudyError

        return StudyError
    raise AttributeError(f"module 'ratiotune' has no attribute {name!r}")
