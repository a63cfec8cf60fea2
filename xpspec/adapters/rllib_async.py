"""Asynchronous actors in RLlib 2.60.0 (clauses ``async.*``): IMPALA's own ``training_step``
with one remote ``SingleAgentEnvRunner`` per actor on a local Ray cluster, RLlib's weight sync
and RLlib's own weights sequence number. Sources are cited as ``file:function`` under
``ray/rllib`` of the installed wheel (commit ``b7f4259e``).

- **Cluster**: ``ray.init(num_cpus=num_envs + 1, include_dashboard=False)``, shut down after
  the run; ``IMPALAConfig`` with ``num_env_runners = num_envs`` remote env runners (Ray actors,
  ``env/env_runner_group.py``) of one env each, ``num_learners=0`` (the learner lives in the
  driver, behind IMPALA's learner thread and its queue, ``algorithms/impala/impala_learner.py``)
  and no aggregator actors. Env runner ``i`` (``EnvContext.worker_index``, 1-based) steps env
  ``i - 1`` of the toy env.
- **Fragments**: ``rollout_fragment_length = fragment_length`` and ``batch_mode =
  "truncate_episodes"``: each ``sample()`` of a runner returns the episode chunks of exactly
  ``fragment_length`` env steps, its items the observations that got an action (RLlib never
  acts on an episode's final observation: the step after it is the reset, which is no
  timestep, ``env/single_agent_env_runner.py:_sample``). ``train_batch_size_per_learner =
  fragment_length``: ``IMPALA._pre_queue_episode_refs`` makes each fetched sample one package,
  so one ``LearnerGroup.update`` (one ``Learner.update``, one gradient update) per arrival.
- **Arrivals**: each ``Algorithm.train()`` runs one ``IMPALA.training_step``, which fetches
  whatever samples the runners have ready (``foreach_env_runner_async_fetch_ready``, issuing
  each of those runners its next ``sample()`` at once: the actor is released before the
  learner trains on its fragment) in RLlib's own order. The adapter reads them where
  ``training_step`` hands them to ``_pre_queue_episode_refs`` (after RLlib has counted their
  env steps), resolving each episode list from the object store. The arrival order is RLlib's;
  ``train()`` is called until ``len(arrivals)`` fragments have arrived (the last fetch may
  bring more: they are recorded too).
- **Policy**: the toy versioned policy as an ``RLModule`` whose one weight is the version
  (``_VersionedModule``); RLlib's module-to-env connector samples the action from its
  ``ACTION_DIST_INPUTS`` and stores them with the action's ``ACTION_LOGP`` in each step's
  extra model outputs (``env/single_agent_env_runner.py:_sample``).
- **Recorded version**: ``WEIGHTS_SEQ_NO``, which ``SingleAgentEnvRunner._sample`` stores with
  every step's extra model outputs: the sequence number of the weights the runner last set
  (``set_state``, which the runner pulls from IMPALA's ``EnvRunnerStateServer`` at the top of
  each ``sample()``).
- **Learner**: an ``IMPALATorchLearner`` (``config.learners(learner_class=...)``) whose loss is
  ``-version`` under ``SGD(lr=1)``: its own optimizer raises the version weight by exactly 1
  per update. Its ``_update`` records the items of the batch it trains on (the rows of the
  batch's ``LOSS_MASK``; the bootstrap row ``AddOneTsToEpisodesAndTruncate`` appends is masked
  out) and the update's version, ``WEIGHTS_SEQ_NO - 1`` (``Learner.update`` increments it
  before its minibatch loop, ``core/learner/learner.py``). The learner's version when a
  fragment arrives is its ``WEIGHTS_SEQ_NO`` at the fetch (``broadcast_interval = 1`` makes
  ``IMPALALearner.update`` wait for each update, so no update is in flight then).
- **Env-step counter**: ``NUM_ENV_STEPS_SAMPLED_LIFETIME`` of the algorithm's env-runner
  results, which ``training_step`` aggregates from the metrics of the fetched samples before
  queueing them, and passes to the learner as its ``timesteps``.
- **Lag bound**: none. IMPALA and APPO bound what is in flight
  (``max_requests_in_flight_per_env_runner``, ``learner_queue_size``, APPO's circular buffer),
  not the lag of an item: a scenario with ``max_lag`` is ``Unsupported``.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

with warnings.catch_warnings():  # RLlib's import warns of its own deprecated modules
    warnings.simplefilter("ignore")
    import gymnasium
    import ray
    from ray.rllib.algorithms.impala import IMPALAConfig
    from ray.rllib.algorithms.impala.torch.impala_torch_learner import IMPALATorchLearner
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.apis import ValueFunctionAPI
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.core.rl_module.torch import TorchRLModule
    from ray.rllib.utils.metrics import (
        ENV_RUNNER_RESULTS,
        NUM_ENV_STEPS_SAMPLED_LIFETIME,
        WEIGHTS_SEQ_NO,
    )
    from ray.tune.registry import register_env

from xpspec.adapters.rllib import _seeded
from xpspec.kit.items import decode_items, item_columns
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.asynchronous import LOGIT_STEP, AsyncScenario
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.trace import Arrived, Event, Item, Trace, Trained
from xpspec.refimpl.toy_envs.gym_env import make_env_fns, toy_action_space, toy_observation_space

__all__ = ["run_async"]

_SOURCE = "https://github.com/ray-project/ray/blob/b7f4259e944bf6959f721b106adc366ddfa0c356/rllib"
_MODULE_ID = "default_policy"
_ENV_NAME = "xpspec-toy-actors"
_PATIENCE_S = 60.0
"""Seconds without a new arrival after which the env runners are taken as stuck."""


# -- the toy env, one per runner ------------------------------------------------------------------
@dataclass(frozen=True)
class _ActorEnv:
    """RLlib's env creator: env runner ``i`` (``EnvContext.worker_index``, 1-based) gets env
    ``i - 1`` of the toy env, which RLlib vectorizes alone (``gym_env_vectorize_mode="sync"``;
    its vector entry point gets a plain dict without the worker index,
    ``env/single_agent_env_runner.py:make_env``). The local runner (index 0) never samples."""

    spec: EnvSpec
    seed: int

    def __call__(self, config: Any) -> gymnasium.Env:
        actor = max(int(getattr(config, "worker_index", 0)) - 1, 0)
        return make_env_fns(self.spec, self.seed)[actor]()


# -- the toy versioned policy and its learner ---------------------------------------------------
class _VersionedModule(TorchRLModule, ValueFunctionAPI):
    """The toy versioned policy: action ``k`` has logit ``k * version * LOGIT_STEP``, the
    version being the module's one weight; values are 0 (IMPALA's learner asks for the
    ``ValueFunctionAPI``)."""

    def setup(self) -> None:
        self.version = torch.nn.Parameter(torch.zeros(()))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = batch[Columns.OBS]
        steps = torch.arange(self.action_space.n, dtype=torch.float32)
        logits = (steps * (self.version * LOGIT_STEP)).expand(*obs.shape[:-1], -1)
        return {Columns.ACTION_DIST_INPUTS: logits}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        obs = batch[Columns.OBS]
        return torch.zeros(obs.shape[:-1]) * self.version


_LOCK = threading.Lock()
_TRAINED: list[tuple[int, list[Item]]] = []
"""What IMPALA's learner thread records (the learner lives in the driver, ``num_learners=0``):
each update's version and trained items, in order; the run takes them under ``_LOCK``."""


