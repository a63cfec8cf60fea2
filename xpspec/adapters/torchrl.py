"""Adapter for TorchRL 0.14.1 (tensordict 0.14.3): TorchRL's own env wrappers, ``Collector``,
``Trainer`` loop, replay buffers, samplers, value estimators and post-processors, driven on the
toy env. Sources are cited as ``file:function`` under the installed ``torchrl`` package.

**The env.** The toy env's Gymnasium face (:func:`xpspec.refimpl.toy_envs.gym_env.make_env_fns`)
goes into ``gymnasium.vector.SyncVectorEnv`` with ``AutoresetMode.DISABLED`` (the mode
``GymWrapper`` prefers) and then into ``GymWrapper`` (``envs/libs/gym.py``), so TorchRL's own
partial reset (``step_and_maybe_reset`` with a ``_reset`` mask) restarts an env.
``InitTracker`` marks reset observations (``is_init``); a ``TensorDictPrimer`` holds the toy
policy's state and resets it at every reset. The policy reads that state, acts
``state % num_actions`` and writes ``("next", "policy_state") = state + 1``.

**Frames and rows.** TorchRL stores *frames*: a root observation ``o_t`` with its action, and
under ``"next"`` the reward into ``t + 1``, ``o_{t+1}`` and the done flags. The collector
resets in the step that ends an episode, so an episode of ``L`` transitions is ``L`` frames
with roots ``t = 0 .. L - 1``; its final observation is only the last frame's
``("next", "observation")``. A frame is named by its root item with the spec's row fields:
FIRST where ``is_init``, else MID; the reward into ``t`` (0 at FIRST, else the previous
frame's ``("next", "reward")``); discount 0 where the root's ``terminated`` is set, else 1
(the reset in the same step means it never is). No frame is a LAST row, so where the spec's
auto-reset takes ``L + 1`` vector steps per episode TorchRL takes ``L`` (clause
``timestep.auto-reset``). ``run_env`` records every time step the collector produced: the
frame that ends an episode is followed by its LAST time step (read from ``"next"``, action
``-1``: none is taken at it), the spec's rule for same-step resets.

**Trainer** (``run_trainer``). ``Trainer`` with ``ReplayBufferTrainer`` (``trainers/
trainers.py``): one iteration is one collector batch of ``frames_per_batch = u * B``
frames (integer ``u``), extended into a ``ReplayBuffer`` over ``LazyTensorStorage(capacity *
B, ndim=2)`` (one ring of ``capacity`` frames per env); then, once ``collected_frames >=
init_random_frames`` (``initial_collect_steps``; ``+ 1`` for the strict gate), one train call
of ``optim_steps_per_batch = num_updates_per_train_iter`` samples of ``mini_batch_size *
mini_batch_length`` frames. The collector also acts at random for the first
``ceil(init_random_frames / frames_per_batch)`` batches, without calling the policy. Hooks are
the Trainer's ``post_optim`` (``after_update``) and ``post_steps`` (``after_train_iter``) ops;
the counter is the collector's batch count (per iteration) or the Trainer's ``_optim_count``
(per mini-batch). Windows of one item use ``RandomSampler``; longer ones ``SliceSampler`` over
``("collector", "traj_ids")``, ``strict_length`` unless the boundary policy is ``pad``
(``pad_output``). When no stored trajectory holds a slice, ``SliceSampler`` raises and
``Trainer.train`` stops: the trace ends there (header ``stopped``).

**Preprocessing** (``run_trainer`` with a preprocessor), written as a TorchRL user writes it.
The trainer's stores are read back from the storage at the indices ``extend`` returns, each
row from what the storage holds: a stored frame's reward into its root is the
``("next", "reward")`` of the env's previous *stored* frame, which after an exclusion is not
the root's predecessor (the storage holds no reward into the root; the row names what it
implies). Per-step
transforms and exclusions are the collector's ``postproc`` (``collectors/_single.py``,
``_postproc``): a reward transform rescales ``("next", "reward")`` (a frame holds no reward
into its root, so a FIRST keeps 0); a step-type overwrite at ``t`` sets or clears ``is_init``,
one of truncated ends to MID clears ``("next", "truncated")`` and ``("next", "done")``
(overwrites to a LAST root, or of a truncated end to FIRST, are refused: no frame holds
them); an exclusion sets ``("collector", "mask")``, which
``ReplayBufferTrainer(flatten_tensordicts=True).extend`` applies (``trainers/trainers.py``)
before one write per batch into a 1-D ``LazyTensorStorage(capacity * B)``, env after env;
task ids come from the env's info (``default_info_dict_reader``, ``envs/gym_like.py``). The
hook records what it excluded, with its reason. Episode-delayed writes are
``Collector(trajs_per_batch=1, trajs_per_write=1, replay_buffer=...)`` (``collectors/_base.py``,
``_iter_by_trajectories``): each finished trajectory is one write of its ``L`` frames into a
1-D storage, after the collector batch that finished it, through a replay-buffer transform
whose inverse (run by ``ReplayBuffer.extend``, ``data/replay_buffers/replay_buffers/base.py``)
sets the annotation and drops the episodes ``keep`` rejects by returning ``None``, for which
``extend`` writes nothing; the Trainer gets ``None``
batches and gates on the buffer's write count (``Trainer(replay_buffer=...)``,
``Trainer.train``). What the collector still holds is its partial trajectories
(``_traj_assembly``): the iteration ends count them and the run end names them, under either
pending policy (TorchRL never writes them). A write with no frame, or a sample from a buffer
nothing was written to, raises in TorchRL; the trace ends there (header ``stopped``).

**Replay, learner, relabel.** ``run_replay`` fills the same storage one collector step at a
time and samples as above; a draw TorchRL refuses (``RuntimeError`` from an empty storage or
when no trajectory holds a slice) is recorded as an empty draw, TorchRL's way of saying there
is no valid window (``replay.no-window``); its stores name the frames of each collector
step it writes whole, not read back. ``run_learner`` collects each env's frames of its first ``steps``
time steps (``set_truncated=True`` marks the cut), runs ``GAE`` (and ``GAE(average_gae=True)``
for normalised advantages) over all of them, ``MultiStep`` + ``TD0Estimator`` for n-step
targets, and the PPO scripts' ``SamplerWithoutReplacement`` epochs. ``run_relabel`` writes
each env's frames whole into ``HERReplayBuffer`` (1-D storage) with ``achieved_goal_key=
("next", "achieved_goal")``; its stores name every time step the frames it writes hold
(not read back).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import torch

with warnings.catch_warnings():  # TorchRL's import warns of its own deprecated classes
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        from gymnasium.vector import AutoresetMode, SyncVectorEnv
        from tensordict import TensorDict, TensorDictBase
        from tensordict.nn import TensorDictModule
        from torchrl.collectors import Collector
        from torchrl.data import (
            HERReplayBuffer,
            LazyTensorStorage,
            RandomSampler,
            ReplayBuffer,
            SamplerWithoutReplacement,
            SliceSampler,
            TensorDictReplayBuffer,
            Unbounded,
        )
        from torchrl.data.postprocs import MultiStep
        from torchrl.envs import (
            Compose,
            GymWrapper,
            InitTracker,
            TensorDictPrimer,
            Transform,
            TransformedEnv,
        )
        from torchrl.envs.gym_like import default_info_dict_reader
        from torchrl.objectives.value import GAE, TD0Estimator
        from torchrl.trainers import ReplayBufferTrainer, Trainer
    except ImportError as exc:  # pragma: no cover - exercised only without the framework
        raise ImportError(
            "xpspec.adapters.torchrl drives TorchRL 0.14.1 with tensordict 0.14.3, which are not "
            "importable here: install them with `pip install -e '.[adapter-torchrl]' -c "
            f"constraints/torch.txt` ({exc})"
        ) from exc

from xpspec.protocol.adapter import PROTOCOL_VERSION, AdapterInfo, Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeSteps,
    ExcludeTasks,
    Identity,
    OverwriteStepType,
    PreprocessorSpec,
    RewardTransform,
)
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import (
    EnvScenario,
    LearnerScenario,
    RelabelScenario,
    ReplayScenario,
    TrainerScenario,
)
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import (
    Advantages,
    EnvStep,
    Event,
    Exclude,
    Hook,
    IterationEnd,
    IterationStart,
    NStep,
    Relabel,
    RunEnd,
    Sampled,
    Shard,
    Store,
    Trace,
    TrainCall,
    Update,
    UpdatePlan,
)
from xpspec.refimpl.toy_envs.gym_env import ToyEnv, make_env_fns

__all__ = ["TorchRLAdapter"]

_FIRST, _MID, _LAST = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)
_SOURCE = "https://github.com/pytorch/rl/blob/v0.14.1/torchrl"
_NO_SLICE = "Did not find a single trajectory with sufficient length"
"""The start of the ``RuntimeError`` TorchRL 0.14.1's ``SliceSampler`` raises when no stored
trajectory holds a slice (``data/replay_buffers/samplers/slice.py``, ``_sample_slices``)."""
_EMPTY = "Cannot sample from an empty storage"
"""The ``RuntimeError`` TorchRL 0.14.1's samplers raise on an empty storage
(``data/replay_buffers/samplers/random.py``, ``slice.py``)."""

_EMPTY_WRITE = "Expected at least one element in extend"
"""The start of the ``RuntimeError`` TorchRL 0.14.1's ``RoundRobinWriter.extend`` raises on a
write with no frame (``data/replay_buffers/writers/round_robin.py``)."""
_UNINITIALIZED = "Cannot get elements out of a non-initialized storage"
"""The ``RuntimeError`` TorchRL 0.14.1's ``TensorStorage.get`` raises before the first write
(``data/replay_buffers/storages/tensor.py``), e.g. when ``SliceSampler`` reads its
trajectory ids from a buffer nothing was written to."""
_STOPS = (_NO_SLICE, _EMPTY, _EMPTY_WRITE, _UNINITIALIZED)
_TASK_ID = "task_id"
_MASK = ("collector", "mask")

Item = tuple[int, int, int]


# -- quiet, seeded execution ----------------------------------------------------------------------
@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Run with TorchRL's info logging and warnings silenced and the global torch generator
    (used by ``env.rand_action`` during ``init_random_frames``) seeded, restoring both."""
    logger = logging.getLogger("torchrl")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
            warnings.simplefilter("ignore")
            torch.manual_seed(seed)
            yield
    finally:
        logger.setLevel(level)


