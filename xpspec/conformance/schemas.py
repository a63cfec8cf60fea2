"""JSON Schemas of the suite's data model, generated from its frozen dataclasses.

``scenario``, ``trace-header`` and ``trace-event`` are derived from the types that the
suite itself decodes (:data:`xpspec.protocol.scenario.Scenario`, :data:`xpspec.protocol.trace.Event`),
so they cannot drift from what the suite accepts; they ship with the protocol core
(:mod:`xpspec.protocol.schemas`) beside the hand-written ``request``, ``response`` and
``report-record``. The schemas describe shape (fields, types, allowed words); the values
themselves (ranges, budgets, consistency between fields) are checked by the suite, whose
errors name the field, what is allowed and what was got.

``xpspec schemas --write`` regenerates the derived files; a test keeps them current.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

__all__ = ["DERIVED", "derived_schemas", "write_schemas"]

_DRAFT = "https://json-schema.org/draft/2020-12/schema"
_RATIONAL = {
    "description": "an exact rational: an integer, or a string 'p/q' or a short decimal",
    "anyOf": [
        {"type": "integer"},
        {"type": "string", "pattern": r"^\s*[-+]?(\d+(/\d+)?|\d*\.\d+)\s*$"},
    ],
}


class _Builder:
    """Turns type hints into schemas, collecting one ``$defs`` entry per dataclass."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def of(self, tp: Any) -> dict[str, Any]:
        origin = get_origin(tp)
        if tp is Any or tp is object:
            return {}
        if tp is type(None):
            return {"type": "null"}
        if tp is Fraction:
            return dict(_RATIONAL)
        if tp is bool:
            return {"type": "boolean"}
        if tp is int:
            return {"type": "integer"}
        if tp is float:
            return {"type": "number"}
        if tp is str:
            return {"type": "string"}
        if tp is dict or origin is dict:
            return {"type": "object"}
        if origin is Literal:
            values = list(get_args(tp))
            return {"const": values[0]} if len(values) == 1 else {"enum": values}
        if origin in (Union, types.UnionType):
            options = get_args(tp)
            tagged = all(
                o is type(None) or (isinstance(o, type) and dataclasses.is_dataclass(o))
                for o in options
            )
            return {"anyOf": [self.of_member(o) if tagged else self.of(o) for o in options]}
        if origin is tuple:
            args = get_args(tp)
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self.of(args[0])}
            return {
                "type": "array",
                "prefixItems": [self.of(a) for a in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self.of_dataclass(tp)
        raise TypeError(f"no JSON Schema rule for {tp!r}")

    def of_member(self, tp: Any) -> dict[str, Any]:
        """A union member: a dataclass whose ``kind`` must then be given (it tells the
        members apart)."""
        if tp is type(None):
            return {"type": "null"}
        if "kind" not in {f.name for f in dataclasses.fields(tp)}:
            return self.of_dataclass(tp)
        return {"allOf": [self.of_dataclass(tp)], "required": ["kind"]}

    def of_dataclass(self, cls: type) -> dict[str, Any]:
        name = cls.__name__
        if name not in self.defs:
            self.defs[name] = {}  # a placeholder while the fields are resolved
            hints = get_type_hints(cls)
            properties: dict[str, Any] = {}
            required = []
            for f in dataclasses.fields(cls):
                if not f.init:
                    continue
                schema = self.of(hints[f.name])
                default = _default(f)
                if default is dataclasses.MISSING:
                    required.append(f.name)
                else:
                    schema = {**schema, "default": default}
                properties[f.name] = schema
            entry: dict[str, Any] = {"type": "object", "properties": properties}
            if required:
                entry["required"] = required
            entry["additionalProperties"] = False
            doc = (cls.__doc__ or "").strip().split("\n\n")[0]
            if doc:
                entry = {"description": " ".join(doc.split()), **entry}
            self.defs[name] = entry
        return {"$ref": f"#/$defs/{name}"}


def _default(f: dataclasses.Field[Any]) -> Any:
    from xpspec.protocol.codec import to_jsonable

    if f.default is not dataclasses.MISSING:
        return to_jsonable(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return to_jsonable(f.default_factory())
    return dataclasses.MISSING


def _document(title: str, description: str, tp: Any) -> dict[str, Any]:
    builder = _Builder()
    root = builder.of(tp)
    return {
        "$schema": _DRAFT,
        "$id": f"https://xpspec.invalid/schemas/{title}.schema.json",
        "title": title,
        "description": description,
        **root,
        "$defs": dict(sorted(builder.defs.items())),
    }


DERIVED = ("scenario", "trace-header", "trace-event")
"""The schemas generated from the data model (the others are written by hand)."""


def derived_schemas() -> dict[str, dict[str, Any]]:
    """The generated schemas by name."""
    from xpspec.protocol.scenario import Scenario
    from xpspec.protocol.trace import TRACE_FORMAT, Event

    header = {
        "$schema": _DRAFT,
        "$id": "https://xpspec.invalid/schemas/trace-header.schema.json",
        "title": "trace-header",
        "description": "The first line of a trace: its format, and what produced it. "
        "'stopped' says why the framework ended the run early (the exception and where); "
        "'stateless' why the run's policy holds no state (a declared 'state' is not judged "
        "on it).",
        "type": "object",
        "required": ["format"],
        "properties": {
            "format": {"const": TRACE_FORMAT},
            "producer": {"type": "string"},
            "stopped": {"type": "string"},
            "stateless": {"type": "string"},
        },
    }
    return {
        "scenario": _document(
            "scenario",
            "A scenario of the conformance suite; 'kind' names the operation that runs it.",
            Scenario,
        ),
        "trace-header": header,
        "trace-event": _document(
            "trace-event",
            "One line of a trace after its header: an event; 'kind' names which.",
            typing.cast(Any, Event),
        ),
    }


def _text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=1, sort_keys=False) + "\n"


def write_schemas(directory: Path | None = None) -> list[Path]:
    """Write the derived schemas into the protocol core's schema folder (or
    ``directory``); returns the paths written."""
    if directory is None:
        import xpspec.protocol.schemas as package

        directory = Path(package.__file__).parent
    written = []
    for name, schema in derived_schemas().items():
        path = directory / f"{name}.schema.json"
        path.write_text(_text(schema), encoding="utf-8")
        written.append(path)
    return written


def current_text(name: str) -> str:
    """The text :func:`write_schemas` would write for derived schema ``name``."""
    return _text(derived_schemas()[name])
