"""Adapter over Stable-Baselines3 2.9.2: its ``DummyVecEnv``, the ``DQN`` training loop
(``OffPolicyAlgorithm.learn``), ``ReplayBuffer``, ``HerReplayBuffer``, ``NStepReplayBuffer``
and the ``PPO`` rollout buffer, driven on the toy env and recorded at their seams (the vec
env's step, the buffer's ``add`` and ``sample``, the algorithm's ``collect_rollouts`` and
``train``). Nothing of SB3 is re-implemented; sources are cited as ``file:function`` of the
installed ``stable_baselines3`` package.

**Time steps.** SB3's vec envs reset an env inside the step that ends its episode: the step
returns the next episode's first observation and moves the final one to
``infos[e]["terminal_observation"]`` (``common/vec_env/dummy_vec_env.py:step_wait``). A buffer
row is one transition ``(o_t, a_t, r_{t+1}, o_{t+1}, done, timeout)`` with ``o_{t+1}`` the
terminal observation at an episode end (``common/off_policy_algorithm.py:_store_transition``,
``common/buffers.py:ReplayBuffer.add``). Step types are derived from ``done`` and the resets,
never from the observation: an observation returned by a reset (the first one, or one that
follows ``done``) is FIRST, a ``terminal_observation`` is LAST (discount 0 unless
``TimeLimit.truncated``), any other MID.

- ``run_env`` records every time step the vec env returns, in order: a step that ends an
  env's episode returns two time steps of it (LAST, then FIRST), recorded as two events.
- ``run_trainer`` and ``run_replay`` name a row by ``o_t``, the time step the policy acted on
  (``EnvStep``) and the buffer stored as ``observations`` (``Store``); its reward and step
  type are those of ``o_t`` (the previous row's reward, FIRST after a ``done``). The LAST time
  step is never a time step the policy acts on nor a row of its own: it exists only as the
  final transition's ``next_observations``. So an episode of ``L`` transitions takes ``L``
  vector steps, where the spec's auto-reset takes ``L + 1`` (clause ``timestep.auto-reset``).
- ``run_relabel`` names the same rows and, for a row whose ``done`` is set, also the LAST it
  holds as ``next_observations`` (relabeled goals and rewards come from next observations).
  Its ring keeps ``buffer_size // n_envs`` rows per env, i.e. that many time steps plus one
  LAST per episode end among them, where the spec's ring keeps ``capacity`` time steps. The
  adapter gives it the most rows whose time steps, LASTs included, fit in ``capacity`` in
  every env when the draws begin (:mod:`xpspec.kit.transition_rings`): it then holds no step
  the spec's ring has evicted (``capacity * B`` would keep one more step per episode end).
- ``run_learner``: see :class:`_LearnerRun`.

**Trainer iterations.** One spec iteration is one ``collect_rollouts`` call of
``OffPolicyAlgorithm.learn`` (``train_freq = (u, "step")``: ``u`` vector steps) followed by
learn's gate ``num_timesteps > learning_starts``: when it opens, one train call
``train(gradient_steps, batch_size)`` whose ``gradient_steps`` replay samples are the updates;
when it stays shut, the call is recorded with status ``warmup``. Knobs: ``unroll_length`` ->
``train_freq`` (integers only), ``num_updates_per_train_iter`` -> ``gradient_steps``,
``mini_batch_size`` -> ``batch_size`` (default ``B``), ``initial_collect_steps`` ->
``learning_starts`` (same unit: items, ``num_timesteps`` grows by ``B`` per vector step and
every transition is stored; the gate is strict), ``capacity`` -> ``buffer_size = capacity * B``
(``buffer_size // n_envs`` rows per env), ``num_iterations`` -> ``learn(num_iterations * u * B)``,
``num_env_steps`` -> ``learn(num_env_steps)``. SB3 keys schedules and logs on
``num_timesteps`` and has no iteration counter: the trace's counter is ``num_timesteps`` (mode
per-iteration) or ``_n_updates`` (per-mini-batch, which ``DQN.train`` increments after its
loop). SB3 has no ``after_update`` or ``after_train_iter`` hook, so no hook event is recorded.
Its policies are stateless; the ``policy_state`` column holds the reference counting state
``t`` (clause ``timestep.state-reset`` holds trivially).

**Preprocessing** (clauses ``preprocess.*``). SB3's route is a ``ReplayBuffer`` subclass
passed as ``replay_buffer_class`` whose ``add`` does the work
(``common/off_policy_algorithm.py:OffPolicyAlgorithm._setup_model`` builds it,
``_store_transition`` calls its ``add`` once per vector step); the subclasses are in
:mod:`xpspec.adapters.sb3_preprocess`. What the user's ``add`` decides is recorded as it decides it
(Exclude with the rule's reason, Hold); what SB3 stored is read back from the buffer's arrays
after each ``ReplayBuffer.add`` (``observations``, ``rewards``, ``dones`` at ``pos - 1``, and
the subclass's ``annotations``), named as above, one Store event per ``add`` call; the RunEnd's
``pending`` items are the rows the subclass still holds. ``RewardTransform``: rewards scaled
and shifted before ``ReplayBuffer.add``; a row carries ``r_{t+1}``, so the transformed reward
shows as the next item's, and a FIRST's reward (no row holds one) stays 0. Exclusions
(``ExcludeSteps``, ``ExcludeEpisodes``, ``ExcludeTasks``, the task id from the step's
``info``; a stored row takes its step type and reward from the row stored before it, so
when the rule left out that row, which alone held them, it is named from the one before) and
``EpisodeDelayed`` (rows held until the ``done`` row, then added, annotated 1.0
unless ``TimeLimit.truncated``, or dropped when ``keep`` rejects the outcome; ``flush`` adds
what is held after ``learn``) run with one env only: ``ReplayBuffer.add`` writes every env's
row at one shared ``pos`` (``common/buffers.py:ReplayBuffer.add``), so with ``B > 1`` they
raise Unsupported. ``OverwriteStepType`` raises Unsupported: the buffer stores no step type,
only the ``done``/``timeouts`` of a transition's end. ``learn`` still trains once per
``collect_rollouts`` whatever was stored (the ``plain`` train accounting), and a train call
on a buffer that holds no row yet raises ``ValueError`` in ``ReplayBuffer.sample``: the run
stops there (header ``stopped``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

try:
    import stable_baselines3
    from stable_baselines3 import DQN, PPO, HerReplayBuffer
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.policies import ActorCriticPolicy
    from stable_baselines3.common.vec_env import DummyVecEnv, VecEnvWrapper
except ImportError as exc:  # pragma: no cover - exercised only without the framework
    raise ImportError(
        "xpspec.adapters.sb3 drives Stable-Baselines3 2.9.2's API, which is not importable "
        f"here ({exc})"
    ) from exc

import gymnasium
import numpy as np
import torch

from xpspec.adapters.sb3_preprocess import (
    EpisodeDelayedBuffer,
    ExcludingBuffer,
    HookedBuffer,
    RewardScalingBuffer,
    Row,
)
from xpspec.kit.episodes import (
    episode_rows,
    standin_bootstrap,
    transitions_observed,
)
from xpspec.kit.events import env_step, exclude, hold, run_end, store
from xpspec.kit.exclusion import EXCLUSIONS
from xpspec.kit.items import decode_item, decode_items, item_columns, single_item_windows
from xpspec.kit.quiet import quiet
from xpspec.kit.release import check_release
from xpspec.kit.steps import Step, TransitionRows, last_step, steps_from_columns
from xpspec.kit.transition_rings import rows_within_capacity
from xpspec.kit.value import toy_value
from xpspec.protocol.adapter import PROTOCOL_VERSION, AdapterInfo, Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    Identity,
    RewardTransform,
)
from xpspec.protocol.scenario import (
    EnvScenario,
    LearnerScenario,
    RelabelScenario,
    ReplayScenario,
    StackScenario,
    TrainerScenario,
)
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import (
    Advantages,
    Event,
    Item,
    IterationEnd,
    IterationStart,
    NStep,
    Relabel,
    Sampled,
    Store,
    Trace,
    TrainCall,
    Update,
    UpdatePlan,
)
from xpspec.refimpl.toy_envs.gym_env import make_env_fns

__all__ = ["SB3Adapter"]

_VERSION = "2.9.2"
_SRC = "stable_baselines3 2.9.2"
_LINK = "https://github.com/DLR-RM/stable-baselines3/tree/v2.9.2/stable_baselines3"
_FIRST, _MID = int(StepType.FIRST), int(StepType.MID)
_NSTEP = "n_steps" in inspect.signature(DQN.__init__).parameters
"""Whether DQN computes n-step returns (``n_steps`` and ``NStepReplayBuffer``, new in SB3
2.7.0): on an older release, which a version sweep drives, the adapter leaves the ``nstep``
observable out instead of breaking the learner scenarios."""
_NET = {"net_arch": [8]}
"""A tiny Q-network: the spec is about experience, not learning."""


# -- envs -------------------------------------------------------------------------------------
def _env_fns(spec: EnvSpec, seed: int) -> list[Callable[[], gymnasium.Env[Any, Any]]]:
    return list(make_env_fns(spec, seed))


def _vec_env(spec: EnvSpec, seed: int) -> DummyVecEnv:
    return DummyVecEnv(_env_fns(spec, seed))


def _patch(obj: Any, name: str, function: Callable[..., Any]) -> None:
    """Replace method ``name`` of this one instance (its class and other instances keep it)."""
    setattr(obj, name, function)


def _policy(spec: EnvSpec) -> str:
    return "MultiInputPolicy" if spec.goals else "MlpPolicy"


# -- the rows SB3 writes ----------------------------------------------------------------------
class _RowMapper:
    """Names the rows of SB3's ``add(obs, next_obs, action, reward, done, infos)`` calls.

    Row ``o_t`` of env ``e`` is item ``t``: FIRST if it is the env's first row or the previous
    row of that env was ``done``, else MID with the previous row's reward (the reward into
    ``t``). With ``with_last``, a row whose ``done`` is set also names the LAST it holds as
    ``next_obs`` (the terminal observation), with this row's reward and discount 0 unless
    ``TimeLimit.truncated``.
    """

    def __init__(self, with_last: bool) -> None:
        self.with_last = with_last
        self.rows = TransitionRows()

    def store(
        self, iteration: int, obs: Any, next_obs: Any, reward: Any, done: Any, infos: Any
    ) -> Store:
        items = decode_items(obs)
        rows = [self.rows.row(item) for item in items]
        ended = np.flatnonzero(done)
        if self.with_last:
            for e, last in zip(ended, decode_items(_take(next_obs, ended))):
                truncated = bool(infos[e].get("TimeLimit.truncated", False))
                rows.append(last_step(last, float(reward[e]), not truncated))
        for item, r, d in zip(items, np.asarray(reward).tolist(), np.asarray(done).tolist()):
            self.rows.follow(item[0], r, d)
        return store(iteration, rows)


def _take(obs: Any, rows: np.ndarray) -> Any:
    if isinstance(obs, dict):
        return {key: np.asarray(value)[rows] for key, value in obs.items()}
    return np.asarray(obs)[rows]


# -- the vector steps SB3 takes ---------------------------------------------------------------
class _StepRecorder(VecEnvWrapper):
    """A pass-through ``VecEnvWrapper`` that reports each vector step: the time step every
    env was in before it (FIRST after a reset or a ``done``, else MID with the reward the
    previous step returned; never LAST, see the module docstring) and the actions."""

    def __init__(self, venv: DummyVecEnv, on_step: Callable[[list[Step]], None]) -> None:
        super().__init__(venv)
        self._on_step = on_step
        self._obs: Any = None
        self._rows = TransitionRows()
        self._actions: Any = None

    def reset(self) -> Any:
        self._obs = self.venv.reset()
        self._rows = TransitionRows()
        return self._obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).copy()
        self.venv.step_async(actions)

    def step_wait(self) -> Any:
        obs, rewards, dones, infos = self.venv.step_wait()
        items = decode_items(self._obs)
        actions = np.asarray(self._actions).reshape(-1).tolist()
        self._on_step([self._rows.row(item, action=a) for item, a in zip(items, actions)])
        for item, r, d in zip(items, np.asarray(rewards).tolist(), np.asarray(dones).tolist()):
            self._rows.follow(item[0], r, d)
        self._obs = obs
        return obs, rewards, dones, infos


# -- translating trainer scenarios ------------------------------------------------------------
@dataclass(frozen=True)
class _DQNConfig:
    """SB3 ``DQN`` arguments and the ``learn`` budget of a trainer scenario."""

    train_freq: int
    gradient_steps: int
    batch_size: int
    learning_starts: int
    buffer_size: int
    total_timesteps: int


def _unsupported(reason: str) -> Unsupported:
    return Unsupported(f"{reason} ({_SRC})", _LINK)


def _check_sampling(length: int, period: int, distribution: str) -> None:
    if length != 1:
        raise _unsupported(
            f"window length {length}: SB3's ReplayBuffer samples single transitions "
            "(common/buffers.py:BaseBuffer.sample), there is no sequence sampling"
        )
    if period != 1:
        raise _unsupported(f"period {period}: SB3 samples any stored row (no period grid)")
    if distribution != "uniform-windows":
        raise _unsupported(
            f"sampling distribution {distribution!r}: SB3 draws a row uniformly, then an env "
            "uniformly (common/buffers.py:ReplayBuffer._get_samples), and cannot be configured"
        )


def _dqn_config(scenario: TrainerScenario) -> _DQNConfig:
    """SB3's own configuration for ``scenario``; raises Unsupported for what SB3 lacks."""
    cfg, b = scenario.trainer, scenario.env.num_envs
    if cfg.mode != "off-policy":
        raise _unsupported("on-policy mode: the adapter drives SB3's off-policy DQN loop")
    if cfg.drain is not None:
        raise _unsupported("drain mode: SB3 collects synchronously (no asynchronous unroller)")
    u = cfg.unroll_length
    if u.denominator != 1:
        raise _unsupported(
            f"unroll_length {u}: train_freq=(n, 'step') takes an integer number of vector "
            "steps (off_policy_algorithm.py:_convert_train_freq)"
        )
    if cfg.whole_buffer:
        raise _unsupported("whole-buffer training: DQN.train samples mini-batches at random")
    if cfg.warmup_gate == "size>=":
        raise _unsupported(
            "warm-up gate on the buffer size: learn() compares num_timesteps with learning_starts"
        )
    _check_sampling(cfg.mini_batch_length, scenario.sampling.period, scenario.sampling.distribution)
    n = int(u)
    per_iteration = n * b
    if cfg.num_env_steps and cfg.env_step_count != "all":
        raise _unsupported("num_timesteps counts every collected transition, FIRST ones included")
    if cfg.num_iterations:
        total = cfg.num_iterations * per_iteration
        if cfg.num_env_steps and math.ceil(cfg.num_env_steps / per_iteration) < cfg.num_iterations:
            raise _unsupported(
                "training iterations after the env-step budget: learn() stops collecting and "
                "training together once num_timesteps reaches total_timesteps"
            )
    else:
        total = cfg.num_env_steps
    return _DQNConfig(
        train_freq=n,
        gradient_steps=cfg.num_updates_per_train_iter,
        batch_size=cfg.mini_batch_size or b,
        learning_starts=cfg.initial_collect_steps,
        buffer_size=cfg.capacity * b,
        total_timesteps=total,
    )


