"""The suite holds refimpl's variant models to their committed digests
(``xpspec/conformance/vectors/variant-digests.json``): a change of a model fails the check
``pinned-model`` under the variant's clause, although the checks of that clause, which compare
the model with a fresh run of itself, pass; and an edited digest makes the file stale."""

from __future__ import annotations

import hashlib
import inspect
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from xpspec.conformance import vectors
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.engine import Session
from xpspec.conformance.vectors.digests import (
    DIGESTS,
    ModelCase,
    clause_checks,
    model_cases,
    pin_check,
    pins,
    render_digests,
    scenario_digest,
)
from xpspec.protocol.scenario import scenario_to_json
from xpspec.refimpl import learner
from xpspec.refimpl.adapter import RefimplAdapter
from xpspec.refimpl.learner import advantages

CLAUSE, VARIANT = "learner.stats-exclude-bootstrap", "rllib-includes-bootstrap"
RECURSION = "carry = delta[t] + gamma * lam * propagate[t] * carry"


def _case() -> ModelCase:
    return next(c for c in model_cases() if (c.clause, c.variant) == (CLAUSE, VARIANT))


def _gamma_plus_lam() -> Any:
    """refimpl's ``episode_advantages`` with the rllib-2.60 recursion computing
    ``gamma + lam * ...`` for ``gamma * lam * ...`` (a mutant the checks of the variant's
    clause let pass)."""
    source = textwrap.dedent(inspect.getsource(advantages.episode_advantages))
    assert source.count(RECURSION) == 1, "the rllib-2.60 recursion moved: update this test"
    namespace = dict(vars(advantages))
    exec(source.replace(RECURSION, RECURSION.replace("gamma * lam", "gamma + lam")), namespace)
    return namespace["episode_advantages"]


def test_every_model_case_has_a_digest() -> None:
    """The committed file is what ``python -m xpspec.conformance.vectors --write`` writes for
    the model cases, trace digests aside: in its form, it pins every model case and only
    those, each under a label of its own, their scenarios unchanged. That refimpl's trace of
    every model case still has its pinned digest is tests/conformance/test_variants.py's
    claim, which runs refimpl on every model case anyway (the stale-vector test,
    tests/docs/test_vectors.py, leaves the digests to these two)."""
    committed = (vectors.default_directory() / DIGESTS).read_text(encoding="utf-8")
    assert committed == render_digests(pins()), (
        f"{DIGESTS} is not in the form the vectors' --write gives: regenerate with "
        "`python -m xpspec.conformance.vectors --write`"
    )
    labels = [case.label for case in model_cases()]
    assert len(set(labels)) == len(labels), "two model cases share a label"
    cases = {case.label: case for case in model_cases()}
    assert set(pins()) == set(cases)
    for label, case in cases.items():
        assert pins()[label].scenario == scenario_digest(case.scenario), label


def test_unchanged_model_passes_its_pin() -> None:
    case = _case()
    outcome = Session(RefimplAdapter(), "refimpl").evaluate(
        pin_check(case), case.label, case.scenario
    )
    assert outcome.status == "pass", outcome.message


def test_a_changed_model_fails_its_pin_under_the_variants_clause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    case = _case()
    monkeypatch.setattr(learner, "episode_advantages", _gamma_plus_lam())
    session = Session(RefimplAdapter(), "refimpl")
    own = {c.name: session.evaluate(c, case.label, case.scenario) for c in clause_checks(case)}
    assert own and {o.status for o in own.values()} == {"pass"}, "the gap this pin closes"
    outcome = session.evaluate(pin_check(case), case.label, case.scenario)
    assert outcome.status == "fail"
    assert outcome.check == "pinned-model"
    assert outcome.clauses == outcome.charged == (CLAUSE,)
    actual = session.run(case.scenario).to_jsonl()
    got = hashlib.sha256(actual.encode("utf-8")).hexdigest()
    assert got != pins()[case.label].trace
    for part in (
        CLAUSE,
        repr(VARIANT),
        repr(case.name),
        case.label,
        repr(pins()[case.label].trace),
        repr(got),
        scenario_to_json(case.scenario),
        "xpspec trace s.json --adapter refimpl",
        f"git log -1 -- xpspec/conformance/vectors/{DIGESTS}",
        "python -m xpspec.conformance.vectors --write",
    ):
        assert part in outcome.message, part


def test_a_model_scenario_changed_since_the_digests_fails_naming_it() -> None:
    case = _case()
    pin = pins()[case.label]
    other = next(c for c in model_cases() if c.label != case.label and c.scenario.kind == "learner")
    outcome = Session(RefimplAdapter(), "refimpl").evaluate(
        pin_check(case), case.label, other.scenario
    )
    assert outcome.status == "fail"
    assert "changed since the digests were written" in outcome.message
    assert repr(pin.scenario) in outcome.message


def test_an_edited_digest_makes_the_file_stale(tmp_path: Path) -> None:
    subset = {name: CATALOG[name] for name in ("learner-single", "warmup-boundary")}
    files = vectors.generate(subset)
    assert DIGESTS in files and json.loads(files[DIGESTS])["digests"]
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert vectors.stale_files(tmp_path, catalog=subset) == []
    data = json.loads(files[DIGESTS])
    label = next(iter(data["digests"]))
    digest = data["digests"][label]["trace"]
    data["digests"][label]["trace"] = ("0" if digest[0] != "0" else "1") + digest[1:]
    (tmp_path / DIGESTS).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    assert vectors.stale_files(tmp_path, catalog=subset) == [DIGESTS]
    (tmp_path / DIGESTS).unlink()
    assert vectors.stale_files(tmp_path, catalog=subset) == [DIGESTS]
