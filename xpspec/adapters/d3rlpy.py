"""Adapter over d3rlpy 2.8.0: its online loop ``QLearningAlgoBase.fit_online``, its collection
loop ``collect``, its ``ReplayBuffer`` on a ``FIFOBuffer`` and its transition pickers, driven on
the toy env and recorded at their seams (the gym env's ``step``, the buffer's ``append``, the
replay buffer's ``append``, ``clip_episode`` and ``sample_transition_batch``, ``fit_online``'s
per-step ``callback``). Nothing of d3rlpy is re-implemented; sources are cited as
``file:function`` of the installed ``d3rlpy`` package.

**Why 2.8.0.** d3rlpy 2.8.1, the newest release, requires ``gymnasium==1.0.0``, and xpspec
requires ``gymnasium>=1.1``: pip refuses to install them together. 2.8.0 requires
``gymnasium>=1.0.0`` and is the newest release that installs beside xpspec.

**One env.** d3rlpy has no vector env: ``fit_online`` and ``collect`` step one Gym env, and
``ReplayBuffer`` writes through one ``ExperienceWriter`` holding one active episode
(``dataset/writers.py:ExperienceWriter``). Scenarios with more than one env raise
``Unsupported``.

**Time steps and rows.** ``fit_online`` resets the env inside the loop step that ends an
episode (``algos/qlearning/base.py:fit_online``: ``clip_episode`` then ``env.reset()``), so
the policy never acts on a LAST (spec variant ``same-step`` of ``timestep.auto-reset``). Each
loop step appends ``(o_t, a_t, r_t+1)`` to the active episode; the writer appends the buffer
entry ``(episode, t - 1)`` once ``o_t`` arrives (``ExperienceWriter.write``) and, when the
episode terminated, the entry of its last observation at ``clip_episode(True)``. A buffer entry
is a transition picked from the episode at sampling time (``transition_pickers.py``). The
adapter names the entry ``(episode, i)`` by its observation ``o_i`` decoded from the episode's
own ``observations`` array: FIRST if ``i == 0``, else MID with the reward into it, read from the
episode's ``rewards[i - 1]``. The LAST is never an entry of its own.

**Trainer iterations.** One spec iteration is ``update_interval`` loop steps of ``fit_online``;
``fit_online`` makes a train call at the end of the step whose ``total_step`` is a multiple of
``update_interval`` when its gate ``total_step > update_start_step and
buffer.transition_count > batch_size`` is open: ``n_updates`` samples
``sample_transition_batch(batch_size)`` and ``update``s. When the gate is shut the call is
recorded with status ``warmup``. Knobs: ``unroll_length`` -> ``update_interval`` (integers
only), ``num_updates_per_train_iter`` -> ``n_updates``, ``mini_batch_size`` -> the algorithm's
``batch_size`` (default 1), ``initial_collect_steps`` -> ``update_start_step``, ``capacity`` ->
``FIFOBuffer(limit=capacity)`` (a limit in transitions), ``num_iterations`` ->
``n_steps = num_iterations * u``, ``num_env_steps`` -> ``n_steps``. d3rlpy has no iteration
counter and no ``after_update`` / ``after_train_iter`` hook: the trace's counter is the
algorithm's ``grad_step``, declared as the ``update-counter`` observable (not ``counter``): an
update carries the value ``QLearningAlgoBase.update`` hands to it, read when the update
samples its batch, before d3rlpy increments it; no hook event is recorded. The Q-network's policy is stateless.

**Preprocessing** (clauses ``preprocess.*``). ``fit_online`` takes any replay buffer; the
user's objects are in :mod:`xpspec.adapters.d3rlpy_preprocess`, over a ``FilteringFIFO`` (a
``FIFOBuffer`` as the ``BufferProtocol``) whose ``keep`` and ``drop`` the adapter wraps: every
entry d3rlpy's writer hands the buffer is recorded from the entry's own episode, as stored
(Store) or left out with the rule's reason (Exclude). ``RewardTransform``: the
``WriterPreprocessProtocol`` a ``ReplayBuffer`` applies to each appended step
(``dataset/writers.py``), whose ``process_reward`` scales and shifts. ``ExcludeSteps`` and
``ExcludeEpisodes``: the buffer's ``append(episode, index)`` leaves out an entry whose
observation the rule selects. ``EpisodeDelayed``: ``ReplayBuffer(write_at_termination=True)``,
whose writer holds every step in its active episode and hands the buffer the episode's entries
at ``clip_episode`` (``ExperienceWriter.clip_episode``); with ``keep`` ``success`` or
``failure`` the ``ReplayBuffer`` subclass's ``clip_episode(terminated)`` makes its buffer leave
out an episode of the other outcome (reason ``outcome``). An ``append`` that gave the buffer no
entry is recorded as a Hold of the step the writer's active episode took; what one
``clip_episode`` hands over is one release, its stores annotated with the episode's
``terminated`` flag, which ``clip_episode`` sets; ``pending`` and the run end's items are the
steps the writer's active episode still holds (``ReplayBuffer._writer._active_episode``).
``fit_online`` closes the run with ``clip_episode(False)``, whose entries are recorded after
the last iteration. Refused: ``ExcludeTasks`` (a buffer sees an entry's observations, actions
and rewards; ``fit_online`` drops the env's ``info``, which alone holds the task id) and
``OverwriteStepType`` (a ``ReplayBuffer`` stores no step type, only an episode's
``terminated`` flag).

**Replay.** ``run_replay`` fills the buffer with d3rlpy's ``collect`` for ``fill_steps`` steps
and draws ``sample_transition_batch(batch_size)`` for windows of one item, else
``sample_trajectory_batch(batch_size, length)`` (``dataset/replay_buffer.py:ReplayBuffer``:
``np.random.randint`` over the buffer's entries, seeded through numpy's global state as
``d3rlpy.seed`` seeds it). A trajectory window ends at the drawn entry; its items before the
episode's first step are zero observations with mask 0, recorded as padding (``None``). A draw
from an empty buffer raises ``ValueError`` (numpy's ``randint(0)``) and is recorded as an
empty draw (``replay.no-window``). A ``FIFOBuffer`` of limit 1 raises ``IndexError`` on its
second entry (``dataset/buffers.py:FIFOBuffer.append``); the run then ends with the header's
``stopped``, in trainer, replay and stack runs alike.

**Frame stacking.** ``run_stack`` drives d3rlpy's ``FrameStack`` env wrapper under ``collect``
and a ``ReplayBuffer`` of last frames stacked at sample time by ``FrameStackTransitionPicker``
(:mod:`xpspec.adapters.d3rlpy_stack`).

**Checkpoint and resume** (``run_trainer`` with a checkpoint spec): ``save`` and
``d3rlpy.load_learnable``, ``set_grad_step``, ``ReplayBuffer.dump`` and ``ReplayBuffer.load``,
and a second ``fit_online`` call (:mod:`xpspec.adapters.d3rlpy_checkpoint`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

try:
    import d3rlpy
    import structlog
    from d3rlpy.algos import DQNConfig
    from d3rlpy.dataset import FIFOBuffer, ReplayBuffer
    from d3rlpy.logging import NoopAdapterFactory
    from d3rlpy.models.encoders import VectorEncoderFactory
except ImportError as exc:  # pragma: no cover - exercised only without the framework
    raise ImportError(
        f"xpspec.adapters.d3rlpy drives d3rlpy 2.8.0's API, which is not importable here ({exc})"
    ) from exc

import gymnasium
import numpy as np
import torch

from xpspec.adapters.d3rlpy_preprocess import (
    ExcludingFIFO,
    FilteringFIFO,
    OutcomeReplayBuffer,
    RewardTransformWriter,
)
from xpspec.kit.events import env_step, exclude, hold, run_end, store
from xpspec.kit.exclusion import EXCLUSIONS, Exclusion
from xpspec.kit.items import decode_item, decode_items, single_item_windows
from xpspec.kit.quiet import Generator, seeded_quiet
from xpspec.kit.release import check_release, producer
from xpspec.kit.rewards import affine_reward
from xpspec.kit.steps import Step, TransitionRows
from xpspec.protocol.adapter import PROTOCOL_VERSION, AdapterInfo, Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import EpisodeDelayed, ExcludeTasks
from xpspec.protocol.scenario import ReplayScenario, StackScenario, TrainerScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import (
    Event,
    Item,
    IterationEnd,
    IterationStart,
    Sampled,
    Trace,
    TrainCall,
    Update,
)
from xpspec.refimpl.toy_envs.gym_env import ToyEnv

__all__ = ["D3rlpyAdapter"]

_VERSION = "2.8.0"
_LINK = "https://github.com/takuseno/d3rlpy/blob/v2.8.0/d3rlpy"
_FIRST, _MID = int(StepType.FIRST), int(StepType.MID)
_GENERATORS: tuple[Generator, ...] = ("torch", "numpy", "random")


def _unsupported(reason: str, where: str) -> Unsupported:
    return Unsupported(f"{reason} (d3rlpy {_VERSION}, {where})", f"{_LINK}/{where}")


# -- quiet: d3rlpy logs through structlog to stdout ---------------------------------------------
@contextmanager
def _silenced(seed: int) -> Iterator[None]:
    """The seeded quiet context, with d3rlpy's structlog output (``logging/logger.py``, printed
    to stdout) filtered below ERROR; structlog's configuration is restored afterwards."""
    config = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    try:
        with seeded_quiet(seed, _GENERATORS):
            yield
    finally:
        structlog.configure(**config)


