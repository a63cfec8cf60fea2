"""Adapter for Tianshou 2.0.1: its ``DummyVectorEnv`` stepped by its ``Collector``, its
``OffPolicyTrainer`` loop, ``VectorReplayBuffer`` sampling (frame-stack windows included),
``PPO``'s learner-side preprocessing and update loop, ``Algorithm.compute_nstep_return`` and
``HERVectorReplayBuffer``, driven on the toy env and recorded at their seams (the vector env's
``step`` and ``reset``, the buffer's ``add`` and ``sample``, the trainer's training and update
steps, the algorithm's update). Nothing of Tianshou is re-implemented; sources are cited as
``file:function`` under the installed ``tianshou`` package.

**Time steps.** Tianshou's ``Collector`` resets an env inside the vector step that ends its
episode (``data/collector.py:Collector._collect``, steps 6 to 8): it adds the transition
``(obs, act, rew, terminated, truncated, obs_next)`` to the buffer, then calls
``env.reset(env_id=...)`` for the envs that are done, so the policy never acts on the final
observation and no buffer row holds it except as ``obs_next``. Step types come from the
resets and the ``done`` flags, never from the observation: an observation returned by a reset
is FIRST, an ``obs_next`` with ``terminated`` or ``truncated`` is LAST (discount 0 iff
terminated), any other MID.

- ``run_env`` records every time step the collector's vector env produced, in order: each
  vector step is an event of the time steps the policy acted on (with the actions and the
  policy state it received); a step that ends episodes is followed by an event of their LAST
  time steps (action ``-1``: none is taken at them; policy state ``t``).
- ``run_trainer`` and ``run_replay`` name a row by ``obs``, the time step the policy acted on
  (``EnvStep``) and the buffer stored (``Store``), with its step type and the reward into it
  (the previous transition's ``rew``, 0 at FIRST), read back from the buffer after each
  ``add`` (:func:`_record_stores`): a row is FIRST when its env's sub-buffer was empty or its
  newest row done, else MID with that row's ``rew``. An episode of ``L`` transitions is
  ``L`` rows ``t = 0 .. L - 1`` and takes ``L`` vector steps, where the spec's auto-reset
  takes ``L + 1`` (clause ``timestep.auto-reset``, variant ``same-step``).
- ``run_relabel`` names the same rows and, for a transition that is done, also the LAST it
  holds as ``obs_next`` (relabeled goals and rewards come from ``obs_next``).

**Policy.** :class:`_CountingPolicy` is a Tianshou ``Policy`` whose hidden state counts the
steps since the collector last reset it (``Collector._reset_hidden_state_based_on_type`` at
every done); it acts ``state % num_actions``. The state it received is the trace's
``policy_state``, so clause ``timestep.state-reset`` checks the collector's own state handling.

**Windows.** Tianshou's only sequence sampling is frame stacking (:func:`_stacking`): windows
of one episode for boundary ``forbid`` (and for ``cross``, which it cannot express), windows
filled at the front by repetition for ``pad``. Sampling with no valid window raises inside
Tianshou; the trainer run then stops (header ``stopped``).

**Preprocessing** is written as a Tianshou user writes it (:func:`_preprocessing`), and what
the framework then stores is what the trace records:

- ``RewardTransform``: an ``on_step_hook`` (``data/collector.py:Collector._collect`` step 4,
  before the ``add`` of step 6) assigns ``rew * scale + shift``. No row holds the reward into
  an episode's first observation, so a FIRST keeps reward 0.
- ``OverwriteStepType(to='MID', when='truncated-last')``: the hook assigns an all-false
  ``truncated`` (a new array: the batch's ``done`` is the collector's ``done_R``, and writing
  it in place would also stop the reset). ``ReplayBuffer.add`` recomputes ``done``
  (``data/buffer/buffer_base.py``), so the next episode's first row follows a row that is not
  done: it is stored MID. Other overwrites are Unsupported (a row has no step-type field).
- ``EpisodeDelayed(keep='all')``: a ``CachedReplayBuffer`` (``data/buffer/cached.py``: one
  cache per env, moved to a main buffer of ``capacity * B`` transitions shared by all envs when
  the env's episode ends) and an ``on_episode_done_hook`` returning the ``annotation`` field
  (step 10). "Stored" means sampleable: ``ReplayBufferManager.sample_indices``
  (``data/buffer/manager.py``) draws from the caches too, so a row is stored at its ``add``
  into the cache, the move to the main buffer stores nothing new, and the run end reports no
  pending items (nothing is held out of sampling). Under ``collect(n_step=...)``, the trainer's
  collection, the annotation hook raises ``ValueError`` at the first episode end; the run then
  stops (header ``stopped``). With nothing held, pending policies ``report`` and ``flush`` are
  the same run. ``keep`` other than ``all`` is Unsupported: not driven yet (it needs a
  ``CachedReplayBuffer`` subclass that drops an ended episode instead of moving it).
- Exclusion (``ExcludeSteps``, ``ExcludeEpisodes``, ``ExcludeTasks``): the user's own buffer,
  :class:`~xpspec.adapters.tianshou_preprocess.ExcludingVectorBuffer`, handed to the
  ``Collector``: its ``add`` stores the rows the rule does not select (selection from
  :mod:`xpspec.kit.exclusion`, by the row's ``obs`` and ``info.task_id``) with Tianshou's own
  ``VectorReplayBuffer.add`` and leaves the others out (recorded as ``Exclude``). The collector
  adds every stepped env's transition in one ``add`` (``data/collector.py:929``) and uses the
  returned indices, lengths and returns only at done envs, for its statistics and to read the
  ended episode back (``data/collector.py:951-997``); the module
  :mod:`~xpspec.adapters.tianshou_preprocess` says what the subclass answers for a row it left
  out. The trainer's gradient steps count collected transitions
  (``trainer.py:1062-1064``), whatever the buffer kept. A run whose first ended episode meets
  a buffer that has stored nothing stops in the collector's read-back (header ``stopped``,
  ``KeyError: 'obs'``, ``data/buffer/buffer_base.py:581``).

**Recurrent state** (``run_recurrent``): a counting recurrent model in ``Recurrent``'s form,
``VectorReplayBuffer(stack_num=...)`` frame stacks and ``DQN``, in
:mod:`xpspec.adapters.tianshou_recurrent`.

**Frame stacking** (``run_stack``): an env wrapper stacking in the rollout and
``VectorReplayBuffer(stack_num=...)`` rebuilding the stacks at sample time, in
:mod:`xpspec.adapters.tianshou_stack`.

**Checkpoint and resume** (``run_trainer`` with a checkpoint spec): epochs of one training
step, saved at an epoch's end by ``save_checkpoint_fn`` (``torch.save`` of the state dict, the
buffer pickled) and a ``TensorboardLogger``, resumed with ``resume_from_log=True`` in objects
built anew, in :mod:`xpspec.adapters.tianshou_checkpoint`.

**Trainer** (``run_trainer``): :class:`_TrainerRun`; the counter is the trainer's training
step number (observable ``counter``). Tianshou keeps no count of gradient steps, so the adapter
does not declare ``update-counter``: a per-mini-batch counter scenario runs with the training
step number as its counter, and its counter check is not applicable. Tianshou calls nothing after a training step, so the
adapter does not declare the ``hooks`` observable (the ``after_update`` events it records come
from ``Algorithm._postprocess_batch``). **Learner**: :class:`_LearnerRun`. **Relabel**:
:class:`_RelabelRun`. Preprocessing without a route (above), fractional unroll lengths, on-policy
and whole-buffer training, drain mode, warm-up gates still shut at the first train call,
period grids and other sampling distributions, several learners and the ``final`` and
``episode`` relabeling strategies are :class:`Unsupported`, each with the reason and source.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

try:
    import tianshou
    from tianshou.algorithm import PPO
    from tianshou.algorithm.algorithm_base import (
        Algorithm,
        OffPolicyAlgorithm,
        Policy,
        TrainingStats,
    )
    from tianshou.algorithm.modelfree.reinforce import ProbabilisticActorPolicy
    from tianshou.algorithm.optim import TorchOptimizerFactory
    from tianshou.data import (
        Batch,
        CachedReplayBuffer,
        Collector,
        HERVectorReplayBuffer,
        PrioritizedVectorReplayBuffer,
        ReplayBuffer,
        VectorReplayBuffer,
    )
    from tianshou.env import DummyVectorEnv
    from tianshou.trainer import OffPolicyTrainerParams
except ImportError as exc:  # pragma: no cover - exercised only without the framework
    raise ImportError(
        "xpspec.adapters.tianshou drives Tianshou 2.0.1, which is not importable here: install it "
        f"with `pip install -e '.[adapter-tianshou]' -c constraints/torch.txt` ({exc})"
    ) from exc

import gymnasium
import numpy as np
import torch

from xpspec.adapters.tianshou_preprocess import ExcludingVectorBuffer
from xpspec.kit.episodes import (
    episode_rows,
    standin_bootstrap,
    transitions_observed,
)
from xpspec.kit.events import env_step, exclude, store
from xpspec.kit.exclusion import EXCLUSIONS, Exclusion
from xpspec.kit.goals import goal_rewards
from xpspec.kit.items import decode_items, decode_windows, item_columns, observation_array
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.release import check_release
from xpspec.kit.steps import Step, TransitionRows, last_step, transition_step
from xpspec.kit.transition_rings import rows_within_capacity
from xpspec.kit.value import ToyValue, toy_value
from xpspec.protocol.adapter import PROTOCOL_VERSION, AdapterInfo, Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    Identity,
    OverwriteStepType,
    RewardTransform,
)
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import (
    EnvScenario,
    LearnerScenario,
    RecurrentScenario,
    RelabelScenario,
    ReplayScenario,
    StackScenario,
    TrainerScenario,
)
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import (
    Event,
    Hook,
    Item,
    IterationEnd,
    IterationStart,
    NStep,
    Priorities,
    Prioritized,
    Relabel,
    RunEnd,
    Sampled,
    Store,
    Trace,
    TrainCall,
    Update,
    UpdatePlan,
)
from xpspec.refimpl.toy_envs.gym_env import make_env_fns, toy_action_space, toy_observation_space

__all__ = ["TianshouAdapter"]

_VERSION = "2.0.1"
_SRC = "tianshou 2.0.1"
_LINK = "https://github.com/thu-ml/tianshou/blob/v2.0.1/tianshou"
_MID = int(StepType.MID)
_NO_WINDOW = "cannot be empty unless no samples are taken"
"""The start of numpy's ``ValueError`` when ``VectorReplayBuffer.sample`` (frame-stack with
``sample_avail``) finds no valid window (``data/buffer/manager.py:sample_indices``)."""
_EMPTY_EPISODE = "zero-size array to reduction operation maximum"
"""numpy's ``ValueError`` when ``Collector._collect`` reads an episode as long as a
``PrioritizedVectorReplayBuffer`` sub-buffer that wrapped round it: ``get_buffer_indices(i, i)``
is empty and ``PrioritizedReplayBuffer.__getitem__`` takes ``np.max`` of its weights
(``data/buffer/prio.py``)."""
_NAN_WEIGHTS = "probabilities contain NaN"
"""numpy's ``ValueError`` when ``VectorReplayBuffer.sample`` draws a sub-buffer from an empty
buffer (weights ``lengths / 0``, ``data/buffer/manager.py:sample_indices``)."""


def _unsupported(reason: str, where: str = "") -> Unsupported:
    return Unsupported(f"{reason} ({_SRC})", f"{_LINK}/{where}" if where else _LINK)


# -- quiet, seeded execution ------------------------------------------------------------------
def _seeded(seed: int) -> AbstractContextManager[None]:
    """Tianshou's warnings and logging silenced and numpy's global generator (which
    ``Batch.split`` and ``HERReplayBuffer`` draw from) seeded, both restored afterwards."""
    return seeded_quiet(seed, ("numpy",), ("tianshou",))


# -- observations and items -------------------------------------------------------------------
def _observations(obs: Any) -> Any:
    """The toy observations of a Tianshou batch field (a goal env's ``Batch`` of goals gives
    its ``observation``)."""
    return obs["observation"] if isinstance(obs, Batch) else obs


def _items(obs: Any) -> list[Item]:
    return decode_items(_observations(obs))


# -- the toy policy ---------------------------------------------------------------------------
class _CountingPolicy(Policy):
    """A Tianshou policy with a counting hidden state: it receives ``state`` (``None`` after
    a collector reset, else what it returned last, zeroed by the collector at every done),
    acts ``state % num_actions`` and returns ``state + 1``. ``received`` holds the states of
    its latest call, per row of that call."""

    def __init__(self, spec: EnvSpec) -> None:
        super().__init__(
            action_space=toy_action_space(spec),
            observation_space=toy_observation_space(spec),
            action_bound_method=None,
        )
        self.num_actions = spec.num_actions
        self.received = np.zeros(0, dtype=np.int64)

    def forward(self, batch: Any, state: Any = None, **kwargs: Any) -> Batch:
        n = len(_items(batch.obs))
        received = np.zeros(n, np.int64) if state is None else np.asarray(state, np.int64)
        self.received = received.copy()
        return Batch(act=received % self.num_actions, state=received + 1)


class _RecordingAlgorithm(OffPolicyAlgorithm):
    """An off-policy algorithm whose gradient step is a no-op: ``_update_with_batch`` (the
    update Tianshou's ``Algorithm._update`` calls with each sampled batch) reports the batch,
    ``_postprocess_batch`` (called by ``Algorithm._update`` after every update) reports the
    end of the update."""

    def __init__(
        self,
        policy: _CountingPolicy,
        on_update: Callable[[Any], None],
        on_after_update: Callable[[], None],
    ) -> None:
        super().__init__(policy=policy)
        self._on_update = on_update
        self._on_after_update = on_after_update

    def _update_with_batch(self, batch: Any) -> TrainingStats:
        self._on_update(batch)
        return TrainingStats()

    def _postprocess_batch(self, batch: Any, buffer: Any, indices: np.ndarray) -> None:
        self._on_after_update()


# -- the time steps the collector steps through ------------------------------------------------
class _StateSource(Protocol):
    """What :class:`_Stepper` reads the policy state from: the states the policy received at
    its latest call, per row of that call."""

    received: np.ndarray


class _Stepper:
    """Wraps ``step`` and ``reset`` of one ``DummyVectorEnv`` instance. Before each step it
    reports the time steps the policy acted on (:attr:`acted`, one row per env stepped); with
    ``with_last``, after a step that ended episodes it also reports their LAST time steps.
    :attr:`rows` maps every item it reported to its row."""

    def __init__(
        self,
        envs: DummyVectorEnv,
        policy: _StateSource,
        on_rows: Callable[[list[Step]], None],
        with_last: bool = False,
    ) -> None:
        self.policy = policy
        self.on_rows = on_rows
        self.with_last = with_last
        n = len(envs)
        self.current: list[Item | None] = [None] * n
        self.previous = TransitionRows()
        self.rows: dict[Item, Step] = {}
        self.acted: list[Step] = []
        step, reset = envs.step, envs.reset

        def recorded_reset(env_id: Any = None, **kwargs: Any) -> Any:
            obs, info = reset(env_id, **kwargs)
            ids = range(n) if env_id is None else np.atleast_1d(np.asarray(env_id)).tolist()
            for e, item in zip(ids, _items(obs)):
                self.current[e] = item
                self.previous.restart(item[0])
            return obs, info

        def recorded_step(action: Any, id: Any = None) -> Any:
            ids = range(n) if id is None else np.atleast_1d(np.asarray(id)).tolist()
            actions = np.asarray(action).reshape(-1)
            states = self.policy.received
            self.acted = []
            for i, e in enumerate(ids):
                item = self.current[e]
                assert item is not None, "the collector steps an env it never reset"
                row = self.previous.row(item, policy_state=int(states[i]), action=int(actions[i]))
                self.rows[item] = row
                self.acted.append(row)
            self.on_rows(self.acted)
            obs, rew, terminated, truncated, info = step(action, id)
            lasts = []
            for i, (e, item) in enumerate(zip(ids, _items(obs))):
                done = bool(terminated[i]) or bool(truncated[i])
                self.current[e] = item
                self.previous.follow(item[0], float(rew[i]), done)
                if done:
                    lasts.append(last_step(item, float(rew[i]), bool(terminated[i])))
            if self.with_last and lasts:
                self.on_rows(lasts)
            return obs, rew, terminated, truncated, info

        envs.step = recorded_step
        envs.reset = recorded_reset


def _vector_env(spec: EnvSpec, seed: int, envs: Sequence[int] | None = None) -> DummyVectorEnv:
    fns = make_env_fns(spec, seed)
    return DummyVectorEnv([fns[e] for e in (range(spec.num_envs) if envs is None else envs)])


def _record_adds(buffer: Any, on_add: Callable[[Any], None]) -> None:
    """Call ``on_add(batch)`` after every ``add`` of this buffer instance."""
    add = buffer.add

    def recorded_add(batch: Any, buffer_ids: Any = None) -> Any:
        out = add(batch, buffer_ids=buffer_ids)
        on_add(batch)
        return out

    buffer.add = recorded_add


# -- sampling ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Stacking:
    """``VectorReplayBuffer`` keyword arguments that give windows of ``length`` items."""

    stack_num: int
    sample_avail: bool


def _stacking(sampling: SamplingSpec) -> _Stacking:
    """Tianshou's only sequence sampling is frame stacking (``data/buffer/buffer_base.py``,
    ``ReplayBuffer.get`` with ``stack_num``): a sampled index ``i`` comes with the
    observations ``prev^(L-1)(i) .. i``, where ``prev`` stays put at an episode's first
    stored transition. With ``sample_avail`` only indices whose stack holds ``L`` distinct
    transitions are drawn, uniformly over all envs (``manager.py:sample_indices``): windows
    inside one episode, i.e. boundary ``forbid``; it also serves ``cross``, which Tianshou
    cannot express (declared deviation). Without it every stored index is drawn and the
    stack is filled by repeating the episode's first stored observation (boundary ``pad``
    asked: Tianshou fills the front instead of padding the end)."""
    if sampling.period != 1:
        raise _unsupported(
            f"period {sampling.period}: Tianshou samples any stored index (no grid of starts)",
            "data/buffer/manager.py",
        )
    if sampling.distribution != "uniform-windows":
        raise _unsupported(
            f"sampling distribution {sampling.distribution!r}: VectorReplayBuffer draws a "
            "sub-buffer in proportion to its length, then an index uniformly "
            "(data/buffer/manager.py:sample_indices), i.e. uniformly over stored windows",
            "data/buffer/manager.py",
        )
    length = sampling.window_length
    if length == 1:
        return _Stacking(1, False)
    return _Stacking(length, sampling.boundary != "pad")


def _vector_buffer(num_envs: int, capacity: int, stacking: _Stacking, seed: int) -> Any:
    """``VectorReplayBuffer(capacity * B, B)``: one sub-buffer of ``ceil(capacity * B / B) =
    capacity`` transitions per env. Each sub-buffer draws from its own ``RandomState(seed)``
    (the same stream for all); the manager's draw of sub-buffers uses ``RandomState(42)``
    whatever the seed (``ReplayBufferManager.__init__`` passes on ``options``, which hold no
    seed)."""
    return VectorReplayBuffer(
        capacity * num_envs,
        num_envs,
        stack_num=stacking.stack_num,
        sample_avail=stacking.sample_avail,
        random_seed=seed,
    )


# -- preprocessing ----------------------------------------------------------------------------
_StepHook = Callable[[Any, Any], None]
_EpisodeHook = Callable[[Any], "dict[str, np.ndarray] | None"]


@dataclass(frozen=True)
class _Preprocessing:
    """A scenario's preprocessing written as Tianshou user code: the collector's
    ``on_step_hook`` (called on each vector step's rollout batch before its ``add``,
    ``data/collector.py:Collector._collect`` step 4), its ``on_episode_done_hook`` (step 10)
    and whether the buffer is a ``CachedReplayBuffer`` (``data/buffer/cached.py``)."""

    on_step: _StepHook | None = None
    on_episode_done: _EpisodeHook | None = None
    cached: bool = False
    exclusion: Exclusion | None = None
    """The user's rule of an :class:`~xpspec.adapters.tianshou_preprocess.ExcludingVectorBuffer`."""


