"""Recurrent policy state in training (clauses ``recurrent.*``): refimpl's model.

:func:`run_recurrent` unrolls the toy env ``steps`` vector steps under the counting recurrent
policy (the state is reset to 0 at FIRST, ``timestep.state-reset``, and returned plus one),
stores every item with the state the policy received, then draws ``draws`` batches of
``batch_size`` windows of ``sequence_length`` items with the replay sampler
(:class:`~xpspec.refimpl.replay.ReplayBuffer`, boundary ``cross`` or ``pad``) and trains the
counting network (:class:`CountingLearner`) on each: its first position starts from the
stored state (``recurrent.initial-state``; variant zero-start: from 0), a FIRST later in the
window resets it (``recurrent.reset-at-first``), every other position receives the previous
position's output (``recurrent.carry``), the first ``burn_in`` positions and the padding are
masked from the loss (``recurrent.burn-in``, ``recurrent.padding``), as is a LAST position
(``timestep.loss-mask-last``).
"""

from __future__ import annotations

from typing import Final

import torch

from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Event, Trace, TrainSequence
from xpspec.refimpl.recorder import Recorder, windows_of
from xpspec.refimpl.replay import ReplayBuffer
from xpspec.refimpl.toy_envs.batched import ToyBatchEnv

__all__ = ["PADDING_STATE", "CountingLearner", "run_recurrent"]

_FIRST: Final = int(StepType.FIRST)
_LAST: Final = int(StepType.LAST)
PADDING_STATE: Final = -1
"""The state recorded at a padding position: the network is not run there."""

_FIELDS: Final = {
    "observation": ((3,), torch.float32),
    "step_type": ((), torch.int64),
    "policy_state": ((), torch.int64),
}


class CountingLearner:
    """The counting recurrent network a learner trains, run over a batch of windows
    ``[B, T]``. Each method is one rule of the spec, so a variant (or a broken learner)
    replaces one of them."""

    def __init__(self, scenario: RecurrentScenario) -> None:
        self.scenario = scenario

    def initial_state(self, stored: torch.Tensor) -> torch.Tensor:
        """The state of each window's first position: the stored input state
        (``recurrent.initial-state``), or 0 under variant zero-start."""
        if self.scenario.initial_state == "zeros":
            return torch.zeros_like(stored)
        return stored.clone()

    def reset(self, state: torch.Tensor, is_first: torch.Tensor) -> torch.Tensor:
        """The initial state where a later position is FIRST (``recurrent.reset-at-first``)."""
        return torch.where(is_first, torch.zeros_like(state), state)

    def step(self, state: torch.Tensor) -> torch.Tensor:
        """The network's output state: its input plus one (``recurrent.carry``)."""
        return state + 1

    def loss_mask(self, step_type: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """1 on real positions from ``burn_in`` on that are not LAST; 0 on the burn-in
        positions (``recurrent.burn-in``), the padding (``recurrent.padding``) and a LAST
        (``timestep.loss-mask-last``)."""
        mask = real & (step_type != _LAST)
        mask[:, : self.scenario.burn_in] = False
        return mask.to(torch.int64)

    def run(
        self, stored: torch.Tensor, step_type: torch.Tensor, real: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The state each position received (``PADDING_STATE`` where the network was not
        run) and the loss mask, for windows whose stored states, step types and real
        positions are ``[B, T]`` tensors."""
        length = stored.shape[1]
        state = self.initial_state(stored[:, 0])
        received = torch.full_like(stored, PADDING_STATE)
        for p in range(length):
            if p:
                state = self.reset(self.step(state), step_type[:, p] == _FIRST)
            received[:, p] = torch.where(real[:, p], state, PADDING_STATE)
        return received, self.loss_mask(step_type, real)


def _rollout(scenario: RecurrentScenario, recorder: Recorder) -> ReplayBuffer:
    """``steps`` vector steps under the counting policy; every item stored with the state the
    policy received (``timestep.state-reset``), one EnvStep event per vector step."""
    env = ToyBatchEnv(scenario.env, scenario.seed)
    buffer = ReplayBuffer(env.num_envs, scenario.steps, _FIELDS)
    state = torch.zeros(env.num_envs, dtype=torch.int64)
    action = torch.zeros(env.num_envs, dtype=torch.int64)
    ts = env.reset()
    for n in range(scenario.steps):
        if n:
            ts = env.step(action)
        state = torch.where(ts.step_type == _FIRST, 0, state)
        action = state % scenario.env.num_actions
        recorder.env_step(
            0,
            {
                "observation": ts.observation,
                "step_type": ts.step_type,
                "reward": ts.reward,
                "discount": ts.discount,
                "policy_state": state,
                "action": action,
            },
        )
        buffer.add_row(
            {"observation": ts.observation, "step_type": ts.step_type, "policy_state": state}
        )
        state = state + 1
    return buffer


def run_recurrent(
    scenario: RecurrentScenario, learner: type[CountingLearner] = CountingLearner
) -> Trace:
    """refimpl's recurrent scenario: the rollout's EnvStep events, then one TrainSequence
    event per window drawn (``draws`` batches of ``batch_size``, one seeded generator)."""
    recorder = Recorder()
    buffer = _rollout(scenario, recorder)
    events: list[Event] = list(recorder.trace().events)
    sampling = SamplingSpec(window_length=scenario.sequence_length, boundary=scenario.boundary)
    generator = torch.Generator().manual_seed(scenario.seed)
    network = learner(scenario)
    for draw in range(scenario.draws):
        s = buffer.sample(scenario.batch_size, sampling, generator)
        received, mask = network.run(s.data["policy_state"], s.data["step_type"], s.mask)
        windows = windows_of(s.data["observation"], s.mask)
        for i, (window, states, masks) in enumerate(zip(windows, received.tolist(), mask.tolist())):
            events.append(TrainSequence(draw, i, window, tuple(states), tuple(masks)))
    return Trace(tuple(events), {"producer": "refimpl"})
