"""`ratiotune.search(...)`: a study started from Python (a notebook), returned as DataFrames.

The Python face of `ratiotune search`, as Ray Tune's `Tuner(...).fit()` or Optuna's `optimize()` are
theirs: it runs the command's own code (search/study_run.search: header, pre-flight, trials, trial
table, race), then returns `ratiotune.read_experiment` of the folder it made. Where the command prints
a line and exits with a status, this raises StudyError: a bad study or override, a taken name, an
interruption (search/study_run.RunStopped, whose message is the `ratiotune resume` hint), a study that
produced no result.

`progress=False` sends what the command prints on stdout (the header, a line per trial event, the
trial table, the race's lines) nowhere, by redirecting sys.stdout for the call: every one of those
lines is a plain print on the driver (search/progress.py), and so are the trial processes' lines that
a Ray started with log_to_driver forwards. Notes and warnings stay on stderr.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

# `import ratiotune` imports this module (ratiotune/__init__.py says why): only the standard library
# here, the rest inside the functions.
if TYPE_CHECKING:
    from ratiotune.core.study import Study
    from ratiotune.results.frames import ExperimentFrames


def search(
    study: Study | str | Path,
    *,
    overrides: list[str] | tuple[str, ...] = (),
    storage: str | Path = "results",
    name: str | None = None,
    progress: bool = True,
) -> ExperimentFrames:
    """Run a study's search and race to the end; return the experiment as `ratiotune.read_experiment` reads it.

    study: a study file, or a Study (`ratiotune.load_study(path)`, then edited as a validated value).
    overrides: `--set` strings, e.g. ["train.epochs=2", "search.num_samples=8"], validated like the file.
    storage: the local folder the experiment goes under (STORAGE/NAME; never overwritten).
    name: the experiment's name (default: the study's name).
    progress: print what `ratiotune search` prints (True), or nothing on stdout (False).

    Ray: a Ray this process already runs is used (ray.init before the call, or an earlier search);
    otherwise a local one is started and left running for the next call, as Tune's fit() does.
    """
    from ratiotune.core.storage import is_uri
    from ratiotune.core.study import Study, StudyError
    from ratiotune.results.frames import read_experiment
    from ratiotune.results.tables import print_summary
    from ratiotune.search import study_run

    if is_uri(storage):
        raise StudyError(
            f"storage {storage}: ratiotune.search reads the experiment back as DataFrames, which needs a local "
            "folder; run `ratiotune search --storage URI` on the command line for remote storage"
        )
    overrides = [*override_list(overrides), *([f"name={name}"] if name else [])]
    # provenance.json records the command that made a folder; here, the call.
    shown = f"Study({study.name!r})" if isinstance(study, Study) else repr(str(study))
    call = f"ratiotune.search({shown}, overrides={overrides!r}, storage={str(storage)!r})"
    with contextlib.ExitStack() as stack:
        if not progress:
            stack.enter_context(contextlib.redirect_stdout(stack.enter_context(open(os.devnull, "w"))))
        folder = study_run.search(study, overrides=overrides, storage_root=str(storage), argv=[call], summarize=print_summary)
    return read_experiment(folder)


def load_study(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Study:
    """A study file as a validated Study, with `--set`-style overrides applied; raises StudyError naming
    the field, the value and what is allowed. What `ratiotune search FILE --set ...` runs."""
    from ratiotune.core.study import load_study as load

    return load(path, override_list(overrides))


def override_list(overrides: list[str] | tuple[str, ...]) -> list[str]:
    from ratiotune.core.study import StudyError

    if isinstance(overrides, str):  # one "key=value" given bare would be read letter by letter
        raise StudyError(f"overrides={overrides!r}: a list of 'dotted.key=value' strings, e.g. ['train.epochs=2']")
    return list(overrides)
