"""Offline and hybrid replay in RLlib 2.60.0 (capability ``offline``, clauses ``offline.*``):
old-API-stack PPO reading through ``MixedInput``, the only online + offline mix RLlib has (the
new stack's ``OfflineData`` reads a path or a list of paths, with no online share). Sources are
cited as files under ``rllib/``.

**The dataset.** RLlib's own ``JsonWriter`` (``offline/json_writer.py``) writes the scenario's
items, in order, one ``SampleBatch`` line per item, with the columns an old-stack PPO dataset
holds, the columns of the batches its sampler returns (``concat_samples`` joins a dataset line
and a sampler fragment only when their keys agree): ``obs`` the toy observation ``[env,
episode, t]``, ``new_obs`` the same, action 0, reward 0, not terminated or truncated, empty
``infos``, ``eps_id`` and ``unroll_id`` the item's position, agent 0, ``t`` its time step, and
a logged policy's outputs (value prediction 0, uniform action distribution). The run sets
``postprocess_inputs=True``, so PPO's ``postprocess_trajectory`` computes each line's
advantages when ``JsonReader`` reads it (``offline/json_reader.py:_postprocess_if_needed``).

**The run.** ``PPOConfig().api_stack(enable_rl_module_and_learner=False,
enable_env_runner_and_connector_v2=False)`` on the toy env (one ``ToyEnv`` per sub-env, built
from its ``vector_index``), no remote env runners, ``num_envs_per_env_runner=num_envs``,
``rollout_fragment_length = batch_size / num_envs``, ``batch_mode="truncate_episodes"``,
``train_batch_size = minibatch_size = batch_size``, one epoch, and ``input_ = {"sampler": p,
"<dir>/*.json": 1 - p}`` with ``p = online_weight / (offline_weight + online_weight)`` (the
complement, so that the values add up to exactly 1.0 as ``MixedInput.__init__`` requires).
``RolloutWorker`` builds ``ShuffledInput(MixedInput(...))`` from that dict
(``evaluation/rollout_worker.py``), and ``MixedInput.next`` picks one source per call with
those probabilities (``np.random.choice(self.choices, p=self.p)``, ``offline/mixed_input.py``)
and returns that source's whole batch: a fragment of the sampler (one sub-env's
``rollout_fragment_length`` steps, as the runs show) or one dataset line. ``synchronous_parallel_sample``
calls ``RolloutWorker.sample()`` until the train batch has ``batch_size`` env steps. One
update is one ``Algorithm.train()``.

**Recorded.** Per ``train()``: the items of the ``train_batch`` that PPO's policy passes to
the ``on_learn_on_batch`` callback (``policy/torch_policy_v2.py:learn_on_loaded_batch``),
decoded from its ``obs`` (each item's source is its env index: the sampler's envs are below
``num_envs``, the dataset's at or above); the online items written, the sampler's items among
the samples ``RolloutWorker.sample`` passes to ``on_sample_end``; the items the dataset holds
after the update, read back by the ``MixedInput``'s own ``JsonReader.read_all_files()``; and
``Algorithm.iteration`` after the call. The env runs only when ``MixedInput`` picks the
sampler, so the number of env steps before an update is RLlib's, not ``steps_per_update``.

**Not expressible** (:class:`~xpspec.protocol.adapter.Unsupported`): an online part that
starts late or skips updates (``MixedInput`` has no schedule), an online ring of ``capacity``
items per env smaller than one sampler fragment (PPO keeps no online buffer: it trains on the
fragments as returned, ``batch_size / num_envs`` steps of one env each), and a
``batch_size`` that is not a multiple of ``num_envs`` (``validate_train_batch_size_vs_
rollout_fragment_length`` in ``algorithms/algorithm_config.py`` rejects it).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ray
from ray.rllib.algorithms.callbacks import DefaultCallbacks
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.offline.json_reader import JsonReader
from ray.rllib.offline.json_writer import JsonWriter
from ray.rllib.offline.mixed_input import MixedInput
from ray.rllib.policy.sample_batch import SampleBatch, convert_ma_batch_to_sample_batch
from ray.tune.registry import register_env

from xpspec.kit.items import decode_items
from xpspec.kit.quiet import seeded_quiet
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import OfflineScenario
from xpspec.protocol.trace import Event, Item, Mixed, Trace
from xpspec.refimpl.toy_envs.gym_env import ToyEnv

__all__ = ["offline_problem", "run_offline", "write_dataset"]

_SOURCE = "https://github.com/ray-project/ray/blob/b7f4259e944bf6959f721b106adc366ddfa0c356/rllib"
_MIXED_INPUT = f"{_SOURCE}/offline/mixed_input.py"
_ENV_NAME = "xpspec-toy-offline"


def _probabilities(sc: OfflineScenario) -> tuple[float, float]:
    """``(online, offline)`` probabilities of ``MixedInput``'s dict, the offline one the
    complement of the online one (so that they add up to 1.0, as ``MixedInput`` requires)."""
    online = sc.online_weight / (sc.offline_weight + sc.online_weight)
    return online, 1.0 - online


def offline_problem(sc: OfflineScenario) -> Unsupported | None:
    """Why RLlib's old-stack ``MixedInput`` cannot express ``sc`` (None if it can)."""
    if sc.online_after > 0 or sc.online_every > 1:
        return Unsupported(
            f"online_after {sc.online_after}, online_every {sc.online_every}: RLlib 2.60.0 "
            "MixedInput.next picks a source at every call, with fixed probabilities "
            "(offline/mixed_input.py): it has no schedule",
            _MIXED_INPUT,
        )
    if sc.batch_size % sc.env.num_envs:
        return Unsupported(
            f"batch_size {sc.batch_size} with {sc.env.num_envs} envs: RLlib 2.60.0 rejects a "
            "train_batch_size that num_envs_per_env_runner x rollout_fragment_length cannot "
            "reach (AlgorithmConfig.validate_train_batch_size_vs_rollout_fragment_length)",
            f"{_SOURCE}/algorithms/algorithm_config.py",
        )
    fragment = sc.batch_size // sc.env.num_envs
    if sc.capacity < fragment:
        return Unsupported(
            f"capacity {sc.capacity} per env, batch_size {sc.batch_size} with "
            f"{sc.env.num_envs} envs: old-stack PPO in RLlib 2.60.0 keeps no online buffer; it "
            f"trains on its sampler's fragments as returned, {fragment} steps of one env each "
            "(rollout_fragment_length = batch_size / num_envs, evaluation/rollout_worker.py), "
            "so an online ring holding fewer items per env than a fragment cannot be expressed",
            f"{_SOURCE}/evaluation/rollout_worker.py",
        )
    return None


