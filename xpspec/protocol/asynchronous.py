"""Asynchronous actors and policy lag (capability ``async``, clauses ``async.*``).

Actors collect experience with a copy of the learner's weights that may be some updates old;
the learner trains on what arrives. The scenario states the toy env (one env per actor), the
fragment each actor delivers and the order in which fragments arrive; refimpl replays that
order, a real engine records the order it produced and is judged against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from xpspec.protocol.budget import check_budget
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.errors import ConfigError

__all__ = ["LOGIT_STEP", "AsyncScenario"]

LOGIT_STEP: Final = 0.25
"""The toy versioned policy: the weights of version ``v`` give action ``k`` the logit
``k * v * LOGIT_STEP`` whatever the observation (``async.version-recorded``), so the logits an
actor computed name the version of the weights it acted with."""


def _check_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(name, value, f"an integer >= {minimum}")


@dataclass(frozen=True)
class AsyncScenario:
    """Asynchronous actors (capability ``async``, clauses ``async.*``).

    Actor ``a`` steps env ``a`` of ``env`` (``env.num_envs`` actors) under the toy versioned
    policy (:data:`LOGIT_STEP`) and delivers fragments of ``fragment_length`` items.
    ``arrivals`` lists, in order, the actor whose fragment reaches the learner next
    (refimpl replays it; a real engine's own order is recorded, only its length is imposed).
    The learner's version is the number of updates it has made; it makes one update on each
    arrival it trains on. With ``max_lag`` an item is trained on only while the learner's
    version is at most ``max_lag`` above the version that acted (``async.lag-bounded``)."""

    env: EnvSpec
    fragment_length: int
    arrivals: tuple[int, ...]
    max_lag: int | None = None
    seed: int = 0
    kind: Literal["async"] = "async"

    def __post_init__(self) -> None:
        _check_int("fragment_length", self.fragment_length, 1)
        if not self.arrivals:
            raise ConfigError("arrivals", self.arrivals, "a non-empty list of actor indices")
        for i, a in enumerate(self.arrivals):
            if not isinstance(a, int) or isinstance(a, bool) or not 0 <= a < self.env.num_envs:
                raise ConfigError(
                    f"arrivals[{i}]", a, f"an actor index in [0, {self.env.num_envs}) (num_envs)"
                )
        if self.max_lag is not None:
            _check_int("max_lag", self.max_lag, 0)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ConfigError("seed", self.seed, "an integer in [0, 2**32 - 1]")
        if not 0 <= self.seed <= 2**32 - 1:
            raise ConfigError("seed", self.seed, "an integer in [0, 2**32 - 1]")
        if self.env.autoreset != "next-step":
            raise ConfigError("env.autoreset", self.env.autoreset, "'next-step' (the spec's)")
        if self.env.num_actions < 2:
            raise ConfigError("env.num_actions", self.env.num_actions, "at least 2 (a policy)")
        check_budget(self)
