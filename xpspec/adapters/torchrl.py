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
``Trainer.train`` stops: the trace ends there (header ``stopped``). The loss mask
(capability ``loss-mask``) is TorchRL's: the sampler's info is written into the sample as
``TensorDictReplayBuffer.sample`` writes it, so ``pad_output``'s ``("collector", "mask")``
(False at the positions it padded) reaches the Trainer, whose ``mask_batch`` op
(``process_optim_batch``, ``trainers/trainers.py``) drops the masked positions before the
loss; a position's mask is 1 where it reached the loss. Frames are never LAST rows, so
nothing else is masked.

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

**Checkpoint and resume** (``run_trainer`` with a checkpoint spec): TorchRL's ``Checkpoint``
registered on the ``Trainer``, saved at ``Trainer.request_stop`` and restored into fresh
objects by ``Trainer.load_from_file``, in :mod:`xpspec.adapters.torchrl_checkpoint`.

**Recurrent state** (``run_recurrent``): ``GRUModule`` around a counting core, its state primer,
``SliceSampler`` slices or collector chunks, ``BurnInTransform`` and ``DQNLoss`` in recurrent
mode, in :mod:`xpspec.adapters.torchrl_recurrent`.

**Offline and hybrid replay** (``run_offline``): ``OfflineToOnlineReplayBuffer`` over an
offline ``ReplayBuffer`` of the dataset, filled online by the collector, in
:mod:`xpspec.adapters.torchrl_offline`.

