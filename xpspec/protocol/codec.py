"""JSON form of the project's frozen value types.

Every scenario, configuration and preprocessor is a frozen dataclass; this module turns them
into plain JSON values and back, guided by the dataclass type hints. Fractions are written as
``"p/q"`` strings so that no rational ever passes through a float. Unions of dataclasses are
told apart by their ``kind`` field.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import types
import typing
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Final, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from xpspec.protocol.errors import MISSING, ConfigError

__all__ = [
    "MAX_DECIMAL_DENOMINATOR",
    "Decoder",
    "canonical_json",
    "decoder",
    "from_jsonable",
    "parse_fraction",
    "to_jsonable",
]

T = TypeVar("T")


MAX_DECIMAL_DENOMINATOR: Final = 1000
"""A decimal string is taken as a rational only when its exact value, reduced, has a
denominator of at most this: ``"0.25"`` or ``"0.125"`` mean what they say, while
``"0.3333333"`` is most likely a rounded third and is refused with the fraction to write."""
_MAX_EXPONENT: Final = 100
_MAX_CHARS: Final = 1000
_DECIMAL = re.compile(r"[-+]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE](?P<exp>[-+]?\d+))?")
_EXAMPLES = "an exact rational such as 2, '1/4' or '0.25'"


def parse_fraction(field: str, value: object) -> Fraction:
    """An exact rational from an int, a Fraction or a ``"p/q"``/decimal string.

    Floats are refused: ``0.1`` is not one tenth, and the spec's schedules are exact. A decimal
    string is accepted when its reduced denominator is at most
    :data:`MAX_DECIMAL_DENOMINATOR`; otherwise the error names the exact fraction and the
    nearest one with a small denominator, one of which was meant.
    """
    if isinstance(value, bool):
        raise ConfigError(field, value, "a non-negative rational such as 2, '1/4' or '0.25'")
    if isinstance(value, (int, Fraction)):
        return Fraction(value)
    if isinstance(value, str):
        text = value.strip()
        if len(text) > _MAX_CHARS:
            raise ConfigError(field, value, f"{_EXAMPLES} (at most {_MAX_CHARS} characters)")
        decimal = _DECIMAL.fullmatch(text)
        exponent = decimal["exp"].lstrip("+-").lstrip("0") if decimal and decimal["exp"] else ""
        if len(exponent) > 3 or int(exponent or 0) > _MAX_EXPONENT:  # 1e999999999 is no schedule
            raise ConfigError(field, value, f"{_EXAMPLES} (an exponent of at most {_MAX_EXPONENT})")
        try:
            exact = Fraction(text)
        except (ValueError, ZeroDivisionError):
            pass
        else:
            if decimal and exact.denominator > MAX_DECIMAL_DENOMINATOR:
                nearest = exact.limit_denominator(MAX_DECIMAL_DENOMINATOR)
                raise ConfigError(
                    field,
                    value,
                    f"{_EXAMPLES}; the decimal {value!r} is not exact here: write a fraction "
                    f"('{nearest}' if that is what you mean, or '{exact}')",
                )
            return exact
    raise ConfigError(field, value, f"{_EXAMPLES} (not a float)")


_JSON_SCALARS: Final = frozenset({bool, int, float, str, type(None)})
"""Types whose values are JSON already (exactly these: subclasses take the longer way)."""


def to_jsonable(value: Any) -> Any:
    """A JSON-ready form of ``value`` (dataclasses, tuples, fractions, enums and scalars)."""
    cls = type(value)
    if cls in _JSON_SCALARS:
        return value
    if cls is Fraction:
        return str(value)
    names = _FIELD_NAMES.get(cls)
    if names is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _field_names(cls)
    if names is not None:
        return {name: to_jsonable(getattr(value, name)) for name in names}
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, (tuple, list)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    raise TypeError(f"cannot serialise {type(value).__name__}: {value!r}")


def canonical_json(value: Any) -> str:
    """One deterministic JSON text for ``value``: sorted keys, no spaces. The same text as
    ``json.dumps(to_jsonable(value), ...)``; a dataclass's fields are handed to the encoder
    as they are (tuples and scalars are JSON already) and :func:`to_jsonable` converts only
    what the encoder cannot (fractions, nested dataclasses), which makes trace lines about
    three times faster to write."""
    names = _FIELD_NAMES.get(type(value))
    if names is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _field_names(type(value))
    if names is not None:
        value = {name: getattr(value, name) for name in names}
    elif isinstance(value, dict):
        value = to_jsonable(value)
    return _CANONICAL.encode(value)


_CANONICAL: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=to_jsonable)
"""``json.dumps(..., sort_keys=True, separators=(",", ":"), default=to_jsonable)``'s encoder,
made once (``json.dumps`` makes one at every call given any of those arguments)."""
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
"""A dataclass's field names, by class (filled by :func:`_field_names`)."""


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _kind_of(cls: type) -> str | None:
    for f in dataclasses.fields(cls):
        if f.name == "kind" and isinstance(f.default, str):
            return f.default
    return None


