"""Frame stacking in ALF (snapshot ``23aca492``; clauses ``stack.*``): its ``FrameStacker``
stacking the rollout's time steps and rebuilding the stacks of replayed experience from its
``ReplayBuffer``. Sources are cited as ``file:function`` of the ``alf`` package.

- **Rollout**: the adapter's toy env as a batched ALF environment, stepped ``steps`` times
  (next-step auto-reset, ALF's own); every time step goes through
  ``FrameStacker(observation_spec, stack_size=num_frames, stack_axis=0)``
  ``.transform_timestep`` with the state it returned last (its initial state ``spec_utils.zeros_from_spec``, as
  ``Algorithm.get_initial_transform_state`` makes it), which is the call ``RLAlgorithm._sync_unroll`` makes
  before ``rollout_step`` (``alf/algorithms/rl_algorithm.py``): the stack recorded is the
  transformed observation it returns, ``[B, 3 * k]`` (frames oldest first), the item the raw
  observation of that time step. ALF repeats the first frame ("repeat the first frame" at
  FIRST, ``alf/algorithms/data_transformer.py``) and has no other padding.
- **Storage and sampling**: the raw time step (unstacked, as ``RLAlgorithm._sync_unroll`` stores
  ``make_experience(time_step, ...)``) is written as an ``Experience`` with
  ``ReplayBuffer.add_batch`` into a ``ReplayBuffer(max_length=capacity,
  keep_episodic_info=True, num_earliest_frames_ignored=num_frames - 1)``: the options
  ``Algorithm`` itself passes when its data transformer stacks (``alf/algorithms/algorithm.py``,
  ``_num_earliest_frames_ignored = stack_size - 1``). Each draw is ``get_batch(batch_size, 1)``
  and ``FrameStacker.transform_experience(add_batch_info(batch, info, buffer))``, the route of
  ``Algorithm._prepare_experience_data`` through ``Algorithm.transform_experience``: the
  sampled item is the raw frame ALF returned, its stack the observation ALF rebuilt.
  When ``get_batch`` refuses (``Not all environments have enough data``: some env holds no
  position after its earliest ``num_frames - 1``), ALF samples nothing and the scenario is
  unsupported (the spec's support difference of ``stack.earliest-ignored``).
"""

from __future__ import annotations

from typing import Any

import torch

from xpspec.kit.items import decode_items, item_columns
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import StackScenario
from xpspec.protocol.trace import Event, Item, Stacked, Trace

__all__ = ["run_stack", "stack_problem"]

_LINK = "https://github.com/HorizonRobotics/alf/blob/23aca492/alf/algorithms/data_transformer.py"
_BUFFER_LINK = (
    "https://github.com/HorizonRobotics/alf/blob/23aca492/alf/experience_replayers/replay_buffer.py"
)
_NOT_ENOUGH = "Not all environments have enough data"


def stack_problem(scenario: StackScenario) -> Unsupported | None:
    """Why ALF cannot express ``scenario`` (None if it can)."""
    if scenario.padding != "repeat-first":
        return Unsupported(
            f"padding {scenario.padding!r}: ALF (snapshot 23aca492) FrameStacker always "
            "repeats an episode's first frame (transform_timestep) and rebuilds replayed stacks "
            "clamped to the episode's begin position (transform_experience); it has no "
            "padding option (alf/algorithms/data_transformer.py)",
            _LINK,
        )
    if getattr(scenario.env, "autoreset", "next-step") != "next-step":
        return Unsupported(
            "same-step auto-reset: ALF's environments return FIRST on the step after LAST",
            _LINK,
        )
    return None


def _stacks(observation: torch.Tensor, k: int) -> tuple[tuple[Item, ...], ...]:
    """ALF's stacked observations ``[N, 3 * k]`` as ``N`` stacks of ``k`` decoded frames."""
    return tuple(tuple(decode_items(s)) for s in observation.reshape(-1, k, 3))


def run_stack(scenario: StackScenario, env_cls: Any) -> Trace:
    """The rollout's stacks as ``FrameStacker.transform_timestep`` gave them, then ``draws``
    batches sampled by ALF's ``ReplayBuffer`` and rebuilt by ``transform_experience`` (see
    the module docstring). ``env_cls(spec, seed)`` is the toy env as an ALF environment."""
    from alf.algorithms.data_transformer import FrameStacker
    from alf.data_structures import Experience, add_batch_info
    from alf.experience_replayers.replay_buffer import ReplayBuffer
    from alf.utils import dist_utils, spec_utils

    torch.manual_seed(scenario.seed)
    k, b = scenario.num_frames, scenario.env.num_envs
    env = env_cls(scenario.env, scenario.seed)
    stacker = FrameStacker(env.observation_spec(), stack_size=k, stack_axis=0)
    state = spec_utils.zeros_from_spec(stacker.state_spec, b)
    action = torch.zeros(b, dtype=torch.int64)
    events: list[Event] = []
    buffer: Any = None
    for n in range(scenario.steps):
        ts = env.reset() if n == 0 else env.step(action)
        stacked, state = stacker.transform_timestep(ts, state)
        items = decode_items(ts.observation)
        events.append(Stacked("rollout", n, *item_columns(items), _stacks(stacked.observation, k)))
        exp = Experience(time_step=ts)
        if buffer is None:
            buffer = ReplayBuffer(
                dist_utils.extract_spec(exp, from_dim=1),
                b,
                max_length=scenario.capacity,
                keep_episodic_info=True,
                num_earliest_frames_ignored=k - 1,
            )
        buffer.add_batch(exp)
    for draw in range(scenario.draws):
        try:
            batch, info = buffer.get_batch(scenario.batch_size, 1)
        except AssertionError as exc:  # ALF's answer to "no item it may sample"
            if _NOT_ENOUGH not in str(exc):
                raise
            raise Unsupported(
                f"ALF (snapshot 23aca492) ReplayBuffer(num_earliest_frames_ignored={k - 1}), "
                "as Algorithm configures it for a FrameStacker of "
                f"{k} frames, never samples an env's earliest {k - 1} positions "
                "(alf/experience_replayers/replay_buffer.py, get_batch: 'Not all environments "
                "have enough data'), and this run stores no later position in some env: "
                "nothing is sampled",
                _BUFFER_LINK,
            ) from exc
        out = stacker.transform_experience(add_batch_info(batch, info, buffer))
        items = decode_items(batch.observation[:, 0])
        stacks = _stacks(out.observation[:, 0], k)
        events.append(Stacked("sample", draw, *item_columns(items), stacks))
    return Trace(tuple(events), {"producer": "alf", "seed": scenario.seed})
