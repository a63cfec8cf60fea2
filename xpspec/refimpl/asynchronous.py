"""Asynchronous actors and policy lag (clauses ``async.*``): refimpl's model.

:func:`run_async` replays the scenario's arrival order. Actor ``a`` steps env ``a`` of the toy
env (the spec's next-step auto-reset: the step after a LAST is its env's next FIRST) and
delivers ``fragment_length`` items per fragment. An actor resumes as soon as its fragment is
handed to the learner, before the learner trains on it, so it acts with the weights of the
updates made before that hand-over (the first fragment with version 0): the lag that
asynchrony brings. Each item carries that version, the behaviour logits those weights give
and the log-probability of the action drawn from them (``async.version-recorded``,
``async.behaviour-logits``). The env-step counter grows by a fragment's items when it arrives
(``async.env-steps-counted``); the learner then makes one update on the fragment's items whose
lag is within ``max_lag`` (all without a bound), and none when no item is left
(``async.lag-bounded``).

:class:`Actors` holds one rule per method, so a variant (or a broken implementation) replaces
one.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from xpspec.protocol.asynchronous import LOGIT_STEP, AsyncScenario
from xpspec.protocol.trace import Arrived, Event, Floats, Item, Trace, Trained
from xpspec.refimpl.toy_envs.gym_env import ToyEnv

__all__ = ["Actors", "Row", "run_async"]


class Row(NamedTuple):
    """One item an actor acted on, with what it stored."""

    item: Item
    action: int
    version: int
    logits: Floats
    log_prob: float


class Actors:
    """The actors and learner of an async scenario."""

    def __init__(self, scenario: AsyncScenario) -> None:
        self.scenario = scenario
        self.num_actions = scenario.env.num_actions

    def acting_version(self, released: int, learner: int) -> int:
        """The version an actor acts with: the updates made before it was released
        (``released``), not those made since (``learner``)."""
        return released

    def logits(self, version: int) -> Floats:
        """The toy versioned policy's logits under the weights of ``version``."""
        return tuple(k * version * LOGIT_STEP for k in range(self.num_actions))

    def log_prob(self, logits: Floats, action: int, learner: int) -> float:
        """The behaviour log-probability stored with the item (``async.behaviour-logits``):
        that of ``action`` under the logits that acted."""
        top = max(logits)
        return logits[action] - top - math.log(sum(math.exp(x - top) for x in logits))

    def recorded_version(self, acting: int, learner: int) -> int:
        """The version recorded with the item (``async.version-recorded``): the acting one."""
        return acting

    def trainable(self, lag: int) -> bool:
        """Whether an item ``lag`` updates old is trained on (``async.lag-bounded``)."""
        return self.scenario.max_lag is None or lag <= self.scenario.max_lag

    def count(self, counter: int, arrived: int, trained: int) -> int:
        """The env-step counter after an arrival of ``arrived`` items, ``trained`` of them
        trained on (``async.env-steps-counted``: every arrived item, once)."""
        return counter + arrived


class _Actor:
    """One actor: its env, stepped with next-step auto-reset, and its release version."""

    def __init__(self, scenario: AsyncScenario, index: int) -> None:
        self.env = ToyEnv(scenario.env, index, scenario.seed)
        self.observation, _ = self.env.reset()
        self.ended = False
        self.released = 0

    def item(self) -> Item:
        o = self.observation
        return (int(o[0]), int(o[1]), int(o[2]))

    def step(self, action: int) -> None:
        if self.ended:
            self.observation, _ = self.env.reset()
            self.ended = False
        else:
            self.observation, _, terminated, truncated, _ = self.env.step(action)
            self.ended = bool(terminated or truncated)


def _fragment(rules: Actors, actor: _Actor, learner: int, generator: torch.Generator) -> list[Row]:
    acting = rules.acting_version(actor.released, learner)
    logits = rules.logits(acting)
    rows = []
    for _ in range(rules.scenario.fragment_length):
        probs = torch.softmax(torch.tensor(logits, dtype=torch.float64), 0)
        action = int(torch.multinomial(probs, 1, generator=generator))
        rows.append(
            Row(
                actor.item(),
                action,
                rules.recorded_version(acting, learner),
                logits,
                rules.log_prob(logits, action, learner),
            )
        )
        actor.step(action)
    return rows


def run_async(scenario: AsyncScenario, actors: type[Actors] = Actors) -> Trace:
    """refimpl's async scenario: per arrival an ``Arrived`` event, then the ``Trained`` event
    of the update on it (none when every item is beyond the lag bound)."""
    rules = actors(scenario)
    pool = [_Actor(scenario, a) for a in range(scenario.env.num_envs)]
    generator = torch.Generator().manual_seed(scenario.seed)
    events: list[Event] = []
    learner = counter = 0
    for index, a in enumerate(scenario.arrivals):
        rows = _fragment(rules, pool[a], learner, generator)
        pool[a].released = learner  # handed over: the actor goes on before the update
        trained = [r.item for r in rows if rules.trainable(learner - r.version)]
        counter = rules.count(counter, len(rows), len(trained))
        events.append(
            Arrived(
                index,
                a,
                learner,
                tuple(r.item[0] for r in rows),
                tuple(r.item[1] for r in rows),
                tuple(r.item[2] for r in rows),
                tuple(r.action for r in rows),
                tuple(r.version for r in rows),
                tuple(r.logits for r in rows),
                tuple(r.log_prob for r in rows),
                counter,
            )
        )
        if trained:
            events.append(
                Trained(
                    learner,
                    tuple(i[0] for i in trained),
                    tuple(i[1] for i in trained),
                    tuple(i[2] for i in trained),
                )
            )
            learner += 1
    return Trace(tuple(events), {"producer": "refimpl"})
