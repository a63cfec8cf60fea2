"""The protocol's JSON Schemas (draft 2020-12), shipped as package data: ``request``,
``response`` (the worker protocol), ``scenario``, ``trace-header`` and ``trace-event`` (one
line each of a trace), and ``report-record`` (one line of a run report).

``scenario``, ``trace-header`` and ``trace-event`` are generated from the suite's data
model (``python -m xpspec.conformance.schemas --write``); a test keeps them current.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["load_schema", "schema_names"]


def schema_names() -> tuple[str, ...]:
    """The names of the shipped schemas (``request``, ``response``, ...)."""
    files = resources.files(__name__).iterdir()
    return tuple(
        sorted(
            f.name.removesuffix(".schema.json") for f in files if f.name.endswith(".schema.json")
        )
    )


def load_schema(name: str) -> dict[str, Any]:
    """The schema called ``name``; ValueError names the ones that exist."""
    if name not in schema_names():
        raise ValueError(f"schema: expected one of {schema_names()}, got {name!r}")
    text = resources.files(__name__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
