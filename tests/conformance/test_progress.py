"""Progress lines of ``xpspec run``: the count of checks done and the time left."""

from __future__ import annotations

from xpspec.conformance.progress import Progress, duration, progress_line


def test_durations_read_at_a_glance() -> None:
    assert [duration(s) for s in (0.4, 42, 185, 3720)] == [
        "0 s",
        "42 s",
        "3 min 05 s",
        "1 h 02 min",
    ]


def test_the_line_gives_the_count_and_the_time_left_at_the_pace_so_far() -> None:
    # 100 of 400 checks in 30 s: 300 left at 0.3 s each is 90 s
    assert progress_line(100, 400, 30.0) == (
        "xpspec: 100/400 checks (25%), 30 s elapsed, about 1 min 30 s left"
    )
    assert progress_line(400, 400, 61.0, failed=2) == (
        "xpspec: 400/400 checks (100%), 1 min 01 s elapsed, 2 failed"
    )


def test_a_line_at_each_tenth_and_at_the_end() -> None:
    progress = Progress(total=50, started=0.0)
    printed = [n for n in range(1, 51) if progress.advance(now=n * 0.01) is not None]
    assert printed == [5, 10, 15, 20, 25, 30, 35, 40, 45, 50]


def test_a_slow_run_prints_between_tenths_too() -> None:
    progress = Progress(total=1000, started=0.0, interval=30.0)
    # 10 s per check: 997 left after 30 s is 9970 s
    lines = [progress.advance(now=10.0 * n) for n in range(1, 8)]
    assert [i + 1 for i, line in enumerate(lines) if line] == [3, 6]
    assert lines[2] == "xpspec: 3/1000 checks (0%), 30 s elapsed, about 2 h 46 min left"


def test_failures_are_counted() -> None:
    progress = Progress(total=2, started=0.0)
    progress.advance(1.0, failed=True)
    assert progress.advance(2.0) == "xpspec: 2/2 checks (100%), 2 s elapsed, 1 failed"
