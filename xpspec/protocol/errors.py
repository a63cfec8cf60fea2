"""Errors raised for invalid input: each names the field, what is allowed and what was got."""

from __future__ import annotations

from typing import Any, Final

__all__ = ["MISSING", "ConfigError"]

_VALUE_CHARS: Final = 200
"""Longest rendering of the offending value in a message (a huge list stays one line)."""


class _Missing:
    """The value of a required field that was not given."""

    def __repr__(self) -> str:
        return "nothing"


MISSING: Final = _Missing()
"""The ``value`` of a :class:`ConfigError` for a required field that is absent; it reads
``got nothing``."""


class ConfigError(ValueError):
    """A configuration value is outside what the spec allows.

    The message always has the form ``<field>: expected <allowed>, got <value>``, so the
    offending field can be found without reading a traceback. A long value is shortened in
    the message (``value`` keeps it whole).
    """

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}: expected {allowed}, got {_short(value)}")


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        if isinstance(value, int):
            return f"an integer of {value.bit_length()} bits"
        return f"a {type(value).__name__} too large to print"
    if len(text) <= _VALUE_CHARS:
        return text
    return f"{text[: _VALUE_CHARS - 20]}... ({len(text)} characters)"
