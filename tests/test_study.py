"""Each validation rule refuses a bad study with a message naming the field and the value."""

import copy
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_cli
from ratiotune.study import StudyError, load_study, validate_study

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
        "learning_rate": 0.003, "num_generations": 2, "max_new_tokens": 8, "reward_scale": 100.0,
    }


@pytest.mark.parametrize("path", sorted((REPO / "studies").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_studies_validate(path):
    study = load_study(path)
    assert study.search.metric == "eval/in_range_fraction"


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
        "'learnig_rate' cannot be searched", "did you mean 'learning_rate'",
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
        ("model.name", "./no/such/model", ["./no/such/model", "does not exist"]),
        ("task.train_prompts", "missing.txt", ["missing.txt", "builtin:train"]),
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
    }
    storage = tmp_path / "results"
    for name, study in cases.items():
        # Hide any GPU so that the test means the same on a GPU machine (Ray then counts 0 GPUs).
        result = run_cli("search", str(write_study(study, name)), "--storage", str(storage), timeout=60, env=NO_GPU)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        assert "error:" in result.stderr
        assert not storage.exists() or not any(storage.iterdir())
    result = run_cli("search", str(write_study(cases["gpu.yaml"], "gpu.yaml")), "--storage", str(storage), env=NO_GPU)
    assert "resources.gpu" in result.stderr and "0 available" in result.stderr
    result = run_cli("search", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2 and "study file not found" in result.stderr
