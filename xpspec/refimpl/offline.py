"""Offline and hybrid replay (clauses ``offline.*``): refimpl's model.

:func:`run_offline` stores the scenario's offline dataset in an offline buffer of its own,
then runs ``updates`` updates. Before each, the toy env runs ``steps_per_update`` vector
steps whose items are written to the online buffer (a ring of ``capacity`` items per env),
never to the offline one (``offline.items-unchanged``). Update ``u`` takes the online part
when the schedule says so (``offline.online-schedule``: ``u >= online_after`` and
``u % online_every == 0``, ``u`` counted from ``first_update``); the batch holds each source's share of ``batch_size`` by the
weights, split by largest remainder, ties to the offline share (``offline.mix-ratio``), each
part drawn uniformly with replacement from its buffer; and the training-iteration counter
advances by one at every update, offline-only ones included
(``offline.iteration-accounting``).

:class:`Mixer` holds one rule per method, so a variant (or a broken mixer) replaces one.
"""

from __future__ import annotations

from collections import deque

import torch

from xpspec.protocol.scenario import OfflineScenario
from xpspec.protocol.trace import Event, Item, Mixed, Trace
from xpspec.refimpl.toy_envs.batched import ToyBatchEnv

__all__ = ["Mixer", "Rings", "run_offline"]

Rings = list[deque[Item]]
"""The online buffer: one ring of ``capacity`` items per env."""


class Mixer:
    """The hybrid sampler of an offline scenario: schedule, split, writes, draws, counter."""

    def __init__(self, scenario: OfflineScenario) -> None:
        self.scenario = scenario

    def online_trains(self, update: int) -> bool:
        """Whether update ``update`` takes the online part (``offline.online-schedule``): its
        number ``n`` (``update + first_update``; 1 under variant ``counted-from-one``) is at
        least ``online_after`` and a multiple of ``online_every``."""
        sc = self.scenario
        n = update + sc.first_update
        return n >= sc.online_after and n % sc.online_every == 0

    def shares(self) -> tuple[int, int]:
        """The offline and online counts of a batch with both parts (``offline.mix-ratio``):
        each the floor of its exact share ``batch_size × weight / total``, the remainder (at
        most one item) to the larger fractional part, ties to the offline part."""
        sc = self.scenario
        total = sc.offline_weight + sc.online_weight
        offline, r_off = divmod(sc.batch_size * sc.offline_weight, total)
        online, r_on = divmod(sc.batch_size * sc.online_weight, total)
        if offline + online < sc.batch_size:
            if r_off >= r_on:
                offline += 1
            else:
                online += 1
        return offline, online

    def write(self, online: Rings, offline: list[Item], item: Item) -> None:
        """Write online item ``item`` to its env's ring (``offline.items-unchanged``: the
        offline buffer is never written after the dataset is stored)."""
        online[item[0]].append(item)

    def draw(self, generator: torch.Generator, pool: list[Item], n: int) -> list[Item]:
        """``n`` items of ``pool`` drawn uniformly with replacement."""
        if n == 0:
            return []
        picks = torch.randint(len(pool), (n,), generator=generator)
        return [pool[i] for i in picks.tolist()]

    def count(self, counter: int, online: bool) -> int:
        """The training-iteration counter after an update (``offline.iteration-accounting``):
        one more, whether or not the online part took part."""
        return counter + 1


def _items(observation: torch.Tensor) -> list[Item]:
    return [(int(o[0]), int(o[1]), int(o[2])) for o in observation.to(torch.int64).tolist()]


def run_offline(scenario: OfflineScenario, mixer: type[Mixer] = Mixer) -> Trace:
    """refimpl's offline scenario: one ``Mixed`` event per update; one seeded generator draws
    each batch's offline part, then its online part."""
    rule = mixer(scenario)
    env = ToyBatchEnv(scenario.env, scenario.seed)
    online: Rings = [deque(maxlen=scenario.capacity) for _ in range(env.num_envs)]
    offline = list(scenario.offline)
    action = torch.zeros(env.num_envs, dtype=torch.int64)
    generator = torch.Generator().manual_seed(scenario.seed)
    events: list[Event] = []
    counter, stepped = 0, False
    for update in range(scenario.updates):
        written: list[Item] = []
        for _ in range(scenario.steps_per_update):
            ts = env.step(action) if stepped else env.reset()
            stepped = True
            for item in _items(ts.observation):
                rule.write(online, offline, item)
                written.append(item)
        trains = rule.online_trains(update)
        n_offline, n_online = rule.shares()
        batch = rule.draw(generator, offline, n_offline)
        if trains:
            batch += rule.draw(generator, [i for ring in online for i in ring], n_online)
        counter = rule.count(counter, trains)
        events.append(Mixed(update, tuple(written), tuple(batch), tuple(offline), counter))
    return Trace(tuple(events), {"producer": "refimpl"})