def _scaled_rewards(scale: float, shift: float) -> _StepHook:
    """The user's reward transform: a new ``rew`` array for the batch the collector adds."""

    def hook(action_batch: Any, rollout: Any) -> None:
        rollout.rew = np.asarray(rollout.rew, dtype=np.float64) * scale + shift

    return hook


def _truncation_cleared(action_batch: Any, rollout: Any) -> None:
    """The user's "a truncated end is no end": a new, all-false ``truncated`` array. Assigned,
    not written in place: the batch's ``done`` is the collector's own ``done_R``, which decides
    the resets (``Collector._collect`` step 8); ``ReplayBuffer.add`` recomputes ``done`` from
    ``terminated | truncated`` (``data/buffer/buffer_base.py``)."""
    rollout.truncated = np.zeros_like(np.asarray(rollout.truncated))


def _annotated_outcome(episode: Any) -> dict[str, np.ndarray]:
    """The user's episode annotation: 1.0 on every transition of a terminated episode, 0.0
    on those of a truncated one, returned for the collector to write into the buffer."""
    success = bool(np.asarray(episode.terminated).reshape(-1)[-1])
    return {"annotation": np.full(len(episode), float(success))}


def _preprocessing(sc: TrainerScenario) -> _Preprocessing:
    """The user code of ``sc.preprocess``; raises Unsupported where Tianshou has no route."""
    p = sc.preprocess
    collector_py = "data/collector.py"
    if isinstance(p, Identity):
        return _Preprocessing()
    if isinstance(p, RewardTransform):
        return _Preprocessing(on_step=_scaled_rewards(float(p.scale), float(p.shift)))
    if isinstance(p, OverwriteStepType):
        if (p.to, p.when) != ("MID", "truncated-last"):
            raise _unsupported(
                f"OverwriteStepType(to={p.to!r}, when={p.when!r}): a buffer row has no step "
                "type, only the terminated/truncated flags of its transition "
                "(data/buffer/buffer_base.py:ReplayBuffer.add); clearing truncated (a truncated "
                "LAST becomes MID) is the one step-type edit on_step_hook can make",
                collector_py,
            )
        return _Preprocessing(on_step=_truncation_cleared)
    if isinstance(p, EpisodeDelayed):
        if p.keep != "all":
            raise _unsupported(
                f"EpisodeDelayed(keep={p.keep!r}): not driven by this adapter yet; "
                "CachedReplayBuffer.add moves every ended episode to the main buffer "
                "(data/buffer/cached.py:70-76), so dropping one by its outcome needs a "
                "subclass of it",
                "data/buffer/cached.py",
            )
        return _Preprocessing(on_episode_done=_annotated_outcome, cached=True)
    if isinstance(p, EXCLUSIONS):
        return _Preprocessing(exclusion=p)
    raise TypeError(f"preprocess: expected a preprocessor of xpspec.protocol, got {p!r}")