@dataclass(frozen=True)
class _UserBuffer:
    """The ``replay_buffer_class`` and ``replay_buffer_kwargs`` a user passes to ``DQN`` for
    a preprocessing (no class: SB3's own ``ReplayBuffer``)."""

    cls: type[HookedBuffer] | None = None
    kwargs: tuple[tuple[str, Any], ...] = ()

    def dqn_kwargs(self) -> dict[str, Any]:
        if self.cls is None:
            return {}
        return {"replay_buffer_class": self.cls, "replay_buffer_kwargs": dict(self.kwargs)}


def _one_env_only(name: str, b: int, what: str) -> None:
    if b != 1:
        raise _unsupported(
            f"{name} with {b} envs: ReplayBuffer.add writes the rows of all envs at one shared "
            f"position pos (common/buffers.py:ReplayBuffer.add), so a replay_buffer_class "
            f"overriding add cannot {what} one env's row while adding the others'"
        )


def _user_buffer(scenario: TrainerScenario) -> _UserBuffer:
    """The ``ReplayBuffer`` subclass (:mod:`xpspec.adapters.sb3_preprocess`) that does the scenario's
    preprocessing; raises Unsupported for what no ``add`` override can express."""
    p, b = scenario.preprocess, scenario.env.num_envs
    name = type(p).__name__
    if isinstance(p, Identity):
        return _UserBuffer()
    if isinstance(p, RewardTransform):
        return _UserBuffer(
            RewardScalingBuffer, (("scale", float(p.scale)), ("shift", float(p.shift)))
        )
    if isinstance(p, EXCLUSIONS):
        _one_env_only(name, b, "leave out")
        return _UserBuffer(ExcludingBuffer, (("rule", p),))
    if isinstance(p, EpisodeDelayed):
        _one_env_only(name, b, "hold back")
        return _UserBuffer(EpisodeDelayedBuffer, (("keep", p.keep),))
    raise _unsupported(
        f"preprocessing {name}: SB3's ReplayBuffer stores no step type, only the done and "
        "timeouts flags of a transition's end (common/buffers.py:ReplayBuffer.add); a row's "
        "done ends its episode and makes the next row a FIRST, and a LAST is never a row of "
        "its own, so no add override changes the step type of one time step alone"
    )


