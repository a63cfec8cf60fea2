"""Recurrent state in training (capability ``recurrent``, spec/recurrent.md) on TorchRL 0.14.1:
TorchRL's own recurrent machinery driven on :class:`~xpspec.protocol.scenario.RecurrentScenario`.
Sources are cited as ``file:function`` under the installed ``torchrl`` package.

**The network.** ``GRUModule(gru=counting, in_keys=["observation", "rs"], out_keys=["embed",
("next", "rs")])`` (``modules/tensordict_module/rnn.py``) wraps a counting recurrent core: the
hidden state it returns is the one it received plus one, its per-step output is that new
state. ``GRUModule`` accepts any ``torch.nn.GRU``-like core (``batch_first``, ``num_layers``,
``hidden_size``, called ``core(input, hidden, mask=...)``), so the reset and state handling
under test are TorchRL's: in a rollout (sequential mode) ``GRUModule.forward`` zeroes the
incoming state where ``is_init``; under ``set_recurrent_mode(True)`` it starts each row from the
stored state at its first step and splits a row at every later ``is_init``
(``_split_and_pad_for_reset``), each piece starting from the state stored at its own first step.
A linear Q head and ``QValueModule`` complete the policy; the env is ``InitTracker`` plus
``GRUModule.make_tensordict_primer()``, so the collector stores with each frame the state the
policy received (reset to 0 by the primer at every reset).

**Sequences.** ``boundary="pad"``: the rollout, one collector batch of ``steps`` steps per env,
goes env after env into a ``TensorDictReplayBuffer`` over ``LazyTensorStorage(steps * B)`` (an
``ndim=2`` storage fails TorchRL 0.14.1's ``_set_index_in_td`` when a write holds one step per
env, ``data/replay_buffers/replay_buffers/tensordict.py``) sampled by
``SliceSampler(slice_len=sequence_length, traj_key=("collector", "traj_ids"),
strict_length=False, pad_output=True)`` (``data/replay_buffers/samplers/slice.py``): slices stay
inside one episode, a short one is padded by repeating its last step and flagged in
``("collector", "mask")``, which only a ``TensorDictReplayBuffer`` writes into the sample.
``boundary="cross"``: the collector's batches of ``sequence_length`` steps per env are stored
whole, one sequence per env and batch (TorchRL's recurrent DQN tutorial,
``tutorials/sphinx-tutorials/dqn_with_rnn.py``), and drawn by ``RandomSampler``; a chunk runs on
across episode ends. The collector makes whole batches (``collectors/_single.py``,
``_setup_total_frames``), so with ``steps`` no multiple of ``sequence_length`` the rollout runs
on to the next multiple. Each draw samples ``batch_size`` sequences, shaped ``[batch_size,
sequence_length]``; with ``burn_in > 0`` ``BurnInTransform(burn_in)`` (``envs/transforms/
_env.py``) is called on the sample, as its docstring does: it runs the network over the first
``burn_in`` steps without gradient, drops them and writes the state they end in at the first
remaining step. ``initial_state="zeros"``: the buffer's ``ExcludeTransform`` drops the stored
state from every sample, the case ``BurnInTransform`` is documented for ("obtain up-to-date
recurrent states when they are not available"); ``GRUModule`` then starts each row from its zero
default. With ``burn_in > 0`` TorchRL 0.14.1's ``BurnInTransform`` raises on such a sample (it
reads the shape of the missing state): the trace ends there (header ``stopped``).

**Training** is ``DQNLoss`` (``objectives/dqn.py``) on the sample under
``set_recurrent_mode(True)``, its backward pass and an optimizer step on the Q head; the loss
applies ``("collector", "mask")`` itself (``LossModule._reduce_loss``, ``loss_mask_key="auto"``,
``objectives/common.py``).

**What is recorded.** The counting core notes every call: the observation and the state it
received at every step (the ``mask`` TorchRL passes marks the padding of the pieces it split a
row into, which it did not run) and, through a tensor hook on its per-step output, the gradient
the loss sent back to each step. One ``EnvStep`` per collector step names its frames as the
adapter's other runs do (FIRST where ``is_init``, else MID) with the state the core received
there; an episode's LAST is no frame (the collector resets in the step that ends it), never
receives a state and is never stored, so the rollout names none and a chunk's step after an
episode's last frame is the next episode's FIRST. Each ``TrainSequence`` joins its draw's
burn-in call and the loss's first (online network) call, in TorchRL's row-major order: items
decoded from the observations the core received, ``state_in`` as received, loss mask 1 where
the loss gradient reached that step's output (0 at burn-in steps, which ran without gradient,
and where the loss's mask zeroed it). A padding step repeats its predecessor's item
(``pad_output``) and is named ``None``; the core ran on it, so its state is the one it received.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

with warnings.catch_warnings():  # TorchRL's import warns of its own deprecated classes
    warnings.simplefilter("ignore", DeprecationWarning)
    from gymnasium.vector import AutoresetMode, SyncVectorEnv
    from tensordict import TensorDictBase
    from tensordict.nn import TensorDictModule, TensorDictSequential
    from torchrl.collectors import Collector
    from torchrl.data import (
        LazyTensorStorage,
        RandomSampler,
        SliceSampler,
        TensorDictReplayBuffer,
    )
    from torchrl.envs import (
        BurnInTransform,
        Compose,
        ExcludeTransform,
        GymWrapper,
        InitTracker,
        TransformedEnv,
    )
    from torchrl.modules import GRUModule, QValueModule, set_recurrent_mode
    from torchrl.objectives import DQNLoss

from xpspec.adapters.torchrl import _FrameRows, _seeded
from xpspec.kit.events import env_step
from xpspec.kit.items import decode_items
from xpspec.kit.steps import Step
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.trace import Event, Item, Trace, TrainSequence
from xpspec.refimpl.toy_envs.gym_env import make_env_fns

__all__ = ["CountingCore", "run_recurrent"]

_STATE = "rs"
"""The key of the recurrent state in TorchRL's tensordicts (``("next", "rs")`` its output)."""
_NO_STATE = "'NoneType' object has no attribute 'shape'"
"""The ``AttributeError`` TorchRL 0.14.1's ``BurnInTransform.forward`` raises on a sample that
holds no recurrent state (``envs/transforms/_env.py``: it reads the shape of the missing
entry)."""
_OFFSET = 1.0e6
"""The Q head's bias: far from any toy reward, so a TD error is never exactly zero and a step
the loss keeps always sends back a non-zero gradient."""


