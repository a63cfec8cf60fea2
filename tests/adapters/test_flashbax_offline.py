"""Offline and hybrid replay in the Flashbax adapter (xpspec/adapters/flashbax_offline.py):
what it records of a Vault-read offline buffer mixed with an online trajectory buffer by
``make_mixer``, and that the records follow what Flashbax computed (a perturbed mixer shows in
the trace and fails the check). Skipped when Flashbax is not installed."""

from __future__ import annotations

import pytest

pytest.importorskip("flashbax")

import flashbax as fbx

from tests.adapters.offline_runs import SCENARIO
from xpspec.adapters import flashbax_offline
from xpspec.adapters.flashbax import FlashbaxAdapter
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.offline import check_items_unchanged, check_mix_ratio
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import OfflineScenario


def _run(scenario: OfflineScenario = SCENARIO):  # type: ignore[no-untyped-def]
    return FlashbaxAdapter().run_offline(scenario)


def test_each_batch_is_the_offline_count_then_the_online_count_of_held_items() -> None:
    trace = _run()
    events = list(trace.of_kind("mixed"))
    assert [e.update for e in events] == [0, 1, 2]
    written: list = []
    for e in events:
        written += e.written
        assert len(e.written) == 2 * 2  # two vector steps of two envs
        # make_mixer: int(2/3 * 5) = 3 and int(1/3 * 5) = 1, the fifth item to the first buffer
        offline, online = e.batch[:4], e.batch[4:]
        assert all(item in SCENARIO.offline for item in offline)
        held = {i for env in (0, 1) for i in [w for w in written if w[0] == env][-3:]}
        assert len(online) == 1 and online[0] in held
        assert sorted(e.offline_held) == sorted(SCENARIO.offline)
        assert e.counter is None


def test_a_schedule_is_not_expressible() -> None:
    with pytest.raises(Unsupported, match="make_mixer"):
        _run(OfflineScenario(SCENARIO.env, SCENARIO.offline, updates=2, online_after=1))


def test_a_perturbed_mixer_shows_in_the_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    # The counts in the trace are Flashbax's: mixing 1:2 where the scenario says 2:1 fails
    # offline.mix-ratio, and the items are still the buffers' own.
    real = fbx.make_mixer

    def swapped(buffers, batch_size, proportions):  # type: ignore[no-untyped-def]
        return real(buffers, batch_size, list(reversed(proportions)))

    monkeypatch.setattr(flashbax_offline.fbx, "make_mixer", swapped)
    monkeypatch.setattr(flashbax_offline, "_HYBRIDS", {})
    trace = _run()
    ctx = Context(lambda s: trace, lambda s: trace)
    check_items_unchanged(SCENARIO, trace, ctx)
    with pytest.raises(CheckFailure, match="offline items of the batch"):
        check_mix_ratio(SCENARIO, trace, ctx)