_NSTEP_HOOK = "not supported for n_step collection"
"""The ``ValueError`` ``Collector._collect`` (step 10) raises when an ``on_episode_done_hook``
returns fields while collecting ``n_step`` (the only collection a trainer of ``u`` vector steps
per training step makes)."""


def _cached_buffer(
    num_envs: int, capacity: int, stacking: _Stacking, seed: int, longest: int
) -> Any:
    """``CachedReplayBuffer(ReplayBuffer(capacity * B), B, longest)``: one cache per env,
    holding up to ``longest`` transitions (the run's vector steps, so no cache wraps), and a
    main buffer of ``capacity * B`` transitions shared by all envs that receives an env's
    cached episode when its last transition is added (``data/buffer/cached.py``)."""
    main = ReplayBuffer(
        capacity * num_envs,
        stack_num=stacking.stack_num,
        sample_avail=stacking.sample_avail,
        random_seed=seed,
    )
    return CachedReplayBuffer(main, num_envs, max(1, longest))


def _record_stores(
    buffer: Any, cached: bool, on_store: Callable[[list[Step]], None], method: str = "add"
) -> None:
    """Call ``on_store(rows)`` after every ``add`` of this ``ReplayBufferManager`` instance
    (or its ``method`` of the same signature: ``store_rows`` of the user's excluding buffer),
    with the rows it added read back from the buffer: the item is the ``obs`` at the index
    ``add`` returned (one frame, whatever ``stack_num``); it is FIRST when its env's sub-buffer was empty or its newest row was
    done before the add (how ``prev``/``next`` delimit episodes, ``data/buffer/manager.py``),
    else MID with that newest row's ``rew`` as the reward into it; the annotation is the
    buffer's ``annotation`` at that index (0 while it has none); none is LAST, so every
    discount is 1. An env's sub-buffer is its own (``VectorReplayBuffer``) or its cache
    (``CachedReplayBuffer``, ``buffer_ids + 1``)."""
    add = getattr(buffer, method)
    shift = 1 if cached else 0

    def recorded_add(batch: Any, buffer_ids: Any = None) -> Any:
        envs = range(len(batch)) if buffer_ids is None else np.asarray(buffer_ids).tolist()
        previous: list[tuple[float, bool] | None] = []
        for e in envs:
            sub = int(e) + shift
            newest = int(buffer.last_index[sub])
            held = len(buffer.buffers[sub]) > 0
            previous.append(
                (float(buffer.rew[newest]), bool(buffer.done[newest])) if held else None
            )
        out = add(batch, buffer_ids=buffer_ids)
        index = np.asarray(out[0])
        obs = buffer.get(index, "obs", stack_num=1)
        try:
            annotation = buffer.get(index, "annotation", stack_num=1)
        except KeyError:  # no field of that name in the buffer (yet)
            annotation = np.zeros(len(previous))
        notes = [float(a) for a in np.asarray(annotation).reshape(-1)]
        on_store(
            [
                transition_step(item, p, annotation=a)
                for item, p, a in zip(_items(obs), previous, notes)
            ]
        )
        return out

    setattr(buffer, method, recorded_add)