# -- the counting core ------------------------------------------------------------------------------
@dataclass
class _Call:
    """One call of the counting core: the phase it ran in, its input ``[N, T, 3]``, the state
    it received at each step ``[N, T]``, the steps it ran (``[N, T]``, False at the padding of
    TorchRL's split pieces) and the gradient the loss sent back to each step's output."""

    phase: tuple[str, int]
    observation: torch.Tensor
    state_in: torch.Tensor
    ran: torch.Tensor
    grad: torch.Tensor | None = None

    def positions(self) -> list[tuple[Item, int, int]]:
        """The steps it ran, in TorchRL's row-major order: item, state received, and whether
        the loss gradient reached the step's output (1) or not (0)."""
        ran = self.ran.reshape(-1)
        items = decode_items(self.observation.reshape(-1, self.observation.shape[-1])[ran])
        states = self.state_in.reshape(-1)[ran]
        if self.grad is None:
            reached = [0] * len(items)
        else:
            reached = [int(g != 0) for g in self.grad.reshape(-1)[ran].tolist()]
        return [(i, _count(s), r) for i, s, r in zip(items, states.tolist(), reached, strict=True)]


def _count(value: float) -> int:
    if value != round(value):
        raise ValueError(f"counting state: expected an integral count, got {value}")
    return round(value)


@dataclass
class _Recorder:
    phase: tuple[str, int] = ("rollout", 0)
    calls: list[_Call] = field(default_factory=list)