# -- env and policy ---------------------------------------------------------------------------------
class _CountingPolicy(torch.nn.Module):
    """The toy policy: its state counts steps since the last reset; it acts ``state % n``."""

    def __init__(self, num_actions: int) -> None:
        super().__init__()
        self.num_actions = num_actions

    def forward(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return state % self.num_actions, state + 1


def _policy(spec: EnvSpec) -> TensorDictModule:
    return TensorDictModule(
        _CountingPolicy(spec.num_actions),
        in_keys=["policy_state"],
        out_keys=["action", ("next", "policy_state")],
    )


def _with_transforms(base: Any) -> TransformedEnv:
    primer = TensorDictPrimer(
        policy_state=Unbounded(shape=base.batch_size, dtype=torch.int64), expand_specs=False
    )
    return TransformedEnv(base, Compose(InitTracker(), primer))


def _vector_env(spec: EnvSpec, seed: int, task_ids: bool = False) -> TransformedEnv:
    """All envs of ``spec`` as one batched TorchRL env, reset by TorchRL itself; with
    ``task_ids``, the toy env's ``info["task_id"]`` is read into each frame
    (``default_info_dict_reader``, ``envs/gym_like.py``)."""
    vector = SyncVectorEnv(make_env_fns(spec, seed), autoreset_mode=AutoresetMode.DISABLED)
    base = GymWrapper(vector, categorical_action_encoding=True)
    if task_ids:
        shape = Unbounded(shape=base.batch_size, dtype=torch.int64)
        base.set_info_dict_reader(default_info_dict_reader([_TASK_ID], spec={_TASK_ID: shape}))
    return _with_transforms(base)


def _single_env(spec: EnvSpec, env: int, seed: int) -> TransformedEnv:
    return _with_transforms(GymWrapper(ToyEnv(spec, env, seed), categorical_action_encoding=True))


def _collector(
    env: TransformedEnv, spec: EnvSpec, frames_per_batch: int, total_frames: int, **kwargs: Any
) -> Collector:
    return Collector(
        env,
        policy=_policy(spec),
        frames_per_batch=frames_per_batch,
        total_frames=total_frames,
        **kwargs,
    )


# -- frames as rows ---------------------------------------------------------------------------------
def _items(observation: torch.Tensor) -> list[Item]:
    """The ``(env, episode, t)`` of each observation of a ``[..., 3]`` tensor, flattened."""
    flat = observation.reshape(-1, 3).to(torch.float64).to(torch.int64).tolist()
    return [(row[0], row[1], row[2]) for row in flat]


def _flags(frames: TensorDictBase, key: Any) -> list[bool]:
    return [bool(v) for v in frames.get(key).reshape(-1).tolist()]


def _values(frames: TensorDictBase, key: Any) -> list[float]:
    return [float(v) for v in frames.get(key).reshape(-1).tolist()]


def _ints(frames: TensorDictBase, key: Any) -> list[int]:
    return [int(v) for v in frames.get(key).reshape(-1).tolist()]


@dataclass(frozen=True)
class _Row:
    """A frame's root as a spec row, with what the policy received and did."""

    item: Item
    step_type: int
    reward: float
    discount: float
    policy_state: int
    action: int


@dataclass
class _RowView:
    """Translates frames into rows: remembers, per env, the reward into its current root
    (the previous frame's ``("next", "reward")``) and, per item, the row it became."""

    rewards: dict[int, float] = field(default_factory=dict)
    rows: dict[Item, _Row] = field(default_factory=dict)

    def roots(self, frames: TensorDictBase) -> list[_Row]:
        """The rows of one vector step of frames (any shape; flattened in order)."""
        items = _items(frames.get("observation"))
        first = _flags(frames, "is_init")
        terminal = _flags(frames, "terminated")
        state = _ints(frames, "policy_state")
        action = _ints(frames, "action")
        reward_next = _values(frames, ("next", "reward"))
        out = []
        for i, item in enumerate(items):
            reward = 0.0 if first[i] else self.rewards.get(item[0], 0.0)
            step_type, discount = _FIRST if first[i] else _MID, 0.0 if terminal[i] else 1.0
            row = _Row(item, step_type, reward, discount, state[i], action[i])
            self.rows[item] = row
            self.rewards[item[0]] = reward_next[i]
            out.append(row)
        return out


def _lasts(frames: TensorDictBase) -> list[tuple[Item, float, float, int]]:
    """``(item, reward, discount, policy_state)`` of each LAST time step carried in the
    ``("next", ...)`` of a frame that ends an episode."""
    done = _flags(frames, ("next", "done"))
    items = _items(frames.get(("next", "observation")))
    reward = _values(frames, ("next", "reward"))
    terminated = _flags(frames, ("next", "terminated"))
    state = _ints(frames, ("next", "policy_state"))
    return [
        (items[i], reward[i], 0.0 if terminated[i] else 1.0, state[i])
        for i in range(len(items))
        if done[i]
    ]


def _env_step(iteration: int, rows: Sequence[_Row]) -> EnvStep:
    return EnvStep(
        iteration,
        tuple(r.item[0] for r in rows),
        tuple(r.item[1] for r in rows),
        tuple(r.item[2] for r in rows),
        tuple(r.step_type for r in rows),
        tuple(r.reward for r in rows),
        tuple(r.discount for r in rows),
        tuple(r.policy_state for r in rows),
        tuple(r.action for r in rows),
    )


def _store(iteration: int, rows: Sequence[_Row]) -> Store:
    return Store(
        iteration,
        tuple(r.item[0] for r in rows),
        tuple(r.item[1] for r in rows),
        tuple(r.item[2] for r in rows),
        tuple(r.step_type for r in rows),
        tuple(r.reward for r in rows),
        tuple(r.discount for r in rows),
        (0.0,) * len(rows),
    )


def _windows(
    sample: TensorDictBase, length: int, padded: bool
) -> tuple[tuple[Item | None, ...], ...]:
    """A flat sampler output as windows of ``length`` items. With ``padded``, TorchRL's
    ``pad_output`` convention applies: a slice shorter than ``length`` is completed by
    repeating its last real step, so an item equal to its predecessor is padding (``None``;
    a real window never holds an item twice)."""
    items = _items(sample.get("observation"))
    out = []
    for i in range(0, len(items), length):
        window: list[Item | None] = list(items[i : i + length])
        if padded:
            for j in range(len(window) - 1, 0, -1):
                if items[i + j] == items[i + j - 1]:
                    window[j] = None
        out.append(tuple(window))
    return tuple(out)


def _buffer(capacity: int, num_envs: int, sampler: Any, seed: int, batch: int | None) -> Any:
    """``ReplayBuffer`` over ``LazyTensorStorage(capacity * num_envs, ndim=2)``: one ring of
    ``capacity`` frames per env, written along time. (``TensorDictReplayBuffer`` 0.14.1
    cannot extend such a storage with a ``[B, 1]`` batch: its ``_set_index_in_td`` raises
    "tensor shape is incompatible with dest shape"; the plain buffer writes the same data.)"""
    return ReplayBuffer(
        storage=LazyTensorStorage(capacity * num_envs, ndim=2),
        sampler=sampler,
        batch_size=batch,
        generator=torch.Generator().manual_seed(seed),
    )


def _sampler(sampling: SamplingSpec) -> Any:
    """TorchRL's sampler for a sampling spec: ``RandomSampler`` for uniform single items,
    else ``SliceSampler`` over the collector's trajectory ids (``strict_length`` unless the
    boundary policy is ``pad``, which maps to ``pad_output``)."""
    if sampling.period != 1:
        raise Unsupported(
            f"period {sampling.period}: TorchRL 0.14.1's samplers have no grid of window "
            "starts (SliceSampler draws any start inside a trajectory)",
            f"{_SOURCE}/data/replay_buffers/samplers/slice.py",
        )
    if sampling.distribution == "env-balanced":
        raise Unsupported(
            "distribution 'env-balanced': TorchRL 0.14.1's samplers draw uniformly over "
            "stored items (RandomSampler) or over trajectories (SliceSampler), never per env",
            f"{_SOURCE}/data/replay_buffers/samplers/slice.py",
        )
    length = sampling.window_length
    if length == 1 and sampling.distribution == "uniform-windows":
        return RandomSampler()
    pad = sampling.boundary == "pad"
    return SliceSampler(
        slice_len=length,
        traj_key=("collector", "traj_ids"),
        strict_length=not pad,
        pad_output=pad,
    )


# -- preprocessing: the user's hooks ----------------------------------------------------------------
_Exclusion = tuple[list[Item], str]


def _flat_buffer(capacity: int, sampler: Any, seed: int, batch: int, **kwargs: Any) -> Any:
    """``ReplayBuffer`` over a 1-D ``LazyTensorStorage(capacity)``, written in write order:
    what a masked ``[B, T]`` batch (flattened by the mask) and whole trajectories need."""
    return ReplayBuffer(
        storage=LazyTensorStorage(capacity),
        sampler=sampler,
        batch_size=batch,
        generator=torch.Generator().manual_seed(seed),
        **kwargs,
    )


def _selected(spec: PreprocessorSpec, batch: TensorDictBase) -> torch.Tensor:
    """The frames an exclusion selects, by their root observation ``(env, episode, t)`` or
    the task id read from the env's info."""
    observation = batch.get("observation")
    episode, t = observation[..., 1].to(torch.int64), observation[..., 2].to(torch.int64)
    if isinstance(spec, ExcludeSteps):
        return t % spec.every == spec.offset
    if isinstance(spec, ExcludeEpisodes):
        return episode % spec.every == spec.offset
    assert isinstance(spec, ExcludeTasks)
    return torch.isin(batch.get(_TASK_ID), torch.tensor(spec.task_ids, dtype=torch.int64))


_REASONS = {ExcludeSteps: "step", ExcludeEpisodes: "episode", ExcludeTasks: "task"}


class _StepHook:
    """The user's collector ``postproc`` (``collectors/_single.py``, ``_postproc``): it edits
    each collector batch before the Trainer's ``batch_process`` ops see it. A reward
    transform rescales ``("next", "reward")``; a step-type overwrite at ``t`` sets
    ``is_init`` of those roots (FIRST) or clears it (MID), and at truncated ends clears
    ``("next", "truncated")`` and ``("next", "done")`` so the episode reads as going on; an
    exclusion sets ``("collector", "mask")`` to the frames it keeps, which
    ``ReplayBufferTrainer(flatten_tensordicts=True).extend`` applies before writing
    (``trainers/trainers.py``), and notes what it dropped, with its reason."""

    def __init__(self, spec: PreprocessorSpec, excluded: list[_Exclusion]) -> None:
        self.spec = spec
        self.excluded = excluded

    def __call__(self, batch: TensorDictBase) -> TensorDictBase:
        spec = self.spec
        if isinstance(spec, RewardTransform):
            reward = batch.get(("next", "reward"))
            batch.set(("next", "reward"), reward * float(spec.scale) + float(spec.shift))
        elif isinstance(spec, OverwriteStepType) and spec.when == "t":
            hit = batch.get("observation")[..., 2:3].to(torch.int64) == spec.t
            batch.set("is_init", torch.where(hit, spec.to == "FIRST", batch.get("is_init")))
        elif isinstance(spec, OverwriteStepType):
            hit = batch.get(("next", "truncated"))
            for key in (("next", "truncated"), ("next", "done")):
                batch.set(key, batch.get(key) & ~hit)
        else:
            selected = _selected(spec, batch)
            batch.set(_MASK, ~selected)
            if bool(selected.any()):
                dropped = _items(batch.get("observation")[selected])
                self.excluded.append((dropped, _REASONS[type(spec)]))
        return batch


class _Annotate(Transform):
    """The user's replay-buffer transform for episode-delayed writes. Its inverse runs on
    every write (``ReplayBuffer.extend``, ``data/replay_buffers/replay_buffers/base.py``),
    which ``Collector(trajs_per_batch=..., trajs_per_write=1, replay_buffer=...)`` makes once
    per completed trajectory (``collectors/_base.py``, ``_iter_by_trajectories``): it sets
    ``annotation`` to 1.0 if the trajectory terminated, else 0.0, and drops a trajectory
    whose outcome ``keep`` rejects by returning ``None`` (``extend`` then writes nothing),
    noting it excluded (reason ``outcome``)."""

    def __init__(self, keep: str, excluded: list[_Exclusion]) -> None:
        super().__init__(in_keys_inv=[("next", "terminated")], out_keys_inv=["annotation"])
        self.keep = keep
        self.excluded = excluded

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase | None:
        success = bool(tensordict.get(("next", "terminated"))[-1].all())
        annotation = torch.full(tensordict.shape, float(success), dtype=torch.float32)
        tensordict.set("annotation", annotation)
        if self.keep != "all" and (self.keep == "success") != success:
            self.excluded.append((_items(tensordict.get("observation")), "outcome"))
            return None  # ReplayBuffer.extend writes nothing for a None
        return tensordict


def _partial_items(collector: Collector) -> list[Item]:
    """The items of the trajectories the collector still assembles (``_traj_assembly``, set
    by ``_iter_by_trajectories``): frames it holds and never wrote, in env, then unroll
    order."""
    assembly = getattr(collector, "_traj_assembly", None)
    if assembly is None:
        return []
    items = [i for chunks in assembly[0].values() for c in chunks for i in _items(c["observation"])]
    return sorted(items)


@dataclass(frozen=True)
class _StoredRow:
    """A frame read back from the buffer's storage, as a spec row."""

    item: Item
    step_type: int
    reward: float
    discount: float
    annotation: float


@dataclass
class _StoredView:
    """Reads frames back from the storage as rows, each from what the storage holds: the step
    type from the stored ``is_init``; the discount from the stored root ``terminated`` (0 where
    the root is a terminal observation, else 1); the reward into a root is the stored
    ``("next", "reward")`` of the env's previous stored frame, 0 at FIRST or when the env has
    none. A frame's root holds no reward of its own, so where the previous stored frame is
    not this root's predecessor (an exclusion left that one out) the row names the reward
    the previous stored frame carries, not the reward into the root: what the storage
    implies for it."""

    last: dict[int, float] = field(default_factory=dict)

    def rows(self, frames: TensorDictBase) -> list[_StoredRow]:
        items = _items(frames.get("observation"))
        first = _flags(frames, "is_init")
        terminal = _flags(frames, "terminated")
        reward_next = _values(frames, ("next", "reward"))
        keys = frames.keys()
        annotation = _values(frames, "annotation") if "annotation" in keys else [0.0] * len(items)
        out = []
        for i, item in enumerate(items):
            reward = 0.0 if first[i] else self.last.get(item[0], 0.0)
            self.last[item[0]] = reward_next[i]
            step_type = _FIRST if first[i] else _MID
            discount = 0.0 if terminal[i] else 1.0
            out.append(_StoredRow(item, step_type, reward, discount, annotation[i]))
        return out


def _stored_event(iteration: int, rows: Sequence[_StoredRow]) -> Store:
    return Store(
        iteration,
        tuple(r.item[0] for r in rows),
        tuple(r.item[1] for r in rows),
        tuple(r.item[2] for r in rows),
        tuple(r.step_type for r in rows),
        tuple(r.reward for r in rows),
        tuple(r.discount for r in rows),
        tuple(r.annotation for r in rows),
    )


def _read_back(buffer: Any, index: torch.Tensor) -> TensorDictBase:
    """The frames a write put in the storage, read from it at the indices ``extend``
    returned (``(time, env)`` pairs for the ``ndim=2`` storage, in time-major order)."""
    if index.ndim == 2:
        return buffer.storage[tuple(index.unbind(-1))]
    return buffer.storage[index]


# -- trainer ----------------------------------------------------------------------------------------
def _preprocess_support(spec: PreprocessorSpec) -> None:
    """Raise :class:`Unsupported` for the step-type overwrites a frame cannot hold: a root is
    FIRST (``is_init``) or MID, never LAST, and the final observation of a truncated episode
    lives only under ``"next"``, where nothing marks a FIRST."""
    if not isinstance(spec, OverwriteStepType):
        return
    if (spec.when == "t" and spec.to == "LAST") or (
        spec.when == "truncated-last" and spec.to == "FIRST"
    ):
        raise Unsupported(
            f"OverwriteStepType(to={spec.to!r}, when={spec.when!r}): a TorchRL 0.14.1 frame's "
            "root is marked reset (is_init) or not, never LAST, and a truncated episode's "
            "last observation is only the ('next', 'observation') of its last frame",
            f"{_SOURCE}/envs/transforms/transforms.py",
        )


def _trainer_support(sc: TrainerScenario) -> None:
    """Raise :class:`Unsupported` for every knob TorchRL's Collector + Trainer loop cannot
    express."""
    cfg = sc.trainer
    trainer_py = f"{_SOURCE}/trainers/trainers.py"
    if cfg.mode == "on-policy" or cfg.whole_buffer:
        raise Unsupported(
            "whole-buffer / on-policy training: TorchRL 0.14.1's Trainer samples "
            "optim_steps_per_batch batches from its replay buffer; its on-policy scripts "
            "iterate transitions, not chunks of mini_batch_length items with clearing",
            trainer_py,
        )
    u = cfg.unroll_length
    if u.denominator != 1 or u == 0:
        raise Unsupported(
            f"unroll_length {u}: a Collector batch is frames_per_batch = u*B frames, "
            "rounded up to a multiple of the number of envs (collectors/_single.py "
            "_setup_frames_per_batch); only integer u >= 1 is expressible",
            f"{_SOURCE}/collectors/_single.py",
        )
    _preprocess_support(sc.preprocess)
    if cfg.num_env_steps and cfg.num_iterations:
        raise Unsupported(
            "num_env_steps with num_iterations: the Trainer stops training when the "
            "collector reaches total_frames (no interaction-free iterations)",
            trainer_py,
        )
    if cfg.num_env_steps and cfg.env_step_count != "all":
        raise Unsupported(
            "env_step_count 'non-first': the Collector counts every frame", trainer_py
        )
    if cfg.warmup_gate == "size>=":
        raise Unsupported(
            "warmup_gate 'size>=': the Trainer gates on collected frames "
            "(collected_frames >= collector.init_random_frames), not on the buffer size",
            trainer_py,
        )
    if cfg.drain is not None:  # pragma: no cover - excluded by u == 0 above
        raise Unsupported("drain mode: no asynchronous unroll queue", trainer_py)


class _TrainerRecorder:
    """Records a Trainer run: iterations at ``collector.rollout``, env steps and stores at
    the replay buffer's ``extend`` (the stores read back from its storage), exclusions
    where the user's hook noted them, train calls at ``trainer.optim_steps``, updates in the
    loss, hooks at the Trainer's ``post_optim`` and ``post_steps`` ops, and what the
    collector still holds (its partial trajectories) at every iteration end and the run
    end."""

    def __init__(self, sc: TrainerScenario) -> None:
        self.sc = sc
        self.length = sc.trainer.mini_batch_length
        self.delayed = isinstance(sc.preprocess, EpisodeDelayed)
        self.events: list[Event] = []
        self.view = _RowView()
        self.stored_view = _StoredView()
        self.pending: list[list[_Row]] = []
        self.excluded: list[_Exclusion] = []
        self.iteration = 0
        self.calls = 0
        self.updates = 0
        self.stored = 0
        self.trained = False
        self.weight = torch.nn.Parameter(torch.zeros(()))
        self.collector: Collector | None = None
        self.trainer: Trainer | None = None

    # -- the counter: the collector's batch count, or the Trainer's optimisation step count
    def counter(self) -> int:
        assert self.collector is not None and self.trainer is not None
        if self.sc.trainer.counter_mode == "per-mini-batch":
            return int(self.trainer._optim_count)
        return int(self.collector._iter) + 1

    def frames(self) -> int:
        """Frames the collector produced (the Trainer's ``collected_frames`` counts what
        the mask kept or the buffer's writes instead)."""
        assert self.collector is not None
        return int(self.collector._frames)

    def attach(self, collector: Collector, trainer: Trainer, buffer: Any) -> None:
        self.collector, self.trainer = collector, trainer
        rollout, extend, optim_steps = collector.rollout, buffer.extend, trainer.optim_steps

        def recorded_rollout() -> TensorDictBase:
            self.iteration += 1
            self.trained = False
            unroll = int(self.sc.trainer.unroll_length)
            self.events.append(IterationStart(self.iteration, self.counter(), unroll))
            batch = rollout()
            self.pending = [self.view.roots(batch[..., j]) for j in range(batch.shape[-1])]
            if self.delayed:  # trajectories are written once the whole batch is in
                self.events.extend(_env_step(self.iteration, rows) for rows in self.pending)
                self.pending = []
            return batch

        def recorded_extend(data: TensorDictBase, *args: Any, **kwargs: Any) -> Any:
            try:
                index = extend(data, *args, **kwargs)
            except RuntimeError:
                self._exclusions()  # what the hook dropped before the write failed
                raise
            if index.numel() == 0:  # the user's transform dropped the whole write
                self._exclusions()
                return index
            self._stores(data, _read_back(buffer, index))
            return index

        def recorded_optim_steps(batch: TensorDictBase) -> None:
            self.trained = True
            self.events.append(
                TrainCall(self.iteration, self.calls, self.counter(), "trained", self.stored)
            )
            self.updates = 0
            try:
                optim_steps(batch)
            finally:
                self.calls += 1

        collector.rollout = recorded_rollout
        buffer.extend = recorded_extend
        trainer.optim_steps = recorded_optim_steps
        trainer.register_op("post_optim", self._after_update)
        trainer.register_op("post_steps", self._after_iteration)

    def _exclusions(self) -> None:
        """Env steps not yet recorded, then what the user's hook excluded since."""
        self.events.extend(_env_step(self.iteration, rows) for rows in self.pending)
        self.pending = []
        for items, reason in self.excluded:
            self.events.append(
                Exclude(
                    self.iteration,
                    tuple(i[0] for i in items),
                    tuple(i[1] for i in items),
                    tuple(i[2] for i in items),
                    reason,
                )
            )
        self.excluded.clear()

    def _stores(self, data: TensorDictBase, stored: TensorDictBase) -> None:
        """Stores of one ``extend``, read back from the storage. A ``[B, T]`` batch into the
        ``ndim=2`` storage is written column by column (vector step ``j``, then the frames of
        column ``j``; nothing samples in between, so this order is the write's own): its env
        steps were held back to interleave. Any other write is one store in write order."""
        rows = self.stored_view.rows(stored)
        if data.ndim == 2 and len(self.pending) == data.shape[-1]:
            width = data.shape[0]
            for j, unrolled in enumerate(self.pending):
                self.events.append(_env_step(self.iteration, unrolled))
                self._store(rows[j * width : (j + 1) * width])
            self.pending = []
        else:
            self._exclusions()
            self._store(rows)

    def _store(self, rows: Sequence[_StoredRow]) -> None:
        self.events.append(_stored_event(self.iteration, rows))
        self.stored += len(rows)

    def loss(self, batch: TensorDictBase) -> TensorDictBase:
        """The trivial loss: records the sampled windows and returns a zero loss."""
        windows = _windows(batch, self.length, self.sc.sampling.boundary == "pad")
        mask = tuple(tuple(0 if item is None else 1 for item in w) for w in windows)
        self.events.append(
            Update(self.iteration, self.calls, self.updates, self.counter(), windows, mask)
        )
        return TensorDict({"loss_toy": (self.weight * 0.0).sum()}, [])

    def _after_update(self) -> None:
        self.events.append(Hook(self.iteration, "after_update"))
        self.updates += 1

    def _after_iteration(self) -> None:
        assert self.trainer is not None and self.collector is not None
        self._exclusions()
        if not self.trained:
            self.events.append(
                TrainCall(self.iteration, self.calls, self.counter(), "warmup", self.stored)
            )
            self.calls += 1
        self.events.append(Hook(self.iteration, "after_train_iter"))
        held = len(_partial_items(self.collector))
        self.events.append(
            IterationEnd(self.iteration, self.counter(), self.frames(), self.stored, held)
        )

    def trace(self, stopped: str = "") -> Trace:
        assert self.collector is not None
        held = _partial_items(self.collector)
        policy = self.sc.trainer.pending_at_end
        events = [
            *self.events,
            RunEnd(
                self.iteration,
                self.frames(),
                policy,
                tuple(i[0] for i in held),
                tuple(i[1] for i in held),
                tuple(i[2] for i in held),
            ),
        ]
        header: dict[str, Any] = {"producer": "torchrl", "seed": self.sc.seed}
        if stopped:
            header["stopped"] = stopped
        return Trace(tuple(events), header)


def _run_trainer(sc: TrainerScenario) -> Trace:
    _trainer_support(sc)
    cfg, spec, hook = sc.trainer, sc.env, sc.preprocess
    sampler = _sampler(sc.sampling)
    num_envs, u = spec.num_envs, int(cfg.unroll_length)
    frames_per_batch = u * num_envs
    total = cfg.num_iterations * frames_per_batch if cfg.num_iterations else cfg.num_env_steps
    # The Trainer trains once collected_frames >= init_random_frames; for integers,
    # "stored > n" is "stored >= n + 1".
    warmup = cfg.initial_collect_steps + (1 if cfg.warmup_gate == "stored>" else 0)
    batch = (cfg.mini_batch_size or num_envs) * cfg.mini_batch_length
    masked = isinstance(hook, (ExcludeSteps, ExcludeEpisodes, ExcludeTasks))
    recorder = _TrainerRecorder(sc)
    with _seeded(sc.seed):
        env = _vector_env(spec, sc.seed, task_ids=isinstance(hook, ExcludeTasks))
        writes: dict[str, Any] = {}
        if isinstance(hook, EpisodeDelayed):
            transform = _Annotate(hook.keep, recorder.excluded)
            buffer = _flat_buffer(
                cfg.capacity * num_envs, sampler, sc.seed, batch, transform=transform
            )
            writes = {"trajs_per_batch": 1, "trajs_per_write": 1, "replay_buffer": buffer}
        elif masked:
            buffer = _flat_buffer(cfg.capacity * num_envs, sampler, sc.seed, batch)
        else:
            buffer = _buffer(cfg.capacity, num_envs, sampler, sc.seed, batch)
        if not isinstance(hook, (Identity, EpisodeDelayed)):
            writes = {"postproc": _StepHook(hook, recorder.excluded)}
        collector = _collector(
            env, spec, frames_per_batch, total, init_random_frames=warmup or None, **writes
        )
        trainer = Trainer(
            collector=collector,
            total_frames=total,
            frame_skip=1,
            optim_steps_per_batch=cfg.num_updates_per_train_iter,
            loss_module=recorder.loss,
            optimizer=torch.optim.SGD([recorder.weight], lr=0.0),
            progress_bar=False,
            save_trainer_interval=2**62,
            log_interval=2**62,
            auto_log_optim_steps=False,
            replay_buffer=buffer if "replay_buffer" in writes else None,
        )
        ReplayBufferTrainer(buffer, batch_size=batch, flatten_tensordicts=masked).register(trainer)
        recorder.attach(collector, trainer, buffer)
        try:
            trainer.train()
        except RuntimeError as exc:
            if not any(stop in str(exc) for stop in _STOPS):
                raise
            collector.shutdown()
            return recorder.trace(stopped=f"RuntimeError: {exc}")
    return recorder.trace()


# -- env --------------------------------------------------------------------------------------------
def _run_env(sc: EnvScenario) -> Trace:
    spec = sc.env
    events: list[Event] = []
    view = _RowView()
    with _seeded(sc.seed):
        frames = spec.num_envs * sc.steps
        collector = _collector(_vector_env(spec, sc.seed), spec, frames, frames)
        for batch in collector:
            for j in range(batch.shape[-1]):
                column = batch[..., j]
                events.append(_env_step(0, view.roots(column)))
                lasts = _lasts(column)
                if lasts:
                    events.append(
                        EnvStep(
                            0,
                            tuple(i[0] for i, _, _, _ in lasts),
                            tuple(i[1] for i, _, _, _ in lasts),
                            tuple(i[2] for i, _, _, _ in lasts),
                            (_LAST,) * len(lasts),
                            tuple(r for _, r, _, _ in lasts),
                            tuple(d for _, _, d, _ in lasts),
                            tuple(s for _, _, _, s in lasts),
                            (-1,) * len(lasts),
                        )
                    )
        collector.shutdown()
    return Trace(tuple(events), {"producer": "torchrl"})


# -- replay -----------------------------------------------------------------------------------------
def _run_replay(sc: ReplayScenario) -> Trace:
    spec = sc.env
    sampler = _sampler(sc.sampling)
    length = sc.sampling.window_length
    events: list[Event] = []
    view = _RowView()
    with _seeded(sc.seed):
        buffer = _buffer(sc.capacity, spec.num_envs, sampler, sc.seed, None)
        if sc.fill_steps:
            collector = _collector(
                _vector_env(spec, sc.seed),
                spec,
                spec.num_envs,
                spec.num_envs * sc.fill_steps,
            )
            for batch in collector:
                events.append(_store(0, view.roots(batch)))
                buffer.extend(batch)
            collector.shutdown()
        for draw in range(sc.draws):
            try:
                sample = buffer.sample(sc.batch_size * length)
            except RuntimeError as exc:  # TorchRL's answer to "no valid window"
                if _NO_SLICE not in str(exc) and _EMPTY not in str(exc):
                    raise
                events.append(Sampled(draw, ()))
                continue
            padded = sc.sampling.boundary == "pad"
            events.append(Sampled(draw, _windows(sample, length, padded)))
    return Trace(tuple(events), {"producer": "torchrl"})


# -- learner ----------------------------------------------------------------------------------------
def _transitions_observed(spec: EnvSpec, seed: int, env: int, steps: int) -> int:
    """Transitions within the first ``steps`` time steps of ``env`` (a LAST and the FIRST
    after it are two time steps, one transition apart from neither): the number of frames
    TorchRL collects for exactly those time steps."""
    remaining, episode, count = steps, 0, 0
    while remaining > 0:
        length = spec.episode(seed, env, episode).length
        if remaining >= length + 1:
            count += length
            remaining -= length + 1
        else:
            count += remaining - 1
            remaining = 0
        episode += 1
    return count


def _learner_frames(sc: LearnerScenario) -> list[TensorDictBase]:
    """Per env, the frames of its first ``steps`` time steps from a Collector of that env
    alone, the batch end marked by ``set_truncated=True`` (TorchRL's mark of a trajectory cut
    by the batch)."""
    out = []
    for env in range(sc.env.num_envs):
        count = _transitions_observed(sc.env, sc.seed, env, sc.steps)
        if count == 0:
            continue
        collector = _collector(
            _single_env(sc.env, env, sc.seed), sc.env, count, count, set_truncated=True
        )
        batch = next(iter(collector)).clone()
        collector.shutdown()
        out.append(batch.apply(lambda x: x.double() if x.is_floating_point() else x))
    return out


class _ToyValue(torch.nn.Module):
    """``V(s) = value_scale * t(s)``."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.scale * observation[..., 2:3]


def _value_network(sc: LearnerScenario) -> TensorDictModule:
    return TensorDictModule(
        _ToyValue(float(sc.value_scale)), in_keys=["observation"], out_keys=["state_value"]
    )


def _advantage_events(sc: LearnerScenario, frames: TensorDictBase) -> list[Advantages]:
    """GAE over all envs' frames in one flat batch (each env's batch end is truncated, so
    nothing propagates across), and the same with ``average_gae=True`` for the normalised
    advantages; one event per episode with the bootstrap row (the final observation, which
    TorchRL never trains on) appended as a stand-in (no ``bootstrap`` observable is declared:
    ``learner.bootstrap-timestep-masked`` is not applicable)."""
    gamma, lam = float(sc.gamma), float(sc.lam)
    plain = GAE(gamma=gamma, lmbda=lam, value_network=_value_network(sc), differentiable=False)
    averaged = GAE(
        gamma=gamma,
        lmbda=lam,
        value_network=_value_network(sc),
        differentiable=False,
        average_gae=True,
    )
    out_plain = plain(frames.clone())
    out_norm = averaged(frames.clone())
    items = _items(frames.get("observation"))
    next_items = _items(frames.get(("next", "observation")))
    advantage = _values(out_plain, "advantage")
    target = _values(out_plain, "value_target")
    normalized = _values(out_norm, "advantage")
    next_value = _values(out_plain, ("next", "state_value"))
    episodes: dict[tuple[int, int], list[int]] = {}
    for i, (e, k, _) in enumerate(items):
        episodes.setdefault((e, k), []).append(i)
    events = []
    for (e, k), rows in episodes.items():
        last = rows[-1]
        events.append(
            Advantages(
                e,
                k,
                (*(items[i][2] for i in rows), next_items[last][2]),
                (*(advantage[i] for i in rows), 0.0),
                (*(target[i] for i in rows), next_value[last]),
                (*(normalized[i] for i in rows), 0.0),
                (1,) * len(rows) + (0,),
            )
        )
    return events


def _nstep_event(sc: LearnerScenario, batches: Sequence[TensorDictBase]) -> NStep:
    """``MultiStep(gamma, n)`` (the collector post-processor) on each env's batch, then
    ``TD0Estimator`` (which discounts by ``gamma ** steps_to_next_obs``) for the targets."""
    estimator = TD0Estimator(
        gamma=float(sc.gamma), value_network=_value_network(sc), differentiable=False
    )
    env: list[int] = []
    episode: list[int] = []
    t: list[int] = []
    target: list[float] = []
    steps: list[int] = []
    for batch in batches:
        shifted = MultiStep(gamma=float(sc.gamma), n_steps=sc.nstep)(batch.unsqueeze(0))
        out = estimator(shifted.squeeze(0))
        for item, value, k in zip(
            _items(batch.get("observation")),
            _values(out, "value_target"),
            _ints(out, "steps_to_next_obs"),
        ):
            env.append(item[0])
            episode.append(item[1])
            t.append(item[2])
            target.append(value)
            steps.append(k)
    return NStep(tuple(env), tuple(episode), tuple(t), tuple(target), tuple(steps))


def _update_plan(sc: LearnerScenario, rows: int) -> UpdatePlan:
    """The PPO scripts' epoch loop: the rows go into a buffer of their size with
    ``SamplerWithoutReplacement``, iterated once per epoch in mini-batches."""
    if rows == 0:
        return UpdatePlan(0, ())
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(rows),
        sampler=SamplerWithoutReplacement(),
        batch_size=sc.minibatch_size,
        generator=torch.Generator().manual_seed(sc.seed),
    )
    data = TensorDict({"row": torch.arange(rows)}, [rows])
    plan: list[tuple[int, ...]] = []
    for _ in range(sc.num_epochs):
        buffer.extend(data)
        plan.extend(tuple(int(r) for r in mb.get("row").tolist()) for mb in buffer)
    return UpdatePlan(len(plan), tuple(plan))


def _run_learner(sc: LearnerScenario) -> Trace:
    if sc.num_learners != 1:
        raise Unsupported(
            f"num_learners {sc.num_learners}: TorchRL 0.14.1 has no learner-side sharding of "
            "episodes (several learners sample from one replay buffer)",
            f"{_SOURCE}/trainers/trainers.py",
        )
    if sc.gamma == 0:
        raise Unsupported(
            "gamma 0: MultiStep rejects it (data/postprocs/postprocs.py: 'got out-of-bounds "
            "gamma decay')",
            f"{_SOURCE}/data/postprocs/postprocs.py",
        )
    events: list[Event] = []
    with _seeded(sc.seed):
        batches = _learner_frames(sc)
        if batches:
            events.extend(_advantage_events(sc, torch.cat(batches)))
        events.append(_nstep_event(sc, batches))
        rows = sum(b.numel() for b in batches)
        events.append(_update_plan(sc, rows))
    episodes = [e for e in events if isinstance(e, Advantages)]
    events.append(
        Shard(
            0,
            tuple(e.env for e in episodes),
            tuple(e.episode for e in episodes),
            (0,) * len(episodes),
            tuple(len(e.t) - 1 for e in episodes),
        )
    )
    return Trace(tuple(events), {"producer": "torchrl"})


# -- relabel ----------------------------------------------------------------------------------------
def _goal_reward(data: TensorDictBase) -> torch.Tensor:
    """The toy env's goal reward of a relabeled transition (TorchRL calls the user's
    ``reward_fn``): 0 where the next achieved goal equals the desired goal, else -1."""
    hit = (data.get(("next", "achieved_goal")) == data.get("desired_goal")).all(-1, keepdim=True)
    return torch.where(hit, 0.0, -1.0)


def _held_rows(sc: RelabelScenario, frames: TensorDictBase) -> list[tuple[Item, int, float, float]]:
    """The time steps one env's frames hold, in order, as ``(item, step type, reward,
    discount)``: each frame's root where it starts an episode, then its ``("next", ...)``
    observation, LAST where the frame is done. The collector's ``set_truncated`` also marks
    the batch's last frame done; that one ended an episode only if it terminated or is the
    last step of its episode's plan (a truncation by the env)."""
    roots = _items(frames.get("observation"))
    nexts = _items(frames.get(("next", "observation")))
    first = _flags(frames, "is_init")
    done = _flags(frames, ("next", "done"))
    reward = _values(frames, ("next", "reward"))
    terminated = _flags(frames, ("next", "terminated"))
    out: list[tuple[Item, int, float, float]] = []
    for i, (root, nxt) in enumerate(zip(roots, nexts)):
        if first[i]:
            out.append((root, _FIRST, 0.0, 1.0))
        ended = done[i]
        if i == len(roots) - 1 and not terminated[i]:
            ended = sc.env.episode(sc.seed, nxt[0], nxt[1]).length == nxt[2]
        discount = 0.0 if terminated[i] else 1.0
        out.append((nxt, _LAST if ended else _MID, reward[i], discount))
    return out


