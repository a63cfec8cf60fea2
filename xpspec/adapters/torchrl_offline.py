"""Offline and hybrid replay in TorchRL 0.14.1 (capability ``offline``): its
``OfflineToOnlineReplayBuffer`` over an offline ``ReplayBuffer`` of the scenario's dataset,
filled online by the adapter's ``Collector``. Sources are cited as ``file:function`` under the
installed ``torchrl`` package.

**Translation.** The dataset's items (each the toy observation ``[env, episode, t]``) are
``extend``-ed, in order, into ``ReplayBuffer(storage=LazyTensorStorage(N))``, the offline
dataset a user brings (``data/replay_buffers/offline_to_online.py``: "an offline dataset object
(e.g. MinariExperienceReplay)" or any ``ReplayBuffer``). ``OfflineToOnlineReplayBuffer(offline,
online_capacity=capacity * B, offline_fraction=offline_weight / (offline_weight +
online_weight), batch_size=batch_size)`` holds it; the adapter's batched toy env
(:func:`xpspec.adapters.torchrl._vector_env`) runs under a ``Collector`` of one vector step per
batch, and each batch (its ``observation`` only, the key structure the offline data shares,
as the class requires) is ``extend``-ed into the hybrid buffer, which routes it to its online
buffer: a ring of ``capacity * B`` frames written ``B`` at a time, so each env's last
``capacity`` frames. After ``steps_per_update`` batches one ``sample()`` is an update's batch;
the global torch generator (which TorchRL's samplers draw from) is seeded with the scenario's
seed. The trace records the items of each batch in TorchRL's order and the items of
``offline_buffer`` after it.

**What TorchRL decides** (``OfflineToOnlineReplayBuffer.sample``): ``n_offline =
round(offline_fraction * batch_size)`` (Python's ``round``: half to even) from the offline
buffer, the rest from the online buffer, concatenated offline first; the whole batch from one
buffer when ``n_offline`` rounds to 0 or to ``batch_size``, or when the online buffer is empty.

**Not expressible** (:class:`~xpspec.protocol.adapter.Unsupported`): a zero weight
(``offline_fraction`` must lie in the open interval (0, 1), checked in ``__init__``), and an
online part that starts late or skips updates (the class has no schedule; ``anneal`` decays
the offline fraction linearly instead). The buffer keeps no training-iteration counter.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from torchrl.data import LazyTensorStorage, OfflineToOnlineReplayBuffer, ReplayBuffer

from xpspec.adapters.torchrl import _collector, _seeded, _vector_env
from xpspec.kit.items import decode_items
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import OfflineScenario
from xpspec.protocol.trace import Event, Item, Mixed, Trace

__all__ = ["run_offline"]

_LINK = (
    "https://github.com/pytorch/rl/blob/v0.14.1/torchrl/data/replay_buffers/offline_to_online.py"
)


def _check_support(sc: OfflineScenario) -> None:
    if sc.offline_weight == 0 or sc.online_weight == 0:
        raise Unsupported(
            f"weights {sc.offline_weight}:{sc.online_weight}: TorchRL 0.14.1 "
            "OfflineToOnlineReplayBuffer requires offline_fraction in the open interval (0, 1) "
            "(checked in __init__)",
            _LINK,
        )
    if sc.online_after != 0 or sc.online_every != 1 or sc.first_update != 0:
        raise Unsupported(
            f"online_after {sc.online_after}, online_every {sc.online_every}: TorchRL 0.14.1 "
            "OfflineToOnlineReplayBuffer.sample draws from both buffers at every call (no "
            "schedule; anneal decays the offline fraction linearly instead)",
            _LINK,
        )


def _items(observation: torch.Tensor) -> tuple[Item, ...]:
    return tuple(decode_items(observation.reshape(-1, observation.shape[-1])))


def run_offline(sc: OfflineScenario) -> Trace:
    """The dataset in an offline ``ReplayBuffer``, the collector's batches extended into the
    hybrid buffer, one ``sample()`` per update (see the module docstring)."""
    _check_support(sc)
    b = sc.env.num_envs
    n = len(sc.offline)
    events: list[Event] = []
    with _seeded(sc.seed):
        offline = ReplayBuffer(storage=LazyTensorStorage(n))
        observation = torch.tensor(sc.offline, dtype=torch.float32)
        offline.extend(TensorDict({"observation": observation}, batch_size=[n]))
        hybrid = OfflineToOnlineReplayBuffer(
            offline,
            online_capacity=sc.capacity * b,
            offline_fraction=sc.offline_weight / (sc.offline_weight + sc.online_weight),
            batch_size=sc.batch_size,
        )
        env = _vector_env(sc.env, sc.seed)
        collector = _collector(env, sc.env, b, b * sc.steps_per_update * sc.updates)
        written: list[Item] = []
        update = 0
        for step, batch in enumerate(collector):
            rows = batch.select("observation").reshape(-1)
            hybrid.extend(rows)
            written.extend(_items(rows.get("observation")))
            if (step + 1) % sc.steps_per_update:
                continue
            sample = hybrid.sample()
            held = _items(hybrid.offline_buffer[:].get("observation"))
            events.append(
                Mixed(update, tuple(written), _items(sample.get("observation")), held, None)
            )
            written, update = [], update + 1
        collector.shutdown()
    return Trace(tuple(events), {"producer": "torchrl"})