# -- prioritized replay -----------------------------------------------------------------------
def _run_prioritized(scenario: ReplayScenario) -> Trace:
    """Prioritized replay by ``PrioritizedVectorReplayBuffer(capacity * B, B, alpha, beta)``
    (``data/buffer/prio.py``, ``data/buffer/vecbuf.py``; ``weight_norm=True``, its default),
    filled by a ``Collector`` as in ``run_replay`` and by ``add_steps`` more vector steps of
    the same collector after every draw but the last. Before each draw the masses are read
    from the buffer's ``SegmentTree`` (``buffer.weight``) at every stored index; a draw is
    ``buffer.sample(batch_size)``, whose ``batch.weight`` is the importance weight Tianshou
    computed and whose probabilities are the tree's masses at the sampled indices over its
    total (``weight.reduce()``, what ``sample_indices`` draws by); then
    ``buffer.update_weight(indices, |td| + eps)`` with the scenario's TD error of each sampled
    transition, to which Tianshou adds its own float32 eps (1.2e-7). Windows longer than one
    transition are unsupported. A collect that Tianshou ends by raising (an episode as long as
    a sub-buffer, see :data:`_EMPTY_EPISODE`) ends the run: the trace so far, header
    ``stopped``."""
    spec, priority = scenario.env, scenario.priority
    assert priority is not None
    if scenario.sampling.window_length != 1:
        raise _unsupported(
            f"windows of {scenario.sampling.window_length} items under priorities: "
            "PrioritizedReplayBuffer draws single indices, and a frame stack is keyed by its "
            "last frame, not its first (spec: a window's priority is its first item's)",
            "data/buffer/prio.py",
        )
    events: list[Event] = []
    with _seeded(scenario.seed):
        policy = _CountingPolicy(spec)
        envs = _vector_env(spec, scenario.seed)
        buffer = PrioritizedVectorReplayBuffer(
            scenario.capacity * spec.num_envs,
            spec.num_envs,
            alpha=float(priority.alpha),
            beta=float(priority.beta),
        )
        _record_stores(buffer, False, lambda rows: events.append(store(0, rows)))
        collector = Collector(policy, envs, buffer)
        collector.reset()

        def collect(steps: int) -> str:
            """Collect ``steps`` vector steps; why Tianshou stopped, or ""."""
            try:
                collector.collect(n_step=steps * spec.num_envs)
            except ValueError as exc:
                if _EMPTY_EPISODE not in str(exc):
                    raise
                return f"ValueError: {exc}"
            return ""

        header = {"producer": f"tianshou {tianshou.__version__}"}
        stopped = collect(scenario.fill_steps) if scenario.fill_steps else ""
        for draw in range(scenario.draws if not stopped else 0):
            indices = buffer.sample_indices(0) if len(buffer) else np.zeros(0, dtype=int)
            items = _items(buffer.get(indices, "obs", stack_num=1)) if len(indices) else []
            masses = [float(m) for m in np.atleast_1d(buffer.weight[indices])] if items else []
            events.append(Priorities(draw, *item_columns(items), tuple(masses)))
            try:
                batch, sampled = buffer.sample(scenario.batch_size)
            except ValueError as exc:  # an empty buffer: NaN sub-buffer weights
                if _NAN_WEIGHTS not in str(exc):
                    raise
                events.extend((Sampled(draw, ()), Prioritized(draw, (), ())))
            else:
                total = float(buffer.weight.reduce())
                chosen = _items(buffer.get(sampled, "obs", stack_num=1))
                events.append(Sampled(draw, tuple((item,) for item in chosen)))
                events.append(
                    Prioritized(
                        draw,
                        tuple(float(m) / total for m in buffer.weight[sampled]),
                        tuple(float(w) for w in batch.weight),
                    )
                )
                new = np.array([float(priority.priority(item, draw)) for item in chosen])
                buffer.update_weight(sampled, new)
            if draw < scenario.draws - 1 and priority.add_steps:
                stopped = collect(priority.add_steps)
                if stopped:
                    break
    if stopped:
        header["stopped"] = stopped
    return Trace(tuple(events), header)


# -- trainer ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _TrainerPlan:
    """``OffPolicyTrainerParams`` of a trainer scenario, and the user code its preprocessing
    is written as."""

    preprocessing: _Preprocessing
    collect_steps: int
    """``c``: the env steps one training step collects (``collection_step_num_env_steps``)."""
    total_steps: int
    """``s``: the run's env steps, ``num_iterations * c`` or ``num_env_steps``."""
    batch_size: int
    updates_per_sample: float
    stacking: _Stacking

    @property
    def training_steps(self) -> int:
        """The run's training steps: ``ceil(s / c)`` (``TrainerParams.max_epochs``)."""
        return math.ceil(self.total_steps / self.collect_steps)