# -- d3rlpy's objects ---------------------------------------------------------------------------
def _check_env(spec: EnvSpec) -> None:
    if spec.num_envs != 1:
        raise _unsupported(
            f"{spec.num_envs} envs: d3rlpy has no vector env; fit_online and collect step one "
            "Gym env and ReplayBuffer writes through one ExperienceWriter with one active "
            "episode",
            "dataset/writers.py",
        )
    if spec.goals:
        raise _unsupported(
            "goal envs: ReplayBuffer signatures take array or tuple observations, not Dict "
            "ones, and d3rlpy has no hindsight relabeling",
            "dataset/replay_buffer.py",
        )


def _algo(batch_size: int) -> Any:
    """A DQN with a tiny encoder on the CPU (the spec is about experience, not learning)."""
    return DQNConfig(
        batch_size=batch_size,
        encoder_factory=VectorEncoderFactory(hidden_units=[8]),
    ).create(device="cpu:0")


class _RecordingFIFO(FIFOBuffer):
    """d3rlpy's ``FIFOBuffer`` reporting each entry once its own ``append`` has taken it."""

    def __init__(self, limit: int, on_append: Callable[[Any, int], None]) -> None:
        super().__init__(limit)
        self._on_append = on_append

    def append(self, episode: Any, index: int) -> None:
        super().append(episode, index)
        self._on_append(episode, index)