_SCALARS: Final = {int: "an integer", str: "a string", bool: "true or false"}


def _or(names: list[str]) -> str:
    """``'a', 'b' or 'c'``."""
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _within(path: str, name: str) -> str:
    """The full path of field ``name`` reported by the value at ``path``. A dataclass may
    name itself first (``EnvSpec`` says ``env.num_envs``): that name is not repeated."""
    if name == path or name.startswith((f"{path}.", f"{path}[")):
        return name
    last = path.rsplit(".", 1)[-1]
    head = name.split(".", 1)[0].split("[", 1)[0]
    if head == last and not last.endswith("]"):
        return f"{path}{name[len(head) :]}"
    return f"{path}.{name}"


Decoder = Callable[[Any, str], Any]
"""A compiled reading rule: ``decoder(data, field)`` is the value, or raises naming ``field``."""

_DECODERS: dict[Any, Decoder] = {}


def from_jsonable(tp: Any, data: Any, field: str = "value") -> Any:
    """Rebuild a value of type ``tp`` from its JSON form; errors name the field path.

    The rule for each type is worked out once (type hints resolved, unions indexed by
    ``kind``) and kept, so reading a long trace costs a dictionary lookup per value, not a
    type-hint resolution."""
    return decoder(tp)(data, field)


def decoder(tp: Any) -> Decoder:
    """The compiled rule for ``tp`` (see :func:`from_jsonable`)."""
    try:
        return _DECODERS[tp]
    except KeyError:
        rule = _DECODERS[tp] = _compile(tp)
        return rule
    except TypeError:  # an unhashable type form: compiled each time
        return _compile(tp)


def _identity(data: Any, field: str) -> Any:
    return data


def _compile(tp: Any) -> Decoder:
    origin = get_origin(tp)
    if tp is Any or isinstance(tp, typing.TypeVar) or tp is object:
        return _identity
    if tp is Fraction:
        return lambda data, field: parse_fraction(field, data)
    if origin is Literal:
        return _literal(get_args(tp))
    if origin in (Union, types.UnionType):
        return _union(tp)
    if origin is tuple:
        return _tuple(get_args(tp))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass(tp)
    if tp is float:
        return _float
    if tp in _SCALARS:
        return _scalar(tp)

    def no_rule(data: Any, field: str) -> Any:
        raise TypeError(f"{field}: no JSON rule for type {tp!r}")

    return no_rule


def _literal(args: tuple[Any, ...]) -> Decoder:
    allowed = " or ".join(repr(a) for a in args)

    def read(data: Any, field: str) -> Any:
        if data not in args:
            raise ConfigError(field, data, allowed)
        return data

    return read