def _run_relabel(sc: RelabelScenario) -> Trace:
    if sc.fill_steps > sc.capacity:
        raise Unsupported(
            f"fill_steps {sc.fill_steps} > capacity {sc.capacity}: HERReplayBuffer 0.14.1 "
            "finds episodes only in a 1-D storage (her.py _build_episode_cache), whose ring "
            "evicts the oldest frames of all envs in write order, not each env's own oldest",
            f"{_SOURCE}/data/replay_buffers/her.py",
        )
    relabeled: list[int] = []

    def reward_fn(data: TensorDictBase) -> torch.Tensor:
        relabeled.append(data.shape[0])
        return _goal_reward(data)

    events: list[Event] = []
    with _seeded(sc.seed):
        buffer = HERReplayBuffer(
            reward_fn,
            her_ratio=float(sc.ratio),
            strategy=sc.strategy,
            achieved_goal_key=("next", "achieved_goal"),
            storage=LazyTensorStorage(sc.capacity * sc.env.num_envs),
            generator=torch.Generator().manual_seed(sc.seed),
        )
        for env in range(sc.env.num_envs):
            count = _transitions_observed(sc.env, sc.seed, env, sc.fill_steps)
            if count == 0:
                continue
            collector = _collector(
                _single_env(sc.env, env, sc.seed), sc.env, count, count, set_truncated=True
            )
            frames = next(iter(collector)).clone()
            collector.shutdown()
            buffer.extend(frames)
            rows = _held_rows(sc, frames)
            events.append(
                Store(
                    0,
                    tuple(r[0][0] for r in rows),
                    tuple(r[0][1] for r in rows),
                    tuple(r[0][2] for r in rows),
                    tuple(r[1] for r in rows),
                    tuple(r[2] for r in rows),
                    tuple(r[3] for r in rows),
                    (0.0,) * len(rows),
                )
            )
        for draw in range(sc.draws):
            relabeled.clear()
            sample = buffer.sample(sc.batch_size)
            count = sum(relabeled)
            items = _items(sample.get("observation"))
            goals = _items(sample.get("desired_goal"))
            goal_env, goal_episode, goal_t = (
                tuple(g[c] if n < count else -1 for n, g in enumerate(goals)) for c in range(3)
            )
            events.append(
                Relabel(
                    draw,
                    tuple(i[0] for i in items),
                    tuple(i[1] for i in items),
                    tuple(i[2] for i in items),
                    goal_env,
                    goal_episode,
                    goal_t,
                    tuple(
                        tuple(float(v) for v in row)
                        for row in sample.get("desired_goal").reshape(-1, 3).tolist()
                    ),
                    tuple(_values(sample, ("next", "reward"))),
                )
            )
    return Trace(tuple(events), {"producer": "torchrl"})


