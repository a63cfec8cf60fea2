"""Progress of a long ``xpspec run``: how many checks are done of how many, and an estimate of
the time left, printed as whole lines (never a wall of dots)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Progress", "duration", "progress_line"]


def duration(seconds: float) -> str:
    """``seconds`` in words a reader takes in at a glance: ``42 s``, ``3 min 05 s``,
    ``1 h 02 min``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def progress_line(done: int, total: int, elapsed: float, failed: int = 0) -> str:
    """One progress line: the count, the share, the time spent and, once a check is done, the
    time left at the pace so far (the checks' mean duration times the checks left)."""
    share = f" ({100 * done // total}%)" if total else ""
    line = f"xpspec: {done}/{total} checks{share}, {duration(elapsed)} elapsed"
    if 0 < done < total:
        line += f", about {duration(elapsed / done * (total - done))} left"
    if failed:
        line += f", {failed} failed"
    return line


@dataclass
class Progress:
    """When to print a progress line: each time another ``1 / steps`` of the checks is done,
    at most ``interval`` seconds apart while they run, and once at the end."""

    total: int
    started: float
    steps: int = 10
    interval: float = 30.0
    done: int = 0
    failed: int = 0
    _last_share: int = field(default=0, repr=False)
    _last_time: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self._last_time = self.started

    def advance(self, now: float, failed: bool = False) -> str | None:
        """Count one finished check; the line to print now, if one is due."""
        self.done += 1
        self.failed += int(failed)
        share = self.done * self.steps // self.total if self.total else 0
        if (
            self.done >= self.total
            or share > self._last_share
            or (now - self._last_time >= self.interval)
        ):
            self._last_share, self._last_time = share, now
            return progress_line(self.done, self.total, now - self.started, self.failed)
        return None
