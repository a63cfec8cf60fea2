"""Compact per-item state for checks that remember something about every item of a long trace.

A toy env's time steps are known in advance (clause ``timestep.identity``): env ``e``'s episode
``k`` has the steps ``t = 0 … L_k``. :class:`ItemIndex` numbers them densely per env, episode
after episode (slot ``start(k) + t``, ``start(k) = Σ_{j<k} (L_j + 1)``), so that a small value
per item (a stored step type, a flag) is one byte of a per-env ``bytearray``
(:class:`ItemBytes`) instead of a dictionary entry keyed by a tuple, about a hundred times
less. Items the index does not cover (an episode far beyond those seen so far, which only a
malformed trace names) are kept in a dictionary, so the answers are exact for every item.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Final

from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.schedule import EpisodePlan
from xpspec.protocol.shared_pass import Same, once
from xpspec.protocol.trace import Item

__all__ = ["ItemBytes", "ItemIndex", "Plans", "shared_index"]

_AHEAD: Final = 1 << 12
"""Episodes past the last one numbered that the index numbers on demand; an item of an
episode further ahead is kept aside rather than growing the index to reach it."""


_RECENT: Final = 64
"""Episode plans :class:`Plans` remembers per env."""


class Plans:
    """The episode plans of ``env`` run with ``seed``, the ``_RECENT`` newest asked for of
    each env remembered: a pass over a trace asks for the same few episodes item after item
    (an env step's, a store's a few iterations behind it), and working a plan out (a hash, a
    validated value) costs more than the rest of what a check does with an item."""

    def __init__(self, env: EnvSpec, seed: int) -> None:
        self.env, self.seed = env, seed
        self._recent: dict[int, dict[int, EpisodePlan]] = {}

    def __call__(self, env: int, episode: int) -> EpisodePlan:
        recent = self._recent.get(env)
        if recent is None:
            recent = self._recent[env] = {}
        else:
            plan = recent.get(episode)
            if plan is not None:
                return plan
        plan = self.env.episode(self.seed, env, episode)
        if len(recent) >= _RECENT:
            del recent[next(iter(recent))]  # the one asked for first
        recent[episode] = plan
        return plan


class ItemIndex:
    """Dense slots of the time steps of ``env`` run with ``seed`` (module docstring)."""

    def __init__(self, env: EnvSpec, seed: int) -> None:
        self.env, self.seed = env, seed
        self._starts: dict[int, list[int]] = {}  # per env: start(0), start(1), …, start(n)
        self._growing = threading.Lock()

    def slot(self, item: Item) -> int | None:
        """The slot of ``item`` in its env, or None when the index does not cover it (an env
        or episode out of range, a ``t`` outside its episode)."""
        env, episode, t = item
        starts = self._starts.get(env)  # only an env in range has its starts
        if starts is not None and 0 <= episode < len(starts) - 1 and t >= 0:
            slot = starts[episode] + t  # an episode numbered already: the common case
            return slot if slot < starts[episode + 1] else None
        if not 0 <= env < self.env.num_envs or episode < 0 or t < 0:
            return None
        with self._growing:  # an index shared by the checks run together grows in one of them
            return self._numbered(env, episode, t)

    def _numbered(self, env: int, episode: int, t: int) -> int | None:
        """The slot of ``(env, episode, t)``, numbering the env's episodes up to ``episode``
        first (``env`` in range, ``episode`` and ``t`` not negative)."""
        starts = self._starts.get(env)
        if starts is None:
            starts = self._starts[env] = [0]
        if episode + 1 >= len(starts):
            if episode + 1 - len(starts) > _AHEAD:
                return None
            while len(starts) <= episode + 1:
                k = len(starts) - 1
                starts.append(starts[-1] + self.env.episode(self.seed, env, k).length + 1)
        start = starts[episode]
        return start + t if start + t < starts[episode + 1] else None


def shared_index(env: EnvSpec, seed: int) -> ItemIndex:
    """``ItemIndex(env, seed)``, one for the checks run together
    (:func:`~xpspec.protocol.shared_pass.once`): its slots do not depend on who asks, and
    each episode is numbered once rather than once per check."""
    return once(("ItemIndex", Same(env), seed), lambda: ItemIndex(env, seed))


class ItemBytes:
    """A map from items to values, one byte per slot of ``index`` for the values 0 to 254;
    other values, items outside the index, or every item without one, are kept in a
    dictionary. It answers
    ``item in m``, ``m[item]`` and ``m[item] = value`` as a dictionary would, and
    :meth:`add` and :meth:`update` as a set of items does (the value 1)."""

    def __init__(self, index: ItemIndex | None = None) -> None:
        self.index = index
        self._starts: dict[int, list[int]] = {} if index is None else index._starts
        """The index's episode starts per env, read directly on the common path."""
        self._bytes: dict[int, bytearray] = {}
        self._aside: dict[Item, int] = {}

    def get(self, item: Item) -> int | None:
        env, episode, t = item
        starts = self._starts.get(env)
        slot: int | None
        if starts is not None and 0 <= episode < len(starts) - 1 and t >= 0:
            # An episode numbered already (the common case), as ItemIndex.slot answers it.
            slot = starts[episode] + t
            if slot >= starts[episode + 1]:
                slot = None
        else:
            slot = None if self.index is None else self.index.slot(item)
        if slot is not None:
            row = self._bytes.get(env)
            if row is not None and slot < len(row):
                value = row[slot]
                if value:
                    return value - 1
        return self._aside.get(item) if self._aside else None

    def bump(self, item: Item) -> int:
        """Add one to the value of ``item`` (0 when it has none); return the new value."""
        value = self.get(item)
        value = 1 if value is None else value + 1
        self[item] = value
        return value

    def __contains__(self, item: object) -> bool:
        return isinstance(item, tuple) and len(item) == 3 and self.get(item) is not None

    def __getitem__(self, item: Item) -> int:
        value = self.get(item)
        if value is None:
            raise KeyError(item)
        return value

    def __setitem__(self, item: Item, value: int) -> None:
        env, episode, t = item
        starts = self._starts.get(env)
        slot: int | None
        if starts is not None and 0 <= episode < len(starts) - 1 and t >= 0:
            slot = starts[episode] + t  # as in get
            if slot >= starts[episode + 1]:
                slot = None
        else:
            slot = None if self.index is None else self.index.slot(item)
        if slot is None:
            self._aside[item] = value
            return
        row = self._bytes.get(env)
        if row is None:
            row = self._bytes[env] = bytearray()
        if slot >= len(row):
            row.extend(bytes(max(slot + 1 - len(row), len(row) // 2)))
        if 0 <= value < 255:
            row[slot] = value + 1
            if self._aside:
                self._aside.pop(item, None)
        else:
            row[slot] = 0
            self._aside[item] = value

    def set_all(self, items: Iterable[Item], values: Iterable[int]) -> None:
        """``m[item] = value`` for each pair, in order (a store's columns at once): an item of
        an episode numbered already, whose row holds its slot, is written in place; any other
        goes through ``__setitem__``."""
        starts_of, rows = self._starts, self._bytes
        for item, value in zip(items, values):
            env, episode, t = item
            starts = starts_of.get(env)
            row = rows.get(env)
            if (
                starts is not None
                and row is not None
                and 0 <= episode < len(starts) - 1
                and t >= 0
                and 0 <= value < 255
            ):
                slot = starts[episode] + t
                if slot < starts[episode + 1] and slot < len(row):
                    row[slot] = value + 1
                    if self._aside:
                        self._aside.pop(item, None)
                    continue
            self[item] = value

    def bump_all(self, items: Iterable[Item]) -> None:
        """:meth:`bump` each item, in order: an item of an episode numbered already that has a
        value below 254 in its row is counted in place; any other goes through :meth:`bump`."""
        starts_of, rows = self._starts, self._bytes
        for item in items:
            env, episode, t = item
            starts = starts_of.get(env)
            row = rows.get(env)
            if starts is not None and row is not None and 0 <= episode < len(starts) - 1 and t >= 0:
                slot = starts[episode] + t
                if slot < starts[episode + 1] and slot < len(row):
                    byte = row[slot]  # the value plus one; 0: none here (maybe aside)
                    if 0 < byte < 255:
                        row[slot] = byte + 1
                        continue
                    if byte == 0 and not self._aside:  # none yet: the value 1
                        row[slot] = 2
                        continue
            self.bump(item)

    def add(self, item: Item) -> None:
        self[item] = 1

    def update(self, items: Iterable[Item]) -> None:
        for item in items:
            self[item] = 1