def _entry_step(episode: Any, index: int) -> Step:
    """The buffer entry ``(episode, index)`` named by its observation (module docstring)."""
    item = decode_item(np.asarray(episode.observations[index]))
    if index == 0:
        return Step(item, _FIRST, 0.0)
    return Step(item, _MID, float(np.asarray(episode.rewards[index - 1]).reshape(-1)[0]))


def _held(buffer: ReplayBuffer) -> list[Item]:
    """The steps d3rlpy's writer holds in its active episode (``ReplayBuffer._writer``,
    ``dataset/writers.py:ExperienceWriter._active_episode``), named by their observations."""
    active = buffer._writer._active_episode
    return decode_items(np.asarray(active.observations)) if active.size() else []


def _patch(obj: Any, name: str, function: Callable[..., Any]) -> None:
    """Replace method ``name`` of this one instance (its class and other instances keep it)."""
    setattr(obj, name, function)


class _StepRecorder(gymnasium.Wrapper[Any, Any, Any, Any]):
    """A pass-through wrapper reporting each step: the time step the env was in before it
    (FIRST after a reset, else MID with the reward the previous step returned) and the
    action."""

    def __init__(self, env: gymnasium.Env[Any, Any], on_step: Callable[[Step], None]) -> None:
        super().__init__(env)
        self._on_step = on_step
        self._obs: Any = None
        self._rows = TransitionRows()

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        self._obs = obs
        self._rows.restart(0)
        return obs, info

    def step(self, action: Any) -> Any:
        item = decode_item(self._obs)
        self._on_step(self._rows.row(item, action=int(np.asarray(action).reshape(-1)[0])))
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._rows.follow(0, float(reward), bool(terminated or truncated))
        self._obs = obs
        return obs, reward, terminated, truncated, info


# -- trainer scenarios --------------------------------------------------------------------------
@dataclass(frozen=True)
class _Preprocess:
    """The user's d3rlpy objects for a scenario's preprocessing: a writer preprocess's reward
    transform, an exclusion rule for an :class:`ExcludingFIFO`, or the ``keep`` of an
    :class:`OutcomeReplayBuffer` (episode-delayed); all None for identity."""

    reward: tuple[float, float] | None = None
    exclusion: Exclusion | None = None
    keep: str | None = None


