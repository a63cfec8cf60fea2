"""Adapter for Flashbax 0.1.3 (JAX, CPU): its uniform trajectory buffer
(``flashbax.make_trajectory_buffer``) filled with the toy env and sampled by its own ``sample``
(capability ``replay``). Sources are cited as ``file:function`` under the installed
``flashbax`` package.

**Translation.** A :class:`~xpspec.protocol.scenario.ReplayScenario` becomes
``make_trajectory_buffer(add_batch_size=B, max_length_time_axis=capacity,
min_length_time_axis=window_length, sample_batch_size=batch_size,
sample_sequence_length=window_length, period=period)``: one row of ``capacity`` time steps per
env (the scenario's capacity is per env, so no ``max_size // add_batch_size`` rounding arises),
and ``min_length_time_axis`` at the smallest value Flashbax accepts without overriding it.
Items are the toy env's time steps (``ToyVectorEnv``, auto-reset on the next step, so a LAST
and the next FIRST are two rows), each stored as ``{observation, step_type, reward,
discount}``; every vector step is one ``add`` of a ``[B, 1, ...]`` batch, and the trace's
``store`` events record those batches. Each draw calls ``sample`` with a key split off
``jax.random.PRNGKey(seed)``; windows are decoded from the sampled observations.

**What Flashbax decides** (``buffers/trajectory_buffer.py:sample``): starts ``head + k *
period`` with ``head`` the oldest stored step, so the period grid is anchored at the oldest
item (spec variant ``oldest-anchored`` of ``replay.period-anchor``); windows never pass the
newest write but cross episode ends (it has no notion of episodes); the row and the grid index
are drawn independently and uniformly, and every row holds the same number of starts, so the
draw is uniform over windows. ``can_sample`` is Flashbax's documented precondition of
``sample`` (``buffers/trajectory_buffer.py:can_sample``: at least ``min_length_time_axis``
steps added), and ``sample`` itself does not check it: asked anyway, it returns windows of
slots never written. The adapter respects the precondition as a user would: a draw while
``can_sample`` is false is recorded as a refused, empty draw (``replay.no-window``), so
Flashbax's own ``can_sample`` decides whether a window can be drawn; the trace header also
records its value after the fill.

**Prioritized replay** (capability ``priorities``, :func:`_run_prioritized`): a scenario with a
priority spec runs ``make_prioritised_trajectory_buffer`` with ``priority_exponent=alpha`` and
period 1. The masses are read from the leaves of its sum tree, the probabilities are the ones
``sample`` returns, and the sampled windows' priorities are set with its ``set_priorities``.
Flashbax computes no importance weights (the caller does, from the probabilities), so the
adapter does not declare ``importance-weights``.

**Offline and hybrid replay** (capability ``offline``): an offline dataset read back from a
Flashbax Vault and an online trajectory buffer, mixed by ``make_mixer``
(:mod:`xpspec.adapters.flashbax_offline`).

**Not expressible** (:class:`~xpspec.protocol.adapter.Unsupported`): boundary policies other than
``cross`` and distributions other than ``uniform-windows``. Flashbax has no trainer loop, env
handling or learner-side preprocessing, so the adapter declares ``replay`` (and
``priorities`` and ``offline``) only.

JAX compiles per shape: the buffer functions are jitted once per ``(B, capacity, batch_size,
window_length, period)`` and reused by every run of that shape.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # Flashbax runs on the CPU here; skip probing

try:
    import flashbax as fbx
    import jax
    import jax.numpy as jnp
except ImportError as exc:  # pragma: no cover - exercised only without the framework
    raise ImportError(
        "xpspec.adapters.flashbax drives Flashbax 0.1.3 on JAX 0.10.2, which are not importable "
        "here: install them with `pip install -e '.[adapter-flashbax]' -c "
        f"constraints/torch.txt` ({exc})"
    ) from exc

from xpspec.kit.events import store
from xpspec.kit.items import decode_items, decode_windows, item_columns, observation_array
from xpspec.kit.quiet import quiet
from xpspec.kit.steps import steps_from_columns
from xpspec.protocol.adapter import PROTOCOL_VERSION, AdapterInfo, Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import OfflineScenario, ReplayScenario
from xpspec.protocol.trace import Event, Priorities, Prioritized, Sampled, Trace
from xpspec.refimpl.toy_envs.gym_vector import ToyVectorEnv, step_types_from_gym

__all__ = ["FlashbaxAdapter"]

_SOURCE = "https://github.com/instadeepai/flashbax/blob/v0.1.3/flashbax/buffers"
_TRAJECTORY = f"{_SOURCE}/trajectory_buffer.py"
_PRIORITISED = f"{_SOURCE}/prioritised_trajectory_buffer.py"


# -- what Flashbax can express ----------------------------------------------------------------------
def _check_support(sampling: SamplingSpec) -> None:
    """Raise :class:`Unsupported` for a sampling spec the trajectory buffer cannot express."""
    if sampling.boundary != "cross":
        raise Unsupported(
            f"boundary {sampling.boundary!r}: Flashbax 0.1.3's trajectory buffer has no notion "
            "of episodes; sample draws any grid start inside the stored steps of a row, so "
            "windows cross episode ends (only 'cross' is expressible)",
            _TRAJECTORY,
        )
    if sampling.distribution == "env-balanced":
        raise Unsupported(
            "distribution 'env-balanced': Flashbax 0.1.3's sample draws each window's row "
            "independently and uniformly (jax.random.randint over add_batch_size), never "
            "round-robin over envs",
            _TRAJECTORY,
        )
    if sampling.distribution != "uniform-windows":
        raise Unsupported(
            f"distribution {sampling.distribution!r}: Flashbax 0.1.3's trajectory buffer "
            "knows no episodes to draw from (it draws a row, then a grid start)",
            _TRAJECTORY,
        )


# -- the buffer, jitted once per shape --------------------------------------------------------------
@dataclass(frozen=True)
class _Shape:
    num_envs: int
    capacity: int
    batch_size: int
    window_length: int
    period: int


@dataclass(frozen=True)
class _Buffer:
    """Flashbax's buffer functions for one shape, jitted."""

    init: Callable[[Any], Any]
    add: Callable[[Any, Any], Any]
    sample: Callable[[Any, Any], Any]
    can_sample: Callable[[Any], Any]