def _trainer_plan(sc: TrainerScenario) -> _TrainerPlan:
    """Tianshou's own configuration for ``sc``; raises Unsupported for what it lacks."""
    cfg, b = sc.trainer, sc.env.num_envs
    trainer_py = "trainer.py"
    if cfg.mode != "off-policy" or cfg.whole_buffer:
        raise _unsupported(
            "on-policy / whole-buffer training: the adapter drives OffPolicyTrainer, which "
            "samples batch_size transitions with replacement per gradient step "
            "(OffPolicyTrainer._sample_and_update); OnPolicyTrainer hands the whole buffer to "
            "the algorithm, whose own update loop does the mini-batching",
            trainer_py,
        )
    if cfg.drain is not None:
        raise _unsupported("drain mode: no scheduled asynchronous unroller", trainer_py)
    u = cfg.unroll_length
    if u.denominator != 1:
        raise _unsupported(
            f"unroll_length {u}: collection_step_num_env_steps = c collects ceil(c/B) vector "
            "steps every training step (Collector._collect), so only integer u is expressible",
            "data/collector.py",
        )
    if cfg.num_env_steps and cfg.env_step_count != "all":
        raise _unsupported(
            "env_step_count 'non-first': the trainer's env_step counts every collected "
            "transition (OnlineTrainer._TrainingStepResult.get_env_step_advancement)",
            trainer_py,
        )
    per_iteration = int(u) * b
    budget = cfg.num_env_steps and math.ceil(cfg.num_env_steps / per_iteration)
    if cfg.num_iterations and budget and budget < cfg.num_iterations:
        raise _unsupported(
            "training steps after the env-step budget: every training step of "
            "OnlineTrainer collects before it updates (OnlineTrainer._training_step)",
            trainer_py,
        )
    steps = cfg.num_iterations * per_iteration if cfg.num_iterations else cfg.num_env_steps
    _check_gate(sc, per_iteration)
    stacking = _stacking(sc.sampling)
    return _TrainerPlan(
        preprocessing=_preprocessing(sc),
        collect_steps=per_iteration,
        total_steps=steps,
        batch_size=cfg.mini_batch_size or b,
        updates_per_sample=cfg.num_updates_per_train_iter / per_iteration,
        stacking=stacking,
    )


def _check_gate(sc: TrainerScenario, per_iteration: int) -> None:
    """Tianshou has no warm-up gate: OffPolicyTrainer updates after every collect. A
    scenario is expressible iff its gate is already open at the first train call (every
    collected transition is stored, ``u`` per env)."""
    cfg, b = sc.trainer, sc.env.num_envs
    first = {
        "stored>=": per_iteration >= cfg.initial_collect_steps,
        "stored>": per_iteration > cfg.initial_collect_steps,
        "size>=": b * min(int(cfg.unroll_length), cfg.capacity) >= cfg.initial_collect_steps,
    }[cfg.warmup_gate]
    if not first:
        raise _unsupported(
            f"initial_collect_steps {cfg.initial_collect_steps} ({cfg.warmup_gate}): "
            "OffPolicyTrainer has no warm-up gate and updates after every collect "
            "(OffPolicyTrainer._update_step); warm-up is a manual collect before run(), "
            "outside the trainer's training steps",
            "trainer.py",
        )


@dataclass
class _TrainerRun:
    """One ``OffPolicyTrainer.run()`` on the toy env, recorded.

    Translation: ``collection_step_num_env_steps = u * B`` (``u`` vector steps per training
    step), ``update_step_num_gradient_steps_per_sample = n / (u * B)`` so that
    ``round(r * collected)`` (``OffPolicyTrainer._update_step``) is ``n`` gradient steps,
    ``batch_size = mini_batch_size`` (default ``B``), ``VectorReplayBuffer(capacity * B, B)``
    (``CachedReplayBuffer`` under episode-delayed preprocessing, :func:`_cached_buffer`),
    epochs of one training step each (``epoch_num_steps = u * B``, ``max_epochs`` the run's
    ``ceil(s / c)`` training steps for ``s = num_iterations * u * B`` or ``num_env_steps``;
    ``trainer.py:TrainerParams.max_epochs``), so every iteration ends at an epoch boundary,
    where Tianshou's logger saves and ``resume_from_log`` resumes
    (:mod:`xpspec.adapters.tianshou_checkpoint`); no test collector. ``run()`` resets the
    collector (the envs start episode 0) and keeps the buffer.

    Recording: one spec iteration is one training step (``Trainer._training_step``, counter
    ``_current_update_step``); its env steps come from the vector env, its stores from the
    buffer, read back after each ``add`` (:func:`_record_stores`); the train call is ``OffPolicyTrainer._update_step``; each update is one
    ``Algorithm.update``: the windows of its sampled batch (``_update_with_batch``), then
    ``after_update`` when ``Algorithm._update`` calls ``_postprocess_batch``. Tianshou calls
    nothing after a training step (``training_fn`` runs before it), so no ``after_train_iter``
    hook is recorded.
    """

    sc: TrainerScenario
    plan: _TrainerPlan
    events: list[Event] = field(default_factory=list)
    iteration: int = 0
    calls: int = 0
    index: int = 0
    stored: int = 0
    env_steps: int = 0

    def __post_init__(self) -> None:
        self.build(_vector_env(self.sc.env, self.sc.seed), self._new_buffer())

    def _new_buffer(self) -> Any:
        """The scenario's replay buffer, empty (see the class docstring)."""
        spec, pre = self.sc.env, self.plan.preprocessing
        if pre.cached:
            longest = self.plan.training_steps * self.plan.collect_steps // spec.num_envs
            return _cached_buffer(
                spec.num_envs, self.sc.trainer.capacity, self.plan.stacking, self.sc.seed, longest
            )
        if pre.exclusion is not None:
            return ExcludingVectorBuffer(
                self.sc.trainer.capacity * spec.num_envs,
                spec.num_envs,
                rule=pre.exclusion,
                stack_num=self.plan.stacking.stack_num,
                sample_avail=self.plan.stacking.sample_avail,
                random_seed=self.sc.seed,
            )
        return _vector_buffer(
            spec.num_envs, self.sc.trainer.capacity, self.plan.stacking, self.sc.seed
        )

    def _trainer_params(self) -> dict[str, Any]:
        """More ``OffPolicyTrainerParams`` (a checkpointed run's logger and checkpoint)."""
        return {}

    def build(self, envs: DummyVectorEnv, buffer: Any) -> None:
        """A policy, an algorithm, a collector over ``envs`` and ``buffer`` and a trainer, all
        new, recorded at their seams into this run's events and counts."""
        spec, pre = self.sc.env, self.plan.preprocessing
        self.envs = envs
        self.policy = _CountingPolicy(spec)
        self.algorithm = _RecordingAlgorithm(self.policy, self._update, self._after_update)
        self.stepper = _Stepper(envs, self.policy, self._env_rows)
        self.buffer = buffer
        if isinstance(buffer, ExcludingVectorBuffer):
            self._record_drops(buffer)
        seam = "add" if pre.exclusion is None else "store_rows"
        _record_stores(buffer, pre.cached, self._add, seam)
        self.collector = Collector(
            self.algorithm,
            envs,
            buffer,
            on_episode_done_hook=pre.on_episode_done,
            on_step_hook=pre.on_step,
        )
        params = OffPolicyTrainerParams(
            training_collector=self.collector,
            test_collector=None,
            max_epochs=self.plan.training_steps,
            epoch_num_steps=self.plan.collect_steps,
            collection_step_num_env_steps=self.plan.collect_steps,
            batch_size=self.plan.batch_size,
            update_step_num_gradient_steps_per_sample=self.plan.updates_per_sample,
            verbose=False,
            show_progress=False,
            **self._trainer_params(),
        )
        self.trainer = self.algorithm.create_trainer(params)
        training_step, update_step = self.trainer._training_step, self.trainer._update_step

        def recorded_training_step() -> Any:
            self.iteration += 1
            unroll = int(self.sc.trainer.unroll_length)
            self.events.append(IterationStart(self.iteration, self._counter(), unroll))
            result = training_step()
            self.events.append(
                IterationEnd(self.iteration, self._counter(), self.env_steps, self.stored, 0)
            )
            return result

        def recorded_update_step(collect_stats: Any) -> Any:
            self.events.append(
                TrainCall(self.iteration, self.calls, self._counter(), "trained", self.stored)
            )
            self.index = 0
            try:
                return update_step(collect_stats)
            finally:
                self.calls += 1

        self.trainer._training_step = recorded_training_step
        self.trainer._update_step = recorded_update_step

    def _counter(self) -> int:
        return int(self.trainer._current_update_step)

    def _record_drops(self, buffer: ExcludingVectorBuffer) -> None:
        """An ``Exclude`` event for every row the user's buffer leaves out."""
        drop = buffer.drop

        def recorded_drop(batch: Any, buffer_ids: np.ndarray, reason: str) -> None:
            drop(batch, buffer_ids, reason)
            self.events.append(exclude(self.iteration, _items(batch.obs), reason))

        buffer.drop = recorded_drop  # type: ignore[method-assign]

    def _env_rows(self, rows: list[Step]) -> None:
        self.events.append(env_step(self.iteration, rows))
        self.env_steps += len(rows)

    def _add(self, rows: list[Step]) -> None:
        self.events.append(store(self.iteration, rows))
        self.stored += len(rows)

    def _update(self, batch: Any) -> None:
        windows = decode_windows(_observations(batch.obs))
        mask = tuple((1,) * len(w) for w in windows)
        self.events.append(
            Update(self.iteration, self.calls, self.index, self._counter(), windows, mask)
        )

    def _after_update(self) -> None:
        self.events.append(Hook(self.iteration, "after_update"))
        self.index += 1

    def train(self) -> str | None:
        """``trainer.run()``; the ``stopped`` reason where Tianshou raises one of the errors
        that end a run (see :meth:`run`), else None."""
        try:
            self.trainer.run()
        except ValueError as exc:
            if _NO_WINDOW in str(exc):
                return f"ValueError: {exc} (no valid frame-stack window to sample)"
            if _NAN_WEIGHTS in str(exc) and len(self.buffer) == 0:
                return f"ValueError: {exc} (sampling an empty buffer)"
            if _NSTEP_HOOK in str(exc):
                return f"ValueError: {exc}"
            raise
        except KeyError as exc:
            if exc.args != ("obs",) or len(self.buffer) != 0:
                raise
            return (
                "KeyError: 'obs' (the collector reads an ended episode back from a buffer "
                "that holds no row yet)"
            )
        return None

    def run(self) -> Trace:
        header: dict[str, Any] = {"producer": f"tianshou {tianshou.__version__}"}
        stopped = self.train()
        if stopped is not None:
            header["stopped"] = stopped
        policy = self.sc.trainer.pending_at_end
        self.events.append(RunEnd(self.iteration, self.env_steps, policy, (), (), ()))
        return Trace(tuple(self.events), header)


