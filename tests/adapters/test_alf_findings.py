"""Minimal reproductions, with ALF alone (snapshot 23aca492, run from a checkout), of the
learner findings that xpspec/adapters/alf.expectations.toml declares. Skipped when ALF is not
on the path (it is not on PyPI; see the conformance(alf) nox session).

One env whose episodes are F, M, L (two transitions, terminated): its first 5 time steps are
rows F M L F M, so the second episode is in progress, its newest row M carrying the final
observation so far. The observation is the row's index. One ``train_iter`` of ALF's PPO trains
on the whole replay buffer as ``alf/examples/ppo_conf.py`` configures it, with
``mini_batch_length=1`` as ``alf/examples/ppo_cart_pole_conf.py`` does, and ALF's defaults
(``mask_out_loss_for_last_step=True``, ``PPOLoss(normalize_advantages=True)``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("alf")

import alf
import gym
import gym.spaces
import numpy as np
import torch
from alf.algorithms.config import TrainerConfig
from alf.algorithms.ppo_algorithm import PPOAlgorithm
from alf.algorithms.ppo_loss import PPOLoss
from alf.data_structures import StepType, TimeStep
from alf.environments import suite_gym
from alf.networks import ActorDistributionNetwork, ValueNetwork

ROWS = 5
CYCLE = (StepType.FIRST, StepType.MID, StepType.LAST)


class _CycleEnv:
    """One batched, tensor-based env: step types F, M, L, F, M, ...; reward 1 into every
    non-FIRST row, discount 0 at LAST; the observation is the row's index."""

    batch_size = 1
    is_tensor_based = True

    def __init__(self) -> None:
        self._n = 0
        self._ts = self._time_step(torch.zeros(1, dtype=torch.int64))

    def _time_step(self, action: torch.Tensor) -> Any:
        step_type = CYCLE[self._n % 3]
        return TimeStep(
            observation=torch.tensor([[float(self._n)]]),
            step_type=torch.tensor([int(step_type)], dtype=torch.int32),
            reward=torch.tensor([0.0 if step_type == StepType.FIRST else 1.0]),
            discount=torch.tensor([0.0 if step_type == StepType.LAST else 1.0]),
            prev_action=action,
            env_id=torch.zeros(1, dtype=torch.int32),
        )

    def observation_spec(self) -> Any:
        return alf.TensorSpec((1,), torch.float32)

    def action_spec(self) -> Any:
        return alf.BoundedTensorSpec((), torch.int64, minimum=0, maximum=1)

    def reward_spec(self) -> Any:
        return alf.TensorSpec(())

    def reset(self) -> Any:
        return self._ts

    def current_time_step(self) -> Any:
        return self._ts

    def step(self, action: torch.Tensor) -> Any:
        self._n += 1
        self._ts = self._time_step(action)
        return self._ts

    def close(self) -> None:
        pass


@dataclass
class _Run:
    """What one train_iter handed ALF's seams: the preprocessed advantages of the rows (by
    row index), and per mini-batch its rows, the valid_masks and the advantages
    PPOLoss._pg_loss received."""

    advantages: dict[int, float] = field(default_factory=dict)
    minibatches: list[list[int]] = field(default_factory=list)
    masks: list[list[float]] = field(default_factory=list)
    pg_advantages: list[list[float]] = field(default_factory=list)


