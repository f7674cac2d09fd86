"""ratiotune: reproducible hyperparameter studies for two-agent MAGRPO on the length-ratio task.

`ratiotune.read_experiment(path)` gives an experiment folder as pandas DataFrames (frames.py).
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy: `ratiotune` on the command line should not pay for pandas before it needs it.
    if name in ("read_experiment", "ExperimentFrames"):
        from ratiotune import frames

        return getattr(frames, name)
    raise AttributeError(f"module 'ratiotune' has no attribute {name!r}")
