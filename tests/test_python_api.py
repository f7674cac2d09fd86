"""`ratiotune.search(...)` from Python: the demo study, its search and race, in this process and silent.

One real run of studies/demo.yaml (4 trials x 3 epochs, then the race) on the session's Ray, with
progress=False; the frames it returns are checked against the study and the race's own summary.json.
"""

from __future__ import annotations

import json

import pytest

from conftest import REPO

DEMO = REPO / "studies" / "demo.yaml"


def test_search_runs_the_demo_study_silently_and_returns_its_frames(ray_session, tmp_path, capsys):
    import ratiotune

    study = ratiotune.load_study(DEMO)
    capsys.readouterr()
    exp = ratiotune.search(study, storage=tmp_path / "results", name="api", progress=False)
    assert capsys.readouterr().out == ""

    folder = tmp_path / "results" / "api"
    assert exp.path == folder
    # The trials the study asked for, each trained every epoch (fifo: nothing stopped early).
    assert len(exp.trials) == study.search.num_samples == 4
    epochs = exp.curves.groupby("trial")["epoch"].max()
    assert len(epochs) == 4 and (epochs == study.train.epochs).all()
    assert exp.hyperparameters == study.searched()
    # The race ran, and the recommendation is the one its summary.json records.
    summary = json.loads((folder / "race" / "summary.json").read_text())
    rec = exp.recommended()
    assert rec.source == "race" and rec.which == summary["recommended"]["which"]
    assert rec.hyperparameters == summary["recommended"]["hyperparameters"]
    # provenance.json names the call that made the folder.
    command = json.loads((folder / "provenance.json").read_text())["search"]["command"]
    assert command[-1].startswith("ratiotune.search(Study('demo'), overrides=['name=api']")
    # The function keeps its name once the search layer (the subpackage ratiotune.search) is imported.
    assert callable(ratiotune.search) and ratiotune.search.__module__ == "ratiotune.results.python_api"
    # A folder is never overwritten.
    with pytest.raises(ratiotune.StudyError, match="already exists"):
        ratiotune.search(study, storage=tmp_path / "results", name="api", progress=False)


def test_a_bad_override_raises_study_error_naming_the_field(tmp_path):
    import ratiotune

    with pytest.raises(ratiotune.StudyError, match=r"train\.epochs") as bad_file:
        ratiotune.search(DEMO, overrides=["train.epochs=zero"], storage=tmp_path / "results", progress=False)
    assert "'zero'" in str(bad_file.value)
    study = ratiotune.load_study(DEMO)
    with pytest.raises(ratiotune.StudyError, match=r"search\.num_samples"):
        ratiotune.search(study, overrides=["search.num_samples=-1"], storage=tmp_path / "results", progress=False)
    with pytest.raises(ratiotune.StudyError, match=r"train\.epochs"):
        ratiotune.load_study(DEMO, overrides=["train.epochs=zero"])
    assert not (tmp_path / "results").exists()  # nothing started, nothing written


def test_no_module_imports_the_search_layer_through_the_attribute_the_function_holds():
    # `import ratiotune.search.race as race` walks attributes and meets the function (ratiotune/__init__.py):
    # "cannot import name 'race' from 'search'". `from ratiotune.search import race` is the form that works.
    import re

    pattern = re.compile(r"^\s*import ratiotune\.search\.\w+(\.\w+)* as ", re.MULTILINE)
    sources = [p for folder in ("src", "tests", "bench", "analysis", "examples") for p in (REPO / folder).rglob("*.py")]
    assert len(sources) > 30
    assert [str(p.relative_to(REPO)) for p in sources if pattern.search(p.read_text())] == []
