"""The docs come from the code: the field table is the schema's, and the first task in
docs/your-task.md is complete (imports included) and trains as written."""

from __future__ import annotations

import json
import math
import re

import yaml

from conftest import REPO
from ratiotune.cli import FIELDS_BEGIN, FIELDS_END, fields_markdown, main
from ratiotune.core.study import load_study, schema_fields


def test_the_field_table_in_study_file_md_is_the_schemas():
    text = (REPO / "docs" / "study-file.md").read_text()
    documented = text.split(FIELDS_BEGIN, 1)[1].split(FIELDS_END, 1)[0].lstrip("\n")
    assert documented == fields_markdown(schema_fields()), (
        "docs/study-file.md's field table differs from the schema: run `ratiotune fields --markdown docs/study-file.md`"
    )
    # Fields a user asked about are there, each with its default.
    for name, default in [
        ("race.second_look_seeds", None),
        ("race.fallbacks", None),
        ("search.max_failures", None),
        ("train.fast_update", None),
        ("train.train_batch_size", None),
        ("checkpoint.keep_best_trials", None),
        ("race.max_share", "0.55"),
        ("race.max_collapse_share", "0.34"),
        ("race.confidence", "0.95"),
        ("search.lr_points", None),
    ]:
        row = next(line for line in documented.splitlines() if line.startswith(f"| `{name}` |"))
        assert default is None or f"| `{default}` |" in row, row


def test_fields_markdown_writes_the_block_and_refuses_a_file_without_one(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text(f"intro\n{FIELDS_BEGIN}\nstale\n{FIELDS_END}\noutro\n")
    assert main(["fields", "--markdown", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{FIELDS_END}\noutro\n") and "stale" not in text
    assert "| `race.fallbacks` |" in text
    bare = tmp_path / "bare.md"
    bare.write_text("no block\n")
    assert main(["fields", "--markdown", str(bare)]) == 2
    assert "has no" in capsys.readouterr().err


def test_the_first_task_in_your_task_md_runs_as_written(tiny_study, tmp_path):
    from ratiotune.core.study import check_launch
    from ratiotune.training.trainable import Trial

    text = (REPO / "docs" / "your-task.md").read_text()
    python = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    section = yaml.safe_load(re.search(r"```yaml\n(.*?)```", text, re.S).group(1))
    assert python.startswith("# task.py\n") and "import" in python.split("def ", 1)[0]
    (tmp_path / "task.py").write_text(python)
    for split in ("train", "eval", "test"):
        (tmp_path / f"{split}.txt").write_text(f"Describe a {split} lighthouse:\nName a new {split} colour:\n")
    study = json.loads(json.dumps(tiny_study))
    study["task"] = {**section["task"], "eval_samples_per_prompt": 2}
    study["search"]["metric"] = section["search"]["metric"]
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    loaded = check_launch(load_study(tmp_path / "study.yaml"))  # the load-time probe included
    assert loaded.metrics().value_range("eval/mean_reward") == (0.0, 1.0)  # set_reward_range was read
    metrics = Trial(loaded, {}).run_epoch()
    assert 0.0 <= metrics["eval/longer_fraction"] <= 1.0 and math.isfinite(metrics["search/objective"])


def test_the_readme_study_validates_and_races_against_its_baseline():
    """The README's example study is a study: it validates, its baseline lies in its space (the race
    needs one to stand against), and it is studies/smoke.yaml's search, shortened."""
    from ratiotune.core.study import validate_study

    readme = (REPO / "README.md").read_text()
    block = re.search(r"A study is one YAML file.*?```yaml\n(.*?)```", readme, re.S).group(1)
    study = validate_study(yaml.safe_load(block))
    smoke = load_study(REPO / "studies" / "smoke.yaml")
    assert study.race.enabled and study.baseline() == smoke.baseline()
    assert study.search.space == smoke.search.space and study.search.sampler == smoke.search.sampler