# -- learner ----------------------------------------------------------------------------------
class _ToyCritic(ToyValue):
    """The toy value (float64, of Tianshou's observations) plus a zero-weighted parameter:
    PPO's optimiser needs one."""

    def __init__(self, scale: float) -> None:
        super().__init__(scale)
        self.weight = torch.nn.Parameter(torch.zeros(()))

    def forward(self, observation: Any, **kwargs: Any) -> torch.Tensor:
        values = super().forward(torch.as_tensor(observation_array(_observations(observation))))
        return (values + 0.0 * self.weight).reshape(-1, 1)


class _ProbeDistribution(torch.distributions.Distribution):
    """Action 0 with log-probability 0; while gradients are on, ``log_prob`` returns fresh
    zeros that require grad (kept in ``probes``). At ratio 1 PPO's clipped loss
    ``-mean(min(r A, clip(r) A))`` has gradient ``-A_i / n`` with respect to them, so the
    (normalised) advantages PPO trained with are ``-n * grad``."""

    arg_constraints: dict[str, Any] = {}  # noqa: RUF012 (torch's class attribute)

    def __init__(self, n: int, probes: list[torch.Tensor]) -> None:
        super().__init__(torch.Size([n]), validate_args=False)
        self.n = n
        self.probes = probes

    def sample(self, sample_shape: Any = None) -> torch.Tensor:
        return torch.zeros(self.n, dtype=torch.long)

    @property
    def mode(self) -> torch.Tensor:
        return self.sample()

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        probe = torch.zeros(self.n, dtype=torch.float64, requires_grad=torch.is_grad_enabled())
        if probe.requires_grad:
            self.probes.append(probe)
        return probe

    def entropy(self) -> torch.Tensor:
        return torch.zeros(self.n, dtype=torch.float64)


class _RowActor(torch.nn.Module):
    """The actor: reports the items of every batch it sees while gradients are on (the
    mini-batches of PPO's update loop) and hands ``dist_fn`` the batch size."""

    def __init__(self, seen: list[list[Item]]) -> None:
        super().__init__()
        self.seen = seen

    def forward(self, obs: Any, state: Any = None, info: Any = None) -> tuple[Any, Any]:
        items = _items(obs)
        if torch.is_grad_enabled():
            self.seen.append(items)
        return len(items), state


class _LearnerRun:
    """Learner-side preprocessing of a learner scenario by Tianshou's own code.

    Data: per env, a ``Collector`` of that env alone adds the transitions of its first
    ``steps`` time steps to a ``ReplayBuffer`` of exactly that size (an env's last
    transition is the buffer's ``unfinished_index`` unless done).

    - Advantages and value targets: ``PPO._preprocess_batch`` of each env's buffer
      (``A2C._add_returns_and_advantages`` calls ``Algorithm.compute_episodic_return`` with
      ``V(obs)`` and ``V(obs_next)``, masked by ``~terminated``; a truncated or unfinished
      last transition bootstraps). Tianshou keeps no row for an episode's final observation:
      the bootstrap row ``L`` is recorded with zeros and loss mask 0 as a stand-in (no
      ``bootstrap`` observable is declared: ``learner.bootstrap-timestep-masked`` is not
      applicable).
    - Normalised advantages and update plan: ``PPO._update_with_batch(batch, minibatch_size,
      num_epochs)`` on the envs' preprocessed batches concatenated env-major (the order
      ``VectorReplayBuffer.sample(0)`` returns), with ``advantage_normalization=True`` (per
      mini-batch ``(A - mean) / (std + 1e-8)``); its mini-batches come from
      ``Batch.split(minibatch_size, merge_last=True)`` (seeded numpy permutation), recorded by
      the actor, and the first epoch's normalised advantages from :class:`_ProbeDistribution`.
    - n-step targets: ``Algorithm.compute_nstep_return`` on each env's buffer with
      ``target_q_fn = V(obs_next)``; ``k`` is ``t(obs_next)`` of the index the walk stopped at
      (the one ``target_q_fn`` receives) minus ``t``.
    - Shards: Tianshou trains one learner, so the trace has no ``shard`` event and the adapter
      does not declare ``shards``.
    """

    def __init__(self, scenario: LearnerScenario) -> None:
        if scenario.num_learners != 1:
            raise _unsupported(
                f"{scenario.num_learners} learners: Tianshou trains one algorithm instance, "
                "with no sharding of episodes across learners"
            )
        self.sc = scenario
        self.seen: list[list[Item]] = []
        self.probes: list[torch.Tensor] = []

    def _buffers(self) -> list[tuple[Any, np.ndarray]]:
        out = []
        for env in range(self.sc.env.num_envs):
            count = transitions_observed(self.sc.env, self.sc.seed, env, self.sc.steps)
            if count == 0:
                continue
            buffer = ReplayBuffer(count)
            policy = _CountingPolicy(self.sc.env)
            collector = Collector(policy, _vector_env(self.sc.env, self.sc.seed, [env]), buffer)
            collector.reset()
            collector.collect(n_step=count)
            out.append((buffer, buffer.sample_indices(0)))
        return out

    def _ppo(self) -> Any:
        sc = self.sc
        probes = self.probes
        policy = ProbabilisticActorPolicy(
            actor=_RowActor(self.seen),
            dist_fn=lambda n: _ProbeDistribution(n, probes),
            action_space=toy_action_space(sc.env),
            observation_space=toy_observation_space(sc.env),
            action_scaling=False,
            action_bound_method=None,
        )
        return PPO(
            policy=policy,
            critic=_ToyCritic(float(sc.value_scale)),
            optim=TorchOptimizerFactory(torch.optim.SGD, lr=0.0),
            advantage_normalization=True,
            gamma=float(sc.gamma),
            gae_lambda=float(sc.lam),
        )

    def run(self) -> Trace:
        buffers = self._buffers()
        ppo = self._ppo()
        batches = [ppo._preprocess_batch(buf[idx], buf, idx) for buf, idx in buffers]
        events: list[Event] = []
        plan = UpdatePlan(0, ())
        normalized: dict[Item, float] = {}
        if batches:
            whole = Batch.cat(batches)
            rows = {item: i for i, item in enumerate(_items(whole.obs))}
            self.seen.clear()
            self.probes.clear()
            ppo.policy.is_within_training_step = True
            ppo._update_with_batch(whole, self.sc.minibatch_size, self.sc.num_epochs)
            minibatches = [tuple(rows[i] for i in items) for items in self.seen]
            plan = UpdatePlan(len(minibatches), tuple(minibatches))
            per_epoch = len(minibatches) // self.sc.num_epochs
            for items, probe in zip(self.seen[:per_epoch], self.probes[:per_epoch]):
                grad = probe.grad
                assert grad is not None
                for item, g in zip(items, grad.tolist()):
                    normalized[item] = -len(items) * g
            events.extend(self._advantages(batches, normalized))
        events.append(self._nstep(buffers))
        events.append(plan)
        return Trace(tuple(events), {"producer": f"tianshou {tianshou.__version__}"})

    def _advantages(self, batches: Sequence[Any], normalized: dict[Item, float]) -> list[Event]:
        """One event per episode, env-major, oldest first, the bootstrap row appended."""
        out: list[Event] = []
        for batch in batches:
            items = _items(batch.obs)
            adv = [float(a) for a in torch.as_tensor(batch.adv).reshape(-1).tolist()]
            ret = [float(r) for r in torch.as_tensor(batch.returns).reshape(-1).tolist()]
            for (e, k), rows in episode_rows(items).items():
                trained = [(items[i][2], adv[i], ret[i], normalized[items[i]]) for i in rows]
                out.append(standin_bootstrap(e, k, trained))
        return out

    def _nstep(self, buffers: Sequence[tuple[Any, np.ndarray]]) -> NStep:
        rows = [row for buffer, idx in buffers for row in self._nstep_rows(buffer, idx)]
        starts = item_columns([start for start, _, _ in rows])
        return NStep(*starts, tuple(g for _, g, _ in rows), tuple(k for _, _, k in rows))

    def _nstep_rows(self, buffer: Any, idx: np.ndarray) -> list[tuple[Item, float, int]]:
        """``(start, target, k)`` of every transition of one env's buffer."""
        scale = float(self.sc.value_scale)
        stopped: list[np.ndarray] = []

        def target_q(buf: Any, indices: np.ndarray) -> torch.Tensor:
            stopped.append(np.asarray(indices).copy())
            observation = observation_array(_observations(buf.obs_next[indices]))
            return toy_value(torch.as_tensor(observation).reshape(-1, 3), scale)

        batch = buffer[idx]
        out = Algorithm.compute_nstep_return(
            batch, buffer, idx, target_q, gamma=float(self.sc.gamma), n_step=self.sc.nstep
        )
        ends = _items(buffer.obs_next[stopped[0]])
        returns = torch.as_tensor(out.returns).reshape(-1).tolist()
        return [
            (start, float(g), end[2] - start[2])
            for start, end, g in zip(_items(batch.obs), ends, returns)
        ]


