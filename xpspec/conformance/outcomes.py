"""The outcomes of a check and of a run, and the exit codes of ``xpspec``.

A check's outcome is a verdict about the implementation (``pass``, ``fail``, ``deviation``,
``not-applicable``), ``cut-short`` (the framework ended the run by raising, as a declared
finding says it does, before the check could see the whole run: no verdict on the check's
clauses in that scenario, and never a pass) or a failure of the adapter itself, which is never a verdict: ``error``
(it raised, or returned something malformed), ``crash`` (its worker process died: a signal,
an exit, ``sys.exit``, ``os._exit``), ``timeout`` (an operation overran its time limit and the
worker was killed) and ``resource`` (the worker went over its memory limit and was killed).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final, Literal

__all__ = [
    "ADAPTER_FAILURES",
    "RUN_STATUSES",
    "STATUSES",
    "AdapterError",
    "AdapterFailure",
    "AdapterUnavailable",
    "ExitCode",
    "RunStatus",
    "Status",
]

Status = Literal[
    "pass",
    "fail",
    "deviation",
    "not-applicable",
    "cut-short",
    "error",
    "crash",
    "timeout",
    "resource",
]
STATUSES: Final = (
    "pass",
    "fail",
    "deviation",
    "not-applicable",
    "cut-short",
    "error",
    "crash",
    "timeout",
    "resource",
)
ADAPTER_FAILURES: Final = ("error", "crash", "timeout", "resource")
"""Outcomes that say the adapter broke, not what the implementation does."""

RunStatus = Literal[
    "complete", "stopped", "interrupted", "timeout", "adapter-unavailable", "crashed"
]
RUN_STATUSES: Final = (
    "complete",
    "stopped",
    "interrupted",
    "timeout",
    "adapter-unavailable",
    "crashed",
)
"""How a run ended, as its report's footer says: ``complete`` (every selected check has its
outcome), ``stopped`` (the runner stopped before every selected check had one, e.g. at the
first failure with ``-x``), ``interrupted`` (stopped by the user), ``timeout`` (the run's
time budget was spent), ``adapter-unavailable`` (the adapter could not be loaded or failed
its smoke check) and ``crashed`` (the runner itself failed). A report without a footer is a
run that died."""


class ExitCode(IntEnum):
    """Exit codes of ``xpspec run`` (and of the other commands where they apply)."""

    OK = 0
    """The run is complete: no MUST-level failure and no adapter failure."""
    FINDINGS = 1
    """The run is complete, and some check failed at MUST level or the adapter broke."""
    BAD_INPUT = 2
    """A command-line argument or an input file is invalid (one line says which)."""
    ADAPTER_UNAVAILABLE = 3
    """The adapter could not be loaded, did not answer, or failed its smoke check."""
    INCOMPLETE = 4
    """The run did not complete: interrupted, over its time budget, or the runner failed."""


class AdapterError(Exception):
    """The adapter broke: it raised, or returned a malformed trace (outcome ``error``)."""

    status: Status = "error"


class AdapterFailure(AdapterError):
    """The adapter's worker failed: ``status`` is ``crash``, ``timeout``, ``resource`` or
    ``error`` (it broke the protocol); the message says what happened, with the worker's
    exit status and the last lines it wrote to standard error where there are any."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status


class AdapterUnavailable(Exception):
    """The adapter cannot be used at all: the message is one line naming the adapter, the
    cause and the fix."""