def _train_once(root: Path, mini_batch_size: int) -> _Run:
    torch.manual_seed(0)
    env = _CycleEnv()
    config = TrainerConfig(
        root_dir=str(root),  # a required argument of TrainerConfig
        unroll_length=ROWS,
        replay_buffer_length=ROWS,
        whole_replay_buffer_training=True,
        clear_replay_buffer=False,
        mini_batch_length=1,
        mini_batch_size=mini_batch_size,
        num_updates_per_train_iter=1,
    )
    alg = PPOAlgorithm(
        observation_spec=env.observation_spec(),
        action_spec=env.action_spec(),
        actor_network_ctor=partial(ActorDistributionNetwork, fc_layer_params=()),
        value_network_ctor=partial(ValueNetwork, fc_layer_params=()),
        env=env,
        config=config,
        loss=PPOLoss(gamma=0.9, td_lambda=0.5),
        optimizer=alf.optimizers.Adam(lr=1e-3),
    )
    run = _Run()
    preprocess, update, gradient = alg.preprocess_experience, alg._update, alg.update_with_gradient
    pg_loss = alg._loss._pg_loss

    def preprocess_experience(inputs: Any, info: Any, batch_info: Any) -> Any:
        out = preprocess(inputs, info, batch_info)
        rows = inputs.observation[0, :, 0].long().tolist()
        run.advantages.update(zip(rows, out[1].advantages[0].tolist()))
        return out

    def _update(experience: Any, batch_info: Any, weight: Any) -> Any:
        run.minibatches.append(experience.time_step.observation.reshape(-1).long().tolist())
        return update(experience, batch_info, weight)

    def update_with_gradient(loss_info: Any, valid_masks: Any = None, *a: Any, **k: Any) -> Any:
        run.masks.append(valid_masks.reshape(-1).tolist())
        return gradient(loss_info, valid_masks, *a, **k)

    def recorded_pg_loss(info: Any, advantages: torch.Tensor) -> Any:
        run.pg_advantages.append(advantages.reshape(-1).tolist())
        return pg_loss(info, advantages)

    alg.preprocess_experience = preprocess_experience
    alg._update = _update
    alg.update_with_gradient = update_with_gradient
    alg._loss._pg_loss = recorded_pg_loss
    alg.train_iter()
    return run


def test_the_newest_row_of_an_in_progress_episode_is_trained_with_advantage_zero(
    tmp_path: Path,
) -> None:
    """PPOAlgorithm.preprocess_experience zeroes the advantage of each env's newest row
    (tensor_extend_zero, alf/algorithms/ppo_algorithm.py), the row carrying an in-progress
    episode's final observation, and Algorithm._update masks only LAST rows
    (mask_out_loss_for_last_step: step_type != LAST, alf/algorithms/algorithm.py), so that
    row is trained, loss mask 1, on the made-up advantage; the LAST row is masked."""
    run = _train_once(tmp_path, mini_batch_size=ROWS)
    mask = {r: m for rows, ms in zip(run.minibatches, run.masks) for r, m in zip(rows, ms)}
    assert run.advantages[4] == 0.0 and mask[4] == 1.0  # row 4: M, the newest
    assert run.advantages[2] == 0.0 and mask[2] == 0.0  # row 2: L


def test_advantages_are_normalised_per_mini_batch_over_every_row(tmp_path: Path) -> None:
    """ActorCriticLoss.forward normalises the advantages of the mini-batch it is given
    (_normalize_advantages, alf/algorithms/actor_critic_loss.py: mean and population std over
    all its rows, plus 1e-8), LAST rows and the newest row included, and PPOLoss._pg_loss
    trains on the result: each mini-batch's normalised advantages have mean 0 by themselves,
    and the LAST row gets a normalised advantage of its own."""
    whole = _train_once(tmp_path, mini_batch_size=ROWS)
    (rows,), (normalized,) = whole.minibatches, whole.pg_advantages
    assert sorted(rows) == list(range(ROWS))  # every row, the LAST and the newest included
    assert abs(normalized[rows.index(2)]) > 0.1  # the LAST row's advantage 0, normalised
    split = _train_once(
        tmp_path, mini_batch_size=2
    )  # 5 rows: resized to 3, mini-batches of 3 and 2
    assert [len(r) for r in split.minibatches] == [3, 2]
    for values in split.pg_advantages:
        assert abs(sum(values)) < 1e-5  # each mini-batch centred on its own mean


def test_every_buffer_row_is_an_item_of_the_update(tmp_path: Path) -> None:
    """Algorithm._train_experience splits the rows of the whole buffer into mini-batches
    (alf/algorithms/algorithm.py), the LAST row and the newest row counted: 5 rows with
    mini_batch_size 2 are resized to ceil(5 / 2) = 3 and make 2 updates, where the 3
    transitions of the episodes make 2 updates of 2 and 1."""
    run = _train_once(tmp_path, mini_batch_size=2)
    assert sorted(r for rows in run.minibatches for r in rows) == list(range(ROWS))