def _silent(model: BaseAlgorithm) -> None:
    """Give ``model`` a logger that writes nothing: without one, every ``learn()`` makes a
    fresh empty log folder in the temporary directory (SB3 2.9.2
    ``common/utils.py:configure_logger`` -> ``common/logger.py:configure(folder=None)``)."""
    model.set_logger(Logger(folder=None, output_formats=[]))


def _dqn(venv: Any, spec: EnvSpec, config: _DQNConfig, seed: int, **kwargs: Any) -> DQN:
    model = DQN(
        _policy(spec),
        venv,
        train_freq=(config.train_freq, "step"),
        gradient_steps=config.gradient_steps,
        batch_size=config.batch_size,
        learning_starts=config.learning_starts,
        buffer_size=config.buffer_size,
        policy_kwargs=_NET,
        seed=seed,
        device="cpu",
        verbose=0,
        **kwargs,
    )
    _silent(model)
    return model


# -- recording a train run --------------------------------------------------------------------
class _StoredRows:
    """Reads back the row SB3 has just written into a ``ReplayBuffer``, from its arrays
    (index ``(pos - 1) % buffer_size``): row ``o_t`` of env ``e`` names item ``t``, FIRST if it
    is the env's first stored row or the env's previous stored row is ``done``, else MID with
    that row's reward (the reward into ``t``); its annotation is the buffer's ``annotations``
    entry where the user's buffer keeps one, else 0."""

    def __init__(self) -> None:
        self.rows = TransitionRows()

    def read(self, buffer: Any) -> list[Step]:
        row = (buffer.pos - 1) % buffer.buffer_size
        items = decode_items(buffer.observations[row])
        annotations = getattr(buffer, "annotations", None)
        notes = [0.0] * len(items) if annotations is None else annotations[row].tolist()
        out = [self.rows.row(item, annotation=a) for item, a in zip(items, notes)]
        done = buffer.dones[row].astype(bool).tolist()
        for item, r, d in zip(items, buffer.rewards[row].tolist(), done):
            self.rows.follow(item[0], r, d)
        return out


