"""Recurrent state in training (capability ``recurrent``, spec/recurrent.md) on Tianshou 2.0.1:
Tianshou's own recurrent machinery driven on :class:`~xpspec.protocol.scenario.RecurrentScenario`.
Sources are cited as ``file:function`` under the installed ``tianshou`` package.

**The network** is a Tianshou model (``model(obs, state=None, info=None) -> (values, state)``,
the interface of ``utils/net/common.py:Recurrent``) whose recurrent state counts: the state it
returns at a position is the state it received plus one, and given no state it starts from
zeros, as ``Recurrent`` does. Like ``Recurrent`` it reads ``[N, dim]`` observations in a rollout
and ``[N, T, dim]`` frame stacks in training and returns the values of the stack's *last*
position (``Recurrent.forward``: ``fc2(obs[:, -1])``): a linear Q head (weight 1, bias far from
any toy reward) on the last position's output, each position's output being its new state times
a trained gain (1 at the start), so the loss's gradient reaches the outputs while training never
changes a count. Its state is a ``Batch`` with a ``hidden`` entry, as ``Recurrent``'s (``hidden``
and ``cell``): the collector resets a ``Batch`` state, but not a ``torch.Tensor`` one (a finding
test in ``tests/adapters/test_tianshou_findings.py``). It is the model of Tianshou's
``DiscreteQLearningPolicy`` trained by ``DQN`` (``algorithm/modelfree/dqn.py``), the pairing of
Tianshou's recurrent example (``test/discrete/test_drqn.py``: ``Recurrent`` net, DQN,
``VectorReplayBuffer(stack_num=...)``).

**Rollout.** ``Collector.collect(n_step=steps * B)`` on a ``DummyVectorEnv`` of the toy envs:
the collector passes the policy the state it returned last (``None`` at the first call),
stores it with each transition (``policy.hidden_state``) and zeroes a done env's entry
(``data/collector.py:Collector._reset_hidden_state_based_on_type``); an episode's final
observation is never acted on (the collector resets in the step that ends it), so the rollout
names no LAST. Time steps are named as the adapter's ``run_env`` names them (resets and done
flags, :class:`~xpspec.adapters.tianshou._Stepper`), each with the state the model received.

**Sequences.** ``VectorReplayBuffer(steps * B, B, stack_num=sequence_length)``: a sampled
index ``i`` comes with the observations ``prev^(T-1)(i) .. i``, where ``prev`` stays put at an
episode's first transition (``data/buffer/buffer_base.py:ReplayBuffer.get``): a stack that
reaches its episode's start repeats that first observation at its front. Those repeats are the
spec's padding (a position that holds "a repeated step"), named ``None``; Tianshou puts them
*before* the real positions. Boundary ``pad`` is driven so (every stored index drawn,
``sample_avail=False``, the default of the example); boundary ``cross`` is Unsupported: no
stack runs across an episode end. Each draw is one ``DQN.update(buffer, sample_size=
batch_size)`` inside ``policy_within_training_step``; ``draws`` draws.

**Training.** ``DQN._update_with_batch`` calls the policy on the stacked batch with no state
(``self.policy(batch)``), so every stack starts from the model's zero state whatever
``initial_state`` asks; the stored ``policy.hidden_state`` is never read back. Its loss takes
one Q value per stack, the last position's, so only the last position is trained whatever
``burn_in`` asks: Tianshou has no burn-in setting. Both run as asked and are judged as they
are (declared in ``tianshou.expectations.toml``).

**What is recorded.** The model notes every call: in the rollout the state it received per
env (the trace's ``policy_state``); in each draw's training forward (the one call with
gradients enabled: the n-step target's calls run under ``torch.no_grad``) the observation and
the state it received at every position and, through a tensor hook on its per-position
outputs, the gradient the loss sent back to each position. One ``TrainSequence`` per stack:
items decoded from the observations received (a position whose item repeats at the next
position is front padding, ``None``), ``state_in`` as received (the model ran on padding too),
loss mask 1 where the loss gradient reached that position's output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tianshou
import torch
from tianshou.algorithm import DQN
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import Batch, Collector, VectorReplayBuffer
from tianshou.utils.torch_utils import policy_within_training_step

from xpspec.adapters.tianshou import _LINK, _SRC, _items, _observations, _seeded, _Stepper
from xpspec.adapters.tianshou import _vector_env as vector_env
from xpspec.kit.events import env_step
from xpspec.kit.items import observation_array
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.trace import Event, Item, Trace, TrainSequence
from xpspec.refimpl.toy_envs.gym_env import toy_action_space, toy_observation_space

__all__ = ["CountingRecurrent", "run_recurrent"]

_OFFSET = 1.0e6
"""The Q head's bias: far from any toy reward, so a TD error is never exactly zero and a
position the loss keeps always sends back a non-zero gradient."""


def _unsupported(reason: str, where: str) -> Unsupported:
    return Unsupported(f"{reason} ({_SRC}, {where})", f"{_LINK}/{where.partition(':')[0]}")


# -- the counting model ---------------------------------------------------------------------------
@dataclass
class _Forward:
    """One training forward: the items at every position ``(N * T)``, the state received at
    every position ``(N, T)`` and the gradient the loss sent back to each position's output
    (``None`` until the backward pass)."""

    items: list[Item]
    states: np.ndarray
    grad: np.ndarray | None = None

    def keep(self, grad: torch.Tensor) -> None:
        """The tensor hook on the per-position outputs."""
        self.grad = grad.detach()[..., 0].cpu().numpy().copy()


@dataclass
class _Log:
    """The phase the run is in and the training forwards of each draw."""

    phase: tuple[str, int] = ("rollout", 0)
    training: dict[int, list[_Forward]] = field(default_factory=dict)


class CountingRecurrent(torch.nn.Module):
    """A Tianshou recurrent model whose state counts (see the module docstring). ``step`` is
    what a position adds to the state (1; tests perturb it). ``received`` holds the states of
    its latest rollout call, per row (what ``_Stepper`` records as ``policy_state``)."""

    def __init__(self, num_actions: int, step: int = 1) -> None:
        super().__init__()
        self.step = step
        self.gain = torch.nn.Parameter(torch.ones(()))
        self.head = torch.nn.Linear(1, num_actions)
        with torch.no_grad():
            self.head.weight.fill_(1.0)
            self.head.bias.fill_(_OFFSET)
        self.received = np.zeros(0, dtype=np.int64)
        self.log = _Log()

    def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple[torch.Tensor, Batch]:
        toy = observation_array(_observations(obs))
        rollout = toy.ndim == 2 and self.log.phase[0] == "rollout"
        x = torch.as_tensor(toy, dtype=torch.float32)
        if x.ndim == 2:  # a rollout step (or a stack of one): one position per row
            x = x.unsqueeze(1)
        n, positions = x.shape[0], x.shape[1]
        h = torch.zeros(n, 1) if state is None else _hidden(state["hidden"], n)
        received, outputs = [], []
        for _ in range(positions):
            received.append(h[:, 0].clone())
            h = h + self.step
            outputs.append(h * self.gain)
        y = torch.stack(outputs, dim=1)  # [N, T, 1]: each position's output
        states = torch.stack(received, dim=1)
        if rollout:
            self.received = _counts(states[:, 0])
        elif torch.is_grad_enabled() and self.log.phase[0] == "update":
            forward = _Forward(_items(toy), np.stack([_counts(s) for s in states]))
            y.register_hook(forward.keep)
            self.log.training.setdefault(self.log.phase[1], []).append(forward)
        return self.head(y[:, -1]), Batch(hidden=h.detach())


def _hidden(value: Any, n: int) -> torch.Tensor:
    """The ``hidden`` entry of the state Tianshou passed back, as ``[N, 1]``."""
    return torch.as_tensor(np.asarray(value, dtype=np.float32)).reshape(n, 1)


def _counts(values: torch.Tensor) -> np.ndarray:
    array = values.detach().cpu().numpy().reshape(-1)
    rounded = np.round(array)
    if not np.array_equal(array, rounded):
        raise ValueError(f"counting state: expected integral counts, got {array.tolist()}")
    return rounded.astype(np.int64)


# -- configuration --------------------------------------------------------------------------------
def _check(sc: RecurrentScenario) -> None:
    if sc.boundary == "cross":
        raise _unsupported(
            "boundary 'cross': a frame stack never runs across an episode end, ReplayBuffer.prev "
            "stays put at an episode's first transition and the stack repeats it",
            "data/buffer/buffer_base.py:ReplayBuffer.get",
        )


def _algorithm(spec: EnvSpec, model: CountingRecurrent) -> DQN:
    policy = DiscreteQLearningPolicy(
        model=model,
        action_space=toy_action_space(spec),
        observation_space=toy_observation_space(spec),
    )
    return DQN(
        policy=policy,
        optim=AdamOptimizerFactory(lr=1e-3),
        n_step_return_horizon=1,
        target_update_freq=0,
    )


# -- the run --------------------------------------------------------------------------------------
def _sequences(draw: int, forwards: list[_Forward]) -> list[Event]:
    """The draw's stacks, one ``TrainSequence`` each, from its one training forward."""
    if len(forwards) != 1:
        raise RuntimeError(f"draw {draw}: expected one training forward, got {len(forwards)}")
    forward = forwards[0]
    if forward.grad is None:
        raise RuntimeError(f"draw {draw}: no gradient reached the training forward")
    n, length = forward.states.shape
    events: list[Event] = []
    for index in range(n):
        items: list[Item | None] = list(forward.items[index * length : (index + 1) * length])
        for p in range(length - 1):  # a repeat of the next position is front padding
            if items[p] == items[p + 1]:
                items[p] = None
        events.append(
            TrainSequence(
                draw,
                index,
                tuple(items),
                tuple(int(s) for s in forward.states[index]),
                tuple(int(g != 0) for g in forward.grad[index]),
            )
        )
    return events


