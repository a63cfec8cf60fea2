"""AgileRL 2.58.0's n-step targets on the toy env (observable ``nstep`` of the learner row of
:mod:`xpspec.adapters.agilerl`): a ``MultiStepReplayBuffer`` (``components/replay_buffer.py``)
filled as ``training/train_off_policy.py:train_off_policy`` fills it, and one
``RainbowDQN.learn`` (``algorithms/dqn_rainbow.py``) on every stored row, through the loop's
own ``_learn_from_buffer``. Nothing of AgileRL is re-implemented (clause
``learner.nstep-episode-end``).

**Fill.** Every env's first ``steps`` time steps, ``steps - 1`` vector steps of a Gymnasium
``SyncVectorEnv`` (``NEXT_STEP`` autoreset, as ``utils/utils.py:make_vect_envs`` builds): each
vector step's ``Transition(obs, action, reward, next_obs, done=terminated)`` goes to
``n_step_memory.add``, whose returned one-step transition goes to ``memory.add``, as
``train_off_policy`` does when handed an ``n_step_memory``. The n-step buffer
(``MultiStepReplayBuffer(n_step=nstep, gamma)``) stores a row once ``nstep`` vector steps follow
its start (``MultiStepReplayBuffer.add``), its reward ``sum_i gamma^i r_i``, ``next_obs`` and
``done`` those of the last step used (``_get_n_step_info``).

**Targets.** ``RainbowDQN(n_step=nstep, gamma, batch_size=rows)`` learns once by
``_learn_from_buffer(per=False)``: it samples every row of ``memory`` (``ReplayBuffer.sample``
draws ``torch.randperm(size)[:size]``) and the n-step rows at the same indices, and
``RainbowDQN.learn`` hands them to ``_dqn_loss`` with ``gamma ** n_step``. The adapter records
those arguments and evaluates the line that projects them,
``t_z = rewards + (1 - dones) * gamma * support``, at the toy value of ``next_obs``
(``V = value_scale * t``) in place of the support: the target is
``reward + (1 - done) * gamma_arg * V(next_obs)``. A row is named by its ``obs``; the rewards it
sums are the vector steps from its ``obs`` to its ``next_obs`` in its env's sequence of
observations as the env returned them. With fewer than ``nstep`` vector steps nothing is stored
and the event is empty.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch
from agilerl.algorithms import RainbowDQN
from agilerl.components.data import Transition, transition_to_tensordict
from agilerl.components.replay_buffer import MultiStepReplayBuffer, ReplayBuffer
from agilerl.components.sampler import Sampler
from agilerl.training.train_off_policy import _learn_from_buffer

from xpspec.kit.items import decode_items, item_columns
from xpspec.kit.value import toy_value
from xpspec.protocol.scenario import LearnerScenario
from xpspec.protocol.trace import Item, NStep
from xpspec.refimpl.toy_envs.gym_env import make_env_fns

__all__ = ["nstep_event"]


def _as_numpy(obs: Any) -> np.ndarray:
    return np.asarray(obs.detach().cpu())


def nstep_event(sc: LearnerScenario) -> NStep:
    """The n-step targets AgileRL 2.58.0 trains RainbowDQN on (see the module docstring).
    Runs under the caller's seeded context."""
    b = sc.env.num_envs
    vector_steps = sc.steps - 1
    gamma = float(sc.gamma)
    env = gymnasium.vector.SyncVectorEnv(list(make_env_fns(sc.env, sc.seed)))
    memory = ReplayBuffer(max_size=max(1, vector_steps * b))
    n_step_memory = MultiStepReplayBuffer(
        max_size=max(1, vector_steps * b), n_step=sc.nstep, gamma=gamma
    )
    obs, _ = env.reset()
    # every env's observations in the order the env returned them
    seen: list[list[Item]] = [[] for _ in range(b)]
    for e, item in enumerate(decode_items(obs)):
        seen[e].append(item)
    actions = np.zeros(b, dtype=np.int64)
    for _ in range(vector_steps):
        next_obs, reward, terminated, _, _ = env.step(actions)
        transition = transition_to_tensordict(
            Transition(obs=obs, action=actions, reward=reward, next_obs=next_obs, done=terminated)
        )
        transition.batch_size = torch.Size([b])
        one_step = n_step_memory.add(transition)
        if one_step is not None:
            memory.add(one_step)
        for e, item in enumerate(decode_items(next_obs)):
            seen[e].append(item)
        obs = next_obs
    env.close()
    rows = len(memory)
    if rows == 0:
        return NStep((), (), (), (), ())
    agent = RainbowDQN(
        env.single_observation_space,
        env.single_action_space,
        batch_size=rows,
        gamma=gamma,
        n_step=sc.nstep,
    )
    calls: list[tuple[Any, Any, Any, Any, float]] = []
    loss = agent._dqn_loss

    def recorded_loss(
        obs: Any, actions: Any, rewards: Any, next_obs: Any, dones: Any, gamma: float
    ) -> Any:
        calls.append((obs, rewards, next_obs, dones, gamma))
        return loss(obs, actions, rewards, next_obs, dones, gamma)

    agent._dqn_loss = recorded_loss
    _learn_from_buffer(
        agent, Sampler(memory=memory), memory, n_step_memory, Sampler(memory=n_step_memory), False
    )
    # combined_reward=False: RainbowDQN.learn computes the n-step loss alone
    ((start_obs, rewards, end_obs, dones, n_gamma),) = calls
    starts, ends = decode_items(_as_numpy(start_obs)), decode_items(_as_numpy(end_obs))
    values = toy_value(end_obs, float(sc.value_scale)).reshape(-1)
    targets = rewards.reshape(-1) + (1 - dones.reshape(-1)) * n_gamma * values
    steps = [
        seen[start[0]].index(end) - seen[start[0]].index(start)
        for start, end in zip(starts, ends, strict=True)
    ]
    return NStep(*item_columns(starts), tuple(float(v) for v in targets.tolist()), tuple(steps))
