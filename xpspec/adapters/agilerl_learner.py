"""AgileRL 2.58.0's PPO learner on the toy env (capability ``learner`` of
:mod:`xpspec.adapters.agilerl`): one ``rollouts/on_policy.py:collect_rollouts`` into PPO's
``RolloutBuffer`` (``components/rollout_buffer.py``), whose
``compute_returns_and_advantages`` computes GAE, then one ``PPO.learn``
(``algorithms/ppo.py:PPO._learn_from_rollout_buffer_flat``), which normalises the advantages
and runs ``update_epochs`` epochs of mini-batches of ``batch_size`` rows. Nothing of AgileRL is
re-implemented; what is recorded is read from AgileRL's own objects.

**Configuration.** ``PPO(num_envs=B, learn_step=(steps - 1) * B, batch_size=minibatch_size,
update_epochs=num_epochs, gamma, gae_lambda=lam, share_encoders=False)``, so the rollout buffer
holds ``steps - 1`` vector steps (``PPO.create_rollout_buffer``: capacity
``ceil(learn_step / num_envs)``) and every env's first ``steps`` time steps are collected (the
last one is the observation ``collect_rollouts`` values as ``last_value``). The critic is the
toy value ``V(o) = value_scale * t(o)`` (:class:`~xpspec.kit.value.ToyValue`) set as
``agent.critic``: without shared encoders PPO's values are ``self.critic(obs)``
(``PPO._get_action_and_values``). The vector env is a Gymnasium ``SyncVectorEnv`` of the toy
env (``NEXT_STEP`` autoreset, as ``utils/utils.py:make_vect_envs`` builds).

**Rows.** ``collect_rollouts`` adds one row per env and vector step, ``done = terminated or
truncated`` of that step. Under ``NEXT_STEP`` autoreset it also acts on an episode's final
observation: the vector env ignores that action and returns the next episode's first
observation with reward 0, and the row is stored (not done). Such a row is recorded as the
episode's row ``L`` with AgileRL's values and loss mask 1 (``PPO.learn`` trains on it); an
in-progress episode has no row ``L`` in the buffer and gets a stand-in (zeros, loss mask 0),
so the adapter does not declare ``bootstrap``. Advantages and value targets are the buffer's
``advantages`` and ``returns``; normalised advantages are those of the ``RolloutMinibatch``
``PPO.learn`` built and trained on (read back after the call); the update plan names the
mini-batches ``PPO.learn`` passed to ``evaluate_actions`` by their observations.

**n-step targets** (observable ``nstep``): ``MultiStepReplayBuffer`` and ``RainbowDQN.learn``
on the same env, see :mod:`xpspec.adapters.agilerl_nstep`.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch
from agilerl.algorithms import PPO
from agilerl.algorithms import ppo as ppo_module
from agilerl.rollouts import collect_rollouts

from xpspec.adapters.agilerl_nstep import nstep_event
from xpspec.kit.items import decode_items
from xpspec.kit.quiet import seeded_quiet
from xpspec.kit.release import producer
from xpspec.kit.rollout import RolloutRow, rollout_advantages, rollout_plan, rollout_rows
from xpspec.kit.value import ToyValue
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import LearnerScenario
from xpspec.protocol.trace import Event, Item, Trace
from xpspec.refimpl.toy_envs.gym_env import make_env_fns

__all__ = ["run_learner"]

_VERSION = "2.58.0"
_SRC = f"agilerl {_VERSION}"
_LINK = "https://github.com/AgileRL/AgileRL/blob/v2.58.0/agilerl"


def _unsupported(reason: str, where: str) -> Unsupported:
    return Unsupported(f"{reason} ({_SRC}, {where})", f"{_LINK}/{where.partition(':')[0]}")


def run_learner(scenario: LearnerScenario) -> Trace:
    """One rollout and one ``PPO.learn`` of AgileRL 2.58.0 (see the module docstring)."""
    if scenario.num_learners != 1:
        raise _unsupported(
            f"{scenario.num_learners} learners: PPO.learn trains on its own rollout buffer; "
            "no code of AgileRL splits episodes among learners",
            "algorithms/ppo.py:PPO.learn",
        )
    if scenario.steps < 2:
        raise _unsupported(
            f"{scenario.steps} time steps: no transition to train on",
            "rollouts/on_policy.py:collect_rollouts",
        )
    return _LearnerRun(scenario).run()


class _LearnerRun:
    """One learner scenario run: the rollout, ``PPO.learn`` with its mini-batches and
    normalised batch recorded, and the events read back from AgileRL's objects."""

    def __init__(self, scenario: LearnerScenario) -> None:
        self.sc = scenario
        self.b = scenario.env.num_envs
        self.timesteps = scenario.steps - 1

    def run(self) -> Trace:
        sc = self.sc
        with seeded_quiet(sc.seed, ("torch", "numpy")):
            env = gymnasium.vector.SyncVectorEnv(list(make_env_fns(sc.env, sc.seed)))
            agent = PPO(
                env.single_observation_space,
                env.single_action_space,
                num_envs=self.b,
                learn_step=self.timesteps * self.b,
                batch_size=sc.minibatch_size,
                update_epochs=sc.num_epochs,
                gamma=float(sc.gamma),
                gae_lambda=float(sc.lam),
                share_encoders=False,
            )
            agent.critic = ToyValue(float(sc.value_scale))
            collect_rollouts(agent, env, n_steps=self.timesteps)
            batches: list[list[Item]] = []
            built: list[Any] = []
            evaluate = agent.evaluate_actions
            from_tensordict = ppo_module.RolloutMinibatch.from_tensordict

            def recorded_evaluate(obs: Any, *args: Any, **kwargs: Any) -> Any:
                batches.append(decode_items(np.asarray(obs.detach().cpu())))
                return evaluate(obs, *args, **kwargs)

            def recorded_batch(td: Any) -> Any:
                out = from_tensordict(td)
                built.append(out)
                return out

            agent.evaluate_actions = recorded_evaluate
            ppo_module.RolloutMinibatch.from_tensordict = recorded_batch
            try:
                agent.learn()
            finally:
                ppo_module.RolloutMinibatch.from_tensordict = from_tensordict
            (batch,) = built
            rows = self._rows(agent.rollout_buffer.buffer, batch.advantages)
            nstep = nstep_event(sc)
        events: list[Event] = list(rollout_advantages(rows))
        events.append(nstep)
        events.append(rollout_plan(rows, batches))
        return Trace(tuple(events), {"producer": producer("agilerl")})

    def _rows(self, buffer: Any, normalized: torch.Tensor) -> list[list[RolloutRow]]:
        """Every env's rows in time order, read from the rollout buffer and the normalised
        advantages of the flattened batch (row ``m * B + e``)."""
        t = self.timesteps
        return rollout_rows(
            buffer["observations"][:t].numpy(),
            buffer["dones"][:t].numpy(),
            buffer["advantages"][:t].numpy(),
            buffer["returns"][:t].numpy(),
            normalized.detach().reshape(t, self.b).numpy(),
        )
