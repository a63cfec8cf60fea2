"""Asynchronous actors in the TorchRL adapter (xpspec/adapters/torchrl_async.py):
``MultiAsyncCollector`` with one worker process per actor, shared-memory weights, TorchRL's
policy-version tracking and ``StalenessAwareSampler``. Each run is judged against the arrival
order TorchRL produced, whatever it was. Skipped when TorchRL is not installed."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("torchrl")

from xpspec.adapters import torchrl_async
from xpspec.adapters.torchrl import TorchRLAdapter
from xpspec.conformance.checks.asynchronous import (
    check_behaviour_logits,
    check_env_steps_counted,
    check_lag_bounded,
)
from xpspec.conformance.checks.base import CheckFailure
from xpspec.protocol.asynchronous import LOGIT_STEP, AsyncScenario
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Item

ADAPTER = TorchRLAdapter()
SCENARIO = AsyncScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(3),)),
    fragment_length=3,
    arrivals=(0, 1) * 4,
)
BOUNDED = replace(SCENARIO, max_lag=0)


def test_each_arrival_is_one_workers_batch_and_the_counter_counts_it_once() -> None:
    trace = ADAPTER.run_async(SCENARIO)
    arrivals = list(trace.of_kind("arrived"))
    assert len(arrivals) == len(SCENARIO.arrivals)
    assert {a.actor for a in arrivals} <= {0, 1}
    assert all(set(a.env) == {a.actor} and len(a.env) == 3 for a in arrivals)
    assert [a.env_steps for a in arrivals] == [3 * (i + 1) for i in range(len(arrivals))]
    check_env_steps_counted(SCENARIO, trace, None)  # type: ignore[arg-type]


def test_the_workers_act_with_the_weights_the_learner_pushed() -> None:
    trace = ADAPTER.run_async(SCENARIO)
    acted: dict[int, list[float]] = {}
    for a in trace.of_kind("arrived"):
        assert all(a.learner_version >= row[1] / LOGIT_STEP for row in a.logits)
        acted.setdefault(a.actor, []).extend(row[1] for row in a.logits)
    # shared-memory weights: each worker's versions grow, and reach past the first update
    assert all(v == sorted(v) for v in acted.values())
    assert max(max(v) for v in acted.values()) > 0
    # every update trained on one whole arrived batch
    trained = list(trace.of_kind("trained"))
    assert [t.version for t in trained] == list(range(len(SCENARIO.arrivals)))
    check_behaviour_logits(SCENARIO, trace, None)  # type: ignore[arg-type]


def test_the_staleness_sampler_trains_only_within_the_bound() -> None:
    trace = ADAPTER.run_async(BOUNDED)
    versions = {
        item: v
        for a in trace.of_kind("arrived")
        for item, v in zip(zip(a.env, a.episode, a.t), a.version)
    }
    for t in trace.of_kind("trained"):
        assert all(t.version - versions[i] <= 0 for i in zip(t.env, t.episode, t.t))


def test_a_learner_that_ignores_the_staleness_bound_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Perturbation: every stored frame is trained on, the oldest included."""

    def everything(self: torchrl_async._Learner, arrived: object) -> list[Item]:
        self.buffer.extend(arrived.reshape(-1))  # type: ignore[attr-defined]
        return torchrl_async.decode_items(self.buffer[:].get("observation"))

    monkeypatch.setattr(torchrl_async._Learner, "batch", everything)
    trace = ADAPTER.run_async(BOUNDED)
    with pytest.raises(CheckFailure, match="at most max_lag"):
        check_lag_bounded(BOUNDED, trace, None)  # type: ignore[arg-type]