# -- relabel ----------------------------------------------------------------------------------
def _future_k(ratio: Fraction) -> float:
    """``future_k`` whose ``future_p = 1 - 1/future_k`` (``data/buffer/her.py``) is
    ``ratio``; ``inf`` for ratio 1."""
    return math.inf if ratio == 1 else float(1 / (1 - ratio))


@contextmanager
def _recording_choices(calls: list[np.ndarray]) -> Iterator[None]:
    """Record what ``np.random.choice`` returns while active: ``HERReplayBuffer.rewrite_
    transitions`` draws the relabeled episodes with it (``data/buffer/her.py``), once per
    sub-buffer with a non-empty sample; the buffers' own draws use ``RandomState`` methods
    and are not affected."""
    choice = np.random.choice

    def recorded(*args: Any, **kwargs: Any) -> Any:
        out = choice(*args, **kwargs)
        calls.append(np.asarray(out).copy())
        return out

    np.random.choice = recorded
    try:
        yield
    finally:
        np.random.choice = choice


class _RelabelRun:
    """``HERVectorReplayBuffer(n * B, B, compute_reward_fn, horizon=capacity, future_k)``
    filled by a ``Collector`` for ``fill_steps`` vector steps (the goal env's Dict
    observations stored as they are), then sampled ``draws`` times with ``sample``. A
    sub-buffer keeps ``n`` rows, i.e. ``n`` time steps plus the final observations its done
    rows hold as ``obs_next`` and, when its newest row is not done, that row's ``obs_next``
    (recorded as stored after the fill); ``n = rows_within_capacity(scenario)`` is the most rows that
    are at most ``capacity`` time steps in every env when the draws begin
    (:mod:`xpspec.kit.transition_rings`), so it holds no step the spec's ring has evicted.

    Tianshou relabels at sample time (``HERReplayBuffer.rewrite_transitions``), per
    sub-buffer: ``int(E * future_p)`` of the ``E`` distinct episodes among that env's sampled
    transitions are chosen (``np.random.choice``, recorded), and every sampled row of a chosen
    episode gets one goal, the achieved goal of ``obs_next`` at a future index of the
    episode's latest sampled transition. A chosen episode is the ``j``-th distinct episode in
    chronological order (``np.unique`` of the walk ends, sorted by first occurrence), i.e.
    the ``j``-th smallest episode index among that env's sampled rows; its rows' goal source
    ``(e, k, t')`` is decoded from the new desired goal ``[e, k, t']``, and every row's goal is recorded as the
    sampled ``obs.desired_goal`` holds it. Rows keep Tianshou's order (env-major)
    and its rewards (recomputed from ``obs_next`` for relabeled rows). ``horizon = capacity``
    lets the walk reach every stored episode's end.
    """

    def __init__(self, scenario: RelabelScenario) -> None:
        if scenario.strategy != "future":
            raise _unsupported(
                f"strategy {scenario.strategy!r}: HERReplayBuffer supports HER's 'future' "
                "strategy only",
                "data/buffer/her.py",
            )
        self.sc = scenario

    def run(self) -> Trace:
        sc = self.sc
        b = sc.env.num_envs
        buffer = HERVectorReplayBuffer(
            rows_within_capacity(sc) * b,
            b,
            compute_reward_fn=goal_rewards,
            horizon=sc.capacity,
            future_k=_future_k(sc.ratio),
            random_seed=sc.seed,
        )
        policy = _CountingPolicy(sc.env)
        envs = _vector_env(sc.env, sc.seed)
        events: list[Event] = []
        stepper = _Stepper(envs, policy, lambda rows: None)
        newest: dict[int, Step | None] = {}  # env -> its newest row's next step, if no LAST

        def on_add(batch: Any) -> None:
            events.append(self._store(stepper, batch))
            for nxt, terminated, truncated, rew in zip(
                _items(batch.obs_next),
                np.asarray(batch.terminated).reshape(-1),
                np.asarray(batch.truncated).reshape(-1),
                np.asarray(batch.rew, dtype=np.float64).reshape(-1),
            ):
                ended = terminated or truncated
                newest[nxt[0]] = None if ended else Step(nxt, _MID, float(rew))

        _record_adds(buffer, on_add)
        collector = Collector(policy, envs, buffer)
        collector.reset()
        collector.collect(n_step=sc.fill_steps * b)
        # The newest row of an episode in progress holds the next time step as obs_next
        # only; the buffer holds it (future goals are read from it), so it is stored too.
        trailing = [row for _, row in sorted(newest.items()) if row is not None]
        if trailing:
            events.append(store(0, trailing))
        for draw in range(sc.draws):
            calls: list[np.ndarray] = []
            with _recording_choices(calls):
                batch, _ = buffer.sample(sc.batch_size)
            events.append(self._relabel(draw, batch, calls))
        return Trace(tuple(events), {"producer": f"tianshou {tianshou.__version__}"})

    @staticmethod
    def _store(stepper: _Stepper, batch: Any) -> Store:
        rows = [stepper.rows[item] for item in _items(batch.obs)]
        for nxt, terminated, truncated, rew in zip(
            _items(batch.obs_next),
            np.asarray(batch.terminated).reshape(-1),
            np.asarray(batch.truncated).reshape(-1),
            np.asarray(batch.rew, dtype=np.float64).reshape(-1),
        ):
            if terminated or truncated:
                rows.append(last_step(nxt, float(rew), bool(terminated)))
        return store(0, rows)

    def _relabel(self, draw: int, batch: Any, calls: list[np.ndarray]) -> Relabel:
        items = _items(batch.obs)
        goals = decode_items(batch.obs.desired_goal)
        envs = sorted({e for e, _, _ in items})
        if len(calls) != len(envs):
            raise RuntimeError(
                f"expected one relabeling draw per sampled env ({len(envs)}), got {len(calls)}"
            )
        chosen: set[tuple[int, int]] = set()
        for sub, picks in zip(envs, calls):
            episodes = sorted({k for e, k, _ in items if e == sub})
            chosen.update((sub, episodes[int(j)]) for j in np.asarray(picks).reshape(-1))
        sources: list[Item] = []
        for item, (ge, gk, gt) in zip(items, goals):
            e, k = item[0], item[1]
            if (e, k) in chosen:
                sources.append((int(ge), int(gk), int(gt)))
            elif (float(ge), float(gk), float(gt)) != self.sc.env.desired_goal(self.sc.seed, e, k):
                raise RuntimeError(f"the goal of {item} changed, yet its episode was not chosen")
            else:
                sources.append((-1, -1, -1))
        env, episode, t = item_columns(items)
        goal_env, goal_episode, goal_t = item_columns(sources)
        values = tuple(
            tuple(float(v) for v in row)
            for row in np.asarray(batch.obs.desired_goal, dtype=np.float64).reshape(len(items), -1)
        )
        rewards = tuple(float(r) for r in np.asarray(batch.rew, dtype=np.float64).reshape(-1))
        return Relabel(draw, env, episode, t, goal_env, goal_episode, goal_t, values, rewards)


