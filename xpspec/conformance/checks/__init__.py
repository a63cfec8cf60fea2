"""All checks of the suite (:data:`ALL_CHECKS`, from :mod:`xpspec.conformance.checks.registry`)
and what a check is (:mod:`xpspec.conformance.checks.base`)."""

from xpspec.conformance.checks.base import Check, CheckFailure, Context
from xpspec.conformance.checks.registry import ALL_CHECKS

__all__ = ["ALL_CHECKS", "Check", "CheckFailure", "Context"]
