"""Learner scenarios the rollout-memory adapters' tests share (skrl, AgileRL)."""

from __future__ import annotations

from fractions import Fraction

from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import LearnerScenario
from xpspec.protocol.schedule import Ending, FixedSchedule

__all__ = ["two_step_episodes"]


def two_step_episodes(
    num_envs: int = 2, learners: int = 1, ending: Ending = "terminated"
) -> LearnerScenario:
    """Episodes of 2 transitions (rewards 1, 2 into t = 1, 2) ending as ``ending``, 6 time
    steps per env, V = 0, gamma 1/2, lambda 1, mini-batches of 4, one epoch."""
    return LearnerScenario(
        EnvSpec(num_envs, (FixedSchedule(2, ending),)),
        steps=6,
        value_scale=Fraction(0),
        gamma=Fraction(1, 2),
        lam=Fraction(1),
        minibatch_size=4,
        num_epochs=1,
        num_learners=learners,
    )
