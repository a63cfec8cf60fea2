"""Frame stacking in Tianshou 2.0.1 (clauses ``stack.*``): an env wrapper stacks in the rollout
and ``VectorReplayBuffer(stack_num=k, save_only_last_obs=True)`` rebuilds the stacks at sample
time, the pairing of Tianshou's Atari DQN example (``examples/atari/atari_dqn.py``: an env
``FrameStack`` and that buffer). Sources are cited as ``file:function`` under the installed
``tianshou`` package.

- **Rollout**: Tianshou's own ``FrameStack`` (``env/atari/atari_wrapper.py``) cannot be built
  over a Box observation space with the Gymnasium 1.4.0 that Tianshou 2.0.1 installs: its
  ``get_space_dtype`` returns the abstract ``np.floating`` (or ``np.integer``) and
  ``gymnasium.spaces.Box`` raises ``TypeError`` (reproduced with Tianshou alone by
  ``tests/adapters/test_tianshou_findings.py::test_atari_frame_stack_cannot_wrap_a_box_env``).
  Each toy env is therefore wrapped in Gymnasium's ``FrameStackObservation(env, k,
  padding_type="reset")`` (``gymnasium/wrappers/stateful_observation.py``), which stacks as
  Tianshou's wrapper does: at a reset the reset observation ``k`` times, then each new
  observation last, ``[k, 3]`` oldest first. A ``DummyVectorEnv`` of them is stepped by
  ``Collector.collect(n_step=steps * B)``, which resets a done env in the step that ends its
  episode (variant same-step of ``timestep.auto-reset``). The stack the policy receives is
  ``batch.obs`` of its ``forward`` call, read there; the item it belongs to is the raw
  observation the toy env under the stacker returned last (a pass-through wrapper between
  them reads it).
- **Storage and sampling** (padding ``repeat-first``): ``VectorReplayBuffer(capacity * B, B, stack_num=k,
  save_only_last_obs=True, ignore_obs_next=True)`` (``data/buffer/buffer_base.py``): one ring
  of ``capacity`` transitions per env, each storing only the last frame of its stack
  (``ReplayBuffer.add``), and ``sample(batch_size)`` rebuilding the stack of a sampled index
  ``i`` as ``obs[prev^(k-1)(i)] .. obs[i]`` (``ReplayBuffer.get``; ``prev`` stays put at an
  episode's first stored transition and at the ring's oldest one). ``sample_avail`` keeps its
  default ``False``, as in the example: every stored index is drawn. A sampled item is the
  stack's last frame (the index's own stored observation).

Padding ``zeros``: Tianshou's sample-time stacking has no padding value (``ReplayBuffer.get``
repeats the episode's first stored frame), so a zero-filled rollout stack can only be kept by
storing it whole, the buffer's default: ``FrameStackObservation(padding_type="zero")`` and
``VectorReplayBuffer(capacity * B, B)`` with ``stack_num=1``, whose rows are the stacks the
policy received; a sampled item is then its stored stack's newest frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tianshou
from gymnasium.wrappers import FrameStackObservation
from tianshou.algorithm.algorithm_base import Policy
from tianshou.data import Batch, Collector, VectorReplayBuffer
from tianshou.env import DummyVectorEnv

from xpspec.adapters.tianshou import _seeded
from xpspec.kit.items import decode_items, item_columns
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import StackScenario
from xpspec.protocol.trace import Event, Item, Stacked, Trace
from xpspec.refimpl.toy_envs.gym_env import LastObservation, make_env_fns, toy_action_space

__all__ = ["run_stack"]

_PADDING = {"repeat-first": "reset", "zeros": "zero"}
"""``FrameStackObservation(padding_type=...)`` per scenario padding."""


class _StackPolicy(Policy):
    """A Tianshou policy that acts 0 and keeps the observations of its latest call."""

    def __init__(self, spec: EnvSpec, observation_space: Any) -> None:
        super().__init__(
            action_space=toy_action_space(spec),
            observation_space=observation_space,
            action_bound_method=None,
        )
        self.on_forward: Any = None

    def forward(self, batch: Any, state: Any = None, **kwargs: Any) -> Batch:
        if self.on_forward is not None:
            self.on_forward(np.asarray(batch.obs))
        return Batch(act=np.zeros(len(batch.obs), dtype=np.int64))


def _stacks(observations: Any, k: int) -> tuple[tuple[Item, ...], ...]:
    """Stacked observations ``[N, k, 3]`` as ``N`` stacks of ``k`` decoded frames."""
    array = np.asarray(observations, dtype=np.float64).reshape(-1, k, 3)
    return tuple(tuple(decode_items(stack)) for stack in array)


def run_stack(scenario: StackScenario) -> Trace:
    """The rollout's stacks as the policy received them, then ``draws`` batches sampled by
    ``VectorReplayBuffer.sample`` (see the module docstring)."""
    spec, k = scenario.env, scenario.num_frames
    zeros = scenario.padding == "zeros"
    b = spec.num_envs
    events: list[Event] = []
    with _seeded(scenario.seed):
        taps = [LastObservation(fn()) for fn in make_env_fns(spec, scenario.seed)]
        stacked = [
            FrameStackObservation(tap, k, padding_type=_PADDING[scenario.padding]) for tap in taps
        ]
        envs = DummyVectorEnv([lambda env=env: env for env in stacked])
        policy = _StackPolicy(spec, stacked[0].observation_space)

        def recorded(obs: np.ndarray) -> None:
            items = [decode_items(np.asarray(tap.last)[None])[0] for tap in taps]
            stacks = _stacks(obs, k)
            if len(stacks) != b:
                raise AssertionError(f"expected all {b} envs stepped, got {len(stacks)}")
            events.append(Stacked("rollout", len(events), *item_columns(items), stacks))

        buffer = VectorReplayBuffer(
            scenario.capacity * b,
            b,
            stack_num=1 if zeros else k,
            save_only_last_obs=not zeros,
            ignore_obs_next=True,
            random_seed=scenario.seed,
        )
        collector = Collector(policy, envs, buffer)
        collector.reset()
        policy.on_forward = recorded
        collector.collect(n_step=scenario.steps * b)
        policy.on_forward = None
        for draw in range(scenario.draws):
            batch, _ = buffer.sample(scenario.batch_size)
            stacks = _stacks(batch.obs, k)
            sampled = [stack[-1] for stack in stacks]
            events.append(Stacked("sample", draw, *item_columns(sampled), stacks))
    return Trace(tuple(events), {"producer": f"tianshou {tianshou.__version__}"})
