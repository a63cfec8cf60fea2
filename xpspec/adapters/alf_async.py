"""Asynchronous unroll in ALF (clauses ``async.*``): ``RLTrainer`` with
``TrainerConfig.async_unroll``, whose ``AsyncUnroller`` steps the batched toy env in a spawned
worker process while the trainer trains (``alf/algorithms/async_unroller.py``). Sources are
files of the ``alf`` package at snapshot ``23aca492``.

- **Conf file**: the worker builds its own env and algorithm by parsing the trainer's conf
  file (``AsyncUnroller.__init__`` refuses a gin file; ``_worker`` calls
  ``common.parse_conf_file``). The adapter writes a Python conf per run into the run's root
  directory that calls :func:`configure` with the scenario; the trainer's process parses the
  same file, as ALF's ``train.py`` does, so both build the same env and algorithm.
- **Actors**: ALF has one unroll process, which steps every env of the batch (the toy env as
  one batched ALF environment, as the trainer row builds it). Each ``UnrollResult`` is
  one time step of all envs; ``unroll_length = max_unroll_length = fragment_length`` makes
  ``RLAlgorithm._async_unroll`` take ``fragment_length`` of them per iteration
  (``gather_unroll_results``), so each iteration receives one fragment per env at once. They
  are recorded as arrivals in env order, every one with the learner's version at that gather.
- **Publishing**: ``unroll_parameter_update_period = 1`` (ALF's default is 10): the trainer
  sends its ``state_dict`` to the worker at the start of every iteration, before it gathers
  (``_async_unroll``, ``AsyncUnroller.update_parameter``), the spec's publish after each
  update. ``unroll_queue_size = fragment_length - 1``: the worker acts a step before it waits
  for room in the queue (``_worker``), so it holds one more step while the queue is full and
  acts at most one fragment ahead of the trainer, as the spec's actor
  released at the hand-over; with ``fragment_length`` 1 ALF's smallest queue (1) lets it act
  two steps ahead.
- **Policy**: an off-policy ``RLAlgorithm`` whose one weight is the version; its
  ``rollout_step`` computes the toy versioned policy's logits from that weight, samples the
  action and returns the logits, the action's log-probability and the weight it acted with
  as its info, which ALF sends through the result queue (``UnrollResult.policy_step``) and
  stores as the experience's ``rollout_info``.
- **Recorded version**: ALF records no policy version with an unroll step (an
  ``UnrollResult`` holds the time step, the policy step and state and two timings; the
  worker's global counter, which it receives with the weights, is the trainer's iteration
  number, not its number of updates). The version recorded is the version weight of the
  ``state_dict`` the worker last loaded, which the policy put in its info: the logits half of
  ``async.version-recorded`` agrees with it by construction, and the bounds (the weights the
  worker acted with against the learner's versions) are what the check judges.
- **Learner**: ALF's defaults ``whole_replay_buffer_training`` and ``clear_replay_buffer``:
  each iteration trains once (one epoch, one mini-batch of every item, windows of one) on a
  ring of ``fragment_length + 1`` steps per env, the gather's steps and the newest of the one
  before; ``RLAlgorithm.__init__`` raises ``initial_collect_steps`` to the ring's size, so the
  first iteration stores and does not train (``alf/algorithms/rl_algorithm.py``, the
  deviations ``alf-fixed-length`` and ``capped-size`` of the trainer row). The loss is
  ``-version`` under ALF's ``SGD(lr=1)`` with ``mask_out_loss_for_last_step`` off, so each
  update raises the version weight by exactly 1. Recorded per update (``Algorithm._update``):
  the items ALF trained on and the weight before the update. The learner's version at an
  arrival is the trainer's weight when ``gather_unroll_results`` is called.
- **Env-step counter**: ALF's ``EnvironmentSteps`` metric (``RLAlgorithm.get_step_metrics``)
  read after each iteration's unroll, once all its fragments were processed: it counts only
  non-FIRST time steps (``alf/metrics/metrics.py``).
- **Lag bound**: none. ALF trains on whatever its replay buffer holds and has no filter on the
  age of the weights that acted: a scenario with ``max_lag`` is ``Unsupported``.
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from xpspec.kit.items import decode_items, item_columns
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.asynchronous import LOGIT_STEP, AsyncScenario
from xpspec.protocol.scenario import scenario_from_json, scenario_to_json
from xpspec.protocol.trace import Arrived, Event, Item, Trace, Trained

__all__ = ["CONF_NAME", "async_problem", "configure", "run_async"]

_SOURCE = "https://github.com/HorizonRobotics/alf/blob/23aca492/alf"
CONF_NAME = "xpspec_async_conf.py"
"""The conf file written into each run's root directory."""


def async_problem(sc: AsyncScenario) -> Unsupported | None:
    """Why ALF cannot express ``sc`` (None if it can)."""
    if sc.max_lag is not None:
        return Unsupported(
            f"max_lag {sc.max_lag}: ALF 23aca492 has no bound on the age of the weights that "
            "acted; with async_unroll the trainer stores every unroll result in its replay "
            "buffer and samples it (RLAlgorithm._async_unroll, _train_iter_off_policy), with "
            "no version to filter by",
            f"{_SOURCE}/algorithms/rl_algorithm.py",
        )
    return None