# -- prioritized replay (xpspec/adapters/alf_priority.py) ------------------------------------


def _prioritized_buffer() -> Any:
    from alf.experience_replayers.replay_buffer import ReplayBuffer

    spec = alf.nest.map_structure(lambda t: alf.TensorSpec(t.shape[1:], t.dtype), _CycleEnv()._ts)
    return ReplayBuffer(spec, 1, max_length=4, prioritized_sampling=True)


def test_an_empty_prioritized_buffer_raises_from_its_segment_tree_for_windows_of_two() -> None:
    """``get_batch`` on an empty ``ReplayBuffer(prioritized_sampling=True)``: for windows of 1
    ALF's own assertion refuses the draw ("There is no data in the buffer",
    ``_prioritized_sample``), but for windows of 2 the window-length change that precedes it
    (``_change_mini_batch_length``) writes zeros for no index, and ``SumSegmentTree.__setitem__``
    takes ``values.min()`` of the empty tensor: torch's RuntimeError ends the caller's run."""
    with pytest.raises(AssertionError, match="There is no data in the buffer"):
        _prioritized_buffer().get_batch(2, 1)
    with pytest.raises(RuntimeError, match="Expected reduction dim"):
        _prioritized_buffer().get_batch(2, 2)
    # with one item stored, windows of 2 reach ALF's own refusal
    buffer = _prioritized_buffer()
    buffer.add_batch(_CycleEnv()._ts)
    with pytest.raises(AssertionError, match="There is no data in the buffer"):
        buffer.get_batch(2, 2)


def test_a_new_item_gets_the_largest_priority_stored_not_the_largest_assigned() -> None:
    """``ReplayBuffer.initial_priority`` is ``max(initial_priority, the max tree's summary)``
    (alf/experience_replayers/replay_buffer.py): the largest priority the buffer holds now. Once
    the item that held the largest is updated lower, a new item starts below the largest
    priority ever assigned (2.0 here)."""
    buffer = _prioritized_buffer()
    env = _CycleEnv()
    buffer.add_batch(env._ts)
    buffer.add_batch(env.step(torch.zeros(1, dtype=torch.int64)))
    zero = torch.zeros(1, dtype=torch.int64)
    buffer.update_priority(zero, zero, torch.tensor([2.0]))
    buffer.update_priority(zero, zero, torch.tensor([0.5]))
    buffer.add_batch(env.step(torch.zeros(1, dtype=torch.int64)))
    assert buffer._sum_tree[torch.tensor([2])].tolist() == [1.0]


# -- checkpoint and resume (xpspec/adapters/alf_checkpoint.py) -------------------------------


class _Stop(Exception):
    pass


def test_restoring_a_checkpoint_runs_train_iter_before_loading_it() -> None:
    """``Trainer._restore_checkpoint`` (alf/trainers/policy_trainer.py), given a checkpointer
    that holds a checkpoint, calls the algorithm's ``train_iter()`` once (its comment: the
    replay buffer is built lazily) and only then ``Checkpointer.load``: a restored trainer
    unrolls and trains one iteration that the checkpoint then overwrites, its env steps
    included."""
    from types import SimpleNamespace

    from alf.trainers.policy_trainer import Trainer

    calls: list[str] = []
    trainer = SimpleNamespace(
        _algorithm=SimpleNamespace(train_iter=lambda: calls.append("train_iter")),
        _trainer_progress=SimpleNamespace(update=lambda: calls.append("progress")),
        _root_dir="",
    )
    checkpointer = SimpleNamespace(
        has_checkpoint=lambda: True, load=lambda: calls.append("load") or 7
    )
    try:
        Trainer._restore_checkpoint(trainer, checkpointer)
        assert calls == ["train_iter", "load", "progress"]
        assert int(alf.summary.get_global_counter()) == 7
    finally:
        alf.summary.set_global_counter(0)


