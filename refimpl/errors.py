"""Errors raised for invalid input: each names the field, what is allowed and what was got."""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A configuration value is outside what the spec allows.

    The message always has the form ``<field>: expected <allowed>, got <value>``, so the
    offending field can be found without reading a traceback.
    """

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}: expected {allowed}, got {value!r}")