# -- the toy versioned algorithm -------------------------------------------------------------
_ALGORITHM: list[Any] = []


def _algorithm_class() -> Any:
    """The off-policy algorithm of the toy versioned policy (built once ALF is imported)."""
    if _ALGORITHM:
        return _ALGORITHM[0]
    import alf
    from alf.algorithms.rl_algorithm import RLAlgorithm
    from alf.data_structures import AlgStep, LossInfo

    class VersionedAlgorithm(RLAlgorithm):
        """The toy versioned policy: action ``k`` has logit ``k * version * LOGIT_STEP``, the
        version being the algorithm's one weight; the loss ``-version`` per sample."""

        def __init__(
            self,
            observation_spec: Any,
            action_spec: Any,
            reward_spec: Any = None,
            env: Any = None,
            config: Any = None,
            debug_summaries: bool = False,
        ) -> None:
            super().__init__(
                observation_spec=observation_spec,
                action_spec=action_spec,
                reward_spec=alf.TensorSpec(()) if reward_spec is None else reward_spec,
                train_state_spec=(),
                rollout_state_spec=(),
                predict_state_spec=(),
                is_on_policy=False,
                env=env,
                config=config,
                optimizer=alf.optimizers.SGD(lr=1.0),
                debug_summaries=debug_summaries,
                name="VersionedAlgorithm",
            )
            self._num_actions = int(action_spec.maximum) + 1
            self._weight_v = torch.nn.Parameter(torch.zeros(()))

        def _logits(self, batch: int) -> torch.Tensor:
            steps = torch.arange(self._num_actions, dtype=torch.float32)
            return (steps * (self._weight_v.detach() * LOGIT_STEP)).expand(batch, -1).clone()

        def predict_step(self, time_step: Any, state: Any) -> Any:
            logits = self._logits(time_step.step_type.shape[0])
            return AlgStep(output=logits.argmax(-1), state=(), info=())

        def rollout_step(self, time_step: Any, state: Any) -> Any:
            batch = time_step.step_type.shape[0]
            logits = self._logits(batch)
            dist = torch.distributions.Categorical(logits=logits)
            action = dist.sample()
            info = {
                "version": self._weight_v.detach().expand(batch).clone(),
                "logits": logits,
                "log_prob": dist.log_prob(action),
            }
            return AlgStep(output=action, state=(), info=info)

        def train_step(self, inputs: Any, state: Any, rollout_info: Any) -> Any:
            return AlgStep(output=(), state=(), info=self._weight_v.expand(inputs.reward.shape))

        def calc_loss(self, info: torch.Tensor) -> Any:
            return LossInfo(loss=-info)

    _ALGORITHM.append(VersionedAlgorithm)
    return VersionedAlgorithm


def _load_env(env_name: str, spec_json: str, batch_size: int = 1) -> Any:
    """An ALF ``env_load_fn`` marked batched: the toy env as one in-process batched env."""
    from xpspec.adapters.alf import _classes

    sc = scenario_from_json(spec_json)
    assert isinstance(sc, AsyncScenario) and batch_size == sc.env.num_envs
    return _classes()["env"](sc.env, sc.seed)


_load_env.batched = True  # type: ignore[attr-defined]


def _iterations(sc: AsyncScenario) -> int:
    """Iterations whose gathers bring at least the scenario's number of fragments."""
    return math.ceil(len(sc.arrivals) / sc.env.num_envs)


def configure(spec_json: str) -> None:
    """What the conf file does, in the trainer's process and in ALF's unroll worker: the toy
    env and the versioned algorithm under ``async_unroll``."""
    import alf

    from xpspec.adapters.alf import QUIET_TRAINER

    sc = scenario_from_json(spec_json)
    assert isinstance(sc, AsyncScenario)
    fragment = sc.fragment_length
    alf.config(
        "create_environment",
        env_name="xpspec-toy-async",
        env_load_fn=partial(_load_env, spec_json=spec_json),
        num_parallel_environments=sc.env.num_envs,
    )
    alf.config(
        "TrainerConfig",
        algorithm_ctor=_algorithm_class(),
        random_seed=sc.seed,
        num_iterations=_iterations(sc),
        async_unroll=True,
        unroll_length=fragment,
        max_unroll_length=fragment,
        unroll_queue_size=max(fragment - 1, 1),
        unroll_parameter_update_period=1,
        whole_replay_buffer_training=True,  # ALF's default
        clear_replay_buffer=True,  # ALF's default
        num_updates_per_train_iter=1,
        mini_batch_size=(fragment + 1) * sc.env.num_envs,
        mini_batch_length=1,
        mask_out_loss_for_last_step=False,
        **QUIET_TRAINER,
    )


