"""Frame stacking in d3rlpy 2.8.0 (clauses ``stack.*``): its ``FrameStack`` env wrapper in the
rollout, and a ``ReplayBuffer`` that stores each step's last frame
(``LastFrameWriterPreprocess``) and rebuilds the stacks at sample time
(``FrameStackTransitionPicker``), the pairing d3rlpy documents (``dataset/writers.py``:
``LastFrameWriterPreprocess`` "is designed to be used with ``FrameStackTransitionPicker``").
Sources are cited as ``file:function`` of the installed ``d3rlpy`` package.

- **Rollout**: ``d3rlpy.envs.FrameStack(env, num_stack=k)`` (``envs/wrappers.py``) over the
  toy env, stepped by the algorithm's ``collect(env, buffer, n_steps=steps)``
  (``algos/qlearning/base.py``; a DQN whose encoder, a user's ``EncoderFactory``, flattens the
  ``[k, 3]`` stack, which d3rlpy's ``VectorEncoderFactory`` refuses), which resets the env in the step that ends an episode
  (variant same-step of ``timestep.auto-reset``). ``FrameStack.reset`` appends ``k - 1``
  all-zero frames then the reset observation (variant zero-fill of ``stack.episode-start``,
  whatever the scenario's padding: d3rlpy has no other), and ``step`` appends each new
  observation last; a stack is ``[k, 3]``, oldest first. The stack the policy receives is the
  observation ``collect`` hands ``sample_action``, read there; the item it belongs to is the
  raw observation the toy env under the stacker returned last (a pass-through wrapper between
  them reads it).
- **Storage and sampling**: ``ReplayBuffer(FIFOBuffer(capacity),
  transition_picker=FrameStackTransitionPicker(k),
  writer_preprocessor=LastFrameWriterPreprocess(), ...)`` (``dataset/replay_buffer.py``): the
  writer stores each step's last frame, ``[1, 3]``, and the picker stacks an entry's ``k``
  most recent frames of its own episode, zero-padded before the episode's first
  (``dataset/utils.py:stack_recent_observations``). The buffer takes its signatures from
  the env, and its writer types the stored rows by what the preprocess makes of a sample
  observation (``dataset/writers.py:ExperienceWriter``). ``FIFOBuffer(capacity)``
  keeps ``capacity`` transitions; an evicted transition's episode keeps its observations, so
  every stack stays whole. ``sample_transition_batch(batch_size)``, ``draws`` times, seeded
  through numpy's global state as ``d3rlpy.seed`` seeds it; a sampled item is its stack's
  newest frame (the entry's own stored observation). A draw from an empty buffer (numpy's
  ``randint(0)`` raises ``ValueError``) is recorded as an empty batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from d3rlpy.algos import DQNConfig
from d3rlpy.dataset import (
    FIFOBuffer,
    FrameStackTransitionPicker,
    LastFrameWriterPreprocess,
    ReplayBuffer,
)
from d3rlpy.envs import FrameStack
from d3rlpy.models.encoders import EncoderFactory

from xpspec.adapters.d3rlpy import _check_env, _patch, _silenced, _stopped
from xpspec.kit.items import decode_items, item_columns
from xpspec.kit.release import producer
from xpspec.protocol.scenario import StackScenario
from xpspec.protocol.trace import Event, Item, Stacked, Trace
from xpspec.refimpl.toy_envs.gym_env import LastObservation, ToyEnv

__all__ = ["run_stack"]


@dataclass()
class _FlatEncoderFactory(EncoderFactory):
    """A user's encoder factory (d3rlpy's documented extension point, ``models/encoders.py``)
    for the ``[k, 3]`` stacks: d3rlpy's ``VectorEncoderFactory`` takes 1-D observations only
    and its ``PixelEncoderFactory`` images; this one flattens the stack into a tiny MLP."""

    def create(self, observation_shape: Any) -> torch.nn.Module:
        size = math.prod(observation_shape)
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(size, 8), torch.nn.ReLU())

    @staticmethod
    def get_type() -> str:
        return "xpspec-flat"


def _algo() -> Any:
    """A DQN over the stacks, on the CPU (the spec is about experience, not learning)."""
    return DQNConfig(batch_size=1, encoder_factory=_FlatEncoderFactory()).create(device="cpu:0")


def _stacks(observations: Any, k: int) -> tuple[tuple[Item, ...], ...]:
    """Stacked observations ``[N, k, 3]`` as ``N`` stacks of ``k`` decoded frames."""
    array = np.asarray(observations, dtype=np.float64).reshape(-1, k, 3)
    return tuple(tuple(decode_items(stack)) for stack in array)


def _buffer(env: Any, capacity: int, k: int) -> ReplayBuffer:
    """d3rlpy's buffer of last frames, stacked at sample time (module docstring)."""
    return ReplayBuffer(
        FIFOBuffer(capacity),
        transition_picker=FrameStackTransitionPicker(k),
        writer_preprocessor=LastFrameWriterPreprocess(),
        env=env,
    )


def run_stack(scenario: StackScenario) -> Trace:
    """The rollout's stacks as ``collect``'s policy received them, then ``draws`` batches of
    ``sample_transition_batch`` (see the module docstring)."""
    _check_env(scenario.env)
    k = scenario.num_frames
    events: list[Event] = []
    header: dict[str, Any] = {"producer": producer("d3rlpy")}
    with _silenced(scenario.seed):
        tap = LastObservation(ToyEnv(scenario.env, 0, scenario.seed))
        env = FrameStack(tap, num_stack=k)
        buffer = _buffer(env, scenario.capacity, k)
        algo = _algo()
        sample_action = algo.sample_action

        def recorded(x: Any) -> Any:
            items = decode_items(np.asarray(tap.last)[None])
            stacks = _stacks(x, k)
            events.append(Stacked("rollout", len(events), *item_columns(items), stacks))
            return sample_action(x)

        _patch(algo, "sample_action", recorded)
        try:
            algo.collect(env, buffer, n_steps=scenario.steps, show_progress=False)
        except IndexError as exc:
            header["stopped"] = _stopped(exc, 0)
            return Trace(tuple(events), header)
        for draw in range(scenario.draws):
            try:
                batch = buffer.sample_transition_batch(scenario.batch_size)
            except ValueError as exc:  # numpy's randint(0): nothing stored
                if "high <= 0" not in str(exc):
                    raise
                events.append(Stacked("sample", draw, (), (), (), ()))
                continue
            stacks = _stacks(batch.observations, k)
            sampled = [stack[-1] for stack in stacks]
            events.append(Stacked("sample", draw, *item_columns(sampled), stacks))
    return Trace(tuple(events), header)
