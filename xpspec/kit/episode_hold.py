"""Episode-delayed preprocessing as a user's buffer does it (clauses
``preprocess.delayed-per-env`` and ``preprocess.pending-at-end``): each env's rows are held
until that env's episode ends, then released as one episode, annotated with its outcome and
kept or left out by ``keep``; what is still held at the end is reported or flushed.

Bookkeeping only, over rows of any type: deciding when an episode ends (a ``done`` flag, a
step type) and writing the released rows are the framework's own mechanism, which the adapter
drives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["EpisodeHold", "Release", "keeps"]

Row = TypeVar("Row")

_KEEP = ("all", "success", "failure")


def keeps(keep: str, success: bool) -> bool:
    """Whether ``keep`` (``all``, ``success`` or ``failure``) keeps an episode whose outcome is
    ``success``; the others are left out with reason ``outcome``."""
    if keep not in _KEEP:
        raise ValueError(f"keep: expected one of {_KEEP}, got {keep!r}")
    return keep == "all" or (keep == "success") == success


@dataclass(frozen=True)
class Release(Generic[Row]):
    """One env's episode at its end: its rows in arrival order, its outcome and whether
    ``keep`` keeps it."""

    env: int
    rows: tuple[Row, ...]
    success: bool
    kept: bool

    @property
    def annotation(self) -> float:
        """1.0 for a successful (terminated) episode, else 0.0."""
        return 1.0 if self.success else 0.0


class EpisodeHold(Generic[Row]):
    """The rows each env's current episode has so far, until :meth:`close` releases them."""

    def __init__(self, keep: str = "all") -> None:
        keeps(keep, True)  # validates keep
        self.keep = keep
        self._rows: dict[int, list[Row]] = {}

    def hold(self, env: int, row: Row) -> None:
        """Env ``env``'s next row joins its held episode."""
        self._rows.setdefault(int(env), []).append(row)

    def close(self, env: int, success: bool) -> Release[Row]:
        """Env ``env``'s episode ended with outcome ``success``: its held rows, released."""
        rows = tuple(self._rows.pop(int(env), ()))
        if not rows:
            raise ValueError(f"close: expected rows held for env {env}, got none")
        return Release(int(env), rows, bool(success), keeps(self.keep, success))

    def held(self) -> list[Row]:
        """The rows still held, by env index, each env's in arrival order."""
        return [row for env in sorted(self._rows) for row in self._rows[env]]

    def drain(self) -> list[Row]:
        """Remove and return the rows still held (:meth:`held`'s order): a flush at the end."""
        rows = self.held()
        self._rows.clear()
        return rows
