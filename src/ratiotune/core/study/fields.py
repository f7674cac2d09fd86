"""The study's fields as rows (dotted name, type, default, description): what `ratiotune fields` prints."""

from __future__ import annotations

import json
from typing import Any, Literal, Union

from pydantic import BaseModel

from ratiotune.core.study.schema import Study


def schema_fields(model: type[BaseModel] = None, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(dotted name, type, default, description) of every study field: `ratiotune fields` prints them."""
    import typing

    model = model or Study
    rows = []
    for name, field in model.model_fields.items():
        annotation, dotted = field.annotation, f"{prefix}{name}"
        nested = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows.append((dotted, "section", "", field.description or ""))
            rows.extend(schema_fields(annotation, f"{dotted}."))
        elif nested:  # search.space: a mapping of name -> ParamSpec
            rows.append((dotted, f"mapping of name -> {nested[0].__name__}", "{}", field.description or ""))
            rows.extend(schema_fields(nested[0], f"{dotted}.NAME."))
        else:
            default = "" if field.is_required() else json.dumps(field.get_default(call_default_factory=True))
            rows.append((dotted, _type_name(annotation), default, field.description or ""))
    return rows


def _type_name(annotation: Any) -> str:
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return " | ".join(str(a) for a in args)
    if origin is Union or str(origin) == "<class 'types.UnionType'>":
        return " or ".join("null" if a is type(None) else _type_name(a) for a in args)
    if origin in (list, dict):
        return f"{origin.__name__} of {', '.join(_type_name(a) for a in args)}"
    return getattr(annotation, "__name__", str(annotation))


def json_schema() -> dict[str, Any]:
    """The study schema as JSON Schema (pydantic's Study.model_json_schema()): `ratiotune fields --json-schema`.

    Editors check a study file against it (docs/study-file.md); the checks it cannot state (a task's
    metric names, a baseline inside the space, ...) stay with validate_study."""
    return Study.model_json_schema()