class _TrainerRun:
    """Wraps one DQN instance (``collect_rollouts``, ``train``, the buffer's ``add`` and
    ``sample``; with a user's buffer class also its ``store_row``, ``drop`` and ``hold``) and
    turns what it does into trainer events. One ``add`` call of ``_store_transition`` is one
    vector step: the rows it wrote into the buffer (read back from the buffer) are one Store
    event, after the Exclude and Hold events the user's ``add`` decided."""

    def __init__(self, scenario: TrainerScenario, config: _DQNConfig, user: _UserBuffer) -> None:
        self.scenario, self.config = scenario, config
        self.num_envs = scenario.env.num_envs
        self.per_update = scenario.trainer.counter_mode == "per-mini-batch"
        self.events: list[Event] = []
        self.iteration = 0
        self.open = False
        self.trained = False
        self.calls = 0
        self.update_index = 0
        self.stored = 0
        self.env_steps = 0
        self.rows = _StoredRows()
        self.written: list[Step] = []
        venv = _StepRecorder(_vec_env(scenario.env, scenario.seed), self._on_env_step)
        self.model = _dqn(venv, scenario.env, config, scenario.seed, **user.dqn_kwargs())
        self._wrap()

    def _counter(self) -> int:
        return int(self.model._n_updates if self.per_update else self.model.num_timesteps)

    @property
    def buffer(self) -> Any:
        buffer = self.model.replay_buffer
        assert buffer is not None
        return buffer

    def _wrap(self) -> None:
        model, buffer = self.model, self.buffer
        collect, train = model.collect_rollouts, model.train
        add, sample = buffer.add, buffer.sample
        hooked = isinstance(buffer, HookedBuffer)

        def collect_rollouts(*args: Any, **kwargs: Any) -> Any:
            self._close_iteration()
            self.iteration += 1
            self.events.append(
                IterationStart(self.iteration, self._counter(), self.config.train_freq)
            )
            result = collect(*args, **kwargs)
            self.open, self.trained = True, False
            return result

        def train_call(gradient_steps: int, batch_size: int) -> None:
            self.events.append(
                TrainCall(self.iteration, self.calls, self._counter(), "trained", self.stored)
            )
            self.update_index = 0
            train(gradient_steps=gradient_steps, batch_size=batch_size)
            self.trained = True
            self.calls += 1

        def add_rows(
            obs: Any, next_obs: Any, action: Any, reward: Any, done: Any, infos: Any
        ) -> None:
            add(obs, next_obs, action, reward, done, infos)
            if not hooked:
                self._read_row()
            self._flush_store()

        def sample_batch(batch_size: int, env: Any = None) -> Any:
            samples = sample(batch_size, env=env)
            windows = single_item_windows(decode_items(samples.observations))
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
            return samples

        _patch(model, "collect_rollouts", collect_rollouts)
        _patch(model, "train", train_call)
        _patch(buffer, "add", add_rows)
        _patch(buffer, "sample", sample_batch)
        if hooked:
            self._wrap_hooks(buffer)

    def _wrap_hooks(self, buffer: HookedBuffer) -> None:
        store_row, drop, keep = buffer.store_row, buffer.drop, buffer.hold

        def stored(row: Row) -> None:
            store_row(row)
            self._read_row()

        def dropped(rows: list[Row], reason: str) -> None:
            drop(rows, reason)
            items = [item for row in rows for item in decode_items(row.obs)]
            self.events.append(exclude(self.iteration, items, reason))

        def held(row: Row) -> None:
            keep(row)
            self.events.append(hold(self.iteration, decode_items(row.obs)))

        _patch(buffer, "store_row", stored)
        _patch(buffer, "drop", dropped)
        _patch(buffer, "hold", held)

    def _read_row(self) -> None:
        """Read the row just written, before a later write can overwrite it."""
        self.written.extend(self.rows.read(self.buffer))

    def _flush_store(self) -> None:
        """One Store event for the rows the current ``add`` call wrote (none: no event)."""
        if not self.written:
            return
        self.events.append(store(self.iteration, self.written))
        self.stored += len(self.written)
        self.written = []

    def _pending(self) -> list[Item]:
        buffer = self.buffer
        if not isinstance(buffer, HookedBuffer):
            return []
        return [item for row in buffer.held() for item in decode_items(row.obs)]

    def _on_env_step(self, rows: list[Step]) -> None:
        self.events.append(env_step(self.iteration, rows))
        self.env_steps += len(rows)

    def _close_iteration(self) -> None:
        """End the open iteration; learn() made no train call after its rollout iff its gate
        ``num_timesteps > learning_starts`` was shut."""
        if not self.open:
            return
        if not self.trained:
            self.events.append(
                TrainCall(self.iteration, self.calls, self._counter(), "warmup", self.stored)
            )
            self.calls += 1
        pending = len(self._pending())
        self.events.append(
            IterationEnd(self.iteration, self._counter(), self.env_steps, self.stored, pending)
        )
        self.open = False

    def _learn(self) -> None:
        """The run's ``learn`` calls (one; a checkpointed run makes two around a save)."""
        self.model.learn(self.config.total_timesteps)

    def run(self) -> Trace:
        header: dict[str, Any] = {"producer": f"sb3 {stable_baselines3.__version__}"}
        try:
            self._learn()
        except ValueError as exc:  # BaseBuffer.sample on an empty buffer: numpy randint(0, 0)
            if "high <= 0" not in str(exc):
                raise
            header["stopped"] = (
                f"ValueError: {exc} (ReplayBuffer.sample with no row stored, "
                "common/buffers.py:ReplayBuffer.sample; the trace ends in iteration "
                f"{self.iteration})"
            )
        else:
            self._close_iteration()
        policy = self.scenario.trainer.pending_at_end
        if policy == "flush" and "stopped" not in header:
            buffer = self.buffer
            if isinstance(buffer, EpisodeDelayedBuffer):
                buffer.flush()
                self._flush_store()
        self.events.append(run_end(self.iteration, self.env_steps, policy, self._pending()))
        return Trace(tuple(self.events), header)


