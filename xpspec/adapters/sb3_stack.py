"""Frame stacking in Stable-Baselines3 2.9.2 (clauses ``stack.*``): ``VecFrameStack`` over the
adapter's ``DummyVecEnv``, driven by ``DQN.learn`` and sampled by its ``ReplayBuffer``.

- **Stacking** is SB3's ``VecFrameStack(venv, n_stack=num_frames)``
  (``common/vec_env/vec_frame_stack.py``) with its ``StackedObservations``
  (``common/vec_env/stacked_observations.py``): the toy env's Box ``(3,)`` observation is no
  image, so the stack runs along the last axis, ``(3 * k,)``, oldest frame first. ``reset``
  and ``update`` zero an env's stack when the env resets, then write the new observation last
  (the zero fill: variant zero-fill of ``stack.episode-start``).
- **Rollout**: ``DQN.learn`` for ``steps`` vector steps with the gate never open
  (``learning_starts`` = the whole budget, so ``train`` is never called), every transition
  stored by SB3's own ``_store_transition``. The stack the policy receives at a vector step is
  ``DQN._last_obs`` when ``collect_rollouts`` calls ``_sample_action`` (the observation
  ``predict`` is given and ``_store_transition`` stores as ``observations``), read there; the
  item it belongs to is the raw observation the ``DummyVecEnv`` under the stacker returned
  last (a pass-through wrapper between them reads it).
- **Sampling**: ``ReplayBuffer.sample(batch_size)`` (``common/buffers.py``, the call
  ``DQN.train`` makes), ``draws`` times, seeded through ``DQN(seed=...)``. The buffer stores
  each stack whole, so a sampled row's item is its stack's newest frame.
  ``buffer_size = capacity * num_envs`` keeps ``capacity`` rows per env
  (``buffer_size // n_envs``).

SB3's vec envs reset inside the step that ends an episode (variant same-step of
``timestep.auto-reset``): the policy never receives a LAST's stack.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import stable_baselines3
from stable_baselines3.common.vec_env import VecEnvWrapper, VecFrameStack

from xpspec.adapters.sb3 import _dqn, _DQNConfig, _patch, _vec_env
from xpspec.kit.items import decode_items, item_columns
from xpspec.kit.quiet import quiet
from xpspec.protocol.scenario import StackScenario
from xpspec.protocol.trace import Event, Item, Stacked, Trace

__all__ = ["run_stack"]


class _RawTap(VecEnvWrapper):
    """Pass-through wrapper that keeps the raw observations its vec env returned last."""

    def __init__(self, venv: Any) -> None:
        super().__init__(venv)
        self.last: Any = None

    def reset(self) -> Any:
        self.last = self.venv.reset()
        return self.last

    def step_wait(self) -> Any:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.last = obs
        return obs, rewards, dones, infos


def _stacks(observations: Any, k: int) -> tuple[tuple[Item, ...], ...]:
    """SB3's stacked observations ``[N, 3 * k]`` as ``N`` stacks of ``k`` decoded frames."""
    array = np.asarray(observations, dtype=np.float64).reshape(-1, k, 3)
    return tuple(tuple(decode_items(stack)) for stack in array)


def run_stack(scenario: StackScenario) -> Trace:
    """The rollout's stacks as the policy received them, then ``draws`` batches sampled by
    SB3's ``ReplayBuffer`` (see the module docstring)."""
    k, b = scenario.num_frames, scenario.env.num_envs
    total = scenario.steps * b
    config = _DQNConfig(1, 1, 1, total, scenario.capacity * b, total)
    events: list[Event] = []
    with quiet():
        tap = _RawTap(_vec_env(scenario.env, scenario.seed))
        venv = VecFrameStack(tap, n_stack=k)
        model = _dqn(venv, scenario.env, config, scenario.seed)
        sample_action = model._sample_action

        def recorded(*args: Any, **kwargs: Any) -> Any:
            items = decode_items(tap.last)
            stacks = _stacks(model._last_obs, k)
            events.append(Stacked("rollout", len(events), *item_columns(items), stacks))
            return sample_action(*args, **kwargs)

        _patch(model, "_sample_action", recorded)
        model.learn(total)
        buffer = model.replay_buffer
        assert buffer is not None
        for draw in range(scenario.draws):
            stacks = _stacks(buffer.sample(scenario.batch_size).observations, k)
            items = [stack[-1] for stack in stacks]
            events.append(Stacked("sample", draw, *item_columns(items), stacks))
    return Trace(tuple(events), {"producer": f"sb3 {stable_baselines3.__version__}"})
