"""The parts of a result's message that a matrix cell keeps beside its first line.

A check's failure message, as the engine writes it, is: optional lines of verdict (``finding
(no spec variant reproduces it): …``, ``known deviation, reproduced by …``, ``downstream of
…``), then ``[clauses] check: what`` with the violation's ``  expected: …`` and
``  actual:   …`` lines (:class:`xpspec.conformance.checks.base.CheckFailure`), then the
reproduction block ``scenario 'NAME':`` followed by the scenario's JSON on one indented line
and the ``reproduce:`` / ``explain:`` commands, and last an optional note on where the trace
parts from the committed vector. :func:`failure_parts` splits it so the compliance site can
show each part in its place; a message of another shape keeps its text and nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TEXT_LIMIT", "FailureParts", "failure_parts"]

TEXT_LIMIT = 2000
"""How many characters of a message's text (the lines before its reproduction block) a
cell keeps: a violation's expected and actual values are already cut at 600 each."""

_EXPECTED = re.compile(r"^\s+expected: (?P<value>.*)$")
_ACTUAL = re.compile(r"^\s+actual:\s+(?P<value>.*)$")
_SCENARIO = re.compile(r"^scenario '.*':$")


@dataclass(frozen=True)
class FailureParts:
    """A message in parts: ``text`` the lines before the reproduction block (cut at
    :data:`TEXT_LIMIT`), the first violation's ``expected`` and ``actual`` values, and
    the reproduction block's ``scenario_json``; "" for a part the message does not have."""

    text: str = ""
    expected: str = ""
    actual: str = ""
    scenario_json: str = ""

    def fields(self) -> dict[str, str]:
        """The parts that are there, by name (for a matrix cell)."""
        named = {
            "text": self.text,
            "expected": self.expected,
            "actual": self.actual,
            "scenario_json": self.scenario_json,
        }
        return {k: v for k, v in named.items() if v}


def failure_parts(message: str) -> FailureParts:
    """Split ``message`` (see the module docstring); a one-line message has no parts beyond
    its text, which the cell already holds as its first line."""
    lines = message.splitlines()
    if len(lines) < 2:
        return FailureParts()
    end = next((n for n, line in enumerate(lines) if _SCENARIO.match(line)), len(lines))
    text = "\n".join(lines[:end]).rstrip()
    if len(text) > TEXT_LIMIT:
        text = text[:TEXT_LIMIT] + f"... ({len(text)} chars)"
    expected = next((m["value"] for m in map(_EXPECTED.match, lines[:end]) if m), "")
    actual = next((m["value"] for m in map(_ACTUAL.match, lines[:end]) if m), "")
    scenario = ""
    if end + 1 < len(lines) and lines[end + 1].lstrip().startswith("{"):
        scenario = lines[end + 1].strip()
    return FailureParts(text if "\n" in text else "", expected, actual, scenario)