def _union(tp: Any) -> Decoder:
    options = [a for a in get_args(tp) if a is not type(None)]
    optional = len(options) < len(get_args(tp))
    classes = [a for a in options if isinstance(a, type) and dataclasses.is_dataclass(a)]
    kinds = {_kind_of(c): c for c in classes}
    named = sorted(k for k in kinds if k)
    names = " or ".join(getattr(o, "__name__", str(o)) for o in options)
    rules: list[Decoder] = []  # the options' rules, compiled on first use

    if optional and len(options) == 1 and not classes:
        # ``X | None`` (the items of a window): no kind to look up and one rule to try
        def read_optional(data: Any, field: str) -> Any:
            if data is None:
                return None
            if not rules:
                rules.append(decoder(options[0]))
            try:
                return rules[0](data, field)
            except (ConfigError, TypeError):
                raise ConfigError(field, data, names) from None

        return read_optional

    def read(data: Any, field: str) -> Any:
        if data is None and optional:
            return None
        if classes and isinstance(data, dict):
            kind = data.get("kind")
            if (kind is None or isinstance(kind, str)) and kind in kinds:
                return decoder(kinds[kind])(data, field)
            raise ConfigError(f"{field}.kind", data.get("kind", MISSING), f"one of {_or(named)}")
        if named and len(classes) == len(options):
            raise ConfigError(field, data, f'an object whose "kind" is one of {_or(named)}')
        if not rules:
            rules.extend(map(decoder, options))
        for rule in rules:
            try:
                return rule(data, field)
            except (ConfigError, TypeError):
                continue
        raise ConfigError(field, data, names)

    return read


def _tuple(args: tuple[Any, ...]) -> Decoder:
    if len(args) == 2 and args[1] is Ellipsis:
        item = args[0]
        if item is int:
            return _ints
        if item is float:
            return _floats

        def read_all(data: Any, field: str) -> tuple[Any, ...]:
            if not isinstance(data, list):
                raise ConfigError(field, data, "a list")
            each = decoder(item)
            return tuple(each(v, f"{field}[{i}]") for i, v in enumerate(data))

        return read_all

    width, all_ints = len(args), all(a is int for a in args)

    def read(data: Any, field: str) -> tuple[Any, ...]:
        if all_ints and type(data) is list and len(data) == width:
            return _ints(data, field)
        if not isinstance(data, list):
            raise ConfigError(field, data, "a list")
        if width != len(data):
            raise ConfigError(field, data, f"a list of {width} values")
        return tuple(decoder(a)(v, f"{field}[{i}]") for i, (a, v) in enumerate(zip(args, data)))

    return read


def _ints(data: Any, field: str) -> tuple[int, ...]:
    if type(data) is list and all(type(v) is int for v in data):
        return tuple(data)
    if not isinstance(data, list):
        raise ConfigError(field, data, "a list")
    return tuple(_INT(v, f"{field}[{i}]") for i, v in enumerate(data))


def _floats(data: Any, field: str) -> tuple[float, ...]:
    if type(data) is list and all(type(v) is float or type(v) is int for v in data):
        return tuple(float(v) for v in data)
    if not isinstance(data, list):
        raise ConfigError(field, data, "a list")
    return tuple(_float(v, f"{field}[{i}]") for i, v in enumerate(data))


def _float(data: Any, field: str) -> float:
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        raise ConfigError(field, data, "a number")
    return float(data)


def _scalar(tp: type) -> Decoder:
    expected = _SCALARS[tp]

    def read(data: Any, field: str) -> Any:
        if type(data) is not tp:
            raise ConfigError(field, data, expected)
        return data

    return read


def _dataclass(tp: type) -> Decoder:
    fields = dataclasses.fields(tp)
    names = {f.name for f in fields if f.init}
    listed = ", ".join(sorted(names))
    required = [
        f.name
        for f in fields
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    rules: dict[str, Decoder] = {}  # filled on first use: a field's type may name this class

    def read(data: Any, field: str) -> Any:
        if not isinstance(data, dict):
            raise ConfigError(field, data, f"an object ({tp.__name__})")
        if not rules:
            hints = get_type_hints(tp, vars(sys.modules[tp.__module__]))
            rules.update((name, decoder(hints[name])) for name in names)
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(
                f"{field}.{unknown[0]}", data[unknown[0]], f"a field of {tp.__name__} ({listed})"
            )
        for name in required:
            if name not in data:
                raise ConfigError(
                    f"{field}.{name}", MISSING, f"a value (a required field of {tp.__name__})"
                )
        kwargs = {k: rules[k](v, f"{field}.{k}") for k, v in data.items()}
        try:
            return tp(**kwargs)
        except ConfigError as exc:
            # The dataclass names its own fields ("seed", "env.num_envs"): name the path.
            if type(exc) is not ConfigError:
                raise
            raise ConfigError(_within(field, exc.field), exc.value, exc.allowed) from None

    return read


_INT: Final = _scalar(int)
