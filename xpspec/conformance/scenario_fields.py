"""Every field of a scenario file, with its default and the values it takes.

Read from the scenario's JSON Schema (:func:`xpspec.conformance.schemas.derived_schemas`),
which is generated from the very types the suite decodes, so this list cannot drift from what
``xpspec trace`` and ``xpspec check`` accept. A field with a default may be left out of a
scenario file; a required one may not. Ranges and consistency between fields are checked when
a scenario is read, and its errors name the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["ScenarioField", "render_markdown", "scenario_fields"]

REQUIRED = "required"
"""The default column of a field a scenario file must give."""


@dataclass(frozen=True)
class ScenarioField:
    """One field of one object of a scenario file."""

    owner: str
    """The object the field belongs to (``TrainerScenario``, ``TrainerConfig``, …)."""
    name: str
    default: str
    """The default as JSON text, ``all defaults`` for an object whose fields all keep
    theirs, or :data:`REQUIRED`."""
    allowed: str
    """The values it takes, in words."""


def _name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _choices(options: list[dict[str, Any]]) -> list[str]:
    """The object names of a ``kind``-tagged union (``allOf: [$ref]`` members) or of plain
    ``$ref`` members; other members in words."""
    names = []
    for option in options:
        ref = option.get("$ref") or next(
            (part["$ref"] for part in option.get("allOf", []) if "$ref" in part), None
        )
        names.append(_name(ref) if ref else _allowed(option))
    return names


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _allowed(spec: dict[str, Any]) -> str:
    """The values of a property schema, in words."""
    if "const" in spec:
        return json.dumps(spec["const"])
    if "enum" in spec:
        return _join([json.dumps(v) for v in spec["enum"]])
    if "$ref" in spec:
        return f"{_name(spec['$ref'])} object"
    if "anyOf" in spec:
        if spec.get("description", "").startswith("an exact rational"):
            return "a rational: an integer or a string 'p/q'"
        members = _choices(spec["anyOf"])
        tagged = all("allOf" in option for option in spec["anyOf"])
        if tagged:
            return f"one of {_join(members)} (told apart by kind)"
        return _join([m if m in ("integer", "null") else f"{m} object" for m in members])
    kind = spec.get("type")
    if kind == "array":
        items = spec.get("items", {})
        if "anyOf" in items:
            return f"a list of {_join(_choices(items['anyOf']))} objects (told apart by kind)"
        if "$ref" in items:
            return f"a list of {_name(items['$ref'])} objects"
        return f"a list of {items.get('type', 'value')}s"
    if kind == "boolean":
        return "true or false"
    return str(kind)


def _defaults_of(defs: dict[str, Any], owner: str) -> dict[str, Any]:
    props = defs[owner].get("properties", {})
    return {name: spec["default"] for name, spec in props.items() if "default" in spec}


def _default(defs: dict[str, Any], spec: dict[str, Any], required: bool) -> str:
    if required or "default" not in spec:
        return REQUIRED
    value = spec["default"]
    ref = spec.get("$ref")
    if ref and isinstance(value, dict) and value == _defaults_of(defs, _name(ref)):
        return "all defaults"
    return json.dumps(value, separators=(", ", ": "))


def _tagged(spec: Any) -> dict[str, set[str]]:
    """Per ``$def``, the fields a union that holds it requires of it (``kind``, which tells
    the members of a union apart, is required there even where the type has a default)."""
    found: dict[str, set[str]] = {}
    if isinstance(spec, dict):
        parts = spec.get("allOf", [])
        if "required" in spec and len(parts) == 1 and "$ref" in parts[0]:
            found.setdefault(_name(parts[0]["$ref"]), set()).update(spec["required"])
        values: list[Any] = list(spec.values())
    elif isinstance(spec, list):
        values = spec
    else:
        values = []
    for value in values:
        for owner, names in _tagged(value).items():
            found.setdefault(owner, set()).update(names)
    return found


def _refs(spec: Any) -> list[str]:
    """The ``$defs`` a schema fragment names, in order of appearance."""
    if isinstance(spec, dict):
        found = [_name(spec["$ref"])] if "$ref" in spec else []
        for value in spec.values():
            found.extend(_refs(value))
        return found
    if isinstance(spec, list):
        return [name for value in spec for name in _refs(value)]
    return []


def scenario_fields() -> list[ScenarioField]:
    """Every field of every object a scenario file holds: the five scenario kinds first, then
    the objects they hold, each where it is first named; fields in declaration order."""
    from xpspec.conformance.schemas import derived_schemas

    schema = derived_schemas()["scenario"]
    defs: dict[str, Any] = schema["$defs"]
    order: list[str] = []
    pending = _refs(schema["anyOf"])
    while pending:
        owner = pending.pop(0)
        if owner in order:
            continue
        order.append(owner)
        pending.extend(_refs(defs[owner].get("properties", {})))
    missing = sorted(set(defs) - set(order))
    if missing:  # pragma: no cover - every $def is reachable from the scenario union
        raise ValueError(f"scenario schema: $defs no scenario reaches: {missing}")
    tagged = _tagged(schema)
    rows = []
    for owner in order:
        required = set(defs[owner].get("required", [])) | tagged.get(owner, set())
        for name, spec in defs[owner].get("properties", {}).items():
            rows.append(
                ScenarioField(owner, name, _default(defs, spec, name in required), _allowed(spec))
            )
    return rows


def render_markdown(rows: list[ScenarioField]) -> str:
    """The fields as the Markdown table of the check-it-yourself page (which the docs' tests
    compare with :func:`scenario_fields`): ``python -m xpspec.conformance.scenario_fields``
    prints it."""
    lines = ["| object | field | default | values |", "|---|---|---|---|"]
    lines.extend(f"| {f.owner} | {f.name} | {f.default} | {f.allowed} |" for f in rows)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_markdown(scenario_fields()), end="")
