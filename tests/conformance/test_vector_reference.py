"""The suite holds the reference implementation to the committed vectors: a change of
refimpl's behaviour on a vector scenario fails the suite run against refimpl, although a
fresh reference run would change along with it."""

from __future__ import annotations

from typing import Any

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks import ALL_CHECKS
from xpspec.conformance.engine import Session
from xpspec.refimpl import replay
from xpspec.refimpl.adapter import RefimplAdapter
from xpspec.refimpl.trainer import Trainer

CHECKS = {check.name: check for check in ALL_CHECKS}


def _strict_warmup(self: Trainer) -> bool:
    """The warm-up gate opens only above ``initial_collect_steps`` stored items, whatever the
    configured gate says (the ``stored>`` variant forced on every run)."""
    return self.stored_total > self.config.initial_collect_steps


def _outcomes(session: Session, name: str) -> dict[str, Any]:
    scenario = CATALOG[name]
    return {
        check.name: session.evaluate(check, name, scenario)
        for check in ALL_CHECKS
        if check.capability == scenario.kind and check.applies(scenario)
    }


def test_unchanged_refimpl_passes_its_vectors() -> None:
    outcomes = _outcomes(Session(RefimplAdapter(), "refimpl"), "warmup-boundary")
    assert {o.status for o in outcomes.values()} == {"pass"}


def test_a_changed_refimpl_fails_against_the_committed_vector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Trainer, "_warm", _strict_warmup)
    # A fresh reference run changes with refimpl: the comparison cannot see the change.
    live = Session(RefimplAdapter(), "refimpl", reference=RefimplAdapter())
    assert _outcomes(live, "warmup-boundary")["exact-schedule"].status == "pass"
    # The committed vector does not change: the exact comparison fails and says where.
    outcome = _outcomes(Session(RefimplAdapter(), "refimpl"), "warmup-boundary")["exact-schedule"]
    assert outcome.status == "fail"
    assert outcome.clauses == CHECKS["exact-schedule"].clauses
    assert "[unroll.fractional-schedule, train.synced-schedule, train.warmup-gate" in (
        outcome.message
    )
    assert "differs from the committed vector warmup-boundary" in outcome.message
    assert "first at line" in outcome.message
    assert '"status":"trained"' in outcome.message.split("expected:")[-1].split("\n")[0]
    assert '"status":"warmup"' in outcome.message.split("actual:")[-1].split("\n")[0]


def test_a_changed_replay_fails_against_the_committed_vector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A replay change (draws of windows of 5 come back empty although valid windows exist,
    in refimpl and so in a fresh reference run) fails the exact replay comparison."""
    real = replay.ReplayBuffer.sample

    def sample(self: replay.ReplayBuffer, batch_size: int, sampling: Any, generator: Any) -> Any:
        if sampling.window_length >= 5:
            raise self._no_window(sampling, "no valid window")
        return real(self, batch_size, sampling, generator)

    monkeypatch.setattr(replay.ReplayBuffer, "sample", sample)
    live = Session(RefimplAdapter(), "refimpl", reference=RefimplAdapter())
    assert _outcomes(live, "replay-near-capacity")["replay-no-window"].status == "pass"
    outcomes = _outcomes(Session(RefimplAdapter(), "refimpl"), "replay-near-capacity")
    outcome = outcomes["replay-no-window"]
    assert outcome.status == "fail", outcome.message
    assert "[replay.no-window]" in outcome.message
    assert "differs from the committed vector replay-near-capacity" in outcome.message