def run_recurrent(
    sc: RecurrentScenario,
    model: Callable[[int], CountingRecurrent] = CountingRecurrent,
) -> Trace:
    """Roll out, store, stack and train as the module docstring says; ``model`` builds the
    counting model from the number of actions (tests perturb it)."""
    _check(sc)
    spec = sc.env
    events: list[Event] = []
    with _seeded(sc.seed):
        torch.manual_seed(sc.seed)
        net = model(spec.num_actions)
        algorithm = _algorithm(spec, net)
        envs = vector_env(spec, sc.seed)
        _Stepper(envs, net, lambda rows: events.append(env_step(0, rows)))
        buffer = VectorReplayBuffer(
            sc.steps * spec.num_envs,
            spec.num_envs,
            stack_num=sc.sequence_length,
            ignore_obs_next=True,
            random_seed=sc.seed,
        )
        collector = Collector(algorithm.policy, envs, buffer)
        collector.reset()
        collector.collect(n_step=sc.steps * spec.num_envs)
        for draw in range(sc.draws):
            net.log.phase = ("update", draw)
            with policy_within_training_step(algorithm.policy):
                algorithm.update(buffer=buffer, sample_size=sc.batch_size)
            events.extend(_sequences(draw, net.log.training.get(draw, [])))
    return Trace(tuple(events), {"producer": f"tianshou {tianshou.__version__}"})
