"""Flashbax 0.1.3 offline and hybrid replay (capability ``offline``): an offline dataset
stored in a Flashbax Vault, read back as a buffer state, and mixed with an online trajectory
buffer by ``flashbax.make_mixer``. Sources are cited as ``file:function`` under the installed
``flashbax`` package.

**Translation.** An :class:`~xpspec.protocol.scenario.OfflineScenario` becomes two uniform
trajectory buffers of one-step windows (``sample_sequence_length=1, period=1,
min_length_time_axis=1, sample_batch_size=batch_size``):

- the *offline* buffer, one row (``add_batch_size=1``): the dataset's items are added as one
  ``[1, N]`` batch (each item the toy observation ``[env, episode, t]`` with the fields the
  online items carry), written to a ``flashbax.vault.Vault`` in a fresh directory and read
  back with ``Vault.read()`` (``vault/vault.py``: a ``TrajectoryBufferState`` with
  ``is_full=True``), the way an offline dataset reaches a Flashbax user;
- the *online* buffer, one row of ``capacity`` steps per env (``add_batch_size=num_envs``),
  filled with the toy env as the replay row fills it (one ``add`` per vector step,
  ``steps_per_update`` before each update).

``make_mixer([offline, online], sample_batch_size=batch_size, proportions=[offline_weight,
online_weight])`` gives the mixer; each update is one call of its ``sample`` on the two states
(with a key split off ``jax.random.PRNGKey(seed)``), after its ``can_sample`` (Flashbax's
precondition: every buffer can sample). The trace records per update the online items added
before it, the joint batch's items in Flashbax's order (decoded from the sampled
observations), and the items of the offline state the mixer sampled from.

**What Flashbax decides** (``buffers/mixer.py:make_mixer``): the proportions are normalised
and each buffer's count is ``int(p * sample_batch_size)``, the rounding remainder added to the
first buffer's count, so a batch's split is fixed (exact counts, never drawn per item); the
joint sample is each buffer's own sample sliced to its count and concatenated in buffer order
(``sample_mixer_fn``).

**Not expressible** (:class:`~xpspec.protocol.adapter.Unsupported`): an online part that
starts late or skips updates (``online_after > 0`` or ``online_every > 1``): ``make_mixer``
takes buffers, a batch size and proportions only, and its ``sample`` draws from every buffer
at every call. Flashbax keeps no training-iteration counter (it has no trainer), so
``offline.iteration-accounting`` has nothing to judge.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # Flashbax runs on the CPU here; skip probing

import flashbax as fbx
import jax
import jax.numpy as jnp
from flashbax.vault import Vault

from xpspec.adapters.flashbax import _Buffer, _RecordingFill, _template
from xpspec.kit.items import decode_items
from xpspec.kit.quiet import quiet
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import OfflineScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Event, Item, Mixed, Store, Trace

__all__ = ["run_offline"]

_SOURCE = "https://github.com/instadeepai/flashbax/blob/v0.1.3/flashbax"
_MIXER = f"{_SOURCE}/buffers/mixer.py"


@dataclass(frozen=True)
class _Shape:
    num_envs: int
    capacity: int
    dataset: int
    batch_size: int
    weights: tuple[int, int]


@dataclass(frozen=True)
class _Hybrid:
    """The offline and online buffers' functions and their mixer's, jitted."""

    offline: _Buffer
    online: _Buffer
    sample: Callable[[Any, Any], Any]
    can_sample: Callable[[Any], Any]


_HYBRIDS: dict[_Shape, _Hybrid] = {}


def _trajectory(add_batch_size: int, length: int, batch_size: int) -> Any:
    """A uniform trajectory buffer of one-step windows."""
    with quiet():
        return fbx.make_trajectory_buffer(
            add_batch_size=add_batch_size,
            sample_batch_size=batch_size,
            sample_sequence_length=1,
            period=1,
            min_length_time_axis=1,
            max_length_time_axis=length,
        )


def _jitted(buffer: Any) -> _Buffer:
    return _Buffer(
        init=buffer.init,
        add=jax.jit(buffer.add),
        sample=jax.jit(buffer.sample),
        can_sample=jax.jit(buffer.can_sample),
    )


def _hybrid(shape: _Shape) -> _Hybrid:
    """The buffers and ``make_mixer`` for ``shape`` (see the module docstring), cached: each
    shape compiles once per process. The offline buffer has one slot more than the dataset, so
    that its write index after the dataset's ``add`` is the dataset's length (the Vault writes
    from the last index it received to the buffer's current one)."""
    cached = _HYBRIDS.get(shape)
    if cached is not None:
        return cached
    offline = _trajectory(1, shape.dataset + 1, shape.batch_size)
    online = _trajectory(shape.num_envs, shape.capacity, shape.batch_size)
    mixer = fbx.make_mixer([offline, online], shape.batch_size, list(shape.weights))
    made = _Hybrid(
        _jitted(offline), _jitted(online), jax.jit(mixer.sample), jax.jit(mixer.can_sample)
    )
    _HYBRIDS[shape] = made
    return made


def _vault_state(buffer: _Buffer, dataset: tuple[Item, ...]) -> Any:
    """The dataset added to a fresh offline buffer, written to a Vault and read back."""
    n = len(dataset)
    obs = np.asarray(dataset, dtype=np.float32)
    first = np.array([t == 0 for _, _, t in dataset])
    step_type = np.where(first, int(StepType.FIRST), int(StepType.MID)).astype(np.int32)
    state = buffer.init(_template())
    state = buffer.add(
        state,
        {
            "observation": jnp.asarray(obs[None]),
            "step_type": jnp.asarray(step_type[None]),
            "reward": jnp.zeros((1, n), jnp.float32),
            "discount": jnp.ones((1, n), jnp.float32),
        },
    )
    chatter = io.StringIO()  # the Vault prints where it writes and reads
    with (
        tempfile.TemporaryDirectory(prefix="xpspec-vault-") as root,
        quiet(),
        contextlib.redirect_stdout(chatter),
    ):
        vault = Vault("offline", experience_structure=state.experience, rel_dir=root, vault_uid="0")
        written = vault.write(state)
        if written != n:
            raise RuntimeError(f"Vault.write wrote {written} time steps, expected {n}")
        read = vault.read()
        jax.block_until_ready(read.experience)
    return read


def _observations(tree: Any) -> list[Item]:
    obs = np.asarray(tree["observation"])
    return decode_items(obs.reshape(-1, obs.shape[-1]))


def _check_support(sc: OfflineScenario) -> None:
    if sc.online_after != 0 or sc.online_every != 1:
        raise Unsupported(
            f"online_after {sc.online_after}, online_every {sc.online_every}: Flashbax 0.1.3's "
            "make_mixer takes buffers, a batch size and proportions only, and its sample draws "
            "from every buffer at every call (no schedule for a source)",
            _MIXER,
        )


def run_offline(sc: OfflineScenario) -> Trace:
    """Offline and hybrid replay through ``make_mixer`` (see the module docstring)."""
    _check_support(sc)
    shape = _Shape(
        sc.env.num_envs,
        sc.capacity,
        len(sc.offline),
        sc.batch_size,
        (sc.offline_weight, sc.online_weight),
    )
    hybrid = _hybrid(shape)
    offline_state = _vault_state(hybrid.offline, sc.offline)
    online = _RecordingFill(hybrid.online, sc.env, sc.seed)
    key = jax.random.PRNGKey(sc.seed)
    events: list[Event] = []
    for update in range(sc.updates):
        mark = len(online.events)
        online.fill(sc.steps_per_update)
        written = [
            item
            for store in online.events[mark:]
            if isinstance(store, Store)
            for item in zip(store.env, store.episode, store.t)
        ]
        states = [offline_state, online.state]
        if not bool(hybrid.can_sample(states)):
            raise RuntimeError(f"update {update}: the mixer's can_sample is false")
        key, sample_key = jax.random.split(key)
        sample = hybrid.sample(states, sample_key)
        events.append(
            Mixed(
                update,
                tuple(written),
                tuple(_observations(sample.experience)),
                tuple(_observations(offline_state.experience)),
                None,
            )
        )
    return Trace(tuple(events), {"producer": "flashbax"})