_BUFFERS: dict[_Shape, _Buffer] = {}


def _buffer(shape: _Shape) -> _Buffer:
    """``make_trajectory_buffer`` for ``shape`` (see the module docstring), its functions
    jitted; cached, so each shape compiles once per process."""
    cached = _BUFFERS.get(shape)
    if cached is not None:
        return cached
    with quiet():  # a period longer than the window warns; so be it
        buffer = fbx.make_trajectory_buffer(
            add_batch_size=shape.num_envs,
            sample_batch_size=shape.batch_size,
            sample_sequence_length=shape.window_length,
            period=shape.period,
            min_length_time_axis=shape.window_length,
            max_length_time_axis=shape.capacity,
        )
    made = _Buffer(
        init=buffer.init,
        add=jax.jit(buffer.add),
        sample=jax.jit(buffer.sample),
        can_sample=jax.jit(buffer.can_sample),
    )
    _BUFFERS[shape] = made
    return made


def _template() -> dict[str, Any]:
    """One stored item: the toy observation ``[env, episode, t]`` and the row fields."""
    return {
        "observation": jnp.zeros(3, jnp.float32),
        "step_type": jnp.int32(0),
        "reward": jnp.float32(0),
        "discount": jnp.float32(0),
    }


# -- filling ----------------------------------------------------------------------------------------
class _RecordingFill:
    """Steps the toy env and hands every vector step to Flashbax's ``add`` as one ``[B, 1]``
    batch, recording each batch as a ``store`` event."""

    def __init__(self, buffer: _Buffer, env: EnvSpec, seed: int) -> None:
        self.buffer = buffer
        self.state = buffer.init(_template())
        self.events: list[Event] = []
        self._env = ToyVectorEnv(env, seed)
        self._actions = np.zeros(env.num_envs, dtype=np.int64)
        self._last: tuple[np.ndarray, np.ndarray] | None = None  # (terminated, truncated)

    def add(
        self, obs: np.ndarray, step_type: np.ndarray, reward: np.ndarray, discount: Any
    ) -> None:
        batch = {
            "observation": jnp.asarray(obs[:, None, :]),
            "step_type": jnp.asarray(step_type.astype(np.int32)[:, None]),
            "reward": jnp.asarray(reward.astype(np.float32)[:, None]),
            "discount": jnp.asarray(discount.astype(np.float32)[:, None]),
        }
        self.state = self.buffer.add(self.state, batch)
        rows = steps_from_columns(
            decode_items(obs),
            step_type.tolist(),
            reward.astype(np.float32).tolist(),
            discount.astype(np.float32).tolist(),
        )
        self.events.append(store(0, rows))

    def fill(self, steps: int) -> None:
        """``steps`` more time steps of every env: the first call starts from the reset's
        FIRST, a later one goes on where the previous one stopped."""
        n = self._env.num_envs
        for _ in range(steps):
            if self._last is None:
                obs, _ = self._env.reset()
                reward = np.zeros(n)
                terminated = truncated = np.zeros(n, dtype=bool)
                previous_done = np.ones(n, dtype=bool)  # rows from reset() are FIRST
            else:
                previous_done = self._last[0] | self._last[1]
                obs, reward, terminated, truncated, _ = self._env.step(self._actions)
            self._last = (terminated, truncated)
            step_type = step_types_from_gym(terminated, truncated, previous_done)
            observation = observation_array(obs).astype(np.float32)
            self.add(observation, step_type, reward, np.where(terminated, 0.0, 1.0))