# -- relabeling -------------------------------------------------------------------------------
def _n_sampled_goal(ratio: Fraction) -> int:
    """``n_sampled_goal`` whose ``her_ratio = 1 - 1/(n + 1)`` is ``ratio``
    (``her/her_replay_buffer.py:HerReplayBuffer.__init__``)."""
    if ratio == 1 or (ratio / (1 - ratio)).denominator != 1:
        raise _unsupported(
            f"relabel ratio {ratio}: SB3 relabels the fraction 1 - 1/(n_sampled_goal + 1) "
            "of a batch for an integer n_sampled_goal >= 0 (her_replay_buffer.py:__init__)"
        )
    return int(ratio / (1 - ratio))


# -- the adapter ------------------------------------------------------------------------------
class SB3Adapter:
    """Stable-Baselines3 2.9.2 (see the module docstring for the mapping)."""

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name="sb3",
            framework="Stable-Baselines3",
            framework_version=stable_baselines3.__version__,
            protocol_version=PROTOCOL_VERSION,
            capabilities=(
                *("env", "trainer", "replay", "learner", "relabel", "update-counter"),
                *(("nstep",) if _NSTEP else ()),
                "checkpoint",
                "stack",
            ),
            issue_tracker="https://github.com/DLR-RM/stable-baselines3/issues",
            notes="DQN with a tiny Q-network on DummyVecEnv; PPO's rollout buffer for GAE"
            + ("" if _NSTEP else "; no n-step returns (DQN has n_steps from SB3 2.7.0 on)"),
            extra_versions={
                "torch": torch.__version__,
                "gymnasium": gymnasium.__version__,
                "numpy": np.__version__,
            },
        )

    def smoke(self) -> None:
        check_release("stable-baselines3", stable_baselines3.__version__, _VERSION)
        with quiet():
            spec = EnvSpec()
            config = _DQNConfig(1, 1, 1, 0, 8, 2)
            _dqn(_vec_env(spec, 0), spec, config, 0).learn(2)

    # -- env ----------------------------------------------------------------------------------
    def run_env(self, scenario: EnvScenario) -> Trace:
        """The time steps SB3's ``DummyVecEnv`` returns for ``steps`` calls (the reset and
        ``steps - 1`` steps with action 0): one event per call, and one more after a step
        that ended episodes, holding the FIRSTs it returned for them."""
        venv = _vec_env(scenario.env, scenario.seed)
        b = venv.num_envs
        events: list[Event] = []
        zeros = np.zeros(b, dtype=np.int64)
        with quiet():
            obs = venv.reset()
            events.append(
                env_step(0, [Step(item, _FIRST, 0.0, action=0) for item in decode_items(obs)])
            )
            for _ in range(scenario.steps - 1):
                obs, rewards, dones, infos = venv.step(zeros)
                row = [
                    Step(item, _MID, float(r), action=0)
                    for item, r in zip(decode_items(obs), rewards)
                ]
                for e in np.flatnonzero(dones):
                    terminal = decode_item(infos[e]["terminal_observation"])
                    truncated = bool(infos[e].get("TimeLimit.truncated", False))
                    row[e] = last_step(terminal, float(rewards[e]), not truncated, action=0)
                events.append(env_step(0, row))
                firsts = [
                    Step(item, _FIRST, 0.0, action=0)
                    for item, done in zip(decode_items(obs), dones)
                    if done
                ]
                if firsts:
                    events.append(env_step(0, firsts))
        return Trace(tuple(events), {"producer": f"sb3 {stable_baselines3.__version__}"})

    # -- trainer ------------------------------------------------------------------------------
    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        """One ``DQN.learn`` run (see the module docstring for the mapping); with a checkpoint
        spec, saved and loaded through SB3's own API (:mod:`xpspec.adapters.sb3_checkpoint`)."""
        config = _dqn_config(scenario)
        user = _user_buffer(scenario)
        with quiet():
            if scenario.checkpoint is not None:
                from xpspec.adapters.sb3_checkpoint import CheckpointedRun

                return CheckpointedRun(scenario, config, user).run()
            return _TrainerRun(scenario, config, user).run()

    # -- replay -------------------------------------------------------------------------------
    def run_replay(self, scenario: ReplayScenario) -> Trace:
        """Fill: ``DQN.learn`` for ``fill_steps`` vector steps with the gate never open
        (``learning_starts`` = the whole budget), every transition stored by SB3's own
        ``_store_transition``. Draws: ``ReplayBuffer.sample(batch_size)``, seeded through
        ``DQN(seed=...)``; each sampled row is a window of one item. A draw from an empty
        buffer raises ``ValueError`` (``BaseBuffer.sample``: numpy ``randint(0, 0)``) and is
        recorded as an empty draw (``replay.no-window``)."""
        s = scenario.sampling
        _check_sampling(s.window_length, s.period, s.distribution)
        b = scenario.env.num_envs
        total = scenario.fill_steps * b
        config = _DQNConfig(1, 1, 1, total, scenario.capacity * b, total)
        events: list[Event] = []
        with quiet():
            model = _dqn(_vec_env(scenario.env, scenario.seed), scenario.env, config, scenario.seed)
            _record_stored(model, events)
            if total:
                model.learn(total)
            buffer = model.replay_buffer
            assert buffer is not None
            for draw in range(scenario.draws):
                try:
                    samples = buffer.sample(scenario.batch_size)
                except ValueError as exc:  # SB3's answer to "nothing stored"
                    if "high <= 0" not in str(exc):
                        raise
                    events.append(Sampled(draw, ()))
                    continue
                windows = single_item_windows(decode_items(samples.observations))
                events.append(Sampled(draw, windows))
        return Trace(tuple(events), {"producer": f"sb3 {stable_baselines3.__version__}"})

    # -- frame stacking -----------------------------------------------------------------------
    def run_stack(self, scenario: StackScenario) -> Trace:
        """``VecFrameStack`` under ``DQN.learn`` and its ``ReplayBuffer``
        (:mod:`xpspec.adapters.sb3_stack`)."""
        from xpspec.adapters.sb3_stack import run_stack

        return run_stack(scenario)

    # -- relabel ------------------------------------------------------------------------------
    def run_relabel(self, scenario: RelabelScenario) -> Trace:
        """Fill: ``DQN.learn`` with ``HerReplayBuffer(n_sampled_goal, goal_selection_strategy)``
        of ``rows_within_capacity(scenario)`` rows per env for ``fill_steps`` vector steps,
        never training; stores name each row's ``o_t`` and, at a ``done``, the LAST its
        ``next_observations`` hold, and after the fill the next time step each env's newest
        row holds if it is not ``done``. Draws:
        ``HerReplayBuffer.sample(batch_size)``; its virtual rows (the last ones, counted by
        wrapping ``_get_virtual_samples``) are relabeled, their goal source ``(e, k, t')``
        decoded from the new desired goal ``[e, k, t']``; every row's goal is recorded as SB3's
        sampled ``desired_goal`` holds it; rows keep SB3's order and rewards."""
        n_goals = _n_sampled_goal(scenario.ratio)
        b = scenario.env.num_envs
        total = scenario.fill_steps * b
        config = _DQNConfig(1, 1, 1, total, rows_within_capacity(scenario) * b, total)
        events: list[Event] = []
        with quiet():
            model = _dqn(
                _vec_env(scenario.env, scenario.seed),
                scenario.env,
                config,
                scenario.seed,
                replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs={
                    "n_sampled_goal": n_goals,
                    "goal_selection_strategy": scenario.strategy,
                },
            )
            _record_adds(model, _RowMapper(with_last=True), events)
            model.learn(total)
            buffer = model.replay_buffer
            assert isinstance(buffer, HerReplayBuffer)
            trailing = _trailing_steps(buffer)
            if trailing is not None:
                events.append(trailing)
            virtual = _count_virtual(buffer)
            for draw in range(scenario.draws):
                try:
                    samples = buffer.sample(scenario.batch_size)
                except RuntimeError as exc:  # no complete episode stored
                    raise _unsupported(
                        f"HerReplayBuffer.sample: {exc} (spec variant complete-episodes-only)"
                    ) from exc
                events.append(_relabel_event(draw, samples, virtual.pop()))
        return Trace(tuple(events), {"producer": f"sb3 {stable_baselines3.__version__}"})

    # -- learner ------------------------------------------------------------------------------
    def run_learner(self, scenario: LearnerScenario) -> Trace:
        """Learner-side preprocessing by SB3's own code (see :class:`_LearnerRun`)."""
        with quiet():
            return _LearnerRun(scenario).run()


