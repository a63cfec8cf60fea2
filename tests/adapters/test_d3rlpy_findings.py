"""Minimal reproductions, with d3rlpy 2.8.0 and Gymnasium alone, of the findings that
xpspec/adapters/d3rlpy.expectations.toml declares. Skipped when d3rlpy is not installed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("d3rlpy")

import d3rlpy
import gymnasium
from d3rlpy.algos import DQNConfig
from d3rlpy.constants import ActionSpace
from d3rlpy.dataset import FIFOBuffer, ReplayBuffer, Signature
from d3rlpy.logging import NoopAdapterFactory
from d3rlpy.models.encoders import VectorEncoderFactory
from gymnasium import spaces


class _Counting(gymnasium.Env[np.ndarray, np.int64]):
    """Observation ``[t]``; episodes of ``length`` steps, terminated (or truncated)."""

    def __init__(self, length: int, truncate: bool = False) -> None:
        self.observation_space = spaces.Box(0, 100, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.length, self.truncate, self.t = length, truncate, 0

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        end = self.t == self.length
        obs = np.array([float(self.t)], np.float32)
        return obs, 1.0, end and not self.truncate, end and self.truncate, {}


def _buffer(store: Any, **kwargs: Any) -> ReplayBuffer:
    """A ``ReplayBuffer`` of one-float observations and two actions over ``store`` (a
    ``FIFOBuffer`` limit, or the user's buffer object); ``kwargs`` go to ``ReplayBuffer``."""
    return ReplayBuffer(
        FIFOBuffer(store) if isinstance(store, int) else store,
        observation_signature=Signature(dtype=[np.float32], shape=[(1,)]),
        action_signature=Signature(dtype=[np.int64], shape=[(1,)]),
        reward_signature=Signature(dtype=[np.float32], shape=[(1,)]),
        action_space=ActionSpace.DISCRETE,
        action_size=2,
        **kwargs,
    )


def _dqn() -> Any:
    """d3rlpy's DQN with batches of one transition and a tiny encoder, on the CPU."""
    return DQNConfig(batch_size=1, encoder_factory=VectorEncoderFactory(hidden_units=[8])).create(
        device="cpu:0"
    )


def _fit_online(
    env: gymnasium.Env[Any, Any], n_steps: int, batch_size: int
) -> list[tuple[int, int]]:
    """``(transition_count, grad_step)`` after every loop step of ``fit_online``."""
    algo = DQNConfig(
        batch_size=batch_size, encoder_factory=VectorEncoderFactory(hidden_units=[8])
    ).create(device="cpu:0")
    buffer = _buffer(100)
    seen: list[tuple[int, int]] = []
    algo.fit_online(
        env,
        buffer,
        n_steps=n_steps,
        n_steps_per_epoch=n_steps,
        logger_adapter=NoopAdapterFactory(),
        show_progress=False,
        callback=lambda a, epoch, step: seen.append((buffer.transition_count, a.grad_step)),
    )
    return seen


def test_a_transition_is_stored_one_loop_step_after_its_env_step() -> None:
    # fit_online appends (o_t, a_t, r_t+1) after stepping from o_t; the writer adds entry t
    # only when o_t+1 is appended, in the next loop step (dataset/writers.py,
    # ExperienceWriter.write). After the first step, whose transition is complete, nothing
    # is stored yet.
    seen = _fit_online(_Counting(10), n_steps=3, batch_size=1)
    assert [count for count, _ in seen] == [0, 1, 2]


def test_training_waits_for_more_transitions_than_the_batch_size() -> None:
    # update_start_step = 0 and update_interval = 1: fit_online still skips the update while
    # buffer.transition_count <= batch_size (algos/qlearning/base.py, fit_online).
    seen = _fit_online(_Counting(10), n_steps=6, batch_size=3)
    assert seen == [(0, 0), (1, 0), (2, 0), (3, 0), (4, 1), (5, 2)]


def test_a_truncated_episode_loses_its_last_transition() -> None:
    # Three steps, the third truncated: fit_online appends o_0, o_1, o_2 and calls
    # clip_episode(False); the transition from o_2 (its reward and the known next
    # observation o_3) is never stored, where a terminated episode stores all three.
    truncated = _fit_online(_Counting(3, truncate=True), n_steps=3, batch_size=1)
    terminated = _fit_online(_Counting(3), n_steps=3, batch_size=1)
    assert (truncated[-1][0], terminated[-1][0]) == (2, 3)


def test_collect_writes_no_entry_for_a_truncated_last_step_nor_the_step_in_progress() -> None:
    # collect, as fit_online, calls clip_episode(False) on a truncation and after its last
    # step (algos/qlearning/base.py, collect): three steps of a truncated episode store two
    # transitions, three of a longer episode store two, and one step stores none.
    counts = []
    for env, n_steps in ((_Counting(3, truncate=True), 3), (_Counting(10), 3), (_Counting(10), 1)):
        buffer = _buffer(100)
        _dqn().collect(env, buffer, n_steps=n_steps, show_progress=False)
        counts.append(buffer.transition_count)
    assert counts == [2, 2, 0]


def test_a_fifo_buffer_of_one_transition_raises_on_its_second() -> None:
    # FIFOBuffer.append, when full, compares _transitions[0] with _transitions[1]
    # (dataset/buffers.py), which a deque of one does not have.
    buffer = _buffer(1)
    buffer.append(np.array([0.0], np.float32), 0, 1.0)
    buffer.append(np.array([1.0], np.float32), 0, 1.0)
    with pytest.raises(IndexError, match="deque index out of range"):
        buffer.append(np.array([2.0], np.float32), 0, 1.0)


def test_a_window_near_an_episode_start_is_padded_in_front() -> None:
    # Three entries of one terminated episode; the window of length 3 that
    # sample_trajectory returns for the first entry ends there and is padded before it.
    buffer = _buffer(8)
    for t in range(3):
        buffer.append(np.array([float(t)], np.float32), 0, 1.0)
    buffer.clip_episode(True)
    episode, index = buffer.buffer[0]
    window = buffer.trajectory_slicer(episode, index, 3)
    assert window.masks.tolist() == [0.0, 0.0, 1.0]
    assert window.observations.reshape(-1).tolist() == [0.0, 0.0, 0.0]
    # sample_trajectory_batch draws the end entry uniformly, so such windows are drawn.
    np.random.seed(0)
    batch = buffer.sample_trajectory_batch(64, 3)
    assert (np.asarray(batch.masks).reshape(64, 3)[:, 0] == 0).any()


def _delayed_fit_online(env: gymnasium.Env[Any, Any], n_steps: int) -> tuple[list[int], Any]:
    """``transition_count`` after every loop step of ``fit_online`` on a
    ``ReplayBuffer(write_at_termination=True)``, and the buffer."""
    algo = _dqn()
    buffer = _buffer(100, write_at_termination=True)
    seen: list[int] = []
    algo.fit_online(
        env,
        buffer,
        n_steps=n_steps,
        n_steps_per_epoch=n_steps,
        logger_adapter=NoopAdapterFactory(),
        show_progress=False,
        callback=lambda a, epoch, step: seen.append(buffer.transition_count),
    )
    return seen, buffer


def _entries(buffer: ReplayBuffer) -> list[tuple[float, bool]]:
    """Each entry's observation ``t`` and its episode's ``terminated`` flag."""
    entries = (buffer.buffer[j] for j in range(buffer.transition_count))
    return [(float(e.observations[i][0]), bool(e.terminated)) for e, i in entries]


def test_write_at_termination_releases_an_episode_in_the_step_that_ends_it() -> None:
    # Episodes of 3 steps: each loop step holds (o_t, a_t, r_t+1) in the writer's active
    # episode; the step that ends the episode calls clip_episode, which writes o_0, o_1, o_2
    # (dataset/writers.py, ExperienceWriter.clip_episode) before fit_online resets the env:
    # no entry holds the final observation. A truncated episode's release lacks o_2, whose
    # entry clip_episode(False) never writes.
    seen, buffer = _delayed_fit_online(_Counting(3), n_steps=6)
    assert seen == [0, 0, 3, 3, 3, 6]
    assert _entries(buffer) == [(0.0, True), (1.0, True), (2.0, True)] * 2
    seen, buffer = _delayed_fit_online(_Counting(3, truncate=True), n_steps=6)
    assert seen == [0, 0, 2, 2, 2, 4]
    assert _entries(buffer) == [(0.0, False), (1.0, False)] * 2


def test_fit_online_writes_the_held_episode_but_its_last_step_at_the_end() -> None:
    # Eight steps of 3-step episodes: o_0, o_1 of the third episode are held when the loop
    # ends; its closing clip_episode(False) writes o_0 as an unterminated episode's entry and
    # discards o_1. Seven steps: o_0 alone is held, and clip_episode returns at once
    # (transition_count 0): nothing is written and the writer still holds it.
    _, buffer = _delayed_fit_online(_Counting(3), n_steps=8)
    assert _entries(buffer)[6:] == [(0.0, False)]
    _, buffer = _delayed_fit_online(_Counting(3), n_steps=7)
    assert len(_entries(buffer)) == 6
    assert buffer._writer._active_episode.size() == 1


class _DroppingOdd(FIFOBuffer):
    """A user's BufferProtocol leaving out every entry whose observation ``t`` is odd."""

    def append(self, episode: Any, index: int) -> None:
        if int(episode.observations[index][0]) % 2 == 0:
            super().append(episode, index)


def test_entries_a_user_buffer_leaves_out_take_no_update_away() -> None:
    # Once training starts, fit_online makes one update per loop step (update_interval 1)
    # whether the user's buffer kept the step's entry or left it out.
    algo = _dqn()
    buffer = _buffer(_DroppingOdd(100))
    seen: list[tuple[int, int]] = []
    algo.fit_online(
        _Counting(100),
        buffer,
        n_steps=10,
        n_steps_per_epoch=10,
        logger_adapter=NoopAdapterFactory(),
        show_progress=False,
        callback=lambda a, epoch, step: seen.append((buffer.transition_count, a.grad_step)),
    )
    assert [count for count, _ in seen] == [0, 1, 1, 2, 2, 3, 3, 4, 4, 5]
    assert [steps for _, steps in seen] == [0, 0, 0, 1, 2, 3, 4, 5, 6, 7]


def test_a_one_step_episode_is_not_clipped_and_joins_the_next() -> None:
    # Episodes of one step, terminated: clip_episode(True) returns at once because the active
    # episode has transition_count 0 (dataset/writers.py, ExperienceWriter.clip_episode), so
    # the next episode's first observation is appended to the same episode: four steps make
    # two stored episodes of two entries each, o_0 of one episode followed by o_0 of the next.
    _, buffer = _delayed_fit_online(_Counting(1), n_steps=4)
    assert [len(e.observations) for e in buffer.episodes] == [2, 2]
    assert _entries(buffer) == [(0.0, True)] * 4


class _Recording(FIFOBuffer):
    """A user's BufferProtocol noting the observation ``t`` of every entry handed to it."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.handed: list[int] = []

    def append(self, episode: Any, index: int) -> None:
        self.handed.append(int(episode.observations[index][0]))
        super().append(episode, index)


def test_a_step_without_an_entry_never_reaches_the_users_buffer() -> None:
    # Truncated episodes of 3 steps, 4 loop steps: the writer hands the buffer o_0 and o_1 of
    # the first episode, never o_2 (clip_episode(False)), nor o_0 of the second, the step in
    # progress when fit_online ends.
    algo = _dqn()
    fifo = _Recording(100)
    buffer = _buffer(fifo)
    algo.fit_online(
        _Counting(3, truncate=True),
        buffer,
        n_steps=4,
        n_steps_per_epoch=4,
        logger_adapter=NoopAdapterFactory(),
        show_progress=False,
    )
    assert fifo.handed == [0, 1]


# -- checkpoint and resume (xpspec/adapters/d3rlpy_checkpoint.py) --------------------------------
class _Observed(_Counting):
    """A ``_Counting`` env recording each observation a step acts on (the one returned last)."""

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.acted_on: list[int] = []

    def step(self, action: Any) -> Any:
        self.acted_on.append(self.t)
        return super().step(action)


def test_fit_online_resets_the_env_and_counts_its_steps_from_one_again() -> None:
    # A resumed job calls fit_online again: it takes no start step and no observation, so it
    # resets the env (the episode in progress at t = 4 ends without a done) and its
    # total_step counts from 1 again (algos/qlearning/base.py, fit_online).
    env, algo, buffer = _Observed(10), _dqn(), _buffer(100)
    steps: list[int] = []
    for n_steps in (4, 3):
        algo.fit_online(
            env,
            buffer,
            n_steps=n_steps,
            n_steps_per_epoch=n_steps,
            logger_adapter=NoopAdapterFactory(),
            show_progress=False,
            callback=lambda a, epoch, step: steps.append(step),
        )
    assert env.acted_on == [0, 1, 2, 3, 0, 1, 2]
    assert steps == [1, 2, 3, 4, 1, 2, 3]


def test_the_warm_up_starts_over_in_a_resumed_fit_online() -> None:
    # update_start_step = 3: the first call trains from its fourth step on; the second call,
    # with a buffer holding more than a batch, trains only from its fourth step again.
    algo, buffer = _dqn(), _buffer(100)
    grad_steps: list[int] = []
    for _ in range(2):
        algo.fit_online(
            _Counting(10),
            buffer,
            n_steps=5,
            n_steps_per_epoch=5,
            update_start_step=3,
            logger_adapter=NoopAdapterFactory(),
            show_progress=False,
            callback=lambda a, epoch, step: grad_steps.append(a.grad_step),
        )
    assert grad_steps == [0, 0, 0, 1, 2, 2, 2, 2, 3, 4]


def test_a_dump_holds_neither_the_step_awaiting_its_entry_nor_held_steps(
    tmp_path: Any,
) -> None:
    # ReplayBuffer.dump writes its BufferProtocol's episodes (dataset/replay_buffer.py,
    # dataset/io.py): the writer's active episode is dumped with the entries it has, not the
    # observation whose entry awaits the next one, and under write_at_termination the steps
    # the writer holds are not in the buffer at all. A buffer loaded from the dump has no
    # writer state: the next append starts a new episode.
    obs = [np.array([float(t)], np.float32) for t in range(6)]
    plain = _buffer(100)
    for o in obs[:3]:
        plain.append(o, 0, 1.0)
    delayed = _buffer(100, write_at_termination=True)
    for o in obs[:2]:
        delayed.append(o, 0, 1.0)
    delayed.clip_episode(True)
    for o in obs[:3]:
        delayed.append(o, 0, 1.0)
    restored = []
    for buffer in (plain, delayed):
        with (tmp_path / "buffer.h5").open("w+b") as f:
            buffer.dump(f)
        with (tmp_path / "buffer.h5").open("rb") as f:
            restored.append(ReplayBuffer.load(f, FIFOBuffer(100)))
    assert [b.transition_count for b in (plain, delayed)] == [2, 2]
    assert [b.transition_count for b in restored] == [2, 2]
    held = [b._writer._active_episode.size() for b in (plain, delayed, *restored)]
    assert held == [3, 3, 0, 0]


def test_load_learnable_does_not_restore_the_gradient_step(tmp_path: Any) -> None:
    # save keeps the config and the networks (base.py, dump_learnable), not grad_step, which
    # set_grad_step is documented to take back when training restarts in the middle.
    algo = _dqn()
    algo.fit_online(
        _Counting(10),
        _buffer(100),
        n_steps=5,
        n_steps_per_epoch=5,
        logger_adapter=NoopAdapterFactory(),
        show_progress=False,
    )
    algo.save(str(tmp_path / "algo.d3"))
    loaded = d3rlpy.load_learnable(str(tmp_path / "algo.d3"), device="cpu:0")
    assert (algo.grad_step, loaded.grad_step) == (3, 0)
