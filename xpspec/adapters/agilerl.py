"""Adapter over AgileRL 2.58.0: its uniform ``ReplayBuffer`` (``components/replay_buffer.py``)
filled with the toy env through a Gymnasium ``SyncVectorEnv`` (what ``utils/utils.py:make_vect_envs``
builds) and sampled by its own ``Sampler`` (``components/sampler.py``), as
``training/train_off_policy.py:train_off_policy`` fills and samples it (capability ``replay``);
``train_off_policy`` itself with a ``DQN`` agent (capability ``trainer``, see
:mod:`xpspec.adapters.agilerl_trainer` for its learn-step accounting; saved with
``save_checkpoint`` and resumed with ``load_checkpoint``, capability ``checkpoint``, see
:mod:`xpspec.adapters.agilerl_checkpoint`), its preprocessing done
by a user's ``ReplayBuffer`` subclass handed to it as ``memory``
(:mod:`xpspec.adapters.agilerl_preprocess`); and ``PPO``'s rollout
buffer GAE, advantage normalisation and mini-batch updates (capability ``learner``, see
:mod:`xpspec.adapters.agilerl_learner`), with ``MultiStepReplayBuffer``'s n-step targets as
``RainbowDQN.learn`` trains on them (observable ``nstep``, :mod:`xpspec.adapters.agilerl_nstep`);
and recurrent ``PPO`` with a counting recurrent encoder handed to it as its actor and critic
network, one ``collect_rollouts_recurrent`` and one BPTT ``PPO.learn`` (capability
``recurrent``, :mod:`xpspec.adapters.agilerl_recurrent`), and the same recurrent PPO trained by
``training/train_on_policy.py:train_on_policy`` for whole-buffer trainer scenarios, whose
rollout hands the encoder its state (observable ``state``,
:mod:`xpspec.adapters.agilerl_state`; the DQN row's traces say in their header's
``stateless`` that its policy holds none). Nothing of AgileRL is
re-implemented; sources are cited as ``file:function`` under the installed ``agilerl``
package. ``agilerl.algorithms`` imports ``peft`` (an optional dependency of AgileRL's
``llm`` extras), so the ``adapter-agilerl`` extra installs it too.

**Rows.** ``train_off_policy`` stores one row per env and vector step,
``Transition(obs, action, reward, next_obs, done=terminated)`` turned into a TensorDict by
``components/data.py:transition_to_tensordict`` with batch size ``B`` and handed to
``ReplayBuffer.add``; the adapter builds the rows with those same two functions. Under
Gymnasium's ``NEXT_STEP`` autoreset every time step is the ``obs`` of one row (a LAST's row
holds the next episode's FIRST as ``next_obs``), so the rows name items as time steps. The
``store`` events are read back from the buffer's storage at the rows just written: each row is
named by its ``obs``, and its step type, reward (into the step) and discount are what the
buffer says of it, i.e. what its env's previous row holds (``xpspec.kit.steps.NextStepRows``):
after a ``done`` row a LAST with that row's reward and discount 0, after a LAST a FIRST. The
rows keep ``done = terminated`` alone, so the buffer holds no truncation: a truncated LAST and
the FIRST after it are stored as MID (a finding).

**Capacity.** ``ReplayBuffer(max_size)`` is one ring of rows shared by all envs; every ``add``
writes ``B`` consecutive rows (env order) at its cursor (``ReplayBuffer.add``). The adapter
passes ``max_size = capacity * B``, so the ring stays aligned to whole vector steps and each
env keeps its newest ``capacity`` rows, as the spec's per-env ring does.

**Sampling.** A draw is ``Sampler(memory=buffer).sample(batch_size)`` (``sample_standard`` ->
``ReplayBuffer.sample``), under ``torch.manual_seed(seed)`` (it draws from torch's global
generator); each row is a window of one item. ``ReplayBuffer.sample`` draws
``min(batch_size, size)`` rows by ``torch.randperm(size)`` -- without replacement -- while the
buffer holds fewer than 16384 rows (``ReplayBuffer._sample_indices``); a draw before any row is
stored fails its assertion ``Cannot sample from an empty buffer.`` and is recorded as an empty
draw (``replay.no-window``).

**Prioritized replay** (capabilities ``priorities`` and ``importance-weights``): a replay
scenario with a priority spec runs ``PrioritizedReplayBuffer`` (:func:`_run_prioritized`), its
masses read from its ``sum_tree``, its weights as ``sample`` returns them.

**Not expressible** (:class:`~xpspec.protocol.adapter.Unsupported`): windows longer than one
row, a period, and distributions other than ``uniform-windows``. ``MultiStepReplayBuffer`` is
driven by the learner row for its n-step targets (:mod:`xpspec.adapters.agilerl_nstep`).
Every catalogue replay scenario but ``replay-empty`` asks for windows of several items, so the
sampler's rows are checked mostly through the trainer's updates.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

try:
    from agilerl.components.data import Transition, transition_to_tensordict
    from agilerl.components.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer
    from agilerl.components.sampler import Sampler
except ImportError as exc:  # pragma: no cover - exercised only without the framework
    raise ImportError(
        f"xpspec.adapters.agilerl drives AgileRL 2.58.0's API, which is not importable here ({exc})"
    ) from exc

import gymnasium
import numpy as np
import torch

from xpspec.adapters.agilerl_checkpoint import run_checkpointed
from xpspec.adapters.agilerl_learner import run_learner
from xpspec.adapters.agilerl_recurrent import run_recurrent
from xpspec.adapters.agilerl_rows import StoredRows, as_numpy
from xpspec.adapters.agilerl_state import run_ppo_trainer
from xpspec.adapters.agilerl_trainer import run_trainer
from xpspec.kit.events import store
from xpspec.kit.items import decode_items, item_columns, single_item_windows
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.release import check_release, producer
from xpspec.protocol.adapter import PROTOCOL_VERSION, AdapterInfo, Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import (
    LearnerScenario,
    RecurrentScenario,
    ReplayScenario,
    TrainerScenario,
)
from xpspec.protocol.trace import Event, Priorities, Prioritized, Sampled, Trace
from xpspec.refimpl.toy_envs.gym_env import make_env_fns

__all__ = ["AgileRLAdapter"]

_VERSION = "2.58.0"
_SRC = f"agilerl {_VERSION}"
_LINK = "https://github.com/AgileRL/AgileRL/blob/v2.58.0/agilerl/components/replay_buffer.py"
_EMPTY = "Cannot sample from an empty buffer."
"""``ReplayBuffer.sample``'s assertion message when nothing was ever stored."""