**Prioritized replay** (``run_replay`` with a priority spec): ``PrioritizedSampler`` over the
replay row's storage, its sum tree read before every draw, in
:mod:`xpspec.adapters.torchrl_priority` (the segment trees are TorchRL's C++ extension, built
against the installed torch by ``tools/torchrl_extension.py``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
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
        from torchrl.trainers.trainers import mask_batch
    except ImportError as exc:  # pragma: no cover - exercised only without the framework
        raise ImportError(
            "xpspec.adapters.torchrl drives TorchRL 0.14.1 with tensordict 0.14.3, which are not "
            "importable here: install them with `pip install -e '.[adapter-torchrl]' -c "
            f"constraints/torch.txt` ({exc})"
        ) from exc

from xpspec.kit.arrays import bools, floats, ints
from xpspec.kit.episodes import (
    episode_rows,
    standin_bootstrap,
    transitions_observed,
)
from xpspec.kit.events import env_step, exclude, run_end, store
from xpspec.kit.exclusion import EXCLUSIONS, exclusion_reason, selected
from xpspec.kit.goals import goal_rewards
from xpspec.kit.items import decode_items, item_columns
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.steps import Step, TransitionRows, last_step
from xpspec.kit.value import ToyValue
from xpspec.protocol.adapter import PROTOCOL_VERSION, AdapterInfo, Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeTasks,
    Identity,
    OverwriteStepType,
    PreprocessorSpec,
    RewardTransform,
)
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import (
    AsyncScenario,
    EnvScenario,
    LearnerScenario,
    OfflineScenario,
    RecurrentScenario,
    RelabelScenario,
    ReplayScenario,
    StackScenario,
    TrainerScenario,
)
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import (
    Advantages,
    Event,
    Hook,
    Item,
    IterationEnd,
    IterationStart,
    NStep,
    Relabel,
    Sampled,
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
_POSITION = ("xpspec", "position")
"""The recorder's tag of each sampled position (its place in the sampled batch), read in the
loss to see which positions TorchRL's ``mask_batch`` let through."""


# -- quiet, seeded execution ----------------------------------------------------------------------
def _seeded(seed: int) -> AbstractContextManager[None]:
    """TorchRL's logging and warnings silenced and the global torch generator (used by
    ``env.rand_action`` during ``init_random_frames``) seeded, both restored afterwards."""
    return seeded_quiet(seed, ("torch",), ("torchrl",))


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
    return _wrap_vector(_gym_vector(spec, seed), task_ids)


def _gym_vector(spec: EnvSpec, seed: int) -> SyncVectorEnv:
    """The toy envs as one Gymnasium vector env with TorchRL's preferred autoreset mode."""
    return SyncVectorEnv(make_env_fns(spec, seed), autoreset_mode=AutoresetMode.DISABLED)


def _wrap_vector(vector: SyncVectorEnv, task_ids: bool = False) -> TransformedEnv:
    """``vector`` as a TorchRL env (``GymWrapper`` and the transforms of :func:`_vector_env`)."""
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
class _FrameRows:
    """Names frames as rows (any shape; flattened in order): the root item, FIRST where
    ``is_init``, else MID; the reward into the root is the ``("next", "reward")`` of the
    env's previous frame named here (0 at FIRST or with none); discount 0 where the root's
    ``terminated`` is set, else 1; the annotation where the frames hold one. Read from frames
    a write put into the storage, the previous frame is the env's previous *stored* one, which
    after an exclusion is not the root's predecessor: the row then names the reward that
    frame carries, what the storage implies for the root (which holds no reward of its own)."""

    def __init__(self) -> None:
        self.previous = TransitionRows()

    def rows(self, frames: TensorDictBase, *, acted: bool = False) -> list[Step]:
        """The rows of ``frames``; with ``acted``, with the policy state and action at each
        root."""
        items = decode_items(frames.get("observation"))
        n = len(items)
        first = bools(frames.get("is_init"))
        terminal = bools(frames.get("terminated"))
        done = bools(frames.get(("next", "done")))
        reward_next = floats(frames.get(("next", "reward")))
        state = ints(frames.get("policy_state")) if acted else (None,) * n
        action = ints(frames.get("action")) if acted else (-1,) * n
        keys = frames.keys()
        notes = floats(frames.get("annotation")) if "annotation" in keys else (0.0,) * n
        out = []
        for i, item in enumerate(items):
            discount = 0.0 if terminal[i] else 1.0
            out.append(
                self.previous.row(
                    item,
                    first=first[i],
                    discount=discount,
                    policy_state=state[i],
                    action=action[i],
                    annotation=notes[i],
                )
            )
            self.previous.follow(item[0], reward_next[i], done[i])
        return out


def _lasts(frames: TensorDictBase) -> list[Step]:
    """The LAST time step carried in the ``("next", ...)`` of each frame that ends an episode,
    with the policy state there (no action is taken at it)."""
    done = bools(frames.get(("next", "done")))
    items = decode_items(frames.get(("next", "observation")))
    reward = floats(frames.get(("next", "reward")))
    terminated = bools(frames.get(("next", "terminated")))
    state = ints(frames.get(("next", "policy_state")))
    return [
        last_step(items[i], reward[i], terminated[i], policy_state=state[i])
        for i in range(len(items))
        if done[i]
    ]


def _windows(
    sample: TensorDictBase, length: int, padded: bool
) -> tuple[tuple[Item | None, ...], ...]:
    """A flat sampler output as windows of ``length`` items. With ``padded``, TorchRL's
    ``pad_output`` convention applies: a slice shorter than ``length`` is completed by
    repeating its last real step, so an item equal to its predecessor is padding (``None``;
    a real window never holds an item twice)."""
    items = decode_items(sample.get("observation"))
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
            assert isinstance(spec, EXCLUSIONS), spec
            observation = batch.get("observation")
            tasks = ints(batch.get(_TASK_ID)) if isinstance(spec, ExcludeTasks) else None
            chosen = selected(spec, decode_items(observation), tasks)
            hit = torch.tensor(chosen, dtype=torch.bool).reshape(observation.shape[:-1])
            batch.set(_MASK, ~hit)
            if bool(hit.any()):
                dropped = decode_items(observation[hit])
                self.excluded.append((dropped, exclusion_reason(spec)))
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
            self.excluded.append((decode_items(tensordict.get("observation")), "outcome"))
            return None  # ReplayBuffer.extend writes nothing for a None
        return tensordict


def _partial_items(collector: Collector) -> list[Item]:
    """The items of the trajectories the collector still assembles (``_traj_assembly``, set
    by ``_iter_by_trajectories``): frames it holds and never wrote, in env, then unroll
    order."""
    assembly = getattr(collector, "_traj_assembly", None)
    if assembly is None:
        return []
    items = [
        i for chunks in assembly[0].values() for c in chunks for i in decode_items(c["observation"])
    ]
    return sorted(items)


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
        self.view = _FrameRows()
        self.stored_view = _FrameRows()
        self.pending: list[list[Step]] = []
        self.excluded: list[_Exclusion] = []
        self.iteration = 0
        self.calls = 0
        self.updates = 0
        self.stored = 0
        self.trained = False
        self.weight = torch.nn.Parameter(torch.zeros(()))
        self.sample: TensorDictBase | None = None
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
        sample = buffer.sample

        def recorded_rollout() -> TensorDictBase:
            self.iteration += 1
            self.trained = False
            unroll = int(self.sc.trainer.unroll_length)
            self.events.append(IterationStart(self.iteration, self.counter(), unroll))
            batch = rollout()
            self.pending = [
                self.view.rows(batch[..., j], acted=True) for j in range(batch.shape[-1])
            ]
            if self.delayed:  # trajectories are written once the whole batch is in
                self.events.extend(env_step(self.iteration, rows) for rows in self.pending)
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

        def recorded_sample(*args: Any, **kwargs: Any) -> TensorDictBase:
            """The sample with the sampler's info written into it, as
            ``TensorDictReplayBuffer.sample`` writes it (``data/replay_buffers/replay_buffers/
            tensordict.py``): ``SliceSampler(pad_output=True)`` marks real positions in
            ``("collector", "mask")``. Each position is tagged so the loss can tell which
            positions reached it."""
            data, info = sample(*args, return_info=True, **kwargs)
            if _MASK in info:
                data.set(_MASK, info[_MASK])
            data.set(_POSITION, torch.arange(data.numel()).reshape(data.shape))
            self.sample = data
            return data

        collector.rollout = recorded_rollout
        buffer.extend = recorded_extend
        buffer.sample = recorded_sample
        trainer.optim_steps = recorded_optim_steps
        trainer.register_op("post_optim", self._after_update)
        trainer.register_op("post_steps", self._after_iteration)

    def _exclusions(self) -> None:
        """Env steps not yet recorded, then what the user's hook excluded since."""
        self.events.extend(env_step(self.iteration, rows) for rows in self.pending)
        self.pending = []
        self.events.extend(
            exclude(self.iteration, items, reason) for items, reason in self.excluded
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
                self.events.append(env_step(self.iteration, unrolled))
                self._store(rows[j * width : (j + 1) * width])
            self.pending = []
        else:
            self._exclusions()
            self._store(rows)

    def _store(self, rows: Sequence[Step]) -> None:
        self.events.append(store(self.iteration, rows))
        self.stored += len(rows)

    def loss(self, batch: TensorDictBase) -> TensorDictBase:
        """The trivial loss: records the sampled windows (padding found from the items, see
        :func:`_windows`) and, as the loss mask, which sampled positions reached the loss
        after TorchRL's ``mask_batch`` (a ``process_optim_batch`` op) dropped the positions
        its sampler marked as padding; returns a zero loss."""
        assert self.sample is not None
        sampled, self.sample = self.sample, None
        windows = _windows(sampled, self.length, self.sc.sampling.boundary == "pad")
        reached = set(ints(batch.get(_POSITION)))
        mask = tuple(
            tuple(1 if w * self.length + j in reached else 0 for j in range(len(window)))
            for w, window in enumerate(windows)
        )
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
        events = [*self.events, run_end(self.iteration, self.frames(), policy, held)]
        header: dict[str, Any] = {"producer": "torchrl", "seed": self.sc.seed}
        if stopped:
            header["stopped"] = stopped
        return Trace(tuple(events), header)


def _run_trainer(sc: TrainerScenario) -> Trace:
    _trainer_support(sc)
    recorder = _TrainerRecorder(sc)
    with _seeded(sc.seed):
        env = _gym_vector(sc.env, sc.seed)
        trainer = _build_trainer(sc, recorder, env)[1]
        try:
            trainer.train()
        except RuntimeError as exc:
            if not any(stop in str(exc) for stop in _STOPS):
                raise
            trainer.collector.shutdown()
            return recorder.trace(stopped=f"RuntimeError: {exc}")
    return recorder.trace()


def _build_trainer(
    sc: TrainerScenario, recorder: _TrainerRecorder, vector: SyncVectorEnv, **trainer_kwargs: Any
) -> tuple[Collector, Trainer, Any]:
    """The env, collector, replay buffer, ``Trainer`` and its hooks of a trainer scenario,
    acting in the Gymnasium vector env ``vector``, attached to ``recorder``;
    ``trainer_kwargs`` go to ``Trainer`` (its checkpoint arguments)."""
    cfg, spec, hook = sc.trainer, sc.env, sc.preprocess
    sampler = _sampler(sc.sampling)
    num_envs, u = spec.num_envs, int(cfg.unroll_length)
    frames_per_batch = u * num_envs
    total = cfg.num_iterations * frames_per_batch if cfg.num_iterations else cfg.num_env_steps
    # The Trainer trains once collected_frames >= init_random_frames; for integers,
    # "stored > n" is "stored >= n + 1".
    warmup = cfg.initial_collect_steps + (1 if cfg.warmup_gate == "stored>" else 0)
    batch = (cfg.mini_batch_size or num_envs) * cfg.mini_batch_length
    masked = isinstance(hook, EXCLUSIONS)
    env = _wrap_vector(vector, task_ids=isinstance(hook, ExcludeTasks))
    writes: dict[str, Any] = {}
    if isinstance(hook, EpisodeDelayed):
        transform = _Annotate(hook.keep, recorder.excluded)
        buffer = _flat_buffer(cfg.capacity * num_envs, sampler, sc.seed, batch, transform=transform)
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
        **trainer_kwargs,
    )
    ReplayBufferTrainer(buffer, batch_size=batch, flatten_tensordicts=masked).register(trainer)
    # After ReplayBufferTrainer.sample: the loss gets the sampled positions the sampler did not
    # mark as padding (trainers/trainers.py, mask_batch).
    trainer.register_op("process_optim_batch", mask_batch)
    recorder.attach(collector, trainer, buffer)
    return collector, trainer, buffer


# -- env --------------------------------------------------------------------------------------------
def _run_env(sc: EnvScenario) -> Trace:
    spec = sc.env
    events: list[Event] = []
    view = _FrameRows()
    with _seeded(sc.seed):
        frames = spec.num_envs * sc.steps
        collector = _collector(_vector_env(spec, sc.seed), spec, frames, frames)
        for batch in collector:
            for j in range(batch.shape[-1]):
                column = batch[..., j]
                events.append(env_step(0, view.rows(column, acted=True)))
                lasts = _lasts(column)
                if lasts:
                    events.append(env_step(0, lasts))
        collector.shutdown()
    return Trace(tuple(events), {"producer": "torchrl"})


# -- replay -----------------------------------------------------------------------------------------
def _run_replay(sc: ReplayScenario) -> Trace:
    spec = sc.env
    sampler = _sampler(sc.sampling)
    length = sc.sampling.window_length
    events: list[Event] = []
    view = _FrameRows()
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
                events.append(store(0, view.rows(batch)))
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
def _env_frames(spec: EnvSpec, seed: int, steps: int) -> Iterator[TensorDictBase]:
    """Per env, the frames of its first ``steps`` time steps from a Collector of that env
    alone, the batch end marked by ``set_truncated=True`` (TorchRL's mark of a trajectory cut
    by the batch); an env with no transition among them has no frames."""
    for env in range(spec.num_envs):
        count = transitions_observed(spec, seed, env, steps)
        if count == 0:
            continue
        collector = _collector(_single_env(spec, env, seed), spec, count, count, set_truncated=True)
        frames = next(iter(collector)).clone()
        collector.shutdown()
        yield frames


def _learner_frames(sc: LearnerScenario) -> list[TensorDictBase]:
    """:func:`_env_frames` of the scenario, in float64."""
    return [
        frames.apply(lambda x: x.double() if x.is_floating_point() else x)
        for frames in _env_frames(sc.env, sc.seed, sc.steps)
    ]


def _value_network(sc: LearnerScenario) -> TensorDictModule:
    return TensorDictModule(
        ToyValue(float(sc.value_scale)), in_keys=["observation"], out_keys=["state_value"]
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
    items = decode_items(frames.get("observation"))
    next_items = decode_items(frames.get(("next", "observation")))
    advantage = floats(out_plain.get("advantage"))
    target = floats(out_plain.get("value_target"))
    normalized = floats(out_norm.get("advantage"))
    next_value = floats(out_plain.get(("next", "state_value")))
    events = []
    for (e, k), rows in episode_rows(items).items():
        last = rows[-1]
        trained = [(items[i][2], advantage[i], target[i], normalized[i]) for i in rows]
        events.append(
            standin_bootstrap(
                e,
                k,
                trained,
                bootstrap_t=next_items[last][2],
                bootstrap_target=next_value[last],
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
            decode_items(batch.get("observation")),
            floats(out.get("value_target")),
            ints(out.get("steps_to_next_obs")),
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
    return Trace(tuple(events), {"producer": "torchrl"})


# -- relabel ----------------------------------------------------------------------------------------
def _goal_reward(data: TensorDictBase) -> torch.Tensor:
    """The toy env's goal reward of a relabeled transition (TorchRL calls the user's
    ``reward_fn``), of its next achieved goal and its desired goal, as a column ``[N, 1]``."""
    reward = goal_rewards(data.get(("next", "achieved_goal")), data.get("desired_goal"))
    return torch.as_tensor(reward).unsqueeze(-1)


def _held_rows(sc: RelabelScenario, frames: TensorDictBase) -> list[Step]:
    """The time steps one env's frames hold, in order, as ``(item, step type, reward,
    discount)``: each frame's root where it starts an episode, then its ``("next", ...)``
    observation, LAST where the frame is done. The collector's ``set_truncated`` also marks
    the batch's last frame done; that one ended an episode only if it terminated or is the
    last step of its episode's plan (a truncation by the env)."""
    roots = decode_items(frames.get("observation"))
    nexts = decode_items(frames.get(("next", "observation")))
    first = bools(frames.get("is_init"))
    done = bools(frames.get(("next", "done")))
    reward = floats(frames.get(("next", "reward")))
    terminated = bools(frames.get(("next", "terminated")))
    out: list[Step] = []
    for i, (root, nxt) in enumerate(zip(roots, nexts)):
        if first[i]:
            out.append(Step(root, _FIRST, 0.0))
        ended = done[i]
        if i == len(roots) - 1 and not terminated[i]:
            ended = sc.env.episode(sc.seed, nxt[0], nxt[1]).length == nxt[2]
        discount = 0.0 if terminated[i] else 1.0
        out.append(Step(nxt, _LAST if ended else _MID, reward[i], discount))
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
        for frames in _env_frames(sc.env, sc.seed, sc.fill_steps):
            buffer.extend(frames)
            events.append(store(0, _held_rows(sc, frames)))
        for draw in range(sc.draws):
            relabeled.clear()
            sample = buffer.sample(sc.batch_size)
            count = sum(relabeled)
            items = decode_items(sample.get("observation"))
            goals = decode_items(sample.get("desired_goal"))
            goal_env, goal_episode, goal_t = (
                tuple(g[c] if n < count else -1 for n, g in enumerate(goals)) for c in range(3)
            )
            events.append(
                Relabel(
                    draw,
                    *item_columns(items),
                    goal_env,
                    goal_episode,
                    goal_t,
                    tuple(
                        tuple(float(v) for v in row)
                        for row in sample.get("desired_goal").reshape(-1, 3).tolist()
                    ),
                    floats(sample.get(("next", "reward"))),
                )
            )
    return Trace(tuple(events), {"producer": "torchrl"})


# -- the adapter ------------------------------------------------------------------------------------
def _version(package: str) -> str:
    return metadata.version(package)


class TorchRLAdapter:
    """TorchRL 0.14.1 behind the xpspec protocol (capabilities env, trainer, replay,
    learner, relabel, recurrent, checkpoint, stack, offline, async, prioritized replay and the
    observables above)."""

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
                "update-counter",
                "hooks",
                "state",
                "nstep",
                "loss-mask",  # the positions TorchRL's mask_batch lets reach the loss
                "recurrent",
                "checkpoint",
                "stack",
                "offline",
                "async",
                "priorities",  # PrioritizedSampler: its sum tree's leaves (torchrl_priority)
                "importance-weights",  # the priority_weight PrioritizedSampler.sample returns
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
        episode-delayed writes (see the module docstring). With a checkpoint spec, saved
        and restored through TorchRL's ``Checkpoint`` (:mod:`xpspec.adapters.torchrl_checkpoint`)."""
        if scenario.checkpoint is not None:
            from xpspec.adapters.torchrl_checkpoint import run_checkpointed

            return run_checkpointed(scenario)
        return _run_trainer(scenario)

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        """The fill is ``fill_steps`` collector batches of one vector step, each extended into
        the ``ndim=2`` storage; draws use :func:`_sampler`. A scenario with a priority spec
        runs ``PrioritizedSampler`` (:mod:`xpspec.adapters.torchrl_priority`)."""
        if scenario.priority is not None:
            from xpspec.adapters.torchrl_priority import run_prioritized

            return run_prioritized(scenario)
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

    def run_recurrent(self, scenario: RecurrentScenario) -> Trace:
        """``GRUModule`` around a counting core, collected with its state primer, sliced by
        ``SliceSampler`` (``pad``) or stored as collector chunks (``cross``), burnt in by
        ``BurnInTransform`` and trained by ``DQNLoss`` in recurrent mode (see
        :mod:`xpspec.adapters.torchrl_recurrent`)."""
        from xpspec.adapters.torchrl_recurrent import run_recurrent

        return run_recurrent(scenario)

    def run_stack(self, scenario: StackScenario) -> Trace:
        """``CatFrames`` in the rollout and rebuilt at sample time
        (:mod:`xpspec.adapters.torchrl_stack`)."""
        from xpspec.adapters.torchrl_stack import run_stack

        return run_stack(scenario)

    def run_offline(self, scenario: OfflineScenario) -> Trace:
        """``OfflineToOnlineReplayBuffer`` over the dataset, filled by the collector
        (:mod:`xpspec.adapters.torchrl_offline`)."""
        from xpspec.adapters.torchrl_offline import run_offline

        return run_offline(scenario)

    def run_async(self, scenario: AsyncScenario) -> Trace:
        """``MultiAsyncCollector`` with one worker process per actor and TorchRL's policy-version
        tracking (:mod:`xpspec.adapters.torchrl_async`)."""
        from xpspec.adapters.torchrl_async import run_async

        return run_async(scenario)
