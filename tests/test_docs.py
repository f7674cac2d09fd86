"""The docs come from the code: the field table is the schema's, and the first task in
docs/your-task.md is complete (imports included) and trains as written."""

from __future__ import annotations

import json
import math
import re

import yaml

from conftest import REPO, tiny_study_dict
from ratiotune.cli import FIELDS_BEGIN, FIELDS_END, fields_markdown, main
from ratiotune.core.study import load_study, schema_fields, validate_study


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

    readme = (REPO / "README.md").read_text()
    block = re.search(r"A study is one YAML file.*?```yaml\n(.*?)```", readme, re.S).group(1)
    study = validate_study(yaml.safe_load(block))
    smoke = load_study(REPO / "studies" / "smoke.yaml")
    assert study.race.enabled and study.baseline() == smoke.baseline()
    assert study.search.space == smoke.search.space and study.search.sampler == smoke.search.sampler


# --------------------------------------------------------------------------- docs that cannot drift

# Pages whose names, paths and quoted output are checked against the code (docs/bench/ holds outputs).
PAGES = ["README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))]
# Pages whose quoted `search` / `best` output is compared, line shape by line shape, with what the code prints
# (docs/notebook.md quotes whole sessions of earlier versions, each dated and named by commit on the page).
OUTPUT_PAGES = ["README.md", "docs/search-pipeline.md"]
FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1", re.S | re.M)


def code_text(page: str) -> list[str]:
    """The page's code: its fenced blocks and its `inline` spans (prose may say "ratiotune computes")."""
    text = (REPO / page).read_text()
    return [m.group(2) for m in FENCE.finditer(text)] + re.findall(r"`([^`\n]+)`", FENCE.sub("", text))


def named(pattern: str, pages: list[str] = PAGES, code_only: bool = True) -> list[tuple[str, str]]:
    """(page, the pattern's first group) for every match on the pages (in their code only, by default)."""
    found = []
    for page in pages:
        for chunk in code_text(page) if code_only else [(REPO / page).read_text()]:
            found += [(page, m.group(1)) for m in re.finditer(pattern, chunk)]
    return found


def test_every_study_file_and_script_the_docs_name_exists():
    pages = PAGES
    studies = named(r"(?<![\w/.-])(studies/[\w.-]+\.yaml)\b", pages, code_only=False)
    scripts = named(r"(?<![\w/.-])((?:bench|analysis)/[\w/-]+\.(?:py|sh))\b", pages, code_only=False)
    assert len(studies) > 20 and len(scripts) > 20  # the patterns still find what the pages name
    missing = sorted({(page, path) for page, path in studies + scripts if not (REPO / path).is_file()})
    assert not missing, f"the docs name files that do not exist: {missing}"
    # docs/development.md's layout lists what is in bench/ now.
    layout = (REPO / "docs" / "development.md").read_text().split("\nbench/", 1)[1].split("\ntests/", 1)[0]
    unlisted = [p.name for p in (REPO / "bench").iterdir() if p.name != "__pycache__" and p.name not in layout]
    assert not unlisted, f"docs/development.md's bench/ entry does not list {unlisted}"


def test_every_ratiotune_command_and_make_target_the_docs_name_exists():
    import argparse

    from ratiotune.cli import build_parser

    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    commands = set(subparsers.choices)
    targets = set(re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), re.M))
    used = named(r"(?<![\w.])ratiotune ([a-z][\w-]*)")  # not `from ratiotune import`: a dot or word before it
    used = [(page, c) for page, c in used if c != "import"]
    made = named(r"(?<![\w-])make ([a-z][\w-]*)")
    assert {"search", "best", "retrain"} <= {c for _, c in used} and {"demo", "test"} <= {t for _, t in made}
    assert not [u for u in used if u[1] not in commands], f"not a `ratiotune` command (cli.build_parser: {sorted(commands)})"
    assert not [m for m in made if m[1] not in targets], f"not a Makefile target ({sorted(targets)})"


def study_field(key: str, fields: dict[str, str]) -> bool:
    """Whether `--set key=...` names a study field: a schema row (any name for search.space.NAME), a key
    under a mapping field (task.options.x, search.baseline.x), or a searched value by its bare name (`train`)."""
    from ratiotune.core.study import SEARCHABLE

    if key in SEARCHABLE:
        return True
    for name, kind in fields.items():
        if re.fullmatch(re.escape(name).replace("NAME", r"[^.]+"), key):
            return kind != "section"
        if kind.startswith("dict of") and key.startswith(name + "."):
            return True
    return False


def test_every_set_override_the_docs_name_is_a_study_field():
    fields = {name: kind for name, kind, _, _ in schema_fields()}
    keys = [(page, k) for page, k in named(r"--set[ =]([\w.]+)=") if not (k.isupper() or k == "key")]  # NAME=VALUE
    assert len(keys) > 20
    assert study_field("search.space.temperature.low", fields) and not study_field("search.spacey", fields)
    assert not [k for k in keys if not study_field(k[1], fields)], "`--set` of a key the study schema does not have"