# -- the adapter ------------------------------------------------------------------------------
class TianshouAdapter:
    """Tianshou 2.0.1 behind the xpspec protocol (see the module docstring)."""

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name="tianshou",
            framework="Tianshou",
            framework_version=tianshou.__version__,
            protocol_version=PROTOCOL_VERSION,
            capabilities=(
                "env",
                "trainer",
                "replay",
                "learner",
                "relabel",
                "counter",
                "state",
                "nstep",
                "priorities",
                "importance-weights",
                "recurrent",
                "stack",
                "checkpoint",
            ),
            issue_tracker="https://github.com/thu-ml/tianshou/issues",
            notes=(
                "Rows are named by the observation the policy acted on; the final observation "
                "of an episode is never a row of its own (the collector resets in the same "
                "step). No 'hooks' observable: Tianshou calls nothing after a training step "
                "(its after-update point, Algorithm._postprocess_batch, is recorded)."
            ),
            extra_versions={
                "torch": torch.__version__,
                "gymnasium": gymnasium.__version__,
                "numpy": np.__version__,
            },
        )

    def smoke(self) -> None:
        check_release("tianshou", tianshou.__version__, _VERSION)
        self.run_env(EnvScenario(EnvSpec(), steps=2))

    def run_env(self, scenario: EnvScenario) -> Trace:
        """``Collector.collect(n_step=steps * B)`` after ``Collector.reset()``: ``steps``
        vector steps, recorded as the module docstring says."""
        spec = scenario.env
        events: list[Event] = []
        with _seeded(scenario.seed):
            policy = _CountingPolicy(spec)
            envs = _vector_env(spec, scenario.seed)
            _Stepper(envs, policy, lambda rows: events.append(env_step(0, rows)), True)
            collector = Collector(
                policy,
                envs,
                VectorReplayBuffer(scenario.steps * spec.num_envs, spec.num_envs),
            )
            collector.reset()
            collector.collect(n_step=scenario.steps * spec.num_envs)
        return Trace(tuple(events), {"producer": f"tianshou {tianshou.__version__}"})

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        """One ``OffPolicyTrainer.run()`` (see :class:`_TrainerRun`); with a checkpoint spec,
        saved after an epoch and resumed through Tianshou's ``save_checkpoint_fn`` and
        ``resume_from_log`` (:mod:`xpspec.adapters.tianshou_checkpoint`)."""
        plan = _trainer_plan(scenario)
        with _seeded(scenario.seed):
            if scenario.checkpoint is not None:
                from xpspec.adapters.tianshou_checkpoint import run_checkpointed

                return run_checkpointed(scenario, plan)
            return _TrainerRun(scenario, plan).run()

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        """Fill: ``Collector.collect(n_step=fill_steps * B)`` into ``VectorReplayBuffer(capacity
        * B, B)``, one store per ``add``, read back from the buffer (:func:`_record_stores`). Draws: ``VectorReplayBuffer.sample(batch_size)``;
        windows longer than one item are frame stacks (see :func:`_stacking`). A draw Tianshou
        refuses with ``ValueError`` is recorded as an empty draw (``replay.no-window``): from an
        empty buffer ``sample_indices`` divides by the total length 0 and numpy rejects the NaN
        probabilities; with frame stacks and no valid window it draws from an empty array.
        A scenario with a priority spec runs ``PrioritizedVectorReplayBuffer`` (see
        :func:`_run_prioritized`)."""
        if scenario.priority is not None:
            return _run_prioritized(scenario)
        stacking = _stacking(scenario.sampling)
        spec = scenario.env
        events: list[Event] = []
        with _seeded(scenario.seed):
            policy = _CountingPolicy(spec)
            envs = _vector_env(spec, scenario.seed)
            buffer = _vector_buffer(spec.num_envs, scenario.capacity, stacking, scenario.seed)
            _record_stores(buffer, False, lambda rows: events.append(store(0, rows)))
            if scenario.fill_steps:
                collector = Collector(policy, envs, buffer)
                collector.reset()
                collector.collect(n_step=scenario.fill_steps * spec.num_envs)
            for draw in range(scenario.draws):
                try:
                    batch, _ = buffer.sample(scenario.batch_size)
                except ValueError as exc:  # Tianshou's answer to "no valid window"
                    if _NO_WINDOW not in str(exc) and _NAN_WEIGHTS not in str(exc):
                        raise
                    events.append(Sampled(draw, ()))
                    continue
                events.append(Sampled(draw, decode_windows(_observations(batch.obs))))
        return Trace(tuple(events), {"producer": f"tianshou {tianshou.__version__}"})

    def run_learner(self, scenario: LearnerScenario) -> Trace:
        """Learner-side preprocessing by Tianshou's own code (see :class:`_LearnerRun`)."""
        run = _LearnerRun(scenario)
        with _seeded(scenario.seed):
            return run.run()

    def run_relabel(self, scenario: RelabelScenario) -> Trace:
        """Sample-time relabeling by ``HERVectorReplayBuffer`` (see :class:`_RelabelRun`)."""
        run = _RelabelRun(scenario)
        with _seeded(scenario.seed):
            return run.run()

    def run_recurrent(self, scenario: RecurrentScenario) -> Trace:
        """A counting recurrent model rolled out by ``Collector``, stacked by
        ``VectorReplayBuffer(stack_num=...)`` and trained by ``DQN`` (see
        :mod:`xpspec.adapters.tianshou_recurrent`)."""
        from xpspec.adapters.tianshou_recurrent import run_recurrent

        return run_recurrent(scenario)

    def run_stack(self, scenario: StackScenario) -> Trace:
        """Tianshou's ``FrameStack`` env wrapper in the rollout, stacks rebuilt at sample time
        by ``VectorReplayBuffer(stack_num=...)`` (see :mod:`xpspec.adapters.tianshou_stack`)."""
        from xpspec.adapters.tianshou_stack import run_stack

        return run_stack(scenario)
