"""skrl 2.1.1's ``PPO_RNN`` on the toy env under a counting recurrent policy, recorded at its
seams (capability ``recurrent`` of :class:`xpspec.adapters.skrl.SkrlAdapter`; clauses
``recurrent.*``). Sources are cited as ``file:function`` of the installed ``skrl`` package;
the model follows the recurrent model of skrl's documentation
(``docs/source/snippets/categorical_model.py``, ``rnn-sequential-torch``).

**What skrl does.** A model whose ``get_specification()`` declares ``{"rnn":
{"sequence_length": T, "sizes": [(1, B, 1)]}}`` makes ``PPO_RNN.init`` create the memory
tensor ``rnn_policy_0`` and zero initial states (``agents/torch/ppo/ppo_rnn.py``). In the
rollout (``SequentialTrainer.train``, one ``act`` and one ``record_transition`` per timestep)
``act`` passes the model ``inputs["rnn"]``, the agent's current states, and keeps the states
the model returns; ``record_transition`` stores the agent's current states as ``rnn_policy_0``
with the transition and then zeroes the returned states of the envs whose transition was
``terminated | truncated``, which become the next step's states. It does so by making the
dict of current states the dict of returned ones, which ``act`` writes into: from the second
timestep on, the stored state is the one the policy returned at that step, not the one it
received (a finding, as is the reset landing on an episode's final observation under
next-step autoreset). After ``rollouts`` timesteps ``PPO_RNN.update`` cuts the memory
with ``Memory.sample_all(names, mini_batches, sequence_length=T)``
(``memories/torch/base.py``): with ``T > 1`` every env's rows in time order, env after env
(``all_sequence_indexes``), split by ``np.array_split`` into ``mini_batches`` parts; with
``T = 1`` the rows in memory order. Each of ``learning_epochs`` epochs trains every part: the
policy gets the part's observations, the stored ``rnn`` states of its rows and their
``terminated`` and ``truncated`` flags, views them as sequences of ``T`` rows and, as the
documented model does, starts each sequence from its first row's stored state and zeroes a
sequence's state after a position whose ``terminated`` is set. The loss is the mean over every
row of the part (``PPO_RNN.update``): skrl has no burn-in and no padding.

**The counting module.** :class:`CountingRNN` stands in for the documented model's
``nn.RNN``: the state it returns is the state it received plus one, in the tensor skrl hands
it. It reads, in its forward, the state it received at every position; the policy
(:class:`CountingPolicy`) decodes the observation it received there. Nothing of the state is
the adapter's: the initial states, the stored states, the resets of the rollout and the
sequences are skrl's, the resets inside a sequence the documented model's.

**Where the trace comes from.** ``env_step``: per timestep, the item the policy's rollout
forward received, its step type from the flags the wrapped env returned with it (the existing
adapter's reading of Gymnasium's next-step autoreset), the state the module received there and
the action skrl passed to the env. ``train_sequence``: per mini-batch forward of the update
(``draw`` = epoch * mini_batches + part), per sequence of it: the items the policy received,
the state the module received at each position and the loss mask observed from skrl's loss: 1
where the gradient of the loss reaches the position's logits (a tensor hook; nonzero, NaN
included), else 0. So that
every position the loss covers gets a nonzero gradient whatever its advantage, the policy's
logits are not uniform and ``entropy_loss_scale`` is 0.01 (the entropy term is averaged over
the same rows as the surrogate).

**Knobs.** ``steps`` -> ``rollouts = timesteps = memory_size`` (one update after the rollout);
``sequence_length`` -> the model's ``sequence_length``; ``batch_size`` sequences per
mini-batch -> ``mini_batches = steps * B / (T * batch_size)``; ``draws`` mini-batch passes ->
``learning_epochs = draws / mini_batches``. ``burn_in > 0``, boundary ``"pad"``,
initial state ``"zeros"``, a memory of one row (whose advantage skrl normalises by a NaN std)
and batch sizes or draws those counts cannot express raise ``Unsupported``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal

import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from skrl.agents.torch.ppo import PPO_CFG, PPO_RNN
from skrl.envs.wrappers.torch import Wrapper, wrap_env
from skrl.memories.torch import RandomMemory
from skrl.models.torch import CategoricalMixin, DeterministicMixin, Model
from skrl.utils.spaces.torch import unflatten_tensorized_space

from xpspec.adapters.skrl_trainer import headless_trainer
from xpspec.kit.events import env_step
from xpspec.kit.items import decode_items
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.release import producer
from xpspec.kit.steps import Step
from xpspec.kit.value import toy_value
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Event, Item, Trace, TrainSequence
from xpspec.refimpl.toy_envs.gym_vector import ToyVectorEnv

__all__ = [
    "CountingPolicy",
    "CountingRNN",
    "EnvLog",
    "Forward",
    "RecurrentPlan",
    "ResetFlag",
    "ToyValue",
    "forward_windows",
    "recorded_env",
    "recurrent_plan",
    "rollout_steps",
    "run_recurrent",
    "toy_observations",
]

_VERSION = "2.1.1"
_SRC = f"skrl {_VERSION}"
_LINK = "https://github.com/Toni-SM/skrl/tree/2.1.1/skrl"
_PPO_RNN = "agents/torch/ppo/ppo_rnn.py"
_SAMPLE_ALL = "memories/torch/base.py:Memory.sample_all"
_LOGGERS = ("skrl",)
_FIRST, _MID, _LAST = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)
_ENTROPY_SCALE = 0.01

ResetFlag = Literal["terminated", "ended", "never"]
"""Which sampled flag zeroes a sequence's state after a position in the training forward:
``terminated`` (skrl's documented model), ``ended`` (``terminated | truncated``) or ``never``
(the last two only perturb skrl's side in tests)."""


def _unsupported(reason: str, where: str) -> Unsupported:
    return Unsupported(f"{reason} ({_SRC}, {where})", f"{_LINK}/{where.partition(':')[0]}")


def _as_numpy(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def toy_observations(model: Model, observations: torch.Tensor) -> torch.Tensor:
    """The toy observations ``[N, 3]`` in what a model received: the wrapper flattens a goal
    env's Dict observation, which skrl's ``unflatten_tensorized_space`` gives back
    (``utils/spaces/torch/spaces.py``)."""
    value = unflatten_tensorized_space(model.observation_space, observations)
    return value["observation"] if isinstance(value, dict) else value


# -- the configuration ----------------------------------------------------------------------------
@dataclass(frozen=True)
class RecurrentPlan:
    """skrl's configuration of a recurrent scenario (see the module docstring)."""

    timesteps: int
    sequence_length: int
    mini_batches: int
    learning_epochs: int


def recurrent_plan(scenario: RecurrentScenario) -> RecurrentPlan:
    """The ``PPO_CFG`` counts and model ``sequence_length`` a skrl user gives ``scenario``;
    Unsupported for what skrl cannot express."""
    s, b, t = scenario, scenario.env.num_envs, scenario.sequence_length
    if s.burn_in:
        raise _unsupported(
            f"burn_in {s.burn_in}: PPO_RNN.update averages its loss over every row of a "
            "mini-batch, and PPO_CFG has no burn-in setting",
            f"{_PPO_RNN}:PPO_RNN.update",
        )
    if s.boundary != "cross":
        raise _unsupported(
            f"boundary {s.boundary!r}: Memory.sample_all cuts every env's rows in time order "
            "into sequences of sequence_length rows, across episode ends, and pads none",
            _SAMPLE_ALL,
        )
    if s.initial_state != "stored":
        raise _unsupported(
            f"initial_state {s.initial_state!r}: PPO_RNN.update hands the model the stored "
            "rnn states of the sampled rows, and no setting starts a sequence from zeros",
            f"{_PPO_RNN}:PPO_RNN.update",
        )
    rows = s.steps * b
    if rows < 2:
        raise _unsupported(
            "a memory of one row: compute_gae normalises the advantages by their "
            "Bessel-corrected std, NaN for one row, so the update's loss and parameters are NaN",
            f"{_PPO_RNN}:compute_gae",
        )
    if rows % t:
        raise _unsupported(
            f"{rows} rows ({s.steps} timesteps of {b} envs) in sequences of {t}: "
            "Memory.sample_all returns every row and the documented recurrent model views a "
            "mini-batch as (-1, sequence_length) rows",
            _SAMPLE_ALL,
        )
    sequences = rows // t
    if sequences % s.batch_size:
        raise _unsupported(
            f"batch_size {s.batch_size} of {sequences} sequences: mini_batches is a count, "
            "and np.array_split cuts the rows into parts that differ by a row unless they "
            "divide evenly",
            _SAMPLE_ALL,
        )
    mini_batches = sequences // s.batch_size
    if s.draws % mini_batches:
        raise _unsupported(
            f"draws {s.draws} with {mini_batches} mini-batches: PPO_RNN.update trains every "
            "mini-batch in each of learning_epochs epochs",
            f"{_PPO_RNN}:PPO_RNN.update",
        )
    return RecurrentPlan(
        timesteps=s.steps,
        sequence_length=t,
        mini_batches=mini_batches,
        learning_epochs=s.draws // mini_batches,
    )


# -- the counting recurrent module --------------------------------------------------------------
class CountingRNN(torch.nn.Module):
    """A recurrent layer whose state counts: for inputs ``(N, L, H_in)`` and states
    ``(1, N, 1)`` it returns the state after every position ``(N, L, 1)`` and the last state,
    each the state it received plus one. ``received`` holds, per call, the state it received
    at every position ``(N, L)``."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        outputs, received = [], []
        for _ in range(x.shape[1]):
            received.append(h[0, :, 0].detach().clone())
            h = h + 1
            outputs.append(h[0])
        self.received.append(torch.stack(received, dim=1))
        return torch.stack(outputs, dim=1), h


@dataclass
class Forward:
    """One training forward of the policy: the items it received ``(N * T)`` and the states
    the module received ``(N, T)``; ``grad`` the gradient its logits got (``None`` until the
    backward pass)."""

    items: list[Item]
    states: np.ndarray
    grad: np.ndarray | None = None

    def keep(self, grad: torch.Tensor) -> None:
        """The tensor hook on the forward's logits."""
        self.grad = _as_numpy(grad)


@dataclass
class _Log:
    """What the policy received: per rollout forward the items and states, per training
    forward a :class:`Forward`."""

    rollout: list[tuple[list[Item], np.ndarray]] = field(default_factory=list)
    training: list[Forward] = field(default_factory=list)


class CountingPolicy(CategoricalMixin, Model):
    """skrl's documented recurrent categorical model with :class:`CountingRNN` as its RNN and
    fixed, non-uniform logits (``bias``) that the RNN's output enters with weight 0."""

    def __init__(
        self,
        env: Wrapper,
        sequence_length: int,
        reset_on: ResetFlag = "terminated",
    ) -> None:
        Model.__init__(
            self,
            observation_space=env.observation_space,
            action_space=env.action_space,
            device="cpu",
        )
        CategoricalMixin.__init__(self)
        self.num_envs = env.num_envs
        self.sequence_length = sequence_length
        self.reset_on = reset_on
        self.rnn = CountingRNN()
        self.bias = torch.nn.Parameter(torch.arange(self.num_actions, dtype=torch.float32))
        self.log = _Log()

    def get_specification(self) -> dict[str, Any]:
        return {"rnn": {"sequence_length": self.sequence_length, "sizes": [(1, self.num_envs, 1)]}}

    def _resets(self, inputs: dict[str, Any]) -> torch.Tensor | None:
        terminated = inputs.get("terminated")
        if self.reset_on == "never" or terminated is None:
            return None
        if self.reset_on == "ended":
            return torch.as_tensor(terminated | inputs["truncated"])
        return torch.as_tensor(terminated)

    def _sequences(
        self, observations: torch.Tensor, states: torch.Tensor, ended: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The documented model's training pass: the rows viewed as sequences of
        ``sequence_length``, each started from its first row's state and zeroed after a
        position whose flag ``ended`` is set."""
        t = self.sequence_length
        x = observations.view(-1, t, observations.shape[-1])
        h = states.view(1, -1, t, states.shape[-1])[:, :, 0, :].contiguous()
        if ended is None or not torch.any(ended):
            return self.rnn(x, h)
        ended = ended.view(-1, t)
        cuts = (ended[:, :-1].any(dim=0).nonzero(as_tuple=True)[0] + 1).tolist()
        parts = []
        for i0, i1 in pairwise([0, *cuts, t]):
            out, h = self.rnn(x[:, i0:i1, :], h)
            h[:, ended[:, i1 - 1], :] = 0
            parts.append(out)
        return torch.cat(parts, dim=1), h

    def compute(
        self, inputs: dict[str, Any], role: str = ""
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        observations = inputs["observations"]
        states = inputs["rnn"][0]
        self.rnn.received.clear()
        forward: Forward | None = None
        if self.training:
            output, h = self._sequences(observations, states, self._resets(inputs))
            received = torch.cat(self.rnn.received, dim=1)
            items = decode_items(_as_numpy(toy_observations(self, observations)))
            forward = Forward(items, _as_numpy(received))
            self.log.training.append(forward)
        else:
            output, h = self.rnn(observations.view(-1, 1, observations.shape[-1]), states)
            self.log.rollout.append(
                (
                    decode_items(_as_numpy(toy_observations(self, observations))),
                    _as_numpy(self.rnn.received[0][:, 0]),
                )
            )
        output = torch.flatten(output, start_dim=0, end_dim=1)
        logits = self.bias.expand(output.shape[0], -1) + 0.0 * output
        if forward is not None and logits.requires_grad:
            logits.register_hook(forward.keep)
        return logits, {"rnn": [h]}


class ToyValue(DeterministicMixin, Model):
    """The toy value ``V(o) = t(o)``, not recurrent."""

    def __init__(self, env: Wrapper) -> None:
        Model.__init__(
            self,
            observation_space=env.observation_space,
            action_space=env.action_space,
            device="cpu",
        )
        DeterministicMixin.__init__(self)

    def compute(
        self, inputs: dict[str, Any], role: str = ""
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        return toy_value(toy_observations(self, inputs["observations"]), 1.0), {}


# -- the run ------------------------------------------------------------------------------------
@dataclass
class EnvLog:
    """Per ``step`` of the wrapped env: the actions it got and the flags and rewards it
    returned."""

    actions: list[np.ndarray] = field(default_factory=list)
    rewards: list[np.ndarray] = field(default_factory=list)
    terminated: list[np.ndarray] = field(default_factory=list)
    truncated: list[np.ndarray] = field(default_factory=list)


def recorded_env(spec: Any, seed: int) -> tuple[Wrapper, EnvLog]:
    """The toy vector env (next-step autoreset) through skrl's ``wrap_env``, its ``step``
    recorded."""
    env = wrap_env(
        ToyVectorEnv(spec, seed, autoreset_mode=AutoresetMode.NEXT_STEP),
        wrapper="gymnasium",
        verbose=False,
    )
    log = EnvLog()
    step = env.step

    def stepped(actions: Any) -> Any:
        out = step(actions)
        log.actions.append(_as_numpy(actions).reshape(-1))
        log.rewards.append(_as_numpy(out[1]).reshape(-1).astype(np.float64))
        log.terminated.append(_as_numpy(out[2]).reshape(-1).astype(bool))
        log.truncated.append(_as_numpy(out[3]).reshape(-1).astype(bool))
        return out

    env.step = stepped
    return env, log


def rollout_steps(policy: CountingPolicy, log: EnvLog) -> list[Event]:
    """One ``EnvStep`` per rollout forward: the items and states the policy received, named
    from the flags and reward the env returned with each observation."""
    events: list[Event] = []
    b = policy.num_envs
    done = np.ones(b, dtype=bool)
    reward = np.zeros(b)
    terminated = np.zeros(b, dtype=bool)
    for k, (items, states) in enumerate(policy.log.rollout):
        if k:
            reward, terminated = log.rewards[k - 1], log.terminated[k - 1]
            ended = terminated | log.truncated[k - 1]
        else:
            ended = np.zeros(b, dtype=bool)
        actions = log.actions[k] if k < len(log.actions) else np.full(b, -1)
        row = []
        for e, item in enumerate(items):
            kind = _FIRST if done[e] else _LAST if ended[e] else _MID
            discount = 0.0 if kind == _LAST and terminated[e] else 1.0
            row.append(
                Step(item, kind, float(reward[e]), discount, int(states[e]), int(actions[e]))
            )
        events.append(env_step(0, row))
        done = ended
    return events


def _sequences(policy: CountingPolicy, plan: RecurrentPlan) -> list[Event]:
    """One ``TrainSequence`` per sequence of every training forward, in order."""
    forwards = policy.log.training
    expected = plan.learning_epochs * plan.mini_batches
    if len(forwards) != expected:
        raise RuntimeError(
            f"PPO_RNN.update: expected {expected} training forwards "
            f"({plan.learning_epochs} epochs of {plan.mini_batches} mini-batches), "
            f"got {len(forwards)}"
        )
    events: list[Event] = []
    for draw, forward in enumerate(forwards):
        windows, masks = forward_windows(forward, plan.sequence_length, draw)
        for index, states in enumerate(forward.states):
            events.append(
                TrainSequence(
                    draw, index, windows[index], tuple(int(s) for s in states), masks[index]
                )
            )
    return events


def forward_windows(
    forward: Forward, sequence_length: int, draw: int
) -> tuple[tuple[tuple[Item, ...], ...], tuple[tuple[int, ...], ...]]:
    """The sequences of one training forward (``draw``-th of the run) as windows of
    ``sequence_length`` items, and per position the loss mask observed from skrl's loss: 1
    where the gradient of the loss reached the position's logits, else 0."""
    if forward.grad is None:
        raise RuntimeError(f"PPO_RNN.update: no gradient reached training forward {draw}")
    t = sequence_length
    # reached: a nonzero gradient (NaN included: skrl's advantage of a one-row memory is
    # normalised by a NaN std, and its gradient still reaches the position)
    reached = (forward.grad != 0).any(axis=-1).reshape(-1, t)
    windows = tuple(
        tuple(forward.items[index * t : (index + 1) * t]) for index in range(len(reached))
    )
    return windows, tuple(tuple(int(m) for m in row) for row in reached)


def run_recurrent(
    scenario: RecurrentScenario,
    time_limit_bootstrap: bool = False,
    reset_on: ResetFlag = "terminated",
) -> Trace:
    """One ``SequentialTrainer.train`` of ``PPO_RNN`` with the counting policy on
    ``scenario`` (module docstring): its rollout, then its one update."""
    plan = recurrent_plan(scenario)
    with seeded_quiet(scenario.seed, ("torch",), _LOGGERS):
        env, env_log = recorded_env(scenario.env, scenario.seed)
        policy = CountingPolicy(env, plan.sequence_length, reset_on)
        memory = RandomMemory(memory_size=plan.timesteps, num_envs=env.num_envs, device="cpu")
        cfg = PPO_CFG(
            rollouts=plan.timesteps,
            learning_epochs=plan.learning_epochs,
            mini_batches=plan.mini_batches,
            entropy_loss_scale=_ENTROPY_SCALE,
            time_limit_bootstrap=time_limit_bootstrap,
            experiment={"write_interval": 0, "checkpoint_interval": 0},
        )
        agent = PPO_RNN(
            models={"policy": policy, "value": ToyValue(env)},
            memory=memory,
            observation_space=env.observation_space,
            action_space=env.action_space,
            device="cpu",
            cfg=cfg,
        )
        trainer = headless_trainer(env, agent, plan.timesteps)
        trainer.train()
    events = rollout_steps(policy, env_log) + _sequences(policy, plan)
    return Trace(tuple(events), {"producer": producer("skrl")})