def _unsupported(reason: str) -> Unsupported:
    return Unsupported(f"{reason} ({_SRC})", _LINK)


def _check_sampling(sampling: SamplingSpec) -> None:
    """Raise :class:`Unsupported` for what ``ReplayBuffer.sample`` cannot express."""
    if sampling.window_length != 1:
        raise _unsupported(
            f"window length {sampling.window_length}: ReplayBuffer.sample returns single "
            "transitions (components/replay_buffer.py:ReplayBuffer.sample), no sequences"
        )
    if sampling.period != 1:
        raise _unsupported(
            f"period {sampling.period}: ReplayBuffer.sample draws any stored row (no grid)"
        )
    if sampling.distribution != "uniform-windows":
        raise _unsupported(
            f"sampling distribution {sampling.distribution!r}: ReplayBuffer.sample draws rows "
            "of its one shared ring by torch.randperm, with no notion of envs or episodes "
            "(components/replay_buffer.py:ReplayBuffer._sample_indices)"
        )


def _vec_env(spec: EnvSpec, seed: int) -> gymnasium.vector.SyncVectorEnv:
    """The vector env ``make_vect_envs`` builds (a ``SyncVectorEnv``, ``NEXT_STEP`` autoreset)."""
    if spec.autoreset != "next-step":
        raise _unsupported(
            f"autoreset {spec.autoreset!r}: utils/utils.py:make_vect_envs builds Gymnasium vector "
            "envs in their default NEXT_STEP mode, and train_off_policy stores the next_obs a "
            "step returns (under SAME_STEP the next episode's first observation, the final one "
            "left in infos), so only 'next-step' is what AgileRL's loop stores"
        )
    return gymnasium.vector.SyncVectorEnv(list(make_env_fns(spec, seed)))


