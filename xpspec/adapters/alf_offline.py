"""Offline and hybrid replay in ALF (snapshot ``23aca492``; capability ``offline``, clauses
``offline.*``): an ``RLTrainer`` in ALF's hybrid training mode, its offline buffer loaded from
a replay-buffer checkpoint by ``TrainerConfig.offline_buffer_dir``. Nothing of ALF is
re-implemented; sources are cited as ``file:function`` of the ``alf`` package.

**The dataset.** The scenario's items, in order, are added one time step at a time to a
one-env ``ReplayBuffer(enable_checkpoint=True)`` of exactly their number of steps, whose data
spec is the offline buffer structure ALF documents (``docs/notes/hybrid_and_offline_rl_training
.rst``, section 3: ``Experience(time_step, action, rollout_info=BasicRolloutInfo(rl=BasicRLInfo
(action)))``): observation the toy observation ``[env, episode, t]``, step type FIRST at
``t == 0`` and MID otherwise, reward 0, discount 1, actions 0, env id 0 (the buffer's one
row). ALF's ``Checkpointer(algorithm=...)`` saves it as the ``ckpt-0-replay_buffer`` file a
training run writes, the way the same document says an offline buffer is made.

**The run.** ``RLTrainer(TrainerConfig(offline_buffer_dir=<that file>,
num_iterations=updates, unroll_length=steps_per_update, replay_buffer_length=capacity,
mini_batch_size=batch_size / 2, mini_batch_length=1, num_updates_per_train_iter=1,
initial_collect_steps=0, rl_train_after_update_steps=online_after,
rl_train_every_update_steps=online_every))`` on the toy env with the counting algorithm of
:mod:`xpspec.adapters.alf`. ``Trainer.__init__`` loads the file
(``RLAlgorithm.load_offline_replay_buffer``, which adds its steps in order to
``_offline_replay_buffer``); every ``train_iter`` increments the global counter, unrolls into
the online ``_replay_buffer`` once the counter reaches ``rl_train_after_update_steps``, and
calls ``Algorithm.train_from_replay_buffer``, whose hybrid branch samples the online buffer
when ``global_step >= rl_train_after_update_steps and global_step %
rl_train_every_update_steps == 0`` and the offline buffer always, ``mini_batch_size`` windows
each, and makes one ``_hybrid_update`` of the two mini-batches. An online weight of 0 is ALF's
documented pure offline training: ``rl_train_after_update_steps`` past ``num_iterations``
(same document, section 2), with ``mini_batch_size = batch_size``.

**Recorded.** Per ``train_iter`` (one update): the items ALF wrote to its online buffer
(``ReplayBuffer.add_batch``, read back with ``get_field``); the items of the mini-batches
``_hybrid_update`` received, the online one first (none when ALF passes it ``None``), each
decoded from its observation, so an item's source is what ALF sampled it from; the items the
offline buffer holds after the update (``held_items``); ALF's global counter after it.

**Not expressible** (:class:`~xpspec.protocol.adapter.Unsupported`): an offline weight of 0
(ALF's hybrid branch samples the offline buffer at every update), weights other than 1:1 with
both positive and an odd ``batch_size`` (ALF updates on an online and an offline mini-batch of
``mini_batch_size`` each: a fixed 1:1 split of an even batch).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from xpspec.adapters.alf import QUIET_TRAINER, _classes, _wrap, _wrap_after, quiet_summaries
from xpspec.adapters.alf_checkpoint import held_items
from xpspec.kit.items import decode_items
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import OfflineScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Event, Item, Mixed, Trace

__all__ = ["offline_problem", "run_offline"]

_SOURCE = "https://github.com/HorizonRobotics/alf/blob/23aca492/alf/algorithms"
_ALGORITHM = f"{_SOURCE}/algorithm.py"


def offline_problem(sc: OfflineScenario) -> Unsupported | None:
    """Why ALF cannot express ``sc`` (None if it can)."""
    if sc.offline_weight == 0:
        return Unsupported(
            f"weights {sc.offline_weight}:{sc.online_weight}: ALF (snapshot 23aca492) samples "
            "the offline buffer at every update of hybrid training "
            "(Algorithm.train_from_replay_buffer, alf/algorithms/algorithm.py); without "
            "offline_buffer_dir it trains online only and holds no offline dataset",
            _ALGORITHM,
        )
    if sc.online_weight == 0:
        return None  # pure offline training (rl_train_after_update_steps > num_iterations)
    if sc.offline_weight != sc.online_weight or sc.batch_size % 2:
        return Unsupported(
            f"weights {sc.offline_weight}:{sc.online_weight}, batch_size {sc.batch_size}: ALF "
            "(snapshot 23aca492) updates on an online and an offline mini-batch of "
            "mini_batch_size each (Algorithm._train_hybrid_experience and _hybrid_update, "
            "alf/algorithms/algorithm.py), a fixed 1:1 split of an even batch",
            _ALGORITHM,
        )
    return None


def _write_dataset(sc: OfflineScenario, env: Any, directory: str) -> str:
    """The dataset as an ALF replay-buffer checkpoint (see the module docstring); its path."""
    import alf
    from alf.data_structures import BasicRLInfo, BasicRolloutInfo, Experience, TimeStep
    from alf.experience_replayers.replay_buffer import ReplayBuffer
    from alf.utils.checkpoint_utils import Checkpointer

    action_spec = env.action_spec()
    time_step_spec = TimeStep(
        step_type=alf.TensorSpec((), torch.int32),
        reward=alf.TensorSpec(()),
        discount=alf.TensorSpec(()),
        observation=env.observation_spec(),
        prev_action=action_spec,
        env_id=alf.TensorSpec((), torch.int32),
    )
    spec = Experience(
        time_step=time_step_spec,
        action=action_spec,
        rollout_info=BasicRolloutInfo(rl=BasicRLInfo(action=action_spec), rewards={}, repr={}),
    )
    n = len(sc.offline)
    holder = torch.nn.Module()
    buffer = ReplayBuffer(spec, 1, max_length=n, enable_checkpoint=True)
    holder._replay_buffer = buffer
    zero = torch.zeros(1, dtype=torch.int64)
    for item in sc.offline:
        first = item[2] == 0
        step = TimeStep(
            step_type=torch.full(
                (1,), int(StepType.FIRST if first else StepType.MID), dtype=torch.int32
            ),
            reward=torch.zeros(1),
            discount=torch.ones(1),
            observation=torch.tensor([item], dtype=torch.float32),
            prev_action=zero,
            env_id=torch.zeros(1, dtype=torch.int32),
        )
        exp = Experience(
            time_step=step,
            action=zero,
            rollout_info=BasicRolloutInfo(rl=BasicRLInfo(action=zero), rewards={}, repr={}),
        )
        buffer.add_batch(exp, step.env_id)
    Checkpointer(directory, algorithm=holder).save(0)
    return os.path.join(directory, "ckpt-0-replay_buffer")


def _load_env(env_name: str, spec: EnvSpec, seed: int, batch_size: int = 1) -> Any:
    """ALF's ``env_load_fn``, marked batched: the toy env as an ALF environment."""
    assert batch_size == spec.num_envs
    return _classes()["env"](spec, seed)