@dataclass(frozen=True)
class _OnlineConfig:
    """``fit_online`` arguments of a trainer scenario."""

    update_interval: int
    n_updates: int
    batch_size: int
    update_start_step: int
    limit: int
    n_steps: int
    preprocess: _Preprocess


def _online_config(scenario: TrainerScenario) -> _OnlineConfig:
    """d3rlpy's own configuration for ``scenario``; raises Unsupported for what it lacks."""
    _check_env(scenario.env)
    cfg = scenario.trainer
    loop = "algos/qlearning/base.py"
    if cfg.mode != "off-policy":
        raise _unsupported("on-policy mode: d3rlpy's online loop is off-policy Q-learning", loop)
    if cfg.drain is not None:
        raise _unsupported("drain mode: fit_online steps its env synchronously", loop)
    u = cfg.unroll_length
    if u.denominator != 1:
        raise _unsupported(
            f"unroll_length {u}: fit_online's update_interval is an integer number of steps",
            loop,
        )
    if cfg.whole_buffer:
        raise _unsupported("whole-buffer training: fit_online samples mini-batches at random", loop)
    if cfg.mini_batch_length != 1:
        raise _unsupported(
            f"mini_batch_length {cfg.mini_batch_length}: fit_online samples single "
            "transitions (sample_transition_batch)",
            loop,
        )
    if cfg.warmup_gate == "size>=":
        raise _unsupported(
            "warm-up gate on the buffer size: fit_online compares total_step with "
            "update_start_step",
            loop,
        )
    s = scenario.sampling
    if s.period != 1 or s.distribution != "uniform-windows":
        raise _unsupported(
            "sampling with a period or another distribution: ReplayBuffer.sample_transition "
            "draws an entry uniformly (np.random.randint)",
            "dataset/replay_buffer.py",
        )
    if cfg.num_env_steps and cfg.env_step_count != "all":
        raise _unsupported("fit_online's n_steps counts every step, FIRST ones included", loop)
    n = int(u)
    if cfg.num_iterations:
        total = cfg.num_iterations * n
        if cfg.num_env_steps and math.ceil(cfg.num_env_steps / n) < cfg.num_iterations:
            raise _unsupported(
                "training iterations after the env-step budget: fit_online stops stepping "
                "and training together after n_steps",
                loop,
            )
    else:
        total = cfg.num_env_steps
    return _OnlineConfig(
        update_interval=n,
        n_updates=cfg.num_updates_per_train_iter,
        batch_size=cfg.mini_batch_size or 1,
        update_start_step=cfg.initial_collect_steps,
        limit=cfg.capacity,
        n_steps=total,
        preprocess=_preprocess(scenario),
    )


def _preprocess(scenario: TrainerScenario) -> _Preprocess:
    """The user's d3rlpy route for the scenario's preprocessing (module docstring); raises
    Unsupported for what none of them expresses."""
    p = scenario.preprocess
    if isinstance(p, ExcludeTasks):
        raise _unsupported(
            "preprocessing ExcludeTasks: a BufferProtocol's append sees an entry's episode "
            "(observations, actions, rewards), and fit_online drops the env's info, which "
            "alone holds the task id",
            "algos/qlearning/base.py",
        )
    if isinstance(p, EXCLUSIONS):
        return _Preprocess(exclusion=p)
    if isinstance(p, EpisodeDelayed):
        return _Preprocess(keep=p.keep)
    try:
        return _Preprocess(reward=affine_reward(p))
    except TypeError as exc:
        raise _unsupported(
            f"{exc}: a ReplayBuffer stores no step type (an episode keeps one terminated "
            "flag), and its writer preprocess maps each observation, action and reward to "
            "one value",
            "dataset/writers.py",
        ) from None