# What the code prints, reduced to shapes: numbers -> #, a run of numbers -> one #, a config
# ('lr 0.00275, gens 8, tokens 32, scale 100') -> CONFIG, a trial's id -> TRIAL, a study's name -> NAME.
def shape(line: str) -> str:
    line = re.sub(r"^(# |\[\d+:\d\d(:\d\d)?\] )", "", line.rstrip())
    line = re.sub(r"^study \S+ \([^)]*\)", "study NAME (SOURCE)", line)
    line = re.sub(r"\btrial_[0-9a-f]+\b", "TRIAL", line)
    line = re.sub(r"\b(lr|gens|tokens|scale) [\d.e+-]+(, (lr|gens|tokens|scale) [\d.e+-]+)*", "CONFIG", line)
    line = re.sub(r"\d+(\.\d+)?(e[+-]?\d+)?", "#", line)
    return re.sub(r"#(, #(?!%))+", "#", line)  # not "sd #, #% CI"


# The lines quoted on the pages that come from these formats are compared; each must be printable.
KINDS = (
    "study NAME",
    "space: ",
    "plan: ",
    "note: ",
    "TRIAL started",
    "TRIAL epoch",
    "TRIAL finished",
    "confirmed: ",
    "not confirmed",
    "race winner: ",
    "test/",
    "passed over",
    "winner (",
    "best challenger (",
    "baseline (",
    "  per seed: ",
    "re-run the ",
    "margin over the baseline",
    "selection figure",
    "race plan: ",
    "race fitted to the budget",
    "recommended: ",
)


def printed_lines(tmp_path, capsys) -> list[str]:
    """Lines the code prints now: the search's header for the shipped smoke and demo studies, a trial's
    progress lines, the race's plan lines, and `best` on race summaries (confirmed, the baseline kept)."""
    from types import SimpleNamespace

    from test_race import race_summary, run

    from ratiotune.core.experiment import Experiment
    from ratiotune.core.race_summary import SUMMARY_FILE, race_dir
    from ratiotune.results.recommended import recommended
    from ratiotune.search.progress import SearchProgress, header

    lines = []
    for name in ("smoke", "demo"):
        study = load_study(REPO / "studies" / f"{name}.yaml")
        lines += header(study, f"studies/{name}.yaml", f"results/{name}", REPO / "results" / name / "ray.log")
        # The plan fitted to searches of every size: each way the fitted-plan line can read.
        lines += [study.race_plan().line(), *(study.race_plan(search_epochs=e).fitted or "" for e in (4, 8, 12, 24, 60, 120))]
    progress = SearchProgress(study)
    progress.setup()
    config = {"learning_rate": 7e-4, "num_generations": 2, "max_new_tokens": 16, "reward_scale": 100}
    trial = SimpleNamespace(path="results/demo/trial_1c3f7b92", config=config)
    progress.on_trial_start(0, [], trial)
    progress.on_trial_result(0, [], trial, {"epoch": 1, "search/objective": 0.25})
    trial.last_result = {"epoch": study.train.epochs, "search/objective": 0.5, "done": True}
    progress.on_trial_result(0, [], trial, trial.last_result)
    progress.on_trial_complete(0, [], trial)
    lines += capsys.readouterr().out.splitlines()
    confirmed_race = race_summary(tiny_study_dict(tmp_path / "a"), [0.45, 0.5, 0.4, 0.48], [0.2, 0.25, 0.15, 0.2])
    refused_race = race_summary(tiny_study_dict(tmp_path / "b"), [0.9, 0.0, 0.0, 0.8], [0.2] * 4)
    for k, summary in enumerate([confirmed_race, refused_race, {**refused_race, "race_kept_baseline": True}]):
        # A config the gate passed over for its collapses, in summary["fallbacks"]'s form (race_summary.summarize).
        summary["fallbacks"] = [{key: summary["winner"][key] for key in ("config", "stats", "collapse")}]
        folder = tmp_path / f"experiment{k}"
        race_dir(folder).mkdir(parents=True)
        (race_dir(folder) / SUMMARY_FILE).write_text(json.dumps(summary))
        search_trial = run(1, 0, [0.3, 0.4])
        lines += str(
            recommended(Experiment(folder, validate_study(tiny_study_dict(tmp_path / "a")), [search_trial]))
        ).splitlines()
    return lines


def quoted_lines(page: str) -> list[str]:
    return [line for block in FENCE.finditer((REPO / page).read_text()) for line in block.group(2).splitlines()]


def printable(line: str, shapes: list[str]) -> bool:
    """A quoted line's shape is one the code prints; a line the page cuts short (… or ...) starts like one."""
    quoted = shape(line)
    cut = re.split(r"\.\.\.|…", quoted)[0]
    return quoted in shapes or (cut != quoted and any(s.startswith(cut) for s in shapes))


def test_the_output_the_docs_quote_is_what_the_code_prints_now(tmp_path, capsys):
    shapes = [shape(line) for line in printed_lines(tmp_path, capsys)]
    assert all(any(s.startswith(kind) for s in shapes) for kind in KINDS), "a kind of line the code no longer prints"
    wrong = []
    for page in OUTPUT_PAGES:
        for line in quoted_lines(page):
            if shape(line).startswith(KINDS) and not printable(line, shapes):
                wrong.append(f"{page}: {line}")
    assert not wrong, "quoted output the code no longer prints:\n" + "\n".join(wrong)