def write_dataset(sc: OfflineScenario, directory: str) -> None:
    """The dataset as RLlib JSON: one ``SampleBatch`` line per item, written by
    ``JsonWriter`` (see the module docstring)."""
    writer = JsonWriter(directory)
    for position, item in enumerate(sc.offline):
        observation = np.array([item], dtype=np.float32)
        writer.write(
            SampleBatch(
                {
                    SampleBatch.OBS: observation,
                    SampleBatch.NEXT_OBS: observation,
                    SampleBatch.ACTIONS: np.zeros(1, dtype=np.int32),
                    SampleBatch.REWARDS: np.zeros(1, dtype=np.float32),
                    SampleBatch.TERMINATEDS: np.zeros(1, dtype=bool),
                    SampleBatch.TRUNCATEDS: np.zeros(1, dtype=bool),
                    SampleBatch.INFOS: np.array([{}], dtype=object),
                    SampleBatch.EPS_ID: np.array([position], dtype=np.int64),
                    SampleBatch.UNROLL_ID: np.array([position], dtype=np.int64),
                    SampleBatch.AGENT_INDEX: np.zeros(1, dtype=np.int64),
                    SampleBatch.T: np.array([item[2]], dtype=np.int64),
                    SampleBatch.VF_PREDS: np.zeros(1, dtype=np.float32),
                    SampleBatch.ACTION_DIST_INPUTS: np.zeros(
                        (1, sc.env.num_actions), dtype=np.float32
                    ),
                    SampleBatch.ACTION_LOGP: np.full(
                        1, -np.log(sc.env.num_actions), dtype=np.float32
                    ),
                }
            )
        )


@dataclass(frozen=True)
class _ToyEnvCreator:
    """The old stack's env creator: sub-env ``vector_index`` of the toy vector env."""

    spec: EnvSpec
    seed: int

    def __call__(self, context: Any) -> ToyEnv:
        return ToyEnv(self.spec, int(context.vector_index), self.seed)


