"""AgileRL 2.58.0's recurrent PPO on the toy env under a counting recurrent encoder, recorded at
its seams (capability ``recurrent`` of :class:`xpspec.adapters.agilerl.AgileRLAdapter`; clauses
``recurrent.*`` and, on its rollout, ``timestep.state-reset``). Sources are cited as
``file:function`` under the installed ``agilerl`` package.

**The network.** AgileRL takes a user's network as ``PPO(actor_network=..., critic_network=...)``
(``algorithms/ppo.py``, ``PPO.__init__``): an ``EvolvableModule`` that is no ``StochasticActor``
/ ``ValueNetwork`` is wrapped as their ``encoder`` (``PPO._as_stochastic_actor``,
``PPO._as_value_network``; ``networks/base.py``, ``EvolvableNetwork.__init__`` takes a pre-built
``encoder`` with a ``num_outputs``). With ``recurrent=True`` the encoder is called as
``encoder(x, hidden_state=...)`` and returns its output and the next hidden-state dict; the
hidden state's entries are found by ``get_hidden_states_shape_from_model``
(``utils/algo_utils.py``) from every submodule's ``hidden_state_architecture``, keyed
``f"{name}_{key}"``, and ``PPO._get_action_and_values`` hands the actor the entries prefixed
``actor_encoder`` and the critic those prefixed ``critic_encoder`` (``share_encoders=False``).
:class:`CountingEncoder` is such a module, shaped as AgileRL's ``EvolvableLSTM``
(``modules/lstm.py``): a state ``(1, N, 1)`` under key ``count``, inputs ``(N, F)`` for one
step or ``(N * L, F)`` viewed as ``N`` sequences of ``L`` steps, and the state it returns is
the one it received plus one at every step. Nothing of the state is the adapter's: the initial
states (``PPO.get_initial_hidden_state``, zeros), the resets of the rollout, the stored states
and the sequences' initial states are AgileRL's.

**What AgileRL does.** ``collect_rollouts_recurrent`` (``rollouts/on_policy.py``,
``_collect_rollouts``) starts from ``get_initial_hidden_state`` after ``env.reset()``, calls
``get_action(obs, hidden_state=...)`` once per vector step, stores the state it passed in the
``RolloutBuffer`` with the row (``hidden_state=current_hidden_state_for_buffer``) and, for the
envs whose step returned ``terminated or truncated``, sets the returned state back to the
initial one; after the last step it values the last observation with the state reached
(no action). ``PPO.learn`` with ``recurrent=True`` runs ``_learn_from_rollout_buffer_bptt``:
``RolloutBuffer.prepare_sequence_tensors`` (``components/rollout_buffer.py``) splits each env's
rows after every ``done`` row, cuts each piece of at least ``max_seq_len`` rows into
``len // max_seq_len`` chunks of ``max_seq_len`` (``BPTTSequenceType.CHUNKED``, RecurrentPPO's
default; the rest of the piece is left out) and keeps a shorter piece whole, zero-pads every
sequence to the longest one, flags real rows in ``pad_mask`` and gives each sequence the state
stored with its first row; each of ``update_epochs`` epochs trains every sequence, in
mini-batches of ``batch_size`` sequences in ``torch.randperm`` order
(``get_minibatch_sequences``), the loss over the rows ``pad_mask`` keeps.

**Where the trace comes from.** The actor's encoder notes every call: the observations it
received and, at every step, the state it received; through a tensor hook on its output, the
gradient the loss sent back to each step. ``env_step``: one per ``get_action`` of the rollout
(the encoder's ``k``-th call for vector step ``k``): the items it received, their step types
from the flags the vector env returned before (next-step autoreset: the observation after an
ended step is the episode's final one, LAST; the one after it FIRST), the reward the env
returned into it, the state the encoder received and the action AgileRL passed to the env.
``train_sequence``: per mini-batch forward of ``PPO.learn`` (``draw`` = its order), per
sequence: the items the encoder received (``None`` where the mini-batch's ``pad_mask``, read
from the ``RolloutSequenceMinibatch`` AgileRL built, flags padding), the state it received at
each step and the loss mask: 1 where the loss gradient reached the step's output (nonzero),
else 0.

**Knobs.** ``steps`` -> ``n_steps`` of the rollout and ``learn_step = steps * B`` (a rollout
buffer of ``steps`` rows per env); ``sequence_length`` -> ``max_seq_len``; ``batch_size`` ->
``batch_size`` (sequences per mini-batch); ``draws`` -> ``update_epochs``. ``burn_in > 0``,
boundary ``"cross"`` and initial state ``"zeros"`` raise ``Unsupported``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium
import numpy as np
import torch
from agilerl.algorithms import PPO
from agilerl.algorithms import ppo as ppo_module
from agilerl.modules.base import EvolvableModule
from agilerl.rollouts import collect_rollouts_recurrent
from agilerl.typing import BatchDimension

from xpspec.kit.events import env_step
from xpspec.kit.items import decode_items
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.release import producer
from xpspec.kit.steps import Step
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Event, Item, Trace, TrainSequence
from xpspec.refimpl.toy_envs.gym_env import make_env_fns

__all__ = [
    "CountingEncoder",
    "EncoderCall",
    "EnvLog",
    "act_steps",
    "counting_ppo",
    "recorded_env",
    "run_recurrent",
    "sequences",
]

_VERSION = "2.58.0"
_SRC = f"agilerl {_VERSION}"
_LINK = "https://github.com/AgileRL/AgileRL/blob/v2.58.0/agilerl"
_FIRST, _MID, _LAST = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)
_STATE_KEY = "count"
"""The key of the counting state in the encoder's ``hidden_state_architecture``."""