class _TrainerRun:
    """One ``fit_online`` run, recorded: env steps from the env wrapper, stores and
    exclusions from the user's buffer's ``keep`` and ``drop``, holds and releases from the
    replay buffer's ``append`` and ``clip_episode`` (episode-delayed), train calls and
    updates from ``sample_transition_batch``, iteration ends from ``fit_online``'s per-step
    ``callback``."""

    def __init__(self, scenario: TrainerScenario, config: _OnlineConfig) -> None:
        self.scenario, self.config = scenario, config
        self.events: list[Event] = []
        self.iteration = 0
        self.calls = 0
        self.update_index = 0
        self.trained = False
        self.stored = 0
        self.entries = 0
        self.env_steps = 0
        self.release: list[tuple[Any, int, str | None]] | None = None
        self.algo = _algo(config.batch_size)
        self.env = _StepRecorder(ToyEnv(scenario.env, 0, scenario.seed), self._on_env_step)
        self.delayed = config.preprocess.keep is not None
        self.buffer = self._replay_buffer(self._recording(self._new_fifo()), env=self.env)

    def _replay_buffer(self, fifo: FilteringFIFO, **kwargs: Any) -> ReplayBuffer:
        """The user's ``ReplayBuffer`` over ``fifo`` (``kwargs`` go to its constructor), its
        writes (episode-delayed) and draws recorded."""
        p = self.config.preprocess
        writer = self._writer()
        if p.keep is None:
            return self._install(ReplayBuffer(fifo, writer_preprocessor=writer, **kwargs))
        return self._install(
            OutcomeReplayBuffer(fifo, p.keep, writer_preprocessor=writer, **kwargs)
        )

    def _writer(self) -> RewardTransformWriter | None:
        """The user's writer preprocess (a reward transform), if any."""
        reward = self.config.preprocess.reward
        return None if reward is None else RewardTransformWriter(*reward)

    def _install(self, buffer: ReplayBuffer) -> ReplayBuffer:
        """``buffer`` as the run's, its writes (episode-delayed) and draws recorded."""
        self.buffer = buffer
        if self.delayed:
            self._wrap_writes()
        self._record_draws()
        return buffer

    def _record_draws(self) -> None:
        """The buffer's ``sample_transition_batch`` records each train call's first draw and
        every update's batch."""
        sample = self.buffer.sample_transition_batch

        def sample_batch(batch_size: int) -> Any:
            if not self.trained:
                self.events.append(
                    TrainCall(self.iteration, self.calls, self._counter(), "trained", self.stored)
                )
                self.trained, self.update_index = True, 0
            batch = sample(batch_size)
            windows = single_item_windows(decode_items(batch.observations))
            self.events.append(
                Update(
                    self.iteration,
                    self.calls,
                    self.update_index,
                    self._counter(),
                    windows,
                    ((1,),) * len(windows),
                )
            )
            self.update_index += 1
            return batch

        _patch(self.buffer, "sample_transition_batch", sample_batch)

    def _new_fifo(self) -> FilteringFIFO:
        """The user's ``BufferProtocol``: a ``FilteringFIFO``, or an ``ExcludingFIFO`` with
        the scenario's exclusion rule."""
        c = self.config
        rule = c.preprocess.exclusion
        return FilteringFIFO(c.limit) if rule is None else ExcludingFIFO(c.limit, rule)

    def _recording(self, fifo: FilteringFIFO) -> FilteringFIFO:
        """``fifo`` with its ``keep`` and ``drop`` wrapped to record each entry d3rlpy's
        writer hands it."""
        keep, drop = fifo.keep, fifo.drop

        def kept(episode: Any, index: int) -> None:
            keep(episode, index)
            self._on_entry(episode, index, None)

        def dropped(episode: Any, index: int, reason: str) -> None:
            drop(episode, index, reason)
            self._on_entry(episode, index, reason)

        _patch(fifo, "keep", kept)
        _patch(fifo, "drop", dropped)
        return fifo

    def _wrap_writes(self) -> None:
        """Episode-delayed: an ``append`` that gave the buffer no entry holds the step d3rlpy's
        active episode took last; what one ``clip_episode`` hands the buffer is one release."""
        buffer = self.buffer
        append, clip = buffer.append, buffer.clip_episode

        def appended(observation: Any, action: Any, reward: Any) -> None:
            entries = self.entries
            append(observation, action, reward)
            if self.entries == entries:
                self.events.append(hold(self.iteration, _held(buffer)[-1:]))

        def clipped(terminated: bool) -> None:
            self.release = []
            try:
                clip(terminated)
            finally:
                release, self.release = self.release, None
                self._on_release(release)

        _patch(buffer, "append", appended)
        _patch(buffer, "clip_episode", clipped)

    def _counter(self) -> int:
        return int(self.algo.grad_step)

    def _on_env_step(self, step: Step) -> None:
        if self.env_steps % self.config.update_interval == 0:
            self.iteration += 1
            self.events.append(
                IterationStart(self.iteration, self._counter(), self.config.update_interval)
            )
        self.events.append(env_step(self.iteration, [step]))
        self.env_steps += 1

    def _on_entry(self, episode: Any, index: int, reason: str | None) -> None:
        """An entry the user's buffer kept (``reason`` None) or left out; within a release,
        collected until ``clip_episode`` returns."""
        self.entries += 1
        if self.release is not None:
            self.release.append((episode, index, reason))
        elif reason is None:
            self.events.append(store(self.iteration, [_entry_step(episode, index)]))
            self.stored += 1
        else:
            self.events.append(exclude(self.iteration, [_entry_step(episode, index).item], reason))

    def _on_release(self, release: list[tuple[Any, int, str | None]]) -> None:
        """One Store of the entries kept, annotated with their episode's ``terminated``
        flag, which ``clip_episode`` sets when it shrinks the episode; one Exclude per reason
        for the entries left out."""
        kept = [
            replace(_entry_step(episode, index), annotation=float(bool(episode.terminated)))
            for episode, index, reason in release
            if reason is None
        ]
        if kept:
            self.events.append(store(self.iteration, kept))
            self.stored += len(kept)
        for why in dict.fromkeys(r for _, _, r in release if r is not None):
            items = [_entry_step(e, i).item for e, i, r in release if r == why]
            self.events.append(exclude(self.iteration, items, why))

    def _pending(self) -> list[Item]:
        """Episode-delayed: the steps d3rlpy's active episode holds, which no clip has handed
        the buffer yet."""
        return _held(self.buffer) if self.delayed else []

    def _on_step_end(self, algo: Any, epoch: int, total_step: int) -> None:
        """``fit_online``'s callback, after every loop step: the iteration ends at the step
        that is a multiple of ``update_interval``, where fit_online makes its train call."""
        if total_step % self.config.update_interval:
            # a last, partial iteration (num_env_steps): fit_online evaluates no train gate
            # there (it trains only when total_step % update_interval == 0), so no TrainCall
            if total_step == self.config.n_steps:
                self._end_iteration()
            return
        if self.trained:
            self.calls += 1
        else:
            self.events.append(
                TrainCall(self.iteration, self.calls, self._counter(), "warmup", self.stored)
            )
            self.calls += 1
        self.trained = False
        self._end_iteration()

    def _end_iteration(self) -> None:
        """The iteration's end, with the steps the writer still holds as its ``pending``."""
        pending = len(self._pending())
        self.events.append(
            IterationEnd(self.iteration, self._counter(), self.env_steps, self.stored, pending)
        )

    def run(self) -> Trace:
        header: dict[str, Any] = {"producer": producer("d3rlpy")}
        try:
            self._fit_online()
        except IndexError as exc:
            header["stopped"] = _stopped(exc, self.iteration)
        policy = self.scenario.trainer.pending_at_end
        self.events.append(run_end(self.iteration, self.env_steps, policy, self._pending()))
        return Trace(tuple(self.events), header)

    def _fit_online(self, n_steps: int | None = None) -> None:
        """One ``fit_online`` call of ``n_steps`` loop steps (default: the scenario's)."""
        c = self.config
        n = c.n_steps if n_steps is None else n_steps
        self.algo.fit_online(
            self.env,
            self.buffer,
            n_steps=n,
            n_steps_per_epoch=n,
            update_interval=c.update_interval,
            n_updates=c.n_updates,
            update_start_step=c.update_start_step,
            logger_adapter=NoopAdapterFactory(),
            show_progress=False,
            callback=self._on_step_end,
        )