# -- the run --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Step:
    """One unroll result of one env: the item, action, version, logits and log-probability."""

    item: Item
    action: int
    version: int
    logits: tuple[float, ...]
    log_prob: float


def _version_of(weight: float) -> int:
    version = round(weight)
    if abs(weight - version) > 1e-4:
        raise RuntimeError(f"the version weight: expected an integer, got {weight}")
    return version


class _Run:
    """One ``RLTrainer`` run under ``async_unroll``, recorded at ALF's seams."""

    def __init__(self, sc: AsyncScenario) -> None:
        self.sc = sc
        self.events: list[Event] = []
        self.arrivals = 0
        self.alg: Any = None
        self._pending: list[tuple[int, list[list[_Step]]]] = []

    def _gather(self, original: Any) -> Any:
        def gather(unroller: Any, *args: Any, **kwargs: Any) -> Any:
            learner = _version_of(float(self.alg._weight_v))
            results = original(unroller, *args, **kwargs)
            per_env: list[list[_Step]] = [[] for _ in range(self.sc.env.num_envs)]
            for result in results:
                items = decode_items(result.time_step.observation)
                info = result.policy_step.info
                actions = result.policy_step.output.reshape(-1).tolist()
                versions = info["version"].reshape(-1).tolist()
                logits = info["logits"].tolist()
                log_probs = info["log_prob"].reshape(-1).tolist()
                for b, item in enumerate(items):
                    per_env[item[0]].append(
                        _Step(
                            item,
                            int(actions[b]),
                            _version_of(versions[b]),
                            tuple(float(x) for x in logits[b]),
                            float(log_probs[b]),
                        )
                    )
            self._pending.append((learner, per_env))
            return results

        return gather

    def _unrolled(self, original: Any) -> Any:
        def async_unroll(alg: Any, *args: Any, **kwargs: Any) -> Any:
            experience = original(alg, *args, **kwargs)
            env_steps = int(alg.get_step_metrics()[1].result())
            for learner, per_env in self._pending:
                for actor, steps in enumerate(per_env):
                    if not steps:
                        continue
                    self.events.append(
                        Arrived(
                            self.arrivals,
                            actor,
                            learner,
                            *item_columns([s.item for s in steps]),
                            tuple(s.action for s in steps),
                            tuple(s.version for s in steps),
                            tuple(s.logits for s in steps),
                            tuple(s.log_prob for s in steps),
                            env_steps,
                        )
                    )
                    self.arrivals += 1
            self._pending.clear()
            return experience

        return async_unroll

    def _updated(self, original: Any) -> Any:
        def update(alg: Any, experience: Any, *args: Any, **kwargs: Any) -> Any:
            version = _version_of(float(alg._weight_v))
            items = decode_items(experience.time_step.observation)
            self.events.append(Trained(version, *item_columns(items)))
            return original(alg, experience, *args, **kwargs)

        return update

    def _algorithm(self, cls: Any, **kwargs: Any) -> Any:
        self.alg = cls(**kwargs)
        return self.alg

    def run(self, workdir: str) -> Trace:
        import alf
        from alf.algorithms.algorithm import Algorithm
        from alf.algorithms.async_unroller import AsyncUnroller
        from alf.algorithms.config import TrainerConfig
        from alf.algorithms.rl_algorithm import RLAlgorithm
        from alf.trainers.policy_trainer import RLTrainer
        from alf.utils import common

        from xpspec.adapters.alf import quiet_summaries

        conf = os.path.join(workdir, CONF_NAME)
        with open(conf, "w", encoding="utf-8") as f:
            f.write(
                "from xpspec.adapters.alf_async import configure\n\n"
                f"configure({scenario_to_json(self.sc)!r})\n"
            )
        common.parse_conf_file(conf)
        config = TrainerConfig(root_dir=workdir, conf_file=conf)
        config.algorithm_ctor = partial(self._algorithm, config.algorithm_ctor)
        quiet_summaries(RLTrainer)
        AsyncUnroller.gather_unroll_results = self._gather(AsyncUnroller.gather_unroll_results)
        RLAlgorithm._async_unroll = self._unrolled(RLAlgorithm._async_unroll)
        Algorithm._update = self._updated(Algorithm._update)
        trainer = RLTrainer(config)
        try:
            trainer.train()
        finally:
            unroller = getattr(self.alg, "_async_unroller", None)
            if unroller is not None:  # ALF raised before finish_train closed its worker
                unroller._worker.terminate()
            alf.close_env()
        if self.arrivals < len(self.sc.arrivals):
            raise RuntimeError(
                f"fragments: expected at least {len(self.sc.arrivals)}, got {self.arrivals}"
            )
        return Trace(tuple(self.events), {"producer": "alf", "seed": self.sc.seed})


def run_async(sc: AsyncScenario) -> Trace:
    """``RLTrainer`` under ``async_unroll`` until the scenario's number of fragments arrived
    (see the module docstring), in a temporary root directory."""
    with tempfile.TemporaryDirectory(prefix="xpspec-alf-", ignore_cleanup_errors=True) as workdir:
        return _Run(sc).run(workdir)
