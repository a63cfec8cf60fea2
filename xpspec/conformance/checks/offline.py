"""Checks of offline and hybrid replay (``spec/offline.md``, clauses ``offline.*``).

An item of a batch is told to its source by its env index: the scenario's offline items all
have an env index of at least ``env.num_envs`` and the online stream's all less, so a batch's
offline part is its items of an offline env index and its online part the others, whatever
order the implementation returns them in. Which items a part holds is
``offline.items-unchanged``'s to judge, how many ``offline.mix-ratio``'s, whether the online
part is there at all ``offline.online-schedule``'s: a wrong item is charged once, to the
clause whose property it breaks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import OfflineScenario, Scenario
from xpspec.protocol.trace import Item, Mixed, Trace

__all__ = [
    "check_items_unchanged",
    "check_iteration_accounting",
    "check_mix_ratio",
    "check_online_schedule",
    "share",
]


def _sc(scenario: Scenario) -> OfflineScenario:
    assert isinstance(scenario, OfflineScenario)
    return scenario


def _updates(sc: OfflineScenario, trace: Trace) -> list[Mixed]:
    events = list(trace.of_kind("mixed"))
    got = [e.update for e in events]
    if got != list(range(sc.updates)):
        raise CheckFailure("mixed events, by update", list(range(sc.updates)), got)
    return events


def _parts(sc: OfflineScenario, event: Mixed) -> tuple[list[Item], list[Item]]:
    """The batch's offline part and online part, told apart by env index."""
    offline = [tuple(i) for i in event.batch if i[0] >= sc.env.num_envs]
    online = [tuple(i) for i in event.batch if i[0] < sc.env.num_envs]
    return offline, online  # type: ignore[return-value]


def share(batch_size: int, weight: int, total: int) -> tuple[int, ...]:
    """The counts ``offline.mix-ratio`` allows a source of weight ``weight`` out of
    ``total`` in a batch of ``batch_size``: its exact share when that is whole, else the
    whole numbers either side of it."""
    low, rest = divmod(batch_size * weight, total)
    return (low,) if rest == 0 else (low, low + 1)


def _allowed(counts: tuple[int, ...]) -> int | str:
    return counts[0] if len(counts) == 1 else " or ".join(map(str, counts))


def _trains(sc: OfflineScenario, update: int) -> bool:
    n = update + sc.first_update
    return n >= sc.online_after and n % sc.online_every == 0


def check_mix_ratio(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """offline.mix-ratio: a batch holds its offline share of ``batch_size`` at every update
    and, at an update with the online part, its online share, the two adding up to
    ``batch_size``; a share is exact when whole, else one of the whole numbers either side.
    (An online part missing or present against the schedule is ``offline.online-schedule``'s.)
    """
    sc = _sc(scenario)
    total = sc.offline_weight + sc.online_weight
    want_offline = share(sc.batch_size, sc.offline_weight, total)
    want_online = share(sc.batch_size, sc.online_weight, total)
    for event in _updates(sc, trace):
        offline, online = _parts(sc, event)
        where = f"update {event.update}"
        if len(offline) not in want_offline:
            raise CheckFailure(
                f"{where}: offline items of the batch (batch_size {sc.batch_size}, weights "
                f"{sc.offline_weight}:{sc.online_weight})",
                _allowed(want_offline),
                len(offline),
                iteration=event.update,
            )
        if not _trains(sc, event.update) or (not online and 0 not in want_online):
            continue  # whether online items are there at all is the schedule's
        if len(online) not in want_online:
            raise CheckFailure(
                f"{where}: online items of the batch (batch_size {sc.batch_size}, weights "
                f"{sc.offline_weight}:{sc.online_weight})",
                _allowed(want_online),
                len(online),
                iteration=event.update,
            )
        if len(offline) + len(online) != sc.batch_size:
            raise CheckFailure(
                f"{where}: items of a batch at an update with the online part",
                sc.batch_size,
                len(event.batch),
            )


def _held_online(sc: OfflineScenario, trace: Trace) -> Iterator[tuple[Mixed, set[Item]]]:
    """Each update with the online items the online buffer held at it: each env's last
    ``capacity`` items written so far."""
    rings: dict[int, deque[Item]] = {}
    for event in _updates(sc, trace):
        for item in event.written:
            rings.setdefault(item[0], deque(maxlen=sc.capacity)).append(tuple(item))  # type: ignore[arg-type]
        yield event, {i for ring in rings.values() for i in ring}


def check_items_unchanged(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """offline.items-unchanged: an offline item of a batch is an item of the dataset and an
    online one an item the online buffer holds; after every update the offline buffer holds
    the dataset, each item as stored (online writes never overwrite it)."""
    sc = _sc(scenario)
    dataset = set(sc.offline)
    for event, held in _held_online(sc, trace):
        offline, online = _parts(sc, event)
        where = f"update {event.update}"
        for item in offline:
            if item not in dataset:
                raise CheckFailure(
                    f"{where}: offline item of the batch",
                    "an item of the offline dataset",
                    item,
                    iteration=event.update,
                )
        for item in online:
            if item not in held:
                raise CheckFailure(
                    f"{where}: online item of the batch",
                    f"one of the last {sc.capacity} items written at env {item[0]}",
                    item,
                    iteration=event.update,
                )
        stored = sorted(tuple(i) for i in event.offline_held)
        if stored != sorted(sc.offline):
            raise CheckFailure(
                f"{where}: items the offline buffer holds (sorted)",
                sorted(sc.offline),
                stored,
                iteration=event.update,
            )


def check_online_schedule(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """offline.online-schedule: a batch has online items exactly at the updates ``u`` whose
    number ``n = u + first_update`` has ``n >= online_after`` and ``n % online_every == 0``
    (at such an update a batch whose
    online share may round to 0 items may also have none)."""
    sc = _sc(scenario)
    if max(share(sc.batch_size, sc.online_weight, sc.offline_weight + sc.online_weight)) == 0:
        raise Unsupported(
            f"the online share of a batch of {sc.batch_size} at weights "
            f"{sc.offline_weight}:{sc.online_weight} is 0 items, so whether the online part "
            "takes part cannot be seen"
        )
    may_be_empty = 0 in share(sc.batch_size, sc.online_weight, sc.offline_weight + sc.online_weight)
    for event in _updates(sc, trace):
        _, online = _parts(sc, event)
        want = _trains(sc, event.update)
        if want and not online and may_be_empty:
            continue  # an online share that rounds to 0 items: absence shows nothing
        if bool(online) != want:
            raise CheckFailure(
                f"update {event.update}: online items in the batch (online_after "
                f"{sc.online_after}, online_every {sc.online_every}, first_update "
                f"{sc.first_update})",
                "some" if want else "none",
                len(online),
                iteration=event.update,
            )


def check_iteration_accounting(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """offline.iteration-accounting: the training-iteration counter is ``u + 1`` after update
    ``u``: every update counts once, with or without the online part."""
    sc = _sc(scenario)
    events = _updates(sc, trace)
    if all(e.counter is None for e in events):
        raise Unsupported("the run records no training-iteration counter")
    for event in events:
        if event.counter != event.update + 1:
            raise CheckFailure(
                f"update {event.update}: training iterations counted after it (online part "
                f"{'in' if _trains(sc, event.update) else 'not in'} the batch)",
                event.update + 1,
                event.counter,
                iteration=event.update,
            )
