"""Env stepping through ALF's own Gym wrapping (snapshot ``23aca492``; capability ``env``, clauses
``timestep.identity``, ``timestep.step-types``, ``timestep.discount``, ``timestep.auto-reset``).
Nothing of ALF is re-implemented; sources are cited as ``file:function`` of the ``alf`` package.

**The env.** ALF's Gym path takes a ``gym`` 0.15 env (ALF's own pin): ``reset()`` returns the
observation, ``step(a)`` returns ``(observation, reward, done, info)``, and a time limit is
told by ``info["TimeLimit.truncated"]`` (gym 0.15.4's ``TimeLimit`` convention). Each of the
scenario's Gymnasium toy envs (:func:`xpspec.refimpl.toy_envs.gym_env.make_env_fns`, the one
the other env rows wrap) is put in that API by :class:`GymFace`, a translation and nothing
more (``done = terminated or truncated``; the key set when the episode was truncated, as gym's
``TimeLimit`` sets it), then wrapped by ``suite_gym.wrap_env(gym_env, env_id=e, image_channel_first=False)``
(``alf/environments/suite_gym.py``: ALF's ``NormalizedAction`` and ``ContinuousActionClip`` gym
wrappers, then ``AlfGymWrapper``, auto-reset on; the observations are no images, and
``ImageChannelFirst`` reads ``.shape`` of a goal env's dict observation; no
``max_episode_steps``: the toy env ends its own episodes). The envs are batched in process by
``alf_wrappers.BatchEnvironmentWrapper`` (what ``create_environment`` runs inside each env
process for ``batch_size_per_env > 1``, ``alf/environments/utils.py:_env_constructor``) under
``alf_wrappers.TensorWrapper`` (torch I/O, as ``create_environment`` gives a batched env).
ALF's process-based ``ParallelAlfEnvironment`` runs the same ``AlfGymWrapper`` per env in child
processes and is not driven here.

**The steps.** As ``RLAlgorithm._sync_unroll`` does (``alf/algorithms/rl_algorithm.py``):
``time_step = env.reset()``, then for each vector step the policy state is reset by ALF's
``common.reset_state_if_necessary(state, initial, time_step.is_first())``, the toy policy
acts ``state mod num_actions`` (its state counts steps since FIRST) and ``env.step(action)``
gives the next time step. Each recorded ``EnvStep`` is one ALF ``TimeStep`` as ALF produced it:
the item decoded from its observation, its ``step_type``, ``reward`` and ``discount``, the
state and the action given at it.

**Not expressible** (:class:`~xpspec.protocol.adapter.Unsupported`): same-step auto-reset
(``AlfGymWrapper._step`` returns ``reset()`` on the call after a done step, ignoring the action,
and has no mode that returns the next episode's FIRST in the step that ends one).
"""

from __future__ import annotations

from typing import Any

import gym
import gym.spaces
import torch

from xpspec.kit.events import env_step
from xpspec.kit.items import decode_items
from xpspec.kit.steps import Step
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import EnvScenario
from xpspec.protocol.trace import Event, Trace
from xpspec.refimpl.toy_envs.gym_env import ToyEnv, make_env_fns

__all__ = ["GymFace", "env_problem", "run_env"]

_WRAPPER_LINK = (
    "https://github.com/HorizonRobotics/alf/blob/23aca492/alf/environments/alf_gym_wrapper.py"
)


def env_problem(scenario: EnvScenario) -> Unsupported | None:
    """Why ALF cannot express ``scenario`` (None if it can)."""
    if scenario.env.autoreset == "same-step":
        return Unsupported(
            "same-step auto-reset: ALF's AlfGymWrapper._step (snapshot 23aca492) returns "
            "reset() on the call after a done step, ignoring the action; it has no mode that "
            "returns the next episode's FIRST in the step that ends one",
            _WRAPPER_LINK,
        )
    return None


def _gym_space(space: Any) -> gym.spaces.Space:
    """A Gymnasium ``Box``/``Discrete``/``Dict`` as the gym 0.15 space ALF's
    ``tensor_spec_from_gym_space`` reads."""
    name = type(space).__name__
    if name == "Discrete":
        return gym.spaces.Discrete(int(space.n))
    if name == "Box":
        return gym.spaces.Box(space.low, space.high, dtype=space.dtype)
    if name == "Dict":
        return gym.spaces.Dict({k: _gym_space(s) for k, s in space.spaces.items()})
    raise TypeError(f"toy env space: expected Box, Discrete or Dict, got {name}")


class GymFace(gym.Env):
    """A Gymnasium toy env in the gym 0.15 API ALF's ``AlfGymWrapper`` calls: the same
    observations, rewards and endings, ``done = terminated or truncated`` and
    ``info["TimeLimit.truncated"]`` set on a truncated episode's last step."""

    metadata: dict[str, Any] = {"render.modes": []}  # noqa: RUF012 (gym's class attribute)

    def __init__(self, toy: ToyEnv) -> None:
        self.toy = toy
        self.observation_space = _gym_space(toy.observation_space)
        self.action_space = _gym_space(toy.action_space)

    def reset(self) -> Any:
        observation, _ = self.toy.reset()
        return observation

    def step(self, action: Any) -> tuple[Any, float, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, _ = self.toy.step(int(action))
        info: dict[str, Any] = {}
        if truncated and not terminated:
            info["TimeLimit.truncated"] = True
        return observation, float(reward), bool(terminated or truncated), info

    def seed(self, seed: Any = None) -> list[Any]:
        return [seed]

    def render(self, mode: str = "human") -> None:
        return None


def _steps(time_step: Any, states: torch.Tensor, actions: torch.Tensor) -> list[Step]:
    observation = time_step.observation
    if isinstance(observation, dict):
        observation = observation["observation"]
    items = decode_items(observation.cpu().numpy())
    step_types = time_step.step_type.cpu().tolist()
    rewards = time_step.reward.cpu().tolist()
    discounts = time_step.discount.cpu().tolist()
    return [
        Step(item, int(st), float(r), float(d), policy_state=int(s), action=int(a))
        for item, st, r, d, s, a in zip(
            items, step_types, rewards, discounts, states.tolist(), actions.tolist()
        )
    ]


def run_env(scenario: EnvScenario) -> Trace:
    """``scenario.steps`` vector steps of the toy envs through ALF's wrappers (module
    docstring): one ``EnvStep`` per ALF ``TimeStep`` the unroll acts on."""
    from alf.environments import alf_wrappers, suite_gym
    from alf.utils import common

    envs = [
        suite_gym.wrap_env(GymFace(make()), env_id=e, image_channel_first=False)
        for e, make in enumerate(make_env_fns(scenario.env, scenario.seed))
    ]
    env = alf_wrappers.TensorWrapper(alf_wrappers.BatchEnvironmentWrapper(envs))
    b = scenario.env.num_envs
    initial = torch.zeros(b, dtype=torch.int64)
    state = initial
    events: list[Event] = []
    try:
        time_step = env.reset()
        for _ in range(scenario.steps):
            state = common.reset_state_if_necessary(state, initial, time_step.is_first())
            action = state % scenario.env.num_actions
            events.append(env_step(0, _steps(time_step, state, action)))
            time_step = env.step(action)
            state = state + 1
    finally:
        env.close()
    return Trace(tuple(events), {"producer": "alf AlfGymWrapper", "batching": "in-process"})