def test_a_restored_trainer_resets_the_env_it_is_handed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The env goes on across a checkpoint only if the restored trainer acts on the time step
    it last saw; ALF's resets it twice: ``RLAlgorithm.__init__`` calls ``env.reset()`` for an
    example time step (alf/algorithms/rl_algorithm.py), and ``RLTrainer._train`` calls
    ``env.reset()`` before its first ``train_iter`` (alf/trainers/policy_trainer.py), whatever
    the restored progress."""
    from types import SimpleNamespace

    from alf.trainers.policy_trainer import RLTrainer

    resets: list[int] = []

    class _Counted(_CycleEnv):
        def reset(self) -> Any:
            resets.append(self._n)
            return super().reset()

    env = _Counted()
    env.step(torch.zeros(1, dtype=torch.int64))  # the world is one step in
    PPOAlgorithm(
        observation_spec=env.observation_spec(),
        action_spec=env.action_spec(),
        actor_network_ctor=partial(ActorDistributionNetwork, fc_layer_params=()),
        value_network_ctor=partial(ValueNetwork, fc_layer_params=()),
        env=env,
        config=TrainerConfig(root_dir=str(tmp_path)),
        loss=PPOLoss(),
    )
    assert resets == [1]

    def stop() -> None:
        raise _Stop

    monkeypatch.setattr(alf, "get_env", lambda: env)
    trainer = SimpleNamespace(
        _trainer_progress=SimpleNamespace(_iter_num=torch.tensor(3), _env_steps=torch.tensor(6)),
        _num_iterations=8,
        _num_env_steps=0,
        _num_checkpoints=1,
        _evaluate=False,
        _config=SimpleNamespace(sync_progress_to_envs=False),
        _algorithm=SimpleNamespace(train_iter=stop),
    )
    with pytest.raises(_Stop):
        RLTrainer._train(trainer)  # a trainer restored at iteration 3 of 8
    assert resets == [1, 1]


# -- env: a gym env through suite_gym.wrap_env (AlfGymWrapper) ---------------------------------


class _Episodes(gym.Env):
    """A gym 0.15 env whose observation is ``[episode, t]``: every reset starts the next
    episode; episodes are 2 transitions, ending by truncation (gym's ``TimeLimit`` convention:
    ``done`` with ``info["TimeLimit.truncated"]``)."""

    observation_space = gym.spaces.Box(0.0, 100.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.episode, self.t = -1, 0

    def _obs(self) -> np.ndarray:
        return np.array([self.episode, self.t], dtype=np.float32)

    def reset(self) -> np.ndarray:
        self.calls.append("reset")
        self.episode, self.t = self.episode + 1, 0
        return self._obs()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, dict[str, Any]]:
        self.calls.append("step")
        self.t += 1
        done = self.t == 2
        return self._obs(), 1.0, done, {"TimeLimit.truncated": True} if done else {}


def test_wrapping_a_gym_env_resets_and_steps_it_before_the_first_time_step() -> None:
    """AlfGymWrapper.__init__ calls reset, step, reset on the gym env for a zero env info
    (_obtain_zero_info): the first time step an unroll gets is the gym env's third reset."""
    gym_env = _Episodes()
    env = suite_gym.wrap_env(gym_env)
    assert gym_env.calls == ["reset", "step", "reset"]
    first = env.reset()
    assert first.step_type == StepType.FIRST
    assert first.observation.tolist() == [2.0, 0.0]


def test_a_truncated_gym_episode_ends_with_discount_zero() -> None:
    """AlfGymWrapper._step pops info["TimeLimit.truncated"] and returns termination()
    (discount 0) for every done step: a truncation is told as a termination."""
    env = suite_gym.wrap_env(_Episodes())
    env.reset()
    env.step(np.int64(0))
    last = env.step(np.int64(0))
    assert last.step_type == StepType.LAST
    assert last.observation.tolist() == [2.0, 2.0]
    assert float(last.discount) == 0.0


