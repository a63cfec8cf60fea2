"""A result's message in parts: the engine's failure messages, split where the compliance
site shows each part (the run's text, expected and actual, the scenario's JSON)."""

from __future__ import annotations

import json

from tests.conformance.zoo import MUTANTS, MutantAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.engine import Session
from xpspec.conformance.messages import TEXT_LIMIT, failure_parts
from xpspec.protocol.scenario import scenario_from_json

CHECKS = {c.name: c for c in ALL_CHECKS}


def test_a_real_failure_splits_into_its_parts() -> None:
    mutant = next(m for m in MUTANTS if m.name == "never-release")
    outcome = Session(MutantAdapter(mutant), "my-adapter").evaluate(
        CHECKS["delayed-per-env"], "delayed-b1", CATALOG["delayed-b1"]
    )
    assert outcome.status == "fail"
    parts = failure_parts(outcome.message)
    lines = outcome.message.splitlines()
    expected = next(line for line in lines if line.lstrip().startswith("expected: "))
    actual = next(line for line in lines if line.lstrip().startswith("actual: "))
    assert parts.expected == expected.split("expected: ", 1)[1]
    assert parts.actual == actual.split("actual:", 1)[1].strip()
    assert scenario_from_json(parts.scenario_json) == CATALOG["delayed-b1"]
    # the text stops before the reproduction block, whose commands the site builds itself
    assert parts.text.startswith(lines[0]) and expected in parts.text
    assert "scenario 'delayed-b1'" not in parts.text and "xpspec trace" not in parts.text


def test_a_one_line_message_has_no_parts() -> None:
    assert failure_parts("unsupported: no drain").fields() == {}
    assert failure_parts("").fields() == {}


def test_a_message_of_another_shape_keeps_its_text_only() -> None:
    parts = failure_parts("the worker died\nexit status -9\nstderr: Killed")
    assert parts.fields() == {"text": "the worker died\nexit status -9\nstderr: Killed"}


def test_a_long_text_is_cut_and_says_so() -> None:
    parts = failure_parts("a\n" + "x" * (2 * TEXT_LIMIT))
    assert len(parts.text) < TEXT_LIMIT + 30 and parts.text.endswith(
        f"({2 * TEXT_LIMIT + 2} chars)"
    )


def test_a_scenario_line_that_is_not_json_is_not_taken() -> None:
    parts = failure_parts("[c] x: y\nscenario 'a':\n  not json\n  reproduce: …")
    assert parts.scenario_json == "" and parts.text == ""
    json_line = json.dumps({"kind": "env"})
    assert failure_parts(f"[c] x: y\nscenario 'a':\n  {json_line}").scenario_json == json_line