def _stopped(exc: IndexError, iteration: int) -> str:
    """The header's ``stopped`` for d3rlpy's ``FIFOBuffer`` of one transition, which raises
    on the entry that would evict one (``dataset/buffers.py:FIFOBuffer.append`` reads
    ``_transitions[1]``); any other IndexError propagates."""
    if "deque index out of range" not in str(exc):
        raise exc
    return (
        f"IndexError: {exc} (FIFOBuffer.append of a full buffer with limit 1, "
        f"dataset/buffers.py; the trace ends in iteration {iteration})"
    )


# -- replay scenarios ---------------------------------------------------------------------------
def _check_sampling(scenario: ReplayScenario) -> None:
    s = scenario.sampling
    where = "dataset/replay_buffer.py"
    if s.period != 1:
        raise _unsupported(f"period {s.period}: d3rlpy samples any stored entry", where)
    if s.distribution != "uniform-windows":
        raise _unsupported(
            f"distribution {s.distribution!r}: ReplayBuffer draws an entry uniformly over all "
            "stored transitions (np.random.randint)",
            where,
        )


def _draw(buffer: ReplayBuffer, batch_size: int, length: int) -> tuple[Any, ...]:
    """One draw: ``sample_transition_batch`` for windows of one item, else
    ``sample_trajectory_batch``, whose windows end at the drawn entry and hold zero
    observations with mask 0 before the episode's first step
    (``dataset/trajectory_slicers.py:BasicTrajectorySlicer``): those are padding."""
    if length == 1:
        batch = buffer.sample_transition_batch(batch_size)
        return single_item_windows(decode_items(batch.observations))
    trajectories = buffer.sample_trajectory_batch(batch_size, length)
    observations = np.asarray(trajectories.observations)
    masks = np.asarray(trajectories.masks).reshape(batch_size, length)
    return tuple(
        tuple(decode_item(observations[b, i]) if masks[b, i] else None for i in range(length))
        for b in range(batch_size)
    )