class CountingCore(torch.nn.Module):
    """A recurrent core with ``torch.nn.GRU``'s interface whose hidden state counts steps: the
    state it returns at a step is the state it received plus ``step`` (a parameter, 1), its
    output at a step is that new state; given no state it starts from zeros, as
    ``torch.nn.GRU`` does. Every call is noted in ``recorder``."""

    batch_first = True
    bidirectional = False
    num_layers = 1
    hidden_size = 1
    input_size = 3

    def __init__(self) -> None:
        super().__init__()
        self.step = torch.nn.Parameter(torch.ones(()))
        self.recorder = _Recorder()

    def forward(
        self, x: torch.Tensor, hx: torch.Tensor | None = None, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n, steps = x.shape[0], x.shape[1]
        h = hx[0] if hx is not None else x.new_zeros(n, 1)
        ran = torch.ones(n, steps, dtype=torch.bool) if mask is None else mask.to(torch.bool)
        received, outputs = [], []
        for t in range(steps):
            received.append(h[:, 0].detach().clone())
            new = torch.where(ran[:, t : t + 1], h + self.step, h)
            outputs.append(new)
            h = new
        y = torch.stack(outputs, 1)
        call = _Call(self.recorder.phase, x.detach().clone(), torch.stack(received, 1), ran.clone())
        if y.requires_grad:

            def keep(grad: torch.Tensor) -> None:
                call.grad = grad.detach()[..., 0].clone()

            y.register_hook(keep)
        self.recorder.calls.append(call)
        return y, h.unsqueeze(0)


# -- framework objects ------------------------------------------------------------------------------
def _gru(core: CountingCore) -> GRUModule:
    return GRUModule(
        gru=core, in_keys=["observation", _STATE], out_keys=["embed", ("next", _STATE)]
    )


def _env(spec: EnvSpec, seed: int, gru: GRUModule) -> TransformedEnv:
    """All envs of ``spec`` as one batched TorchRL env reset by TorchRL (as the adapter's
    other runs), with ``InitTracker`` and ``GRUModule``'s own state primer."""
    vector = SyncVectorEnv(make_env_fns(spec, seed), autoreset_mode=AutoresetMode.DISABLED)
    base = GymWrapper(vector, categorical_action_encoding=True)
    return TransformedEnv(base, Compose(InitTracker(), gru.make_tensordict_primer()))


def _network(spec: EnvSpec, gru: GRUModule) -> TensorDictSequential:
    """The policy and value network: the counting ``GRUModule``, a linear Q head (weight 1,
    bias far from any reward), TorchRL's ``QValueModule``."""
    head = torch.nn.Linear(1, spec.num_actions)
    with torch.no_grad():
        head.weight.fill_(1.0)
        head.bias.fill_(_OFFSET)
    return TensorDictSequential(
        gru,
        TensorDictModule(head, in_keys=["embed"], out_keys=["action_value"]),
        QValueModule(action_space="categorical"),
    )


def _buffer(sc: RecurrentScenario) -> TensorDictReplayBuffer:
    """``pad``: every frame, env after env, sliced inside episodes; ``cross``: the
    collector's chunks of ``sequence_length`` frames per env, drawn whole. (A
    ``TensorDictReplayBuffer``: it writes ``pad_output``'s ``("collector", "mask")`` into the
    sample, which a plain ``ReplayBuffer`` returns only in its info.)"""
    spec = sc.env
    generator = torch.Generator().manual_seed(sc.seed)
    # initial_state "zeros": the sample holds no stored state, so GRUModule starts from zeros
    zeros = ExcludeTransform(_STATE, ("next", _STATE)) if sc.initial_state == "zeros" else None
    if sc.boundary == "pad":
        return TensorDictReplayBuffer(
            storage=LazyTensorStorage(sc.steps * spec.num_envs),
            sampler=SliceSampler(
                slice_len=sc.sequence_length,
                traj_key=("collector", "traj_ids"),
                strict_length=False,
                pad_output=True,
            ),
            batch_size=sc.batch_size * sc.sequence_length,
            transform=zeros,
            generator=generator,
        )
    chunks = -(-sc.steps // sc.sequence_length)
    return TensorDictReplayBuffer(
        storage=LazyTensorStorage(chunks * spec.num_envs),
        sampler=RandomSampler(),
        batch_size=sc.batch_size,
        transform=zeros,
        generator=generator,
    )


def _sample(sc: RecurrentScenario, buffer: TensorDictReplayBuffer, gru: GRUModule) -> Any:
    """One draw as the loss reads it: ``[batch_size, sequence_length]`` (a ``SliceSampler``
    sample is flat), burnt in by ``BurnInTransform`` when ``burn_in > 0`` (called on the sample,
    as its docstring does)."""
    sample = buffer.sample().reshape(sc.batch_size, sc.sequence_length)
    if sc.burn_in:
        sample = BurnInTransform([gru], burn_in=sc.burn_in)(sample)
    return sample


# -- rollout ----------------------------------------------------------------------------------------
def _rollout_steps(
    column: TensorDictBase, view: _FrameRows, received: dict[Item, int]
) -> list[Step]:
    """One collector step's frames as rows, each with the state the core received there and
    the action taken. An episode's LAST time step is no frame (the collector resets in the
    step that ends it): the policy never receives a state there and nothing stores it, so the
    rollout names none (unlike ``run_env``, whose clauses are about time steps)."""
    rows = view.rows(column)
    actions = column.get("action").reshape(-1).tolist()
    return [
        replace(r, policy_state=received[r.item], action=int(a))
        for r, a in zip(rows, actions, strict=True)
    ]


def _received(calls: Sequence[_Call]) -> dict[Item, int]:
    return {item: state for call in calls for item, state, _ in call.positions()}


# -- training sequences -----------------------------------------------------------------------------
def _sequences(sc: RecurrentScenario, draw: int, calls: Sequence[_Call]) -> list[TrainSequence]:
    """The draw's sequences: its burn-in call's steps (none without burn-in) followed by its
    loss's first call's steps (the online network; later calls are the target's), sequence
    by sequence in TorchRL's row-major order."""
    burn = [p for c in calls if c.phase == ("sample", draw) for p in c.positions()]
    loss_calls = [c for c in calls if c.phase == ("loss", draw)]
    if not loss_calls:
        raise RuntimeError(f"draw {draw}: expected DQNLoss to run the network, it did not")
    rest = loss_calls[0].positions()
    length, b = sc.sequence_length, sc.burn_in
    if len(burn) % max(b, 1) or len(rest) % (length - b):
        raise RuntimeError(
            f"draw {draw}: expected steps in whole sequences of {b} burn-in and "
            f"{length - b} trained steps, got {len(burn)} and {len(rest)}"
        )
    count = len(rest) // (length - b)
    if b and len(burn) != count * b:
        raise RuntimeError(
            f"draw {draw}: expected {count * b} burn-in steps for {count} sequences, "
            f"got {len(burn)}"
        )
    out = []
    for i in range(count):
        steps = burn[i * b : (i + 1) * b] + rest[i * (length - b) : (i + 1) * (length - b)]
        items: list[Item | None] = [s[0] for s in steps]
        for j in range(len(steps) - 1, 0, -1):  # pad_output repeats the last real step
            if steps[j][0] == steps[j - 1][0]:
                items[j] = None
        out.append(
            TrainSequence(
                draw=draw,
                index=i,
                items=tuple(items),
                state_in=tuple(s[1] for s in steps),
                loss_mask=tuple(s[2] for s in steps),
            )
        )
    return out


# -- the run ----------------------------------------------------------------------------------------
def run_recurrent(sc: RecurrentScenario, core: CountingCore | None = None) -> Trace:
    """Roll out, store, sample and train as the module docstring says; ``core`` replaces the
    counting core (tests perturb it)."""
    spec = sc.env
    core = CountingCore() if core is None else core
    recorder = core.recorder
    events: list[Event] = []
    view = _FrameRows()
    with _seeded(sc.seed):
        gru = _gru(core)
        env = _env(spec, sc.seed, gru)
        network = _network(spec, gru)
        buffer = _buffer(sc)
        per_batch = sc.steps if sc.boundary == "pad" else sc.sequence_length
        collector = Collector(
            env,
            policy=network,
            frames_per_batch=spec.num_envs * per_batch,
            total_frames=spec.num_envs * sc.steps,
        )
        for batch in collector:  # the policy ran on this batch's steps since the last one
            received = _received(recorder.calls)
            recorder.calls.clear()
            for j in range(batch.shape[-1]):
                events.append(env_step(0, _rollout_steps(batch[..., j], view, received)))
            buffer.extend(batch.reshape(-1) if sc.boundary == "pad" else batch)
        collector.shutdown()
        loss = DQNLoss(network, action_space="categorical", loss_function="l2")
        head = [p for name, p in loss.named_parameters() if "step" not in name]
        optimizer = torch.optim.Adam(head, lr=1e-3)
        for draw in range(sc.draws):
            recorder.calls.clear()
            with set_recurrent_mode(True):
                recorder.phase = ("sample", draw)
                try:
                    sample = _sample(sc, buffer, gru)
                except AttributeError as exc:  # BurnInTransform with no stored state
                    if _NO_STATE not in str(exc):
                        raise
                    header = {"producer": "torchrl", "stopped": f"AttributeError: {exc}"}
                    return Trace(tuple(events), header)
                recorder.phase = ("loss", draw)
                loss(sample)["loss"].backward()
            optimizer.step()
            optimizer.zero_grad()
            events.extend(_sequences(sc, draw, recorder.calls))
    return Trace(tuple(events), {"producer": "torchrl"})