class _Fill:
    """Steps the vector env ``steps`` times and adds each step's rows to ``buffer`` as
    ``train_off_policy`` does, recording each add as a ``store`` event read back from the
    buffer."""

    def __init__(self, buffer: ReplayBuffer, spec: EnvSpec, seed: int) -> None:
        self.buffer = buffer
        self.env = _vec_env(spec, seed)
        self.num_envs = spec.num_envs
        self.events: list[Event] = []
        self._obs: Any = None
        self._rows = StoredRows()

    def run(self, steps: int) -> None:
        """``steps`` more vector steps: the first call starts from the reset, a later one goes
        on where the previous one stopped."""
        b = self.num_envs
        actions = np.zeros(b, dtype=np.int64)
        if self._obs is None:
            self._obs, _ = self.env.reset()
        obs = self._obs
        rows = self._rows
        for _ in range(steps):
            next_obs, reward, next_terminated, _, _ = self.env.step(actions)
            transition = transition_to_tensordict(
                Transition(
                    obs=obs, action=actions, reward=reward, next_obs=next_obs, done=next_terminated
                )
            )
            transition.batch_size = torch.Size([b])
            cursor = self.buffer._cursor  # where ReplayBuffer.add writes these B rows
            self.buffer.add(transition)
            written = (cursor + np.arange(b)) % self.buffer.max_size
            self.events.append(store(0, rows.read(self.buffer, written)))
            obs = next_obs
        self._obs = obs


def _run_replay(sc: ReplayScenario) -> Trace:
    _check_sampling(sc.sampling)
    buffer = ReplayBuffer(max_size=sc.capacity * sc.env.num_envs)
    sampler = Sampler(memory=buffer)
    events: list[Event] = []
    with seeded_quiet(sc.seed, ["torch"]):
        fill = _Fill(buffer, sc.env, sc.seed)
        fill.run(sc.fill_steps)
        events.extend(fill.events)
        for draw in range(sc.draws):
            try:
                samples = sampler.sample(sc.batch_size)
            except AssertionError as exc:  # ReplayBuffer.sample before any add
                if str(exc) != _EMPTY:
                    raise
                events.append(Sampled(draw, ()))
                continue
            items = decode_items(as_numpy(samples["obs"]))
            events.append(Sampled(draw, single_item_windows(items)))
    header = {"producer": producer("agilerl"), "stored_rows": len(buffer)}
    return Trace(tuple(events), header)


def _run_prioritized(sc: ReplayScenario) -> Trace:
    """Prioritized replay by ``PrioritizedReplayBuffer(max_size=capacity * B, alpha)``
    (``components/replay_buffer.py``), filled as ``run_replay`` fills it, with
    ``priority.add_steps`` more vector steps after every draw but the last. Before each draw
    the masses are read from its ``sum_tree`` at every stored row (its tree index is its
    storage index: ``add`` advances both by ``B``); a draw is ``sample(batch_size, beta=beta)``,
    whose ``weights`` the trace records and whose probabilities are the tree's masses at the
    returned ``idxs`` over ``sum_tree.sum()``; then ``update_priorities(idxs, |td| + eps)``
    with the scenario's TD error of each sampled row (AgileRL clamps it to at least 1e-5 and
    raises it to ``alpha``)."""
    priority = sc.priority
    assert priority is not None
    _check_sampling(sc.sampling)
    b = sc.env.num_envs
    buffer = PrioritizedReplayBuffer(max_size=sc.capacity * b, alpha=float(priority.alpha))
    events: list[Event] = []
    with seeded_quiet(sc.seed, ["torch"]):
        fill = _Fill(buffer, sc.env, sc.seed)
        fill.run(sc.fill_steps)
        events.extend(fill.events)
        for draw in range(sc.draws):
            size = len(buffer)
            rows = np.arange(size)
            held = decode_items(as_numpy(buffer._storage["obs"][rows])) if size else []
            masses = buffer.sum_tree.get_batch(rows) if size else []
            events.append(Priorities(draw, *item_columns(held), tuple(float(m) for m in masses)))
            try:
                samples = buffer.sample(sc.batch_size, beta=float(priority.beta))
            except AssertionError as exc:  # PrioritizedReplayBuffer.sample before any add
                if str(exc) != _EMPTY:
                    raise
                events.extend((Sampled(draw, ()), Prioritized(draw, (), ())))
            else:
                idxs = as_numpy(samples["idxs"]).reshape(-1).astype(np.int64)
                items = decode_items(as_numpy(samples["obs"]))
                total = float(buffer.sum_tree.sum())
                events.append(Sampled(draw, single_item_windows(items)))
                events.append(
                    Prioritized(
                        draw,
                        tuple(float(m) / total for m in buffer.sum_tree.get_batch(idxs)),
                        tuple(float(w) for w in as_numpy(samples["weights"]).reshape(-1)),
                    )
                )
                new = np.array([float(priority.priority(item, draw)) for item in items])
                buffer.update_priorities(idxs, new)
            if draw < sc.draws - 1 and priority.add_steps:
                mark = len(fill.events)
                fill.run(priority.add_steps)
                events.extend(fill.events[mark:])
    header = {"producer": producer("agilerl"), "stored_rows": len(buffer)}
    return Trace(tuple(events), header)


