"""Frame stacking in the Stable-Baselines3 adapter (xpspec/adapters/sb3_stack.py): what it
records of SB3's ``VecFrameStack`` and ``ReplayBuffer``, and SB3's zero fill reproduced with
SB3 and Gymnasium alone. Skipped when SB3 is not installed."""

from __future__ import annotations

import pytest

pytest.importorskip("stable_baselines3")

import gymnasium
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack

from xpspec.adapters.sb3 import SB3Adapter
from xpspec.conformance.catalog import CATALOG
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import StackScenario
from xpspec.protocol.schedule import FixedSchedule

SCENARIO = StackScenario(
    EnvSpec(num_envs=2, schedules=(FixedSchedule(2),)),
    steps=7,
    num_frames=3,
    capacity=4,
    batch_size=8,
    draws=2,
)


def test_the_rollout_stacks_are_zero_filled_and_restart_at_each_reset() -> None:
    trace = SB3Adapter().run_stack(SCENARIO)
    rollout = [e for e in trace.of_kind("stacked") if e.source == "rollout"]
    assert len(rollout) == 7
    # same-step auto-reset: an episode of 2 transitions is the rows t = 0, 1
    assert [(e.episode[1], e.t[1]) for e in rollout] == [
        (0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0),
    ]  # fmt: skip
    zero = (0, 0, 0)
    assert [e.frames[1] for e in rollout[:4]] == [
        (zero, zero, (1, 0, 0)),
        (zero, (1, 0, 0), (1, 0, 1)),
        (zero, zero, (1, 1, 0)),  # the previous episode's frames are gone
        (zero, (1, 1, 0), (1, 1, 1)),
    ]


def test_the_sampled_stacks_are_the_stored_ones_of_the_last_capacity_rows() -> None:
    trace = SB3Adapter().run_stack(SCENARIO)
    rollout: dict = {}
    per_env: dict[int, list] = {}
    for e in trace.of_kind("stacked"):
        rows = list(zip(zip(e.env, e.episode, e.t), e.frames))
        if e.source == "rollout":
            rollout.update(rows)
            for item, _ in rows:
                per_env.setdefault(item[0], []).append(item)
            continue
        assert len(rows) == SCENARIO.batch_size
        for item, stack in rows:
            assert item in per_env[item[0]][-SCENARIO.capacity :]
            assert stack == rollout[item]


def test_the_catalogue_runs_give_every_clause_something_to_judge() -> None:
    trace = SB3Adapter().run_stack(CATALOG["stack-cross"])
    assert sum(1 for e in trace.of_kind("stacked") if e.source == "sample") == 3


def test_vec_frame_stack_zero_fills_at_a_reset_and_stacks_the_terminal_observation_apart() -> None:
    """SB3 2.9.2 alone: ``VecFrameStack`` over a ``DummyVecEnv`` of an env whose observation
    is its step count and whose episodes last 2 steps."""

    class Counter(gymnasium.Env):  # type: ignore[type-arg]
        observation_space = gymnasium.spaces.Box(0.0, 10.0, (1,), np.float32)
        action_space = gymnasium.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
            self.t = 1
            return np.array([self.t], np.float32), {}

        def step(self, action):  # type: ignore[no-untyped-def]
            self.t += 1
            return np.array([self.t], np.float32), 0.0, self.t == 3, False, {}

    venv = VecFrameStack(DummyVecEnv([Counter]), n_stack=3)
    assert venv.reset().tolist() == [[0.0, 0.0, 1.0]]  # zeros, not the first frame repeated
    obs, _, _, _ = venv.step(np.zeros(1, np.int64))
    assert obs.tolist() == [[0.0, 1.0, 2.0]]
    obs, _, dones, infos = venv.step(np.zeros(1, np.int64))
    assert dones.tolist() == [True]
    assert infos[0]["terminal_observation"].tolist() == [1.0, 2.0, 3.0]
    assert obs.tolist() == [[0.0, 0.0, 1.0]]  # the new episode's stack, zero-filled