@dataclass
class _Recorder:
    """What RLlib's callbacks handed over during one ``train()``."""

    num_envs: int
    batches: list[tuple[Item, ...]] = field(default_factory=list)
    written: list[Item] = field(default_factory=list)


class _RecordingCallbacks(DefaultCallbacks):
    """Old-stack callbacks reporting to the class's ``recorder`` (a subclass per run: the
    config is deep-copied on its way to the worker, its callbacks class is not)."""

    recorder: _Recorder

    def on_sample_end(self, *, samples: Any, **kwargs: Any) -> None:
        batch = convert_ma_batch_to_sample_batch(samples)
        items = decode_items(np.asarray(batch[SampleBatch.OBS]))
        self.recorder.written.extend(i for i in items if i[0] < self.recorder.num_envs)

    def on_learn_on_batch(self, *, train_batch: Any, **kwargs: Any) -> None:
        observation = train_batch[SampleBatch.OBS]
        if hasattr(observation, "detach"):
            observation = observation.detach().cpu().numpy()
        self.recorder.batches.append(tuple(decode_items(np.asarray(observation))))


def _config(sc: OfflineScenario, dataset: str, callbacks: type[DefaultCallbacks]) -> Any:
    online, offline = _probabilities(sc)
    return (
        PPOConfig()
        .api_stack(enable_rl_module_and_learner=False, enable_env_runner_and_connector_v2=False)
        .environment(_ENV_NAME)
        .env_runners(
            num_env_runners=0,
            num_envs_per_env_runner=sc.env.num_envs,
            rollout_fragment_length=sc.batch_size // sc.env.num_envs,
            batch_mode="truncate_episodes",
        )
        .training(train_batch_size=sc.batch_size, minibatch_size=sc.batch_size, num_epochs=1)
        .offline_data(
            input_={"sampler": online, os.path.join(dataset, "*.json"): offline},
            postprocess_inputs=True,
        )
        .callbacks(callbacks)
        .reporting(
            min_time_s_per_iteration=0,
            min_sample_timesteps_per_iteration=0,
            min_train_timesteps_per_iteration=0,
        )
        .debugging(seed=sc.seed)
    )


def _dataset_reader(algo: Any) -> JsonReader:
    """The ``JsonReader`` of the ``MixedInput`` RLlib built (inside its ``ShuffledInput``)."""
    mixed = algo.env_runner.input_reader.child
    if not isinstance(mixed, MixedInput):
        raise RuntimeError(f"the env runner's input: expected a MixedInput, got {mixed!r}")
    (reader,) = (c for c in mixed.choices if isinstance(c, JsonReader))
    return reader


def _run(sc: OfflineScenario, algo: Any, recorder: _Recorder) -> Trace:
    reader = _dataset_reader(algo)
    events: list[Event] = []
    for update in range(sc.updates):
        recorder.batches, recorder.written = [], []
        algo.train()
        if len(recorder.batches) != 1:
            raise RuntimeError(
                f"update {update}: PPO learned on {len(recorder.batches)} batches in one "
                "train(), expected 1 (one epoch, minibatch_size = train_batch_size)"
            )
        held = tuple(
            item
            for line in reader.read_all_files()
            for item in decode_items(np.asarray(line[SampleBatch.OBS]))
        )
        events.append(
            Mixed(update, tuple(recorder.written), recorder.batches[0], held, int(algo.iteration))
        )
    return Trace(tuple(events), {"producer": "rllib", "seed": sc.seed})


def run_offline(sc: OfflineScenario) -> Trace:
    """The offline scenario ``sc`` through old-stack PPO's ``MixedInput`` (see the module
    docstring)."""
    problem = offline_problem(sc)
    if problem is not None:
        raise problem
    recorder = _Recorder(sc.env.num_envs)
    callbacks = type("_Recording", (_RecordingCallbacks,), {"recorder": recorder})
    with (
        seeded_quiet(sc.seed, ("torch", "numpy"), ("ray", "ray.rllib")),
        tempfile.TemporaryDirectory(prefix="xpspec-rllib-offline-") as dataset,
    ):
        write_dataset(sc, dataset)
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
        try:
            register_env(_ENV_NAME, _ToyEnvCreator(sc.env, sc.seed))
            algo = _config(sc, dataset, callbacks).build_algo()
            try:
                return _run(sc, algo, recorder)
            finally:
                algo.stop()
        finally:
            ray.shutdown()
