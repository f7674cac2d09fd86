"""Each validation rule refuses a bad study with a message naming the field and the value."""

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_cli
from ratiotune.core.study import StudyError, load_study, validate_study

NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}


def refused(study: dict, *fragments: str) -> str:
    with pytest.raises(StudyError) as info:
        validate_study(study)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


def with_change(study: dict, dotted: str, value) -> dict:
    study = copy.deepcopy(study)
    node = study
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return study


def test_the_tiny_study_is_valid(tiny_study):
    study = validate_study(tiny_study)
    assert study.hyperparameters({"learning_rate": 0.003}) == {
        "learning_rate": 0.003,
        "num_generations": 2,
        "max_new_tokens": 8,
        "reward_scale": 100.0,
    }


def test_train_eval_and_test_prompts_must_be_disjoint(tiny_study, write_study):
    study = with_change(tiny_study, "task.test_prompts", tiny_study["task"]["eval_prompts"])
    with pytest.raises(StudyError) as caught:
        load_study(write_study(study))
    message = str(caught.value)
    assert message.startswith("task.eval_prompts (") and "task.test_prompts (" in message and "\n" not in message
    assert "'Describe a village on the back of a whale:'" in message
    # builtin:tutorial is the first 10 prompts of builtin:train: the two cannot be train and eval.
    with pytest.raises(StudyError, match=r"task.train_prompts \(builtin:tutorial\) and task.eval_prompts \(builtin:train\)"):
        load_study(write_study({**tiny_study, "task": {"train_prompts": "builtin:tutorial", "eval_prompts": "builtin:train"}}))
    # Readers of an experiment folder do not re-check: a folder stays readable.
    assert load_study(write_study(study), require_prompts=False).task.test_prompts == tiny_study["task"]["eval_prompts"]


