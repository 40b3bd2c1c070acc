"""Validation against the JSON Schemas shipped in ``schemas/`` (jsonschema, loaded lazily).

``xcompact validate`` uses this; the compaction commands use the hand-written checks of
``conversation.py``, which the tests hold to the same verdicts."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import orjson

from .conversation import Problem


@cache
def load_schema(name: str) -> dict[str, Any]:
    schemas = resources.files("compactor_cli").joinpath("schemas")
    schema: dict[str, Any] = orjson.loads(schemas.joinpath(f"{name}.schema.json").read_bytes())
    return schema


@cache
def _validator(name: str) -> Any:
    import jsonschema

    schema = load_schema(name)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def _pointer(path: Any) -> str:
    return "".join(f"/{p}" for p in path)


def schema_problems(obj: Any, name: str = "conversation") -> list[Problem]:
    """Schema violations, deepest and first first, as one-line problems with JSON pointers."""
    import jsonschema

    errors = sorted(_validator(name).iter_errors(obj), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    problems = []
    for e in errors:
        best = jsonschema.exceptions.best_match([e])
        problems.append(Problem(_pointer(best.absolute_path), best.message, True))
    return problems