# -- the adapter ------------------------------------------------------------------------------------
def _version(package: str) -> str:
    return metadata.version(package)


class TorchRLAdapter:
    """TorchRL 0.14.1 behind the xpspec protocol (capabilities env, trainer, replay,
    learner)."""

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name="torchrl",
            framework="TorchRL",
            framework_version=_version("torchrl"),
            protocol_version=PROTOCOL_VERSION,
            capabilities=(
                "env",
                "trainer",
                "replay",
                "learner",
                "relabel",
                "counter",
                "hooks",
                "state",
            ),
            issue_tracker="https://github.com/pytorch/rl/issues",
            notes=(
                "Frames are named by their root observation; the final observation of an "
                "episode is never a row of its own (same-step reset)."
            ),
            extra_versions={
                "tensordict": _version("tensordict"),
                "gymnasium": _version("gymnasium"),
                "torch": torch.__version__,
            },
        )

    def smoke(self) -> None:
        _run_env(EnvScenario(EnvSpec(), steps=2))

    def run_env(self, scenario: EnvScenario) -> Trace:
        """Time steps the Collector produced, one ``env_step`` per collector step, the frame
        that ends an episode split into its LAST time step (see the module docstring)."""
        return _run_env(scenario)

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        """``Trainer`` with ``ReplayBufferTrainer`` over a ``Collector`` of ``u*B`` frames per
        batch and a ``LazyTensorStorage(capacity*B, ndim=2)`` (one ring of ``capacity``
        frames per env); a 1-D ``LazyTensorStorage(capacity*B)`` for exclusions and
        episode-delayed writes (see the module docstring)."""
        return _run_trainer(scenario)

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        """The fill is ``fill_steps`` collector batches of one vector step, each extended into
        the ``ndim=2`` storage; draws use :func:`_sampler`."""
        return _run_replay(scenario)

    def run_learner(self, scenario: LearnerScenario) -> Trace:
        """GAE and normalisation (``GAE(average_gae=True)``), ``MultiStep`` + ``TD0Estimator``
        n-step targets, and the PPO scripts' ``SamplerWithoutReplacement`` epochs, on the
        frames of each env's first ``steps`` time steps."""
        return _run_learner(scenario)

    def run_relabel(self, scenario: RelabelScenario) -> Trace:
        """``HERReplayBuffer`` with ``achieved_goal_key=("next", "achieved_goal")`` over a
        1-D storage, each env's frames written whole and in env order; relabeled rows are
        the rows TorchRL passes to the reward function (the first ``int(n * her_ratio)``)."""
        return _run_relabel(scenario)