# -- sampling ---------------------------------------------------------------------------------------
def _run_replay(sc: ReplayScenario) -> Trace:
    s = sc.sampling
    _check_support(s)
    shape = _Shape(sc.env.num_envs, sc.capacity, sc.batch_size, s.window_length, s.period)
    buffer = _buffer(shape)
    recorder = _RecordingFill(buffer, sc.env, sc.seed)
    recorder.fill(sc.fill_steps)
    state = recorder.state
    events = list(recorder.events)
    key = jax.random.PRNGKey(sc.seed)
    for draw in range(sc.draws):
        key, sample_key = jax.random.split(key)
        if not bool(buffer.can_sample(state)):  # the documented precondition: a refused draw
            events.append(Sampled(draw, ()))
            continue
        sample = buffer.sample(state, sample_key)
        events.append(Sampled(draw, decode_windows(sample.experience["observation"])))
    header = {"producer": "flashbax", "can_sample": bool(buffer.can_sample(state))}
    return Trace(tuple(events), header)


# -- prioritized replay -----------------------------------------------------------------------------
@dataclass(frozen=True)
class _PrioritisedShape:
    num_envs: int
    capacity: int
    batch_size: int
    window_length: int
    alpha: float


@dataclass(frozen=True)
class _Prioritised:
    """Flashbax's prioritised buffer functions for one shape, jitted."""

    buffer: _Buffer
    set_priorities: Callable[[Any, Any, Any], Any]


_PRIORITISED_BUFFERS: dict[_PrioritisedShape, _Prioritised] = {}


def _prioritised(shape: _PrioritisedShape) -> _Prioritised:
    """``make_prioritised_trajectory_buffer(add_batch_size=B, max_length_time_axis=capacity,
    min_length_time_axis=T, sample_batch_size=b, sample_sequence_length=T, period=1,
    priority_exponent=alpha, device="cpu")``, its functions jitted; cached per shape."""
    cached = _PRIORITISED_BUFFERS.get(shape)
    if cached is not None:
        return cached
    buffer = fbx.make_prioritised_trajectory_buffer(
        add_batch_size=shape.num_envs,
        sample_batch_size=shape.batch_size,
        sample_sequence_length=shape.window_length,
        period=1,
        min_length_time_axis=shape.window_length,
        max_length_time_axis=shape.capacity,
        priority_exponent=shape.alpha,
        device="cpu",
    )
    made = _Prioritised(
        _Buffer(
            init=buffer.init,
            add=jax.jit(buffer.add),
            sample=jax.jit(buffer.sample),
            can_sample=jax.jit(buffer.can_sample),
        ),
        jax.jit(buffer.set_priorities),
    )
    _PRIORITISED_BUFFERS[shape] = made
    return made


def _held_priorities(state: Any, draw: int) -> Priorities:
    """Every leaf of the buffer's sum tree with a positive value (a window Flashbax can
    sample), named by the item stored at its start: leaf ``row * L + slot`` (period 1,
    ``_get_sample_trajectories``) holds the window starting at ``experience[row, slot]``."""
    rows, length = state.experience["step_type"].shape[:2]
    leaves = np.asarray(
        fbx.buffers.sum_tree.get_batch(state.sum_tree_state, jnp.arange(rows * length))
    )
    held = np.flatnonzero(leaves > 0)
    observations = np.asarray(state.experience["observation"]).reshape(rows * length, -1)
    items = decode_items(observations[held])
    return Priorities(draw, *item_columns(items), tuple(float(m) for m in leaves[held]))