_load_env.batched = True  # type: ignore[attr-defined]


class _OfflineRun:
    """One hybrid ``RLTrainer`` run of an offline scenario, recorded at ALF's seams."""

    def __init__(self, scenario: OfflineScenario, workdir: str) -> None:
        self.sc = scenario
        self.workdir = workdir
        self.alg: Any = None
        self.events: list[Event] = []
        self._written: list[Item] = []
        self._batches: list[tuple[Item, ...]] = []

    def run(self) -> Trace:
        import alf
        from alf.algorithms.config import TrainerConfig
        from alf.experience_replayers.replay_buffer import ReplayBuffer
        from alf.trainers.policy_trainer import RLTrainer

        sc = self.sc
        env = _classes()["env"](sc.env, sc.seed)
        dataset = _write_dataset(sc, env, os.path.join(self.workdir, "dataset"))
        if sc.online_weight == 0:  # pure offline training: online RL never starts
            after, every, mini_batch = sc.updates + 1, 1, sc.batch_size
        else:
            after, every, mini_batch = sc.online_after, sc.online_every, sc.batch_size // 2
        alf.config(
            "create_environment",
            env_name="xpspec-toy",
            env_load_fn=partial(_load_env, spec=sc.env, seed=sc.seed),
            num_parallel_environments=sc.env.num_envs,
        )
        alf.config(
            "TrainerConfig",
            algorithm_ctor=self._algorithm,
            random_seed=sc.seed,
            num_iterations=sc.updates,
            unroll_length=sc.steps_per_update,
            num_updates_per_train_iter=1,
            mini_batch_size=mini_batch,
            mini_batch_length=1,
            initial_collect_steps=0,
            whole_replay_buffer_training=False,
            clear_replay_buffer=False,
            replay_buffer_length=sc.capacity,
            offline_buffer_dir=dataset,
            rl_train_after_update_steps=after,
            rl_train_every_update_steps=every,
            **QUIET_TRAINER,
        )
        quiet_summaries(RLTrainer)
        _wrap_after(ReplayBuffer, "add_batch", self._on_store)
        trainer = RLTrainer(TrainerConfig(root_dir=os.path.join(self.workdir, "root")))
        trainer.train()
        return Trace(tuple(self.events), {"producer": "alf", "seed": sc.seed})

    def _algorithm(self, **kwargs: Any) -> Any:
        alg = self.alg = _classes()["algorithm"](**kwargs)
        alg.train_iter = self._recorded_train_iter(alg.train_iter)
        _wrap(alg, "_hybrid_update", self._on_hybrid_update)
        return alg

    def _recorded_train_iter(self, original: Callable[[], Any]) -> Callable[[], Any]:
        import alf

        def train_iter() -> Any:
            self._written, self._batches = [], []
            result = original()
            if len(self._batches) != 1:
                raise RuntimeError(
                    f"update {len(self.events)}: ALF made {len(self._batches)} hybrid updates "
                    "in one train_iter, expected 1 (num_updates_per_train_iter=1, one "
                    "mini-batch per sampled batch)"
                )
            self.events.append(
                Mixed(
                    len(self.events),
                    tuple(self._written),
                    self._batches[0],
                    held_items(self.alg._offline_replay_buffer),
                    int(alf.summary.get_global_counter()),
                )
            )
            return result

        return train_iter

    def _on_store(self, buffer: Any, batch: Any, env_ids: Any = None, *a: Any, **k: Any) -> None:
        """After ``add_batch`` of the online buffer: the items just written, read back."""
        online: Any = getattr(self.alg, "_replay_buffer", None)
        if online is None or buffer is not online:
            return  # the dataset's buffer, or ALF loading its offline buffer
        ids = online.check_convert_env_ids(env_ids)
        positions = online.get_current_position()[ids] - 1
        self._written.extend(
            decode_items(online.get_field("time_step.observation", ids, positions))
        )

    def _on_hybrid_update(
        self, experience: Any, batch_info: Any, offline_experience: Any, *a: Any, **k: Any
    ) -> None:
        """The items of the two mini-batches ALF updates on (time-major ``[T, M, 3]``)."""
        items: list[Item] = []
        for mini_batch in (experience, offline_experience):
            if mini_batch is not None:
                observation = mini_batch.time_step.observation.transpose(0, 1)
                items.extend(decode_items(observation.reshape(-1, observation.shape[-1])))
        self._batches.append(tuple(items))


def run_offline(sc: OfflineScenario, env_cls: Callable[[EnvSpec, int], Any], workdir: str) -> Trace:
    """The offline scenario ``sc`` through ALF's hybrid training (see the module docstring)."""
    problem = offline_problem(sc)
    if problem is not None:
        raise problem
    return _OfflineRun(sc, workdir).run()