def _run_replay(scenario: ReplayScenario) -> Trace:
    _check_env(scenario.env)
    _check_sampling(scenario)
    events: list[Event] = []

    def on_append(episode: Any, index: int) -> None:
        events.append(store(0, [_entry_step(episode, index)]))

    env = ToyEnv(scenario.env, 0, scenario.seed)
    buffer = ReplayBuffer(_RecordingFIFO(scenario.capacity, on_append), env=env)
    if scenario.fill_steps:
        try:
            _algo(1).collect(env, buffer, n_steps=scenario.fill_steps, show_progress=False)
        except IndexError as exc:
            header = {"producer": producer("d3rlpy"), "stopped": _stopped(exc, 0)}
            return Trace(tuple(events), header)
    for draw in range(scenario.draws):
        try:
            windows = _draw(buffer, scenario.batch_size, scenario.sampling.window_length)
        except ValueError as exc:  # numpy's randint(0): nothing stored
            if "high <= 0" not in str(exc):
                raise
            events.append(Sampled(draw, ()))
            continue
        events.append(Sampled(draw, windows))
    return Trace(tuple(events), {"producer": producer("d3rlpy")})


# -- the adapter --------------------------------------------------------------------------------
class D3rlpyAdapter:
    """d3rlpy 2.8.0 (see the module docstring for the mapping)."""

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name="d3rlpy",
            framework="d3rlpy",
            framework_version=d3rlpy.__version__,
            protocol_version=PROTOCOL_VERSION,
            capabilities=("trainer", "replay", "update-counter", "stack", "checkpoint"),
            issue_tracker="https://github.com/takuseno/d3rlpy/issues",
            notes="DQN with a tiny encoder; fit_online on one env; FIFOBuffer replay",
            extra_versions={
                "torch": torch.__version__,
                "gymnasium": gymnasium.__version__,
                "numpy": np.__version__,
            },
        )

    def smoke(self) -> None:
        check_release("d3rlpy", d3rlpy.__version__, _VERSION)
        self.run_replay(ReplayScenario(EnvSpec(), capacity=4, fill_steps=3, batch_size=2))

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        """One ``fit_online`` run (see the module docstring for the mapping); with a checkpoint
        spec, saved and loaded through d3rlpy's own API
        (:mod:`xpspec.adapters.d3rlpy_checkpoint`)."""
        config = _online_config(scenario)
        with _silenced(scenario.seed):
            if scenario.checkpoint is not None:
                from xpspec.adapters.d3rlpy_checkpoint import CheckpointedRun

                return CheckpointedRun(scenario, config).run()
            return _TrainerRun(scenario, config).run()

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        """Fill with ``collect`` for ``fill_steps`` steps, then ``draws`` calls of
        ``sample_transition_batch`` (see the module docstring)."""
        with _silenced(scenario.seed):
            return _run_replay(scenario)

    def run_stack(self, scenario: StackScenario) -> Trace:
        """``FrameStack`` under ``collect`` and a ``ReplayBuffer`` of last frames stacked by
        ``FrameStackTransitionPicker`` (:mod:`xpspec.adapters.d3rlpy_stack`)."""
        from xpspec.adapters.d3rlpy_stack import run_stack

        return run_stack(scenario)
