"""The RLlib adapter's trainer row for the policy state: DQN's train loop with a stateful
counting module, the state RLlib 2.60.0 fed the acting module at each step, and that it moves
when the framework side moves. Skipped when RLlib is not installed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from xpspec.adapters.rllib import RLlibAdapter
from xpspec.adapters.rllib_state import ActingStateQModule
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.timesteps import check_state_reset
from xpspec.conformance.validate import validate_trace
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace

pytestmark = pytest.mark.filterwarnings("ignore:.*Overriding environment")

ADAPTER = RLlibAdapter()
CONTEXT = Context(ADAPTER.run_trainer, ADAPTER.run_trainer)
# Two envs, env 0 with episodes of 2 transitions and env 1 of 3 (their ends fall on different
# vector steps), a batch of 2 transitions per update, 6 train() calls: episodes end and start
# across sampling rounds and iterations.
SCENARIO = TrainerScenario(
    EnvSpec(2, (FixedSchedule(2), FixedSchedule(3))),
    TrainerConfig(num_iterations=6),
)


def _states(trace: Trace) -> list[tuple[int, int, int, int]]:
    """(env, episode, t, the state the module received) of every unrolled item."""
    return [
        (env, episode, t, state)
        for e in trace.of_kind("env_step")
        for env, episode, t, state in zip(e.env, e.episode, e.t, e.policy_state, strict=True)
    ]


@pytest.fixture(scope="module")
def trace() -> Trace:
    trace = ADAPTER.run_trainer(SCENARIO)
    validate_trace(SCENARIO, trace)
    return trace


def test_info_declares_state() -> None:
    assert "state" in ADAPTER.info().capabilities


def test_the_module_receives_its_initial_state_at_every_first_and_counts_on(trace: Trace) -> None:
    states = _states(trace)
    # Both envs ran more than one episode, and episodes ran across sampling rounds.
    assert {(env, episode) for env, episode, _, _ in states} >= {(0, 1), (1, 1)}
    assert all(state == t for _, _, t, state in states)
    check_state_reset(SCENARIO, trace, CONTEXT)


def test_updates_keep_the_scenarios_batch_of_single_transitions(trace: Trace) -> None:
    # train_batch_size_per_learner counts two timesteps per sequence of one transition:
    # every update still trains on mini_batch_size (here B = 2) windows of one item.
    updates = list(trace.of_kind("update"))
    assert len(updates) == SCENARIO.trainer.num_iterations
    assert all(len(u.windows) == 2 and all(len(w) == 1 for w in u.windows) for u in updates)


def test_recorded_states_follow_what_rllib_feeds_the_module(monkeypatch: Any) -> None:
    # The user's module starts from a count of 5: RLlib feeds that initial state at every
    # FIRST (get_initial_state), and STATE_OUT back within the episode.
    start = {"count": np.full((1,), 5.0, dtype=np.float32)}
    monkeypatch.setattr(
        ActingStateQModule,
        "get_initial_state",
        lambda self: start if self.inference_only else {},
    )
    trace = ADAPTER.run_trainer(SCENARIO)
    assert all(state == t + 5 for _, _, t, state in _states(trace))
    with pytest.raises(CheckFailure, match="policy state"):
        check_state_reset(SCENARIO, trace, CONTEXT)