class VersionLearner(IMPALATorchLearner):
    """IMPALA's torch learner with the toy loss ``-version`` under ``SGD(lr=1)``: each update
    raises the version weight by 1. Its ``_update`` records the trained rows."""

    def configure_optimizers_for_module(self, module_id: str, config: Any = None) -> None:
        module = self._module[module_id]
        params = self.get_parameters(module)
        self.register_optimizer(
            module_id=module_id,
            optimizer=torch.optim.SGD(params, lr=1.0),
            params=params,
            lr_or_lr_schedule=1.0,
        )

    def compute_loss_for_module(
        self, *, module_id: str, config: Any, batch: dict[str, Any], fwd_out: dict[str, Any]
    ) -> torch.Tensor:
        return -1.0 * self.module[module_id].unwrapped().version

    def _update(self, batch: dict[str, Any], **kwargs: Any) -> Any:
        rows = batch[_MODULE_ID]
        obs = np.asarray(rows[Columns.OBS]).reshape(-1, 3)
        mask = rows.get(Columns.LOSS_MASK)
        keep = np.ones(len(obs), bool) if mask is None else np.asarray(mask).reshape(-1)
        items = [o for o, k in zip(decode_items(obs), keep) if k]
        with _LOCK:
            _TRAINED.append((self._weights_seq_no - 1, items))
        return super()._update(batch, **kwargs)


# -- the run ------------------------------------------------------------------------------------------
def _config(sc: AsyncScenario) -> IMPALAConfig:
    spec = sc.env
    module = RLModuleSpec(module_class=_VersionedModule)
    return (
        IMPALAConfig()
        .environment(
            _ENV_NAME,
            observation_space=toy_observation_space(spec),
            action_space=toy_action_space(spec),
        )
        .env_runners(
            num_env_runners=spec.num_envs,
            num_envs_per_env_runner=1,
            gym_env_vectorize_mode="sync",
            rollout_fragment_length=sc.fragment_length,
            batch_mode="truncate_episodes",
        )
        .rl_module(rl_module_spec=module)
        .training(
            train_batch_size_per_learner=sc.fragment_length,
            lr=1.0,
            broadcast_interval=1,
        )
        .learners(num_learners=0, num_aggregator_actors_per_learner=0, learner_class=VersionLearner)
        .reporting(
            min_time_s_per_iteration=0,
            min_sample_timesteps_per_iteration=0,
            min_train_timesteps_per_iteration=0,
        )
        .debugging(seed=sc.seed)
    )


