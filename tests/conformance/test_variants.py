"""Every variant model is coherent: refimpl run as the variant passes every check that
concerns the variant scenario (so a framework that behaves exactly like the variant is a
declared deviation, never a failure)."""

from __future__ import annotations

import pytest

from conformance.catalog import CATALOG
from conformance.checks import ALL_CHECKS
from conformance.engine import Session, load_adapter
from conformance.variants import VARIANTS, variant_scenario

CASES = [
    pytest.param(clause, variant, id=f"{clause}/{variant}") for clause, variant in sorted(VARIANTS)
]


@pytest.mark.parametrize(("clause", "variant"), CASES)
def test_refimpl_as_the_variant_passes_the_checks_of_the_variant_scenario(
    clause: str, variant: str
) -> None:
    session = Session(load_adapter("refimpl"), "refimpl")
    modelled = 0
    for name, scenario in CATALOG.items():
        model = variant_scenario(clause, variant, scenario)
        if model is None or model == scenario:
            continue
        modelled += 1
        for check in ALL_CHECKS:
            if check.capability == model.kind and check.applies(model):
                outcome = session.evaluate(check, name, model)
                if outcome.status == "error" and "NoValidWindow" in outcome.message:
                    break  # the variant leaves this scenario nothing to sample
                assert outcome.status == "pass", outcome.message
    assert modelled, f"no catalogue scenario exercises {clause}/{variant}"


def test_same_step_rows_skip_last() -> None:
    """Under same-step auto-reset the trainer never sees LAST: an episode of L transitions
    is L rows, and the row after (e, j, L - 1) is (e, j + 1, 0)."""
    from refimpl import EnvSpec, FixedSchedule, TrainerConfig, train

    env = EnvSpec(2, (FixedSchedule(3),), autoreset="same-step")
    trace = train(env, TrainerConfig(num_iterations=7)).trace
    rows = [(e.episode[1], e.t[1], e.step_type[1]) for e in trace.of_kind("env_step")]
    # t = 0, 1, 2 then the next episode; step types FIRST (0) then MID (1), never LAST (2).
    assert rows == [(0, 0, 0), (0, 1, 1), (0, 2, 1), (1, 0, 0), (1, 1, 1), (1, 2, 1), (2, 0, 0)]


def test_a_model_does_not_depend_on_declaration_order() -> None:
    # Windows of 3 over ALF's ring of U + 1 = 2 items: alf-fixed-length only fits once
    # alf-shortened-chunks allows windows longer than the ring.
    from dataclasses import replace

    from conformance.variants import model_scenario

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