Phase = Literal["rollout", "train"]


def _unsupported(reason: str, where: str) -> Unsupported:
    return Unsupported(f"{reason} ({_SRC}, {where})", f"{_LINK}/{where.partition(':')[0]}")


def _count(value: float) -> int:
    if value != round(value):
        raise ValueError(f"counting state: expected an integral count, got {value}")
    return round(value)


# -- the counting encoder -------------------------------------------------------------------------
@dataclass
class EncoderCall:
    """One call of the counting encoder: its phase, the observations it received ``[N, L, F]``,
    the state it received at each step ``[N, L]`` and the gradient the loss sent back to each
    step's output ``[N, L]`` (``None`` without a backward pass)."""

    phase: Phase
    observations: np.ndarray
    received: np.ndarray
    grad: np.ndarray | None = None

    def keep(self, grad: torch.Tensor) -> None:
        """The tensor hook on the call's output."""
        self.grad = grad.detach().reshape(self.received.shape).numpy().copy()


@dataclass
class _Recorder:
    phase: Phase = "rollout"
    calls: list[EncoderCall] = field(default_factory=list)


class CountingEncoder(EvolvableModule):
    """A recurrent encoder whose state counts steps, with ``EvolvableLSTM``'s interface: its
    state ``f"{name}_count"`` has shape ``(1, N, 1)``; for ``x`` of ``N * L`` rows it runs
    ``L`` steps of ``N`` sequences, the state after each step the state before plus one, and
    returns the state after each step as its output ``(N * L, 1)`` with the last state. The
    output is tied with weight 0 to a parameter, so the loss sends a gradient to it whatever
    the optimizer does. Every call is noted in ``recorder``."""

    def __init__(self, name: str, device: str = "cpu", random_seed: int | None = None) -> None:
        super().__init__(device, random_seed)
        self.name = name
        self.num_outputs = 1
        # the output's weight 0 link to a parameter lets the loss gradient reach each step's
        # output (observed by a tensor hook) without the state depending on a trained value
        self.link = torch.nn.Parameter(torch.zeros(()))
        self.recorder = _Recorder()

    @property
    def hidden_state_architecture(self) -> dict[str, tuple[Any, ...]]:
        return {_STATE_KEY: (1, BatchDimension, 1)}

    def forward(
        self, x: torch.Tensor, hidden_state: dict[str, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if hidden_state is None:
            raise ValueError(f"{self.name}: a recurrent encoder needs a hidden state, got None")
        h = hidden_state[f"{self.name}_{_STATE_KEY}"]
        n = h.shape[1]
        xs = torch.as_tensor(x, dtype=torch.float32).reshape(n, -1, x.shape[-1])
        received, outputs = [], []
        for _ in range(xs.shape[1]):
            received.append(h[0, :, 0].detach().clone())
            h = h + 1
            outputs.append(h[0])
        y = torch.stack(outputs, 1).reshape(-1, 1) + 0.0 * self.link
        call = EncoderCall(
            self.recorder.phase,
            xs.detach().numpy().copy(),
            torch.stack(received, 1).numpy().copy(),
        )
        if y.requires_grad:
            y.register_hook(call.keep)
        self.recorder.calls.append(call)
        return y, {**hidden_state, f"{self.name}_{_STATE_KEY}": h}


# -- the run ------------------------------------------------------------------------------------
@dataclass
class EnvLog:
    """Per ``step`` of the vector env: the actions it got and the rewards and flags it
    returned."""

    actions: list[np.ndarray] = field(default_factory=list)
    rewards: list[np.ndarray] = field(default_factory=list)
    terminated: list[np.ndarray] = field(default_factory=list)
    truncated: list[np.ndarray] = field(default_factory=list)


def recorded_env(spec: EnvSpec, seed: int) -> tuple[gymnasium.vector.SyncVectorEnv, EnvLog]:
    """The toy vector env as ``utils/utils.py:make_vect_envs`` builds it (a ``SyncVectorEnv``,
    ``NEXT_STEP`` autoreset), its ``step`` recorded."""
    env = gymnasium.vector.SyncVectorEnv(list(make_env_fns(spec, seed)))
    log = EnvLog()
    step = env.step

    def stepped(actions: Any) -> Any:
        out = step(actions)
        log.actions.append(np.asarray(actions).reshape(-1).astype(np.int64))
        log.rewards.append(np.asarray(out[1], dtype=np.float64).reshape(-1))
        log.terminated.append(np.asarray(out[2], dtype=bool).reshape(-1))
        log.truncated.append(np.asarray(out[3], dtype=bool).reshape(-1))
        return out

    env.step = stepped  # type: ignore[method-assign]
    return env, log


def _check(sc: RecurrentScenario) -> None:
    """Raise :class:`Unsupported` for what AgileRL's recurrent PPO cannot express."""
    bptt = "algorithms/ppo.py:PPO._learn_from_rollout_buffer_bptt"
    prepare = "components/rollout_buffer.py:RolloutBuffer.prepare_sequence_tensors"
    if sc.burn_in:
        raise _unsupported(
            f"burn_in {sc.burn_in}: the BPTT loss covers every row pad_mask keeps, and PPO "
            "has no burn-in setting",
            bptt,
        )
    if sc.boundary != "pad":
        raise _unsupported(
            f"boundary {sc.boundary!r}: prepare_sequence_tensors splits each env's rows after "
            "every done row and zero-pads the pieces, so no sequence is meant to run on "
            "across an episode end",
            prepare,
        )
    if sc.initial_state != "stored":
        raise _unsupported(
            f"initial_state {sc.initial_state!r}: every sequence starts from the hidden state "
            "stored with its first row (initial_hidden_states), and no setting starts one "
            "from the initial state",
            prepare,
        )


def counting_ppo(
    env: Any, num_envs: int, n_steps: int, batch_size: int, update_epochs: int, max_seq_len: int
) -> tuple[Any, CountingEncoder]:
    """A recurrent ``PPO`` (chunked BPTT sequences of ``max_seq_len``) whose actor and critic
    networks are counting encoders, learning every ``n_steps`` steps of each env, and the
    actor's encoder as PPO holds it (PPO deep-copies the networks it is given)."""
    agent = PPO(
        env.single_observation_space,
        env.single_action_space,
        num_envs=num_envs,
        learn_step=n_steps * num_envs,
        batch_size=batch_size,
        update_epochs=update_epochs,
        actor_network=CountingEncoder("actor_encoder"),
        critic_network=CountingEncoder("critic_encoder"),
        share_encoders=False,
        recurrent=True,
        max_seq_len=max_seq_len,
        bptt_sequence_type="chunked",
    )
    encoder = agent.actor.encoder
    if not isinstance(encoder, CountingEncoder):
        raise TypeError(f"PPO's actor encoder: expected a CountingEncoder, got {encoder!r}")
    return agent, encoder


def run_recurrent(scenario: RecurrentScenario) -> Trace:
    """One ``collect_rollouts_recurrent`` and one ``PPO.learn`` of a recurrent PPO with the
    counting encoder on ``scenario`` (module docstring)."""
    _check(scenario)
    sc, b = scenario, scenario.env.num_envs
    with seeded_quiet(sc.seed, ("torch", "numpy")):
        env, log = recorded_env(sc.env, sc.seed)
        agent, encoder = counting_ppo(env, b, sc.steps, sc.batch_size, sc.draws, sc.sequence_length)
        recorder = encoder.recorder
        collect_rollouts_recurrent(agent, env, n_steps=sc.steps)
        recorder.phase = "train"
        masks: list[np.ndarray] = []
        from_tensordict = ppo_module.RolloutSequenceMinibatch.from_tensordict

        def recorded_batch(td: Any) -> Any:
            out = from_tensordict(td)
            masks.append(out.pad_mask.detach().numpy().copy())
            return out

        ppo_module.RolloutSequenceMinibatch.from_tensordict = recorded_batch
        try:
            agent.learn()
        finally:
            ppo_module.RolloutSequenceMinibatch.from_tensordict = from_tensordict
    rollout = [c for c in recorder.calls if c.phase == "rollout"]
    training = [c for c in recorder.calls if c.phase == "train"]
    events = _env_steps(rollout, log, sc.steps) + sequences(training, masks)
    return Trace(tuple(events), {"producer": producer("agilerl")})


def _env_steps(calls: list[EncoderCall], log: EnvLog, steps: int) -> list[Event]:
    """One ``EnvStep`` per ``get_action`` of the rollout (the encoder's first ``steps`` calls;
    the last one values the last observation and acts on nothing)."""
    if len(calls) != steps + 1 or len(log.actions) != steps:
        raise RuntimeError(
            f"collect_rollouts_recurrent: expected {steps + 1} encoder calls and {steps} env "
            f"steps, got {len(calls)} and {len(log.actions)}"
        )
    return act_steps(calls[:steps], log)


def act_steps(calls: list[EncoderCall], log: EnvLog) -> list[Event]:
    """One ``EnvStep`` per act: the ``k``-th of ``calls`` is the encoder's call of
    ``get_action`` for the env's ``k``-th step (one env from its reset on, no reset after):
    the items it received, their step types from the flags the env returned before, the
    reward into them, the state the encoder received and the action the env got."""
    if len(calls) > len(log.actions):
        raise RuntimeError(f"expected at most {len(log.actions)} acts, got {len(calls)}")
    steps = len(calls)
    events: list[Event] = []
    b = len(log.actions[0])
    ended = np.ones(b, dtype=bool)  # before the first observation: the reset
    reward = np.zeros(b)
    terminated = np.zeros(b, dtype=bool)
    previous_last = np.zeros(b, dtype=bool)
    for k in range(steps):
        call = calls[k]
        items = decode_items(call.observations[:, 0])
        states = call.received[:, 0]
        row = []
        for e, item in enumerate(items):
            if k == 0 or previous_last[e]:
                kind = _FIRST
            elif ended[e]:
                kind = _LAST
            else:
                kind = _MID
            discount = 0.0 if kind == _LAST and terminated[e] else 1.0
            row.append(
                Step(
                    item,
                    kind,
                    float(reward[e]),
                    discount,
                    _count(float(states[e])),
                    int(log.actions[k][e]),
                )
            )
        events.append(env_step(0, row))
        previous_last = np.array([s.step_type == _LAST for s in row])
        reward, terminated = log.rewards[k], log.terminated[k]
        ended = terminated | log.truncated[k]
    return events


def sequences(calls: list[EncoderCall], masks: list[np.ndarray]) -> list[Event]:
    """One ``TrainSequence`` per sequence of every training forward of the actor's encoder, in
    order, its padding named by the mini-batch's ``pad_mask``."""
    if len(calls) != len(masks):
        raise RuntimeError(
            f"PPO.learn: expected one actor-encoder forward per mini-batch ({len(masks)}), "
            f"got {len(calls)}"
        )
    events: list[Event] = []
    for draw, (call, mask) in enumerate(zip(calls, masks, strict=True)):
        if call.grad is None:
            raise RuntimeError(f"PPO.learn: no gradient reached training forward {draw}")
        n, length = call.received.shape
        real = mask.reshape(n, length).astype(bool)
        for index in range(n):
            decoded = iter(decode_items(call.observations[index][real[index]]))
            items: list[Item | None] = [
                next(decoded) if real[index, j] else None for j in range(length)
            ]
            events.append(
                TrainSequence(
                    draw,
                    index,
                    tuple(items),
                    tuple(_count(float(s)) for s in call.received[index]),
                    tuple(int(g != 0) for g in call.grad[index]),
                )
            )
    return events