def test_environment_steps_count_no_first_time_step() -> None:
    """EnvironmentSteps, the counter RLAlgorithm.get_step_metrics reports, which
    RLAlgorithm._process_unroll_step feeds every time step an unroll delivers (observe_for_metrics,
    the asynchronous unroll's included), adds only the non-FIRST steps (EnvironmentSteps.call,
    alf/metrics/metrics.py): two unrolled steps of three envs, one of them starting its episode
    in each, count 4 of 6."""
    from alf.metrics import EnvironmentSteps

    metric = EnvironmentSteps()
    for types in (
        (StepType.FIRST, StepType.MID, StepType.LAST),
        (StepType.MID, StepType.LAST, StepType.FIRST),
    ):
        step_type = torch.tensor([int(t) for t in types], dtype=torch.int32)
        metric(TimeStep(step_type=step_type, reward=torch.zeros(3), discount=torch.ones(3)))
    assert int(metric.result()) == 4


_COUNTER_CONF = '''
import alf
import torch
from alf.algorithms.rl_algorithm import RLAlgorithm
from alf.data_structures import AlgStep


class CounterAlgorithm(RLAlgorithm):
    """Acts 0 and reports the global counter the unroll worker received with its weights."""

    def __init__(self, observation_spec, action_spec, reward_spec=alf.TensorSpec(()),
                 env=None, config=None, debug_summaries=False):
        super().__init__(observation_spec=observation_spec, action_spec=action_spec,
                         reward_spec=reward_spec, train_state_spec=(), env=env, config=config,
                         debug_summaries=debug_summaries)

    def rollout_step(self, time_step, state):
        batch = time_step.step_type.shape[0]
        counter = int(alf.summary.get_global_counter())
        return AlgStep(output=torch.zeros(batch, dtype=torch.int64), state=(),
                       info=torch.full((batch,), counter))


alf.config("create_environment", env_name="CartPole-v0", num_parallel_environments=1,
           nonparallel=True)
alf.config("TrainerConfig", algorithm_ctor=CounterAlgorithm, async_unroll=True,
           unroll_length=1, max_unroll_length=1, unroll_queue_size=1)
'''

_COUNTER_MAIN = """
import sys, time
import alf
from alf.algorithms.async_unroller import AsyncUnroller
from alf.algorithms.config import TrainerConfig
from alf.utils import common

if __name__ == "__main__":
    conf, root = sys.argv[1], sys.argv[2]
    common.parse_conf_file(conf)
    config = TrainerConfig(root_dir=root, conf_file=conf)
    env = alf.get_env()
    algorithm = config.algorithm_ctor(observation_spec=env.observation_spec(),
                                      action_spec=env.action_spec(), env=env, config=config)
    unroller = AsyncUnroller(algorithm, config)  # sends counter 0; returns once it is loaded
    time.sleep(2.0)  # the worker fills its queue of one
    alf.summary.set_global_counter(1)
    unroller.update_parameter(algorithm)  # returns once the worker has loaded counter 1
    results = unroller.gather_unroll_results(3, 3)
    print("counters", [int(r.policy_step.info) for r in results])
    unroller.close()
"""


def test_the_unroll_worker_runs_one_step_past_its_queue(tmp_path: Path) -> None:
    """AsyncUnroller's worker computes a step (rollout_step, env.step) before it waits for room
    in its result queue (_worker, alf/algorithms/async_unroller.py): with unroll_queue_size 1
    it holds two steps acted with the weights it had, and the first two results gathered after
    update_parameter were acted before it (the global counter the worker received with the
    weights names them). A conf file and a script, as ALF's own training runs: the worker is
    spawned and parses the conf file."""
    import subprocess
    import sys

    conf, main, root = tmp_path / "conf.py", tmp_path / "main.py", tmp_path / "root"
    conf.write_text(_COUNTER_CONF)
    main.write_text(_COUNTER_MAIN)
    root.mkdir()
    out = subprocess.run(
        [sys.executable, "-W", "ignore", str(main), str(conf), str(root)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert "counters [0, 0, 1]" in out.stdout.splitlines()