def _items(
    episodes: list[Any],
) -> tuple[list[Item], list[int], list[int], list[tuple[float, ...]], list[float]]:
    """Per acted step of the fragment's chunks: item, action, WEIGHTS_SEQ_NO, logits, log-prob."""
    items: list[Item] = []
    actions: list[int] = []
    versions: list[int] = []
    logits: list[tuple[float, ...]] = []
    logps: list[float] = []
    for chunk in episodes:
        n = len(chunk)  # env steps of the chunk: observations 0 .. n - 1 were acted on
        obs = np.asarray(chunk.get_observations(slice(0, n)))
        items.extend(decode_items(obs))
        actions.extend(int(a) for a in np.asarray(chunk.get_actions(slice(0, n))).reshape(-1))
        out = chunk.get_extra_model_outputs
        versions.extend(int(v) for v in np.asarray(out(WEIGHTS_SEQ_NO, slice(0, n))).reshape(-1))
        dist = np.asarray(out(Columns.ACTION_DIST_INPUTS, slice(0, n)), dtype=np.float64)
        logits.extend(tuple(float(x) for x in row) for row in dist.reshape(n, -1))
        logps.extend(
            float(x) for x in np.asarray(out(Columns.ACTION_LOGP, slice(0, n))).reshape(-1)
        )
    return items, actions, versions, logits, logps


class _Run:
    """One IMPALA run, recording arrivals where ``training_step`` queues them."""

    def __init__(self, sc: AsyncScenario, algo: Any) -> None:
        self.sc, self.algo = sc, algo
        self.arrivals: list[Arrived] = []
        self.events: list[Event] = []
        self.learner = algo.learner_group._learner
        queue = algo._pre_queue_episode_refs
        self._queue = queue

        def recorded(episode_refs: list[Any], package_size: int) -> Any:
            self._arrive(episode_refs)
            return queue(episode_refs, package_size)

        algo._pre_queue_episode_refs = recorded

    def _arrive(self, episode_refs: list[Any]) -> None:
        self._flush_trained()
        learner = int(self.learner._weights_seq_no)
        env_steps = int(
            self.algo.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
        )
        for ref in episode_refs:
            episodes = ray.get(ref) if isinstance(ref, ray.ObjectRef) else ref
            items, actions, versions, logits, logps = _items(episodes)
            actors = {e for e, _, _ in items}
            if len(actors) != 1:
                raise RuntimeError(
                    f"a sample of one env runner holds the items of envs {sorted(actors)}"
                )
            event = Arrived(
                len(self.arrivals),
                actors.pop(),
                learner,
                *item_columns(items),
                tuple(actions),
                tuple(versions),
                tuple(logits),
                tuple(logps),
                env_steps,
            )
            self.arrivals.append(event)
            self.events.append(event)

    def _flush_trained(self) -> None:
        with _LOCK:
            done, _TRAINED[:] = list(_TRAINED), []
        self.events.extend(Trained(v, *item_columns(items)) for v, items in done)

    def run(self) -> Trace:
        seen, since = 0, time.monotonic()
        while len(self.arrivals) < len(self.sc.arrivals):
            if len(self.arrivals) > seen:
                seen, since = len(self.arrivals), time.monotonic()
            elif time.monotonic() - since > _PATIENCE_S:
                raise RuntimeError(
                    f"{seen} of {len(self.sc.arrivals)} fragments arrived, then none in "
                    f"{_PATIENCE_S:g} s of train() calls"
                )
            self.algo.train()
        self._flush_trained()
        return Trace(tuple(self.events), {"producer": "rllib", "seed": self.sc.seed})


def run_async(sc: AsyncScenario) -> Trace:
    """IMPALA's ``train()`` with one remote env runner per actor until the scenario's number
    of fragments has arrived (see the module docstring)."""
    if sc.max_lag is not None:
        raise Unsupported(
            f"max_lag {sc.max_lag}: RLlib 2.60.0 has no bound on the lag of an item; IMPALA "
            "and APPO bound what is in flight (max_requests_in_flight_per_env_runner, "
            "learner_queue_size, APPO's circular buffer), never drop an item by its "
            "WEIGHTS_SEQ_NO (algorithms/impala/impala.py, algorithms/appo/appo.py)",
            f"{_SOURCE}/algorithms/impala/impala.py",
        )
    with _LOCK:
        _TRAINED.clear()
    with _seeded(sc.seed):
        ray.init(
            num_cpus=sc.env.num_envs + 1,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
        try:
            register_env(_ENV_NAME, _ActorEnv(sc.env, sc.seed))
            algo = _config(sc).build_algo()
            try:
                return _Run(sc, algo).run()
            finally:
                algo.stop()
        finally:
            ray.shutdown()
