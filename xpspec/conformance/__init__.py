"""The xpspec conformance suite: scenarios, traces, clause checks, adapters and reports."""

from __future__ import annotations

__all__ = ["__version__", "spec_version"]

__version__ = "0.1.0"


def spec_version() -> str:
    """The version of the spec the packaged clause registry was generated from."""
    return "0.1"