@pytest.mark.parametrize("path", sorted((REPO / "studies").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_studies_validate(path):
    study = load_study(path)
    # Each searches on the held-out eval prompts: length-ratio studies its in-range share, the
    # headline-expansion study the mean reward (coverage and length band together), and so does the
    # pretrained model's study: its agents start at a ratio near 1, 0 of 16 eval pairs in range.
    mean_reward = study.task.name == "headline-expansion" or study.model.name == "builtin:smollm2"
    expected = "eval/mean_reward" if mean_reward else "eval/in_range_fraction"
    assert study.search.metric == expected
    assert study.search.metric in study.metrics().selectable
    # Every named hyperparameter is in the space (every trial records all four), and the three that
    # do not cancel vary: a design that holds a value at its default bets on that default.
    space = study.search.space
    assert set(space) == {"learning_rate", "num_generations", "max_new_tokens", "reward_scale"}
    assert space["learning_rate"].low < space["learning_rate"].high
    assert len(space["num_generations"].values) >= 2 and len(space["max_new_tokens"].values) >= 2


def test_qwen_study_is_the_original_setup_on_gpu():
    study = load_study(REPO / "studies" / "qwen2.5-0.5b.yaml")
    assert study.model.name == "Qwen/Qwen2.5-0.5B" and study.model.dtype == "bfloat16"
    assert study.train.epochs == 3 and 0 < study.resources.gpu < 1


def test_unknown_keys_are_named_with_a_suggestion(tiny_study):
    refused(with_change(tiny_study, "trian", {}), "trian: unknown key", "did you mean 'train'")
    refused(with_change(tiny_study, "train.learnig_rate", 1e-3), "train.learnig_rate", "did you mean 'learning_rate'")
    refused(with_change(tiny_study, "search.space.learning_rate.hgih", 1), "hgih", "did you mean 'high'")
    refused(
        with_change(tiny_study, "search.space.learnig_rate", {"type": "choice", "values": [1e-3]}),
        "'learnig_rate' cannot be searched",
        "did you mean 'learning_rate'",
    )


@pytest.mark.parametrize(
    "dotted, value, fragments",
    [
        ("search.space.learning_rate", {"type": "loguniform", "low": 0.0, "high": 1e-2}, ["0 < low < high", "low=0.0"]),
        ("search.space.learning_rate", {"type": "loguniform", "low": 1e-2, "high": 1e-3}, ["must be < high"]),
        ("search.space.num_generations", {"type": "choice", "values": [1, 4]}, ["num_generations", ">= 2", "got 1"]),
        ("train.num_generations", 1, ["train.num_generations", "got 1"]),
        ("train.max_new_tokens", 0, ["train.max_new_tokens", "got 0"]),
        ("search.space.max_new_tokens", {"type": "int", "low": 0, "high": 8}, ["max_new_tokens", ">= 1"]),
        ("search.num_samples", 0, ["search.num_samples", "got 0"]),
        ("search.metric", "eval/in_range", ["eval/in_range", "did you mean 'eval/in_range_fraction'"]),
        ("search.mode", "maximize", ["search.mode", "'max' or 'min'", "maximize"]),
        ("task.target_min", 4.0, ["target_min (4.0) must be <= target_max (3.0)"]),
        ("model.name", "builtin:huge", ["builtin:huge", "builtin:tiny"]),
        ("task.train_prompts", "builtin:trian", ["builtin:trian", "builtin:train"]),
        ("search.sampler", "grid", ["search.sampler", "grid"]),
        ("search.space.reward_scale", {"type": "choice"}, ["needs a non-empty 'values'"]),
    ],
)
def test_bad_values_are_refused(tiny_study, dotted, value, fragments):
    refused(with_change(tiny_study, dotted, value), *fragments)


def test_set_overrides_are_validated(tiny_study, write_study):
    path = write_study(tiny_study)
    study = load_study(path, ["train.epochs=5", "search.space.reward_scale={type: choice, values: [1, 100]}"])
    assert study.train.epochs == 5 and study.search.space["reward_scale"].values == [1, 100]
    with pytest.raises(StudyError, match="train.epochs"):
        load_study(path, ["train.epochs=zero"])
    with pytest.raises(StudyError, match="expected dotted.key=value"):
        load_study(path, ["train.epochs"])


def test_cli_refuses_bad_studies_fast_with_status_2_and_no_folder(tiny_study, write_study, tmp_path):
    """Through the real CLI: exit status 2, the field named, no traceback, no experiment folder."""
    cases = {
        "typo.yaml": with_change(tiny_study, "search.space.learning_rate.low", -1.0),
        "gpu.yaml": with_change(tiny_study, "resources.gpu", 1),  # no GPU visible: CUDA_VISIBLE_DEVICES="" below
        "metric.yaml": with_change(tiny_study, "search.metric", "accuracy"),
        # The eval prompts are also trained on: nothing held out.
        "overlap.yaml": with_change(tiny_study, "task.eval_prompts", tiny_study["task"]["train_prompts"]),
        # Race numbers set in the study that no search of 2 trials x 2 epochs can fit.
        "race.yaml": with_change(tiny_study, "race", {"enabled": True, "top_k": 2, "confirm_seeds": 8}),
    }
    storage = tmp_path / "results"
    stderr = {}
    for name, study in cases.items():
        # Hide any GPU so that the test means the same on a GPU machine (Ray then counts 0 GPUs).
        # The timeout only guards against a hang: a loaded machine takes tens of seconds to start Ray.
        result = run_cli("search", str(write_study(study, name)), "--storage", str(storage), timeout=300, env=NO_GPU)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        assert "error:" in result.stderr
        assert not storage.exists() or not any(storage.iterdir())
        stderr[name] = result.stderr
    assert "resources.gpu" in stderr["gpu.yaml"] and "0 available" in stderr["gpu.yaml"]
    overlap = stderr["overlap.yaml"].strip().splitlines()
    assert len(overlap) == 1 and "task.train_prompts (" in overlap[0] and "task.eval_prompts (" in overlap[0]
    assert "'Tell a joke about dinosaurs:'" in overlap[0]
    assert "race.confirm_seeds 8" in stderr["race.yaml"] and len(stderr["race.yaml"].strip().splitlines()) == 1
    result = run_cli("search", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2 and "study file not found" in result.stderr


def test_the_cli_answers_a_schema_error_without_loading_torch():
    """Validating a study and reading an experiment need no torch, transformers or Ray: a typo is
    answered at once (they are imported by the commands that train, when they train)."""
    code = (
        "import sys, ratiotune.cli, ratiotune.search.race, ratiotune.search.retrain; "
        "print(sorted(m for m in ('torch', 'transformers', 'ray') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --------------------------------------------------------------------------- paths, schema vs launch


def test_paths_resolve_against_the_study_folder_and_set_values_against_cwd(tmp_path, monkeypatch):
    """The file's relative paths belong to the file; a --set path belongs to the shell it was typed in."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "prompts").mkdir(parents=True)
    (project / "my-model").mkdir()
    (project / "prompts" / "train.txt").write_text("a\nb\n")
    (elsewhere / "data").mkdir(parents=True)
    (elsewhere / "data" / "eval.txt").write_text("c\n")
    path = project / "study.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "paths",
                "model": {"name": "my-model"},
                "task": {"train_prompts": "prompts/train.txt", "eval_prompts": "prompts/missing.txt"},
            }
        )
    )
    monkeypatch.chdir(elsewhere)
    study = load_study(Path("../project/study.yaml"), ["task.eval_prompts=data/eval.txt"])
    assert study.model.name == str(project / "my-model")  # a folder next to the study, not a hub id
    assert study.task.train_prompts == str(project / "prompts" / "train.txt")
    assert study.task.eval_prompts == str(elsewhere / "data" / "eval.txt")
    assert (study.prompts("train"), study.prompts("eval")) == ([{"prompt": "a"}, {"prompt": "b"}], [{"prompt": "c"}])
    # A hub id stays a hub id; builtin names stay names.
    study = load_study(path, ["model.name=Qwen/Qwen2.5-0.5B", "task.eval_prompts=builtin:eval"])
    assert (study.model.name, study.task.eval_prompts) == ("Qwen/Qwen2.5-0.5B", "builtin:eval")
    # Without the override the eval file is missing: load_study names the field and the rule.
    with pytest.raises(StudyError, match=r"task.eval_prompts: prompt file not found: .*prompts/missing.txt .*against its folder"):
        load_study(path)


def test_the_study_carries_its_prompt_texts_and_a_folder_keeps_them(tiny_study, write_study, tmp_path):
    """Read once: a later edit of the file does not leak in; study_files writes what was read."""
    import pickle

    from ratiotune.core.study import study_files
    from ratiotune.core.study import write_study as save

    study = load_study(write_study(tiny_study))
    train_file = Path(tiny_study["task"]["train_prompts"])
    original = [{"prompt": line} for line in train_file.read_text().split("\n")[:-1]]
    train_file.write_text("edited later\n")
    assert study.prompts("train") == original
    assert pickle.loads(pickle.dumps(study)).prompts("train") == original  # what Ray ships to a trial
    files = study_files(study)
    assert yaml.safe_load(files["study.yaml"])["task"]["train_prompts"] == "prompts/train.txt"
    copy = save(tmp_path / "kept", study)
    train_file.unlink()
    again = load_study(copy)
    assert again.task.train_prompts == str(tmp_path / "kept" / "prompts" / "train.txt")
    assert again.prompts("train") == original and again.prompts("eval") == study.prompts("eval")


def test_schema_check_touches_no_file_and_the_launch_check_does(tiny_study, tmp_path):
    from ratiotune.core.study import check_launch

    missing = with_change(
        with_change(tiny_study, "task.train_prompts", str(tmp_path / "gone.txt")), "model.name", "./no/such/model"
    )
    study = validate_study(missing)  # a copied experiment's study.yaml reads without its files
    with pytest.raises(StudyError, match=r"task.train_prompts: prompt file not found: .*gone.txt"):
        check_launch(study)
    (tmp_path / "gone.txt").write_text("a prompt\n")
    with pytest.raises(StudyError, match=r"model.name: model folder '\./no/such/model' does not exist"):
        check_launch(validate_study(missing))
    (tmp_path / "empty-model").mkdir()
    with pytest.raises(StudyError, match="has no config.json") as error:
        check_launch(validate_study(with_change(missing, "model.name", str(tmp_path / "empty-model"))))
    assert "huggingface-cli download" in str(error.value)


def test_a_hub_id_neither_cached_nor_reachable_is_one_line(tiny_study):
    """HF_HUB_OFFLINE=1 (set in conftest): nothing is asked of the hub."""
    from ratiotune.core.study import check_launch

    study = validate_study(with_change(tiny_study, "model.name", "ratiotune-tests/no-such-model"))
    with pytest.raises(StudyError) as error:
        check_launch(study)
    message = str(error.value)
    assert message.startswith("model.name: 'ratiotune-tests/no-such-model' is not in the local hub cache")
    assert "HF_HUB_OFFLINE is on" in message and "huggingface-cli download ratiotune-tests/no-such-model" in message
    assert "\n" not in message


def test_cli_refuses_an_unreachable_hub_model_fast(tmp_path):
    """The shipped GPU study on a machine without hub access: exit 2, one line, no traceback, no retries."""
    import time

    env = {
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HOME": str(tmp_path / "hf"),
    }
    start = time.monotonic()
    result = run_cli(
        "search",
        "studies/qwen2.5-0.5b.yaml",
        "--set",
        "resources.gpu=0",
        "--storage",
        str(tmp_path / "results"),
        env=env,
        timeout=120,
    )
    seconds = time.monotonic() - start
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "model.name: 'Qwen/Qwen2.5-0.5B'" in lines[0] and "http://127.0.0.1:9 cannot be reached" in lines[0]
    assert "HF_HUB_OFFLINE=1" in lines[0] and "huggingface-cli download" in lines[0]
    assert not (tmp_path / "results").exists()
    assert seconds < 30, seconds  # imports only; the hub's retry loop took ~25 s more


# --------------------------------------------------------------------------- field descriptions


def test_every_study_field_has_a_description_and_fields_lists_them():
    from ratiotune.core.study import schema_fields

    rows = schema_fields()
    assert {name for name, *_ in rows} >= {"train.top_p", "search.space.NAME.type", "race.max_share", "checkpoint.num_to_keep"}
    assert [name for name, _, _, description in rows if not description.strip()] == []

    result = run_cli("fields", "search.scheduler")
    assert result.returncode == 0, result.stderr
    assert "search.scheduler.grace_period  (int, default 2)" in result.stdout
    assert "  train.epochs  (" not in result.stdout and "  search.num_samples  (" not in result.stdout

    # search.metric's values depend on the task: each builtin task's are listed under the field.
    result = run_cli("fields", "search.metric")
    assert result.returncode == 0, result.stderr
    assert "length-ratio:  train/mean_reward (max), train/in_range_fraction (max)" in result.stdout
    assert "headline-expansion:" in result.stdout and "eval/coverage (max)" in result.stdout

    result = run_cli("fields", "serch")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "'serch'" in result.stderr and "search" in result.stderr


def test_the_metrics_page_matches_the_metrics_table():
    """docs/study-file.md lists every metric with the direction ranking and the report use."""
    from ratiotune.core.metrics import SPLITS, MetricTable, split_metrics
    from ratiotune.tasks.length_ratio import make_task

    page = (REPO / "docs" / "study-file.md").read_text()
    task = make_task()
    for metric in split_metrics(task):
        assert f"| `{metric.name}` | {metric.better or '—'} |" in page, metric.name
    for key, metric in MetricTable(task).rows.items():
        if key.split("/")[0] not in SPLITS:
            assert f"| `{key}` | {metric.better or '—'} |" in page, key
