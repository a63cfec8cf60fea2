"""Prioritized replay in the RLlib adapter (xpspec/adapters/rllib_priority.py): DQN's default
``PrioritizedEpisodeReplayBuffer``, its segment trees read before every draw and
``update_priorities`` after it. Skipped when RLlib is not installed."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (
    PrioritizedEpisodeReplayBuffer,
)

from xpspec.adapters.rllib import RLlibAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.base import CheckFailure
from xpspec.conformance.checks.priority import (
    check_eviction,
    check_new_at_max,
    check_priority_law,
    check_priority_probabilities,
    check_priority_weights,
    check_update_sampled,
)
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.priority import PrioritySpec
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import ReplayScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ADAPTER = RLlibAdapter()
# RLlib's unit: transitions (windows of 2 inside an episode) in a buffer that evicts nothing,
# with new transitions arriving between the draws.
TRANSITIONS = ReplayScenario(
    EnvSpec(2, (FixedSchedule(3),)),
    capacity=30,
    fill_steps=4,
    batch_size=16,
    draws=8,
    sampling=SamplingSpec(window_length=2, boundary="forbid"),
    priority=PrioritySpec(add_steps=1, eps=Fraction(1, 100)),
)
CHECKS: tuple[Callable[[Any, Trace, Any], None], ...] = (
    check_update_sampled,
    check_new_at_max,
    check_eviction,
    check_priority_probabilities,
    check_priority_law,
    check_priority_weights,
)


def _failing(scenario: ReplayScenario, trace: Trace) -> list[str]:
    out = []
    for check in CHECKS:
        try:
            check(scenario, trace, None)
        except CheckFailure:
            out.append(check.__name__)
    return out


def test_transition_windows_follow_every_priority_clause() -> None:
    trace = ADAPTER.run_replay(TRANSITIONS)
    assert len(list(trace.of_kind("sampled"))) == TRANSITIONS.draws
    assert _failing(TRANSITIONS, trace) == []


def test_the_masses_are_the_trees_and_the_weights_rllibs() -> None:
    trace = ADAPTER.run_replay(TRANSITIONS)
    reported = list(trace.of_kind("priorities"))
    # before the first draw every node holds 1 ** alpha; after it the sampled ones hold
    # (|td| + eps) ** alpha and some exceed 1
    assert set(reported[0].mass) == {1.0}
    assert max(reported[1].mass) > 1.0
    weights = [w for e in trace.of_kind("prioritized") for w in e.weight]
    assert weights and all(0 < w <= 1 for w in weights) and min(weights) < 1


def test_a_sampled_window_is_a_transition_inside_its_episode() -> None:
    trace = ADAPTER.run_replay(TRANSITIONS)
    for event in trace.of_kind("sampled"):
        for first, second in event.windows:
            assert first is not None and second is not None
            assert (second[0], second[1], second[2]) == (first[0], first[1], first[2] + 1)


def test_single_items_leave_final_and_newest_observations_without_mass() -> None:
    # The finding of rllib.expectations.toml on priority-law: RLlib's nodes are transitions.
    scenario = CATALOG["priority-law"]
    assert isinstance(scenario, ReplayScenario)
    trace = ADAPTER.run_replay(scenario)
    failing = _failing(scenario, trace)
    assert "check_new_at_max" in failing and "check_update_sampled" not in failing
    stored = {(e, k, t) for s in trace.of_kind("store") for e, k, t in zip(s.env, s.episode, s.t)}
    first = next(trace.of_kind("priorities"))
    held = set(zip(first.env, first.episode, first.t))
    assert held < stored


def test_an_update_rllib_got_wrong_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    # Perturbation: RLlib storing twice the priority it is given must fail update-sampled.
    update = PrioritizedEpisodeReplayBuffer.update_priorities

    def doubled(self: Any, priorities: np.ndarray, module_id: Any = None) -> None:
        update(self, 2 * np.asarray(priorities), module_id)

    monkeypatch.setattr(PrioritizedEpisodeReplayBuffer, "update_priorities", doubled)
    trace = ADAPTER.run_replay(TRANSITIONS)
    assert "check_update_sampled" in _failing(TRANSITIONS, trace)


def test_a_new_node_below_the_maximum_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    # Perturbation: new transitions at mass 1 instead of the running maximum.
    assign = PrioritizedEpisodeReplayBuffer._get_free_node_and_assign

    def at_one(self: Any, sample_index: int, weight: float = 1.0) -> int:
        return assign(self, sample_index, 1.0)

    monkeypatch.setattr(PrioritizedEpisodeReplayBuffer, "_get_free_node_and_assign", at_one)
    trace = ADAPTER.run_replay(TRANSITIONS)
    assert "check_new_at_max" in _failing(TRANSITIONS, trace)


def test_an_empty_buffer_draws_nothing() -> None:
    scenario = CATALOG["priority-warmup"]
    assert isinstance(scenario, ReplayScenario)
    trace = ADAPTER.run_replay(scenario)
    first = next(trace.of_kind("sampled"))
    assert first.draw == 0 and first.windows == ()
    assert len(list(trace.of_kind("sampled"))) == scenario.draws