def _record_stored(model: DQN, events: list[Event]) -> None:
    """Record every ``add`` of ``model``'s ``ReplayBuffer`` as a Store event (iteration 0),
    read back from the buffer's arrays (:class:`_StoredRows`)."""
    buffer = model.replay_buffer
    assert buffer is not None
    add, rows = buffer.add, _StoredRows()

    def add_row(obs: Any, next_obs: Any, action: Any, reward: Any, done: Any, infos: Any) -> None:
        add(obs, next_obs, action, reward, done, infos)
        events.append(store(0, rows.read(buffer)))

    _patch(buffer, "add", add_row)


def _record_adds(model: DQN, rows: _RowMapper, events: list[Event]) -> None:
    """Record every ``add`` of ``model``'s buffer as a Store event (iteration 0)."""
    buffer = model.replay_buffer
    assert buffer is not None
    add = buffer.add

    def add_row(obs: Any, next_obs: Any, action: Any, reward: Any, done: Any, infos: Any) -> None:
        events.append(rows.store(0, obs, next_obs, reward, done, infos))
        add(obs, next_obs, action, reward, done, infos)

    _patch(buffer, "add", add_row)


def _trailing_steps(buffer: HerReplayBuffer) -> Store | None:
    """The time steps that only the newest row of each env holds, as ``next_observations``
    of a row that is not ``done`` (MID, with that row's reward): stored, though no row of
    their own names them yet; None if every env's newest row ended its episode."""
    newest = (buffer.pos - 1) % buffer.buffer_size
    running = np.flatnonzero(~buffer.dones[newest].astype(bool))
    if running.size == 0:
        return None
    items = decode_items(buffer.next_observations["observation"][newest, running])
    return store(
        0, steps_from_columns(items, [_MID] * len(items), buffer.rewards[newest, running].tolist())
    )


