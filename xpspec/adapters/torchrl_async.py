"""Asynchronous actors in TorchRL 0.14.1 (clauses ``async.*``): ``MultiAsyncCollector`` with
one worker process per actor, shared-memory weight sync and TorchRL's own policy-version
tracking. Sources are cited as ``file:function`` under the installed ``torchrl`` package.

- **Actors**: ``MultiAsyncCollector(create_env_fn=[...], frames_per_batch=fragment_length,
  total_frames=len(arrivals) * fragment_length, track_policy_version=True)``
  (``collectors/_multi_async.py``): worker ``a`` runs env ``a`` of the toy env in its own
  process (:func:`xpspec.adapters.torchrl._single_env`) and yields a batch of
  ``fragment_length`` frames when it has one; the main process gets batches in the order
  they were put in the queue, sends the worker ``"continue"`` before yielding its batch
  (``MultiAsyncCollector.iterator``) and so lets it act on while the learner trains. The
  arrival order is TorchRL's own: the scenario's order is not imposed, only its length.
- **Policy**: the toy versioned policy, its version a weight (``_VersionedPolicy.version``):
  a ``TensorDictModule`` writing ``"logits"`` under ``ProbabilisticActor(Categorical,
  return_log_prob=True)``, which samples the action and stores its log-probability
  (``"action_log_prob"``). The logits each worker computed come from the weights TorchRL
  synced into it (``SharedMemWeightSyncScheme``, ``weight_update/_shared.py``).
- **Recorded version**: TorchRL's ``"policy_version"`` of each frame, written by the
  ``PolicyVersion`` transform ``track_policy_version=True`` installs in each worker and bumps
  when the worker applies a weight update (``collectors/_single.py``,
  ``_setup_policy_version_tracking``; ``envs/llm/transforms/policy_version.py``).
- **Learner**: after each arrival, one update (its weight ``version`` plus 1, on the items it
  trains on) followed by ``collector.update_policy_weights_(policy)``. Without a lag bound it
  trains on the arrived batch; with ``max_lag`` it trains on a batch TorchRL's
  ``StalenessAwareSampler(max_staleness=max_lag)`` draws from a ``TensorDictReplayBuffer`` of
  every arrived frame, its ``consumer_version`` the learner's version
  (``data/replay_buffers/samplers/staleness.py``); when every stored frame is too stale the
  sampler raises and no update is made.
- **Processes**: TorchRL starts its workers with the global multiprocessing start method
  (``_utils.py``, ``_get_default_mp_start_method``; ``spawn`` unless one is set). The adapter
  sets Python's ``forkserver`` for the collector's lifetime (restoring the previous method
  after), the server preloading this module, so each worker is forked from a process that
  imported TorchRL once instead of importing it anew: the same workers, started in a second
  rather than half a minute.
- **Env-step counter**: the collector's frame count after each batch (``_frames``, which
  ``MultiAsyncCollector.iterator`` grows by each batch's ``numel()`` and compares with
  ``total_frames``).
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torch.distributions import Categorical
from torchrl.collectors import MultiAsyncCollector
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.data.replay_buffers.samplers import StalenessAwareSampler
from torchrl.modules import ProbabilisticActor

from xpspec.adapters.torchrl import _seeded, _single_env
from xpspec.kit.arrays import floats, ints
from xpspec.kit.items import decode_items, item_columns
from xpspec.protocol.asynchronous import LOGIT_STEP, AsyncScenario
from xpspec.protocol.trace import Arrived, Event, Item, Trace, Trained

__all__ = ["run_async"]

_VERSION = "policy_version"
_LOG_PROB = "action_log_prob"
_STALE = "exceed max_staleness"
"""Part of the ``RuntimeError`` ``StalenessAwareSampler.sample`` raises when every stored
frame is too stale (``data/replay_buffers/samplers/staleness.py``)."""


class _VersionedPolicy(torch.nn.Module):
    """The toy versioned policy: action ``k`` has logit ``k * version * LOGIT_STEP``, the
    version being a weight of the module."""

    def __init__(self, num_actions: int) -> None:
        super().__init__()
        self.version = torch.nn.Parameter(torch.zeros(()), requires_grad=False)
        self.num_actions = num_actions

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        steps = torch.arange(self.num_actions, dtype=torch.float32)
        return (steps * (self.version * LOGIT_STEP)).expand(*observation.shape[:-1], -1)


def _policy(num_actions: int) -> tuple[ProbabilisticActor, _VersionedPolicy]:
    net = _VersionedPolicy(num_actions)
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["logits"])
    actor = ProbabilisticActor(
        module,
        in_keys=["logits"],
        out_keys=["action"],
        distribution_class=Categorical,
        return_log_prob=True,
    )
    return actor, net


def _arrived(index: int, learner: int, batch: TensorDictBase, env_steps: int) -> Arrived:
    items = decode_items(batch.get("observation"))
    actors = {e for e, _, _ in items}
    if len(actors) != 1:
        raise RuntimeError(f"a batch of one worker holds the frames of envs {sorted(actors)}")
    return Arrived(
        index,
        actors.pop(),
        learner,
        *item_columns(items),
        ints(batch.get("action")),
        ints(batch.get(_VERSION)),
        tuple(tuple(float(x) for x in row) for row in batch.get("logits").tolist()),
        floats(batch.get(_LOG_PROB)),
        env_steps,
    )


def _trained(version: int, items: list[Item]) -> Trained:
    return Trained(version, *item_columns(items))


class _Learner:
    """The learner: trains on the arrived batch, or on what the staleness sampler draws."""

    def __init__(self, scenario: AsyncScenario, net: _VersionedPolicy) -> None:
        self.net = net
        self.buffer: Any = None
        self.sampler: StalenessAwareSampler | None = None
        if scenario.max_lag is not None:
            self.sampler = StalenessAwareSampler(max_staleness=scenario.max_lag)
            self.buffer = TensorDictReplayBuffer(
                storage=LazyTensorStorage(len(scenario.arrivals) * scenario.fragment_length),
                sampler=self.sampler,
                batch_size=scenario.fragment_length,
            )

    @property
    def version(self) -> int:
        """The learner's version, read from its own weights."""
        return int(self.net.version.item())

    def batch(self, arrived: TensorDictBase) -> list[Item] | None:
        """The items of this update, None when the sampler has nothing fresh enough."""
        if self.sampler is None:
            return decode_items(arrived.get("observation"))
        self.buffer.extend(arrived.reshape(-1))
        self.sampler.consumer_version = self.version
        try:
            sample = self.buffer.sample()
        except RuntimeError as exc:
            if _STALE in str(exc):
                return None
            raise
        return decode_items(sample.get("observation"))

    def update(self) -> None:
        with torch.no_grad():
            self.net.version.add_(1)