class AgileRLAdapter:
    """AgileRL 2.58.0 behind the xpspec protocol (see the module docstring for the mapping)."""

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name="agilerl",
            framework="AgileRL",
            framework_version=metadata.version("agilerl"),
            protocol_version=PROTOCOL_VERSION,
            capabilities=(
                "trainer",
                "checkpoint",
                "replay",
                "learner",
                "nstep",
                "priorities",
                "importance-weights",
                "recurrent",
                "state",  # recurrent PPO's whole-buffer trainer row (agilerl_state)
            ),
            issue_tracker="https://github.com/AgileRL/AgileRL/issues",
            notes=(
                "train_off_policy with a tiny DQN; ReplayBuffer sampled by its Sampler; one "
                "collect_rollouts and PPO.learn with the toy value as critic; MultiStepReplayBuffer "
                "and one RainbowDQN.learn for n-step targets; recurrent PPO with a counting "
                "encoder as its actor and critic network for recurrent, and trained by train_on_policy "
                "for whole-buffer trainer scenarios"
            ),
            extra_versions={
                "torch": torch.__version__,
                "tensordict": metadata.version("tensordict"),
                "gymnasium": gymnasium.__version__,
                "numpy": np.__version__,
            },
        )

    def smoke(self) -> None:
        check_release("agilerl", metadata.version("agilerl"), _VERSION)
        _run_replay(ReplayScenario(EnvSpec(), capacity=2, fill_steps=2, batch_size=2))

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        """One ``train_on_policy`` run of a recurrent PPO with the counting encoder for
        whole-buffer and on-policy scenarios (:mod:`xpspec.adapters.agilerl_state`), else one
        ``train_off_policy`` run of a DQN agent (:mod:`xpspec.adapters.agilerl_trainer`); with
        a checkpoint spec, saved and resumed through AgileRL's own API
        (:mod:`xpspec.adapters.agilerl_checkpoint`)."""
        cfg = scenario.trainer
        if cfg.whole_buffer or cfg.mode == "on-policy":
            return run_ppo_trainer(scenario)
        if scenario.checkpoint is not None:
            return run_checkpointed(scenario)
        return run_trainer(scenario)

    def run_learner(self, scenario: LearnerScenario) -> Trace:
        """One ``collect_rollouts`` and ``PPO.learn`` (:mod:`xpspec.adapters.agilerl_learner`)."""
        return run_learner(scenario)

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        """Fill: ``fill_steps`` vector steps, one ``ReplayBuffer.add`` of ``B`` rows each;
        draws: ``Sampler.sample(batch_size)`` (see the module docstring). A scenario with a
        priority spec runs ``PrioritizedReplayBuffer`` (:func:`_run_prioritized`)."""
        if scenario.priority is not None:
            return _run_prioritized(scenario)
        return _run_replay(scenario)

    def run_recurrent(self, scenario: RecurrentScenario) -> Trace:
        """One ``collect_rollouts_recurrent`` and one BPTT ``PPO.learn`` of a recurrent PPO
        with a counting encoder (:mod:`xpspec.adapters.agilerl_recurrent`)."""
        return run_recurrent(scenario)
