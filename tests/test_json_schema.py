"""`ratiotune fields --json-schema`: the study schema as JSON Schema, which every shipped study file passes."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import REPO
from ratiotune.cli import main

SECTIONS = ["name", "model", "task", "train", "search", "race", "resources", "checkpoint"]


def printed_schema(capsys) -> dict:
    assert main(["fields", "--json-schema"]) == 0
    return json.loads(capsys.readouterr().out)  # valid JSON, or this raises


def test_the_json_schema_is_json_with_every_section(capsys):
    schema = printed_schema(capsys)
    assert list(schema["properties"]) == SECTIONS
    assert schema["required"] == ["name"]
    assert schema["additionalProperties"] is False  # an unknown key is refused, as validate_study does
    race = schema["$defs"]["RaceSpec"]["properties"]
    assert race["confirm_seeds"]["default"] == 5 and "description" in race["confirm_seeds"]


def test_every_shipped_study_validates_against_the_json_schema(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(printed_schema(capsys))
    studies = sorted((REPO / "studies").glob("*.yaml")) + [REPO / "examples" / "your_task" / "study.yaml"]
    assert len(studies) >= 6
    for path in studies:
        problems = [error.message for error in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert problems == [], path
    # ... and it can fail: a misspelt key and a wrong type.
    assert not validator.is_valid({"name": "x", "train": {"epoch": 2}})
    assert not validator.is_valid({"name": "x", "train": {"epochs": "two"}})


def test_json_schema_takes_no_prefix(capsys):
    assert main(["fields", "race", "--json-schema"]) == 2
    assert "whole study's schema" in capsys.readouterr().err