@contextmanager
def _forkserver() -> Iterator[None]:
    """Python's ``forkserver`` start method while the block runs, the previous one after."""
    previous = mp.get_start_method(allow_none=True)
    mp.set_forkserver_preload([__name__])
    mp.set_start_method("forkserver", force=True)
    try:
        yield
    finally:
        mp.set_start_method(previous, force=True)


def run_async(scenario: AsyncScenario) -> Trace:
    """Arrivals in TorchRL's own order, each followed by the learner's update on it."""
    spec, seed = scenario.env, scenario.seed
    events: list[Event] = []
    with _seeded(seed), _forkserver():
        policy, net = _policy(spec.num_actions)
        collector = MultiAsyncCollector(
            [partial(_single_env, spec, a, seed) for a in range(spec.num_envs)],
            policy,
            frames_per_batch=scenario.fragment_length,
            total_frames=len(scenario.arrivals) * scenario.fragment_length,
            track_policy_version=True,
        )
        learner = _Learner(scenario, net)
        try:
            collector.set_seed(seed)
            for index, batch in enumerate(collector):
                events.append(_arrived(index, learner.version, batch, int(collector._frames)))
                items = learner.batch(batch)
                if items is not None:
                    events.append(_trained(learner.version, items))
                    learner.update()
                    collector.update_policy_weights_(policy)
        finally:
            collector.shutdown()
    return Trace(tuple(events), {"producer": "torchrl"})
