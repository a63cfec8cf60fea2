"""Episode-delayed bookkeeping as a user's buffer does it (xpspec/kit/episode_hold.py)."""

from __future__ import annotations

import pytest

from xpspec.kit.episode_hold import EpisodeHold, Release, keeps


@pytest.mark.parametrize(
    ("keep", "success", "kept"),
    [
        ("all", True, True),
        ("all", False, True),
        ("success", True, True),
        ("success", False, False),
        ("failure", True, False),
        ("failure", False, True),
    ],
)
def test_keep_filters_released_episodes_by_outcome(keep: str, success: bool, kept: bool) -> None:
    assert keeps(keep, success) is kept


def test_an_unknown_keep_is_refused() -> None:
    with pytest.raises(ValueError, match=r"keep: expected one of .* got 'some'"):
        EpisodeHold("some")


def test_closing_an_env_releases_only_its_rows_in_arrival_order() -> None:
    hold: EpisodeHold[str] = EpisodeHold("success")
    for step in range(3):
        hold.hold(1, f"e1-{step}")
        hold.hold(0, f"e0-{step}")
    released = hold.close(1, success=False)
    assert released == Release(1, ("e1-0", "e1-1", "e1-2"), success=False, kept=False)
    assert released.annotation == 0.0
    assert hold.held() == ["e0-0", "e0-1", "e0-2"]
    hold.hold(1, "e1-3")
    terminated = hold.close(0, success=True)
    assert (terminated.rows, terminated.kept, terminated.annotation) == (
        ("e0-0", "e0-1", "e0-2"),
        True,
        1.0,
    )
    assert hold.held() == ["e1-3"]


def test_held_rows_run_by_env_index_and_drain_empties_the_hold() -> None:
    hold: EpisodeHold[int] = EpisodeHold()
    hold.hold(2, 20)
    hold.hold(0, 0)
    hold.hold(2, 21)
    assert hold.held() == [0, 20, 21]
    assert hold.drain() == [0, 20, 21]
    assert hold.held() == []


def test_closing_an_env_that_holds_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"expected rows held for env 3, got none"):
        EpisodeHold().close(3, success=True)