def _count_virtual(buffer: HerReplayBuffer) -> list[int]:
    """Wrap ``_get_virtual_samples`` so that each sample leaves its virtual row count in the
    returned list (SB3 concatenates real rows, then virtual ones)."""
    counts: list[int] = []
    virtual = buffer._get_virtual_samples

    def get_virtual(batch_indices: np.ndarray, env_indices: np.ndarray, env: Any = None) -> Any:
        counts.append(len(batch_indices))
        return virtual(batch_indices, env_indices, env)

    _patch(buffer, "_get_virtual_samples", get_virtual)
    return counts


def _relabel_event(draw: int, samples: Any, virtual: int) -> Relabel:
    items = decode_items(samples.observations["observation"])
    real = len(items) - virtual
    goals = samples.observations["desired_goal"].detach().cpu().numpy()
    # the time step (e, k, t') whose achieved goal [e, k, t'] became a relabeled row's goal
    sources = [(-1, -1, -1)] * real + decode_items(goals[real:])
    env, episode, t = item_columns(items)
    goal_env, goal_episode, goal_t = item_columns(sources)
    values = tuple(tuple(float(v) for v in row) for row in goals.reshape(len(items), -1).tolist())
    rewards = tuple(float(r) for r in samples.rewards.reshape(-1).tolist())
    return Relabel(draw, env, episode, t, goal_env, goal_episode, goal_t, values, rewards)


# -- learner-side preprocessing ---------------------------------------------------------------
def _transitions(scenario: LearnerScenario, env: int) -> int:
    """The rows SB3 collects for env ``env``'s first ``steps`` time steps (it takes no step
    at a LAST)."""
    return transitions_observed(scenario.env, scenario.seed, env, scenario.steps)


