"""Every variant model is coherent: refimpl run as the variant passes every check that
concerns the variant scenario (so a framework that behaves exactly like the variant is a
declared deviation, never a failure), and it does something: on some catalogue scenario its
trace differs from the default's. Every variant the spec names either has a model or is one
the expectations loader refuses, with its reason."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.clauses import ClauseRegistry
from xpspec.conformance.engine import Session
from xpspec.conformance.expectations import Expectations, ExpectationsError
from xpspec.conformance.harness import load_adapter
from xpspec.conformance.variants import UNDECLARABLE, VARIANTS, undeclarable, variant_scenario
from xpspec.conformance.vectors.digests import DIGESTS, ModelCase, pins, trace_digest
from xpspec.protocol.scenario import Scenario

CASES = [
    pytest.param(clause, variant, id=f"{clause}/{variant}") for clause, variant in sorted(VARIANTS)
]


@pytest.mark.parametrize(("clause", "variant"), CASES)
def test_refimpl_as_the_variant_passes_the_checks_of_the_variant_scenario(
    clause: str, variant: str
) -> None:
    """Over every model case of the variant (``model_cases``), also: refimpl's trace of the
    model has the digest ``variant-digests.json`` pins for it (that trace is the reference
    the checks below compare with, computed here once for both)."""
    session = Session(load_adapter("refimpl"), "refimpl")
    modelled, differs = 0, []
    for name, scenario in CATALOG.items():
        model = variant_scenario(clause, variant, scenario)
        if model is None or model == scenario:
            continue
        modelled += 1
        _assert_pinned(ModelCase(name, clause, variant, model), session)
        if _events(session, model) != _default_events(name):
            differs.append(name)
        for check in ALL_CHECKS:
            if check.capability == model.kind and check.applies(model):
                outcome = session.evaluate(check, name, model)
                if outcome.status == "error" and "NoValidWindow" in outcome.message:
                    break  # the variant leaves this scenario nothing to sample
                if outcome.status == "not-applicable":
                    # refimpl gives the check nothing to judge on the scenario itself either
                    # (stack.earliest-ignored: refimpl samples no item with evicted frames)
                    base = session.evaluate(check, name, scenario)
                    assert base.status == "not-applicable", outcome.message
                    continue
                assert outcome.status == "pass", outcome.message
    assert modelled, f"no catalogue scenario exercises {clause}/{variant}"
    assert differs, f"refimpl run as {clause}/{variant} traces what the default does everywhere"


def _assert_pinned(case: ModelCase, session: Session) -> None:
    """refimpl's trace of the model case has its committed digest (what ``python -m
    xpspec.conformance.vectors --check`` checks of the file, besides its form, which
    tests/conformance/test_variant_digests.py checks)."""
    pin = pins().get(case.label)
    assert pin is not None, f"{DIGESTS} has no digest of {case.label}: {_REGENERATE}"
    try:
        trace = session.run(case.scenario, "reference")
    except Exception as exc:  # the digests' writer could not run it either
        raise AssertionError(f"refimpl cannot run model case {case.label}: {exc}") from exc
    assert trace_digest(trace) == pin.trace, (
        f"refimpl's trace of model case {case.label} is not the one {DIGESTS} pins: {_REGENERATE}"
    )


_REGENERATE = "regenerate with `python -m xpspec.conformance.vectors --write`"


@functools.cache
def _default_events(name: str) -> object:
    """The events refimpl records for catalogue scenario ``name`` (once per process: every
    variant that changes the scenario compares its model's with them)."""
    return _events(Session(load_adapter("refimpl"), "refimpl"), CATALOG[name])


def _events(session: Session, scenario: Scenario) -> object:
    """The events refimpl records for ``scenario``, or the error that stopped it."""
    try:
        return session.run(scenario, "reference").events
    except Exception as exc:  # e.g. a variant that leaves nothing to sample
        return f"{type(exc).__name__}: {exc}"


def test_every_variant_the_spec_names_has_a_model_or_cannot_be_declared() -> None:
    named = {(c.id, v) for c in ClauseRegistry.load().clauses for v in c.variants}
    assert set(VARIANTS) <= named, "a model of a variant the spec does not name"
    assert set(UNDECLARABLE) <= named, "a reason for a variant the spec does not name"
    assert not set(VARIANTS) & set(UNDECLARABLE), "a variant both modelled and refused"
    assert named == set(VARIANTS) | set(UNDECLARABLE), "a variant neither modelled nor refused"
    for clause, variant in sorted(named):
        assert bool(undeclarable(clause, variant)) == ((clause, variant) in UNDECLARABLE)


@pytest.mark.parametrize(
    ("clause", "variant"),
    [pytest.param(c, v, id=f"{c}/{v}") for c, v in sorted(UNDECLARABLE)],
)
def test_the_loader_refuses_a_variant_with_no_model(
    tmp_path: Path, clause: str, variant: str
) -> None:
    path = tmp_path / "x.expectations.toml"
    path.write_text(f'[[deviation]]\nclause = "{clause}"\nvariant = "{variant}"\nreason = "r"\n')
    with pytest.raises(ExpectationsError, match="cannot be declared"):
        Expectations.load(path)


def test_same_step_rows_skip_last() -> None:
    """Under same-step auto-reset the trainer never sees LAST: an episode of L transitions
    is L rows, and the row after (e, j, L - 1) is (e, j + 1, 0)."""
    from xpspec.refimpl import EnvSpec, FixedSchedule, TrainerConfig, train

    env = EnvSpec(2, (FixedSchedule(3),), autoreset="same-step")
    trace = train(env, TrainerConfig(num_iterations=7)).trace
    rows = [(e.episode[1], e.t[1], e.step_type[1]) for e in trace.of_kind("env_step")]
    # t = 0, 1, 2 then the next episode; step types FIRST (0) then MID (1), never LAST (2).
    assert rows == [(0, 0, 0), (0, 1, 1), (0, 2, 1), (1, 0, 0), (1, 1, 1), (1, 2, 1), (2, 0, 0)]


def test_a_model_does_not_depend_on_declaration_order() -> None:
    # Windows of 3 over ALF's ring of U + 1 = 2 items: alf-fixed-length only fits once
    # alf-shortened-chunks allows windows longer than the ring.
    from dataclasses import replace

    from xpspec.conformance.variants import model_scenario

    base = CATALOG["whole-buffer-clear"]
    scenario = replace(
        base,
        trainer=replace(base.trainer, unroll_length=1, mini_batch_length=3, capacity=3),
        sampling=replace(base.sampling, window_length=3),
    )
    fixed, short = (
        ("replay.clear", "alf-fixed-length"),
        ("replay.whole-buffer", "alf-shortened-chunks"),
    )
    assert variant_scenario(*fixed, scenario) is None
    one, other = model_scenario(scenario, [fixed, short]), model_scenario(scenario, [short, fixed])
    assert one == other
    assert (one.trainer.capacity, one.trainer.clear, one.trainer.short_chunks) == (
        2,
        "none",
        "shorten",
    )
