"""A raw study mapping -> a Study, or a StudyError with one line per problem (field, value, what is allowed)."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError

from ratiotune.core.study.errors import StudyError
from ratiotune.core.study.schema import Study
from ratiotune.core.study.search_section import ParamSpec, SearchSpec


def validate_study(raw: dict[str, Any], source: str = "study") -> Study:
    """The schema check: types, ranges, names, the metric. Pure, touches no file; every reader of an
    experiment folder uses only this, so a copied folder still reads. Everything downstream receives
    the Study and trusts it; a bad one raises StudyError, one line per problem (field, value, allowed)."""
    try:
        return Study.model_validate(raw)
    except ValidationError as exc:
        lines = [_describe(error, raw) for error in exc.errors()]
        raise StudyError(f"{source}: invalid study\n" + "\n".join(f"  {line}" for line in lines)) from None


def _describe(error: dict[str, Any], raw: dict[str, Any]) -> str:
    field = ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        allowed = _allowed_keys(error["loc"][:-1])
        close = difflib.get_close_matches(str(error["loc"][-1]), allowed, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"{field}: unknown key{hint} (allowed: {', '.join(allowed)})"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "missing":
        return f"{field}: required"
    value = error.get("input")
    if isinstance(value, dict) or error["type"].startswith("value_error"):
        return f"{field}: {message}" if field else message
    return f"{field}: {message}; got {value!r}"


def _allowed_keys(loc: tuple) -> list[str]:
    """Field names of the schema section at `loc` (used for 'did you mean')."""
    model: type[BaseModel] = Study
    parts = iter(loc)
    for part in parts:
        if model is SearchSpec and part == "space":
            next(parts, None)  # the parameter's name: its section is a ParamSpec
            model = ParamSpec
            continue
        annotation = model.model_fields[part].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
    return list(model.model_fields)