class _ValuePolicy(ActorCriticPolicy):
    """The trivial policy the learner operation gives PPO: action 0 with log-probability 0,
    ``V(o) = value_scale * t(o)``. ``evaluate_actions`` returns, as log-probabilities, zeros
    that require grad (one tensor per mini-batch, kept in ``probes``): at ratio 1 PPO's
    policy loss ``-mean(min(A r, A clip(r)))`` has gradient ``-A_i / n`` with respect to
    them, so the advantages PPO's ``train`` used (normalised or not) are ``-n * grad``."""

    def __init__(self, *args: Any, value_scale: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.value_scale = value_scale
        self.probes: list[torch.Tensor] = []

    def _values(self, obs: Any) -> torch.Tensor:
        return toy_value(torch.as_tensor(obs, dtype=torch.float32), self.value_scale)

    def forward(
        self, obs: Any, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = int(obs.shape[0])
        return torch.zeros(n, dtype=torch.long), self._values(obs), torch.zeros(n)

    def predict_values(self, obs: Any) -> torch.Tensor:
        return self._values(obs)

    def evaluate_actions(
        self, obs: Any, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        probe = torch.zeros(int(obs.shape[0]), requires_grad=True)
        self.probes.append(probe)
        return self._values(obs), probe, torch.zeros(int(obs.shape[0]))

    def _predict(self, observation: Any, deterministic: bool = False) -> torch.Tensor:
        return torch.zeros(int(observation.shape[0]), dtype=torch.long)


@dataclass(frozen=True)
class _Rows:
    """PPO's rollout rows before ``train`` flattens them: ``[n_steps, n_envs]`` arrays."""

    items: list[list[Item]]
    advantages: np.ndarray
    returns: np.ndarray


class _LearnerRun:
    """Learner-side preprocessing of a learner scenario by SB3's own code.

    - Advantages and value targets: one ``PPO.learn`` iteration (``n_steps`` = the
      transitions of each env's first ``steps`` time steps, ``gamma``, ``gae_lambda = lam``)
      with :class:`_ValuePolicy`: ``OnPolicyAlgorithm.collect_rollouts`` adds
      ``gamma * V(terminal_observation)`` to the reward of a ``TimeLimit.truncated`` step and
      calls ``RolloutBuffer.compute_returns_and_advantage`` (bootstrapping the in-progress
      tail from ``V`` of the newest observation). SB3 keeps no row for an episode's final
      observation: the bootstrap row ``L`` is recorded with zeros and loss mask 0 as a stand-in
      (the adapter declares no ``bootstrap`` observable, so the check of
      ``learner.bootstrap-timestep-masked``, which the stand-in would pass by construction, is
      not applicable).
    - Normalised advantages: the values ``PPO.train`` used in the first epoch
      (``normalize_advantage=True``: per mini-batch, ``(A - mean) / (std + 1e-8)``), recovered
      from the gradient of its loss (see :class:`_ValuePolicy`).
    - Update plan: the mini-batches of ``RolloutBuffer.get(batch_size)`` over ``n_epochs``
      (``minibatch_size``, ``num_epochs``), recorded by wrapping ``_get_samples``; row
      ``e * n_steps + s`` of SB3's env-major flattening is training row ``e * n_steps + s``
      of the spec's canonical order.
    - n-step targets: per env, ``DQN(n_steps=nstep, gamma)`` (which selects
      ``NStepReplayBuffer``) collects that env's transitions without training;
      ``NStepReplayBuffer._get_samples`` over every stored row gives the n-step reward sum,
      ``next_observations`` and ``dones`` of the last row used and ``discounts = gamma^k``;
      the target is DQN's TD target ``reward + (1 - done) * discount * V(next_obs)``
      (``dqn/dqn.py:DQN.train``) with ``V = value_scale * t``, and ``k`` is ``t(next_obs) - t``.
    - Shards: SB3 trains one learner, so the trace has no ``shard`` event and the adapter
      does not declare ``shards``.
    """

    def __init__(self, scenario: LearnerScenario) -> None:
        self.scenario = scenario
        b = scenario.env.num_envs
        if scenario.num_learners != 1:
            raise _unsupported(
                f"{scenario.num_learners} learners: SB3 trains one algorithm instance, with "
                "no sharding of episodes across learners"
            )
        counts = [_transitions(scenario, e) for e in range(b)]
        if len(set(counts)) != 1:
            raise _unsupported(
                f"per-env transitions {counts} in the first {scenario.steps} time steps differ: "
                "PPO's rollout buffer holds n_steps transitions of every env "
                "(on_policy_algorithm.py:collect_rollouts) and takes no step at a LAST"
            )
        self.n_steps = counts[0]
        if self.n_steps * b < 2:
            raise _unsupported("PPO needs n_steps * n_envs > 1 (ppo/ppo.py:PPO.__init__)")
        if scenario.env.goals:
            raise _unsupported(
                "goal observations: NStepReplayBuffer refuses Dict observation spaces "
                "(off_policy_algorithm.py:_setup_model)"
            )
        if scenario.minibatch_size < 2:
            raise _unsupported("PPO with advantage normalisation needs batch_size > 1")

    def run(self) -> Trace:
        rows, plan, normalized = self._ppo()
        events: list[Event] = list(self._advantages(rows, normalized))
        if _NSTEP:
            events.append(self._nstep())
        events.append(plan)
        return Trace(tuple(events), {"producer": f"sb3 {stable_baselines3.__version__}"})

    # PPO: GAE, normalisation, update plan
    def _ppo(self) -> tuple[_Rows, UpdatePlan, dict[int, float]]:
        sc = self.scenario
        b = sc.env.num_envs
        model = PPO(
            _ValuePolicy,
            _vec_env(sc.env, sc.seed),
            n_steps=self.n_steps,
            batch_size=sc.minibatch_size,
            n_epochs=sc.num_epochs,
            gamma=float(sc.gamma),
            gae_lambda=float(sc.lam),
            ent_coef=0.0,
            normalize_advantage=True,
            policy_kwargs={"value_scale": float(sc.value_scale)},
            seed=sc.seed,
            device="cpu",
            verbose=0,
        )
        _silent(model)
        policy = model.policy
        assert isinstance(policy, _ValuePolicy)
        buffer = model.rollout_buffer
        snapshot: list[_Rows] = []
        minibatches: list[np.ndarray] = []
        train, get_samples = model.train, buffer._get_samples

        def train_once() -> None:
            snapshot.append(
                _Rows(
                    [decode_items(buffer.observations[s]) for s in range(self.n_steps)],
                    buffer.advantages.copy(),
                    buffer.returns.copy(),
                )
            )
            train()

        def samples(batch_inds: np.ndarray, env: Any = None) -> Any:
            minibatches.append(np.asarray(batch_inds).copy())
            return get_samples(batch_inds, env)

        _patch(model, "train", train_once)
        _patch(buffer, "_get_samples", samples)
        model.learn(self.n_steps * b)
        per_epoch = math.ceil(self.n_steps * b / sc.minibatch_size)
        normalized: dict[int, float] = {}
        for inds, probe in zip(minibatches[:per_epoch], policy.probes):
            grad = probe.grad
            assert grad is not None
            for i, g in zip(inds.tolist(), grad.tolist()):
                normalized[int(i)] = -len(inds) * g
        plan = UpdatePlan(len(minibatches), tuple(tuple(int(i) for i in m) for m in minibatches))
        return snapshot[0], plan, normalized

    def _advantages(self, rows: _Rows, normalized: dict[int, float]) -> Iterator[Advantages]:
        """One event per episode, env-major, oldest first, from SB3's ``[step, env]`` rows."""
        for e in range(self.scenario.env.num_envs):
            column = [rows.items[s][e] for s in range(self.n_steps)]
            for (_, k), trained in episode_rows(column).items():
                yield standin_bootstrap(
                    e,
                    k,
                    [
                        (
                            column[s][2],
                            rows.advantages[s, e],
                            rows.returns[s, e],
                            normalized[e * self.n_steps + s],
                        )
                        for s in trained
                    ],
                )

    # NStepReplayBuffer
    def _nstep(self) -> NStep:
        sc = self.scenario
        items: list[Item] = []
        targets: list[float] = []
        steps: list[int] = []
        scale = float(sc.value_scale)
        for e in range(sc.env.num_envs):
            n = _transitions(sc, e)
            if n == 0:
                continue
            venv = DummyVecEnv(_env_fns(sc.env, sc.seed)[e : e + 1])
            config = _DQNConfig(1, 1, 1, n, n + 1, n)
            model = _dqn(venv, sc.env, config, sc.seed, n_steps=sc.nstep, gamma=float(sc.gamma))
            model.learn(n)
            buffer = model.replay_buffer
            assert buffer is not None
            data = buffer._get_samples(np.arange(n))
            starts, ends = decode_items(data.observations), decode_items(data.next_observations)
            # n_steps == 1 selects the plain ReplayBuffer, whose samples carry no discounts:
            # DQN.train then uses gamma.
            discounts = (
                [float(sc.gamma)] * n
                if data.discounts is None
                else data.discounts.reshape(-1).tolist()
            )
            for start, end, reward, done, discount in zip(
                starts,
                ends,
                data.rewards.reshape(-1).tolist(),
                data.dones.reshape(-1).tolist(),
                discounts,
            ):
                items.append(start)
                targets.append(reward + (1.0 - done) * discount * scale * end[2])
                steps.append(end[2] - start[2])
        return NStep(*item_columns(items), tuple(targets), tuple(steps))
