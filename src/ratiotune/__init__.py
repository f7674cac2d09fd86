"""ratiotune: reproducible hyperparameter studies for two-agent MAGRPO (CoMLRL) tasks on Ray Tune + Optuna.

`ratiotune.read_experiment(path)` gives an experiment folder as pandas DataFrames (results/frames.py);
`ratiotune.search(study)` runs a study from Python and returns those, `ratiotune.load_study(path)` reads
a study file as a validated Study (results/python_api.py).
docs/development.md shows the layers: tasks/, core/, training/, search/, results/, then cli.py.
"""

import importlib

# `ratiotune.search` names two things: the search layer (the subpackage src/ratiotune/search/) and the
# function that runs a study from Python. Importing a subpackage for the first time sets the package's
# attribute of that name to it, so the subpackage is imported first (its __init__ is a docstring) and
# the function then takes the name for good. Imports still find the subpackage (`from ratiotune.search
# import race` goes through sys.modules); only `import ratiotune.search.race as race`, which walks
# attributes, would meet the function: write it as a `from` import.
importlib.import_module("ratiotune.search")
from ratiotune.results.python_api import load_study as load_study, search as search  # noqa: E402  (stdlib only)

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
