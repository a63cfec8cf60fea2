"""An explanation of every kind of trace: the committed vectors against themselves, and a
relabeling trace with one row's reward changed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.conformance.explain.perturb import reference, with_events
from xpspec.conformance.explain import explain, render_html, render_text
from xpspec.conformance.vectors import vectors


@pytest.mark.parametrize("vector", vectors(), ids=lambda v: v.name)
def test_a_vector_against_itself_parts_nowhere_and_fails_nothing(vector) -> None:  # type: ignore[no-untyped-def]
    scenario, trace = vector.scenario(), vector.trace()
    x = explain(scenario, trace, trace, name=vector.name, subject="s", against="a")
    assert x.divergence is None and x.where == ""
    assert x.verdict.failures == () and x.verdict.checked
    assert "no divergence; no check fails" in render_text(x)
    assert 'class="headline ok"' in render_html(x)


def test_a_relabeled_reward_differs_in_its_draw_and_env() -> None:
    scenario, trace = reference("relabel-final")
    events = list(trace.events)
    where, relabel = next((n, e) for n, e in enumerate(events) if e.kind == "relabel")
    row = 3
    rewards = list(relabel.reward)
    rewards[row] += 1.0
    events[where] = replace(relabel, reward=tuple(rewards))
    x = explain(scenario, with_events(trace, events), trace, name="r", subject="s", against="a")
    d = x.divergence
    assert d is not None
    assert (d.index, d.shape, d.envs, d.fields) == (
        where,
        "differs",
        (relabel.env[row],),
        ("reward",),
    )
    assert x.where == f"draw {relabel.draw}"
    cause = x.verdict.cause
    assert cause is not None and cause.clauses == ("relabel.reward-recomputed",)
