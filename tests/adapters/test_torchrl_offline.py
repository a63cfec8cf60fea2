"""Offline and hybrid replay in the TorchRL adapter (xpspec/adapters/torchrl_offline.py):
what it records of ``OfflineToOnlineReplayBuffer``, and that the records follow what TorchRL
computed (a perturbed split shows in the trace and fails the check). Skipped when TorchRL is
not installed."""

from __future__ import annotations

import pytest

pytest.importorskip("torchrl")

from torchrl.data import OfflineToOnlineReplayBuffer

from tests.adapters.offline_runs import SCENARIO
from xpspec.adapters.torchrl import TorchRLAdapter
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.offline import check_items_unchanged, check_mix_ratio
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import OfflineScenario


def test_each_batch_is_the_rounded_offline_count_then_held_online_items() -> None:
    events = list(TorchRLAdapter().run_offline(SCENARIO).of_kind("mixed"))
    assert [e.update for e in events] == [0, 1, 2]
    written: list = []
    for e in events:
        written += e.written
        assert len(e.written) == 2 * 2  # two collector batches of two envs
        # round(2/3 * 5) = 3 offline items first, the other 2 online
        offline, online = e.batch[:3], e.batch[3:]
        assert all(item in SCENARIO.offline for item in offline)
        held = {i for env in (0, 1) for i in [w for w in written if w[0] == env][-3:]}
        assert len(online) == 2 and all(item in held for item in online)
        assert sorted(e.offline_held) == sorted(SCENARIO.offline)
        assert e.counter is None


def test_a_zero_weight_or_a_schedule_is_not_expressible() -> None:
    with pytest.raises(Unsupported, match="open interval"):
        TorchRLAdapter().run_offline(
            OfflineScenario(SCENARIO.env, SCENARIO.offline, updates=1, online_weight=0)
        )
    with pytest.raises(Unsupported, match="no schedule"):
        TorchRLAdapter().run_offline(
            OfflineScenario(SCENARIO.env, SCENARIO.offline, updates=2, online_every=2)
        )


def test_a_perturbed_split_shows_in_the_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    # The counts in the trace are TorchRL's: a fraction of 1/3 where the scenario says 2/3
    # fails offline.mix-ratio, and the items are still the buffers' own.
    real = OfflineToOnlineReplayBuffer.__init__

    def flipped(self, offline_dataset, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["offline_fraction"] = 1 - kwargs["offline_fraction"]
        real(self, offline_dataset, **kwargs)

    monkeypatch.setattr(OfflineToOnlineReplayBuffer, "__init__", flipped)
    trace = TorchRLAdapter().run_offline(SCENARIO)
    ctx = Context(lambda s: trace, lambda s: trace)
    check_items_unchanged(SCENARIO, trace, ctx)
    with pytest.raises(CheckFailure, match="offline items of the batch"):
        check_mix_ratio(SCENARIO, trace, ctx)
