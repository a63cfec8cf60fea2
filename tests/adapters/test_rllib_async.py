"""Asynchronous actors in the RLlib adapter (xpspec/adapters/rllib_async.py): IMPALA's own
``training_step`` with one remote env runner per actor on a local Ray cluster, each item's
version RLlib's ``WEIGHTS_SEQ_NO``. Each run is judged against the arrival order RLlib
produced, whatever it was. Skipped when RLlib is not installed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

pytest.importorskip("ray.rllib")

from xpspec.adapters import rllib_async
from xpspec.adapters.rllib import RLlibAdapter
from xpspec.conformance.checks.asynchronous import check_behaviour_logits
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.asynchronous import LOGIT_STEP, AsyncScenario
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ADAPTER = RLlibAdapter()
SCENARIO = AsyncScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(3),)),
    fragment_length=3,
    arrivals=(0, 1) * 5,
)


@pytest.fixture(scope="module")
def trace() -> Trace:
    return ADAPTER.run_async(SCENARIO)


def test_each_arrival_is_one_runners_fragment_counted_by_rllib(trace: Trace) -> None:
    arrivals = list(trace.of_kind("arrived"))
    assert len(arrivals) >= len(SCENARIO.arrivals)
    assert [a.index for a in arrivals] == list(range(len(arrivals)))
    # one env per remote runner, both runners deliver, fragments of fragment_length items
    assert all(set(a.env) == {a.actor} and len(a.env) == 3 for a in arrivals)
    assert {a.actor for a in arrivals} == {0, 1}
    # RLlib's counter never misses a delivered item and never runs ahead of what arrived
    # by the end of the fetch that delivered it
    counters = [a.env_steps for a in arrivals]
    assert counters == sorted(counters) and counters[-1] == 3 * len(arrivals)
    assert all(c >= 3 * (i + 1) for i, c in enumerate(counters))


def test_versions_are_rllibs_and_name_the_weights_that_acted(trace: Trace) -> None:
    acted: dict[int, list[int]] = {}
    for a in trace.of_kind("arrived"):
        for v, logits in zip(a.version, a.logits):
            assert logits == pytest.approx(tuple(k * v * LOGIT_STEP for k in range(2)))
            assert 0 <= v <= a.learner_version
        acted.setdefault(a.actor, []).extend(a.version)
    # the runners' versions grow and reach past the first update
    assert all(v == sorted(v) for v in acted.values())
    assert max(max(v) for v in acted.values()) > 0
    check_behaviour_logits(SCENARIO, trace, None)  # type: ignore[arg-type]


def test_the_learner_trains_once_on_each_arrival_in_order(trace: Trace) -> None:
    arrivals = list(trace.of_kind("arrived"))
    trained = list(trace.of_kind("trained"))
    assert [t.version for t in trained] == list(range(len(arrivals)))
    fragments = sorted((a.env, a.episode, a.t) for a in arrivals)
    assert sorted((t.env, t.episode, t.t) for t in trained) == fragments


def test_a_lag_bound_is_unsupported() -> None:
    with pytest.raises(Unsupported, match="no bound on the lag"):
        ADAPTER.run_async(replace(SCENARIO, max_lag=1))


def test_weights_never_synced_leave_every_version_at_zero(
    monkeypatch: pytest.MonkeyPatch, trace: Trace
) -> None:
    """Perturbation: the learner never hands its state to IMPALA's broadcast; the runners
    act with their first weights throughout and the recorded versions change."""
    update = rllib_async.VersionLearner.update

    def no_state(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["return_state"] = False
        return update(self, *args, **kwargs)

    monkeypatch.setattr(rllib_async.VersionLearner, "update", no_state)
    stuck = ADAPTER.run_async(SCENARIO)
    arrivals = list(stuck.of_kind("arrived"))
    assert all(set(a.version) == {0} for a in arrivals)
    assert all(row == (0.0, 0.0) for a in arrivals for row in a.logits)
    assert arrivals[-1].learner_version >= len(SCENARIO.arrivals) - 2
    assert any(max(a.version) > 0 for a in trace.of_kind("arrived"))