def _run_prioritized(sc: ReplayScenario) -> Trace:
    """Prioritized replay through Flashbax's prioritised trajectory buffer
    (:func:`_prioritised`), filled as ``run_replay`` fills, with ``priority.add_steps`` more
    vector steps after every draw but the last. Before each draw the sum tree's leaves give
    the masses (:func:`_held_priorities`); a draw is its ``sample`` (refused while
    ``can_sample`` is false, as in ``run_replay``), whose ``probabilities`` the trace records;
    then ``set_priorities(indices, |td| + eps)`` with the scenario's TD error of each sampled
    window (Flashbax raises it to ``priority_exponent``). Flashbax returns no importance
    weights (the caller computes them from the probabilities), so none are recorded."""
    priority = sc.priority
    assert priority is not None
    _check_support(sc.sampling)
    shape = _PrioritisedShape(
        sc.env.num_envs,
        sc.capacity,
        sc.batch_size,
        sc.sampling.window_length,
        float(priority.alpha),
    )
    prioritised = _prioritised(shape)
    buffer = prioritised.buffer
    recorder = _RecordingFill(buffer, sc.env, sc.seed)
    recorder.fill(sc.fill_steps)
    events = list(recorder.events)
    key = jax.random.PRNGKey(sc.seed)
    for draw in range(sc.draws):
        events.append(_held_priorities(recorder.state, draw))
        key, sample_key = jax.random.split(key)
        if not bool(buffer.can_sample(recorder.state)):
            events.extend((Sampled(draw, ()), Prioritized(draw, (), ())))
        else:
            sample = buffer.sample(recorder.state, sample_key)
            windows = decode_windows(sample.experience["observation"])
            events.append(Sampled(draw, windows))
            probabilities = np.asarray(sample.probabilities, dtype=np.float64)
            events.append(Prioritized(draw, tuple(float(p) for p in probabilities), ()))
            new = [float(priority.priority(w[0], draw)) for w in windows if w[0] is not None]
            recorder.state = prioritised.set_priorities(
                recorder.state, sample.indices, jnp.asarray(new, dtype=jnp.float32)
            )
        if draw < sc.draws - 1 and priority.add_steps:
            mark = len(recorder.events)
            recorder.fill(priority.add_steps)
            events.extend(recorder.events[mark:])
    return Trace(tuple(events), {"producer": "flashbax"})


# -- the adapter ------------------------------------------------------------------------------------
def _version(package: str) -> str:
    return metadata.version(package)


class FlashbaxAdapter:
    """Flashbax 0.1.3 behind the xpspec protocol (capability replay)."""

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name="flashbax",
            framework="Flashbax",
            framework_version=_version("flashbax"),
            protocol_version=PROTOCOL_VERSION,
            capabilities=("replay", "priorities", "offline"),
            issue_tracker="https://github.com/instadeepai/flashbax/issues",
            notes=(
                "Uniform and prioritised trajectory buffers: one row per env sharing one write "
                "cursor; the uniform buffer's period grid starts at the oldest stored step; no "
                "episode awareness. No 'importance-weights': the prioritised buffer returns "
                "probabilities only."
            ),
            extra_versions={
                "jax": _version("jax"),
                "jaxlib": _version("jaxlib"),
                "chex": _version("chex"),
            },
        )

    def smoke(self) -> None:
        _run_replay(ReplayScenario(EnvSpec(), capacity=2, fill_steps=2, batch_size=2))

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        """The fill is ``fill_steps`` adds of one vector step each; every draw is one call of
        Flashbax's ``sample`` (see the module docstring); a scenario with a priority spec runs
        the prioritised trajectory buffer (:func:`_run_prioritized`)."""
        if scenario.priority is not None:
            return _run_prioritized(scenario)
        return _run_replay(scenario)

    def run_offline(self, scenario: OfflineScenario) -> Trace:
        """An offline dataset read from a Flashbax Vault mixed with an online trajectory
        buffer by ``make_mixer`` (:mod:`xpspec.adapters.flashbax_offline`)."""
        from xpspec.adapters.flashbax_offline import run_offline

        return run_offline(scenario)
