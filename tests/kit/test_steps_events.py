"""Time steps and the trace events built from them (xpspec.kit.steps, xpspec.kit.events)."""

from __future__ import annotations

import numpy as np
import pytest

from xpspec.kit.events import env_step, exclude, hold, run_end, store
from xpspec.kit.steps import (
    NextStepRows,
    Step,
    TransitionRows,
    last_step,
    steps_from_columns,
    transition_step,
)
from xpspec.protocol.codec import canonical_json
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import EnvStep, Exclude, Hold, RunEnd, Store

FIRST, MID, LAST = int(StepType.FIRST), int(StepType.MID), int(StepType.LAST)


def test_transition_rows_of_same_step_resets() -> None:
    # env 0: rows t = 0, 1 of episode 0 (the second done), then t = 0 of episode 1;
    # env 1 has one row in between and never ends.
    rows = TransitionRows()
    named = [rows.row((0, 0, 0))]
    rows.follow(0, 1.0, False)
    named.append(rows.row((1, 0, 0)))
    rows.follow(1, 1.0, False)
    named.append(rows.row((0, 0, 1)))
    rows.follow(0, 2.0, True)
    named.append(rows.row((0, 1, 0)))
    named.append(rows.row((1, 0, 1), action=1, policy_state=7))
    assert [(s.item, s.step_type, s.reward) for s in named] == [
        ((0, 0, 0), FIRST, 0.0),
        ((1, 0, 0), FIRST, 0.0),
        ((0, 0, 1), MID, 1.0),
        ((0, 1, 0), FIRST, 0.0),  # after a done row: FIRST, the done row's reward not carried
        ((1, 0, 1), MID, 1.0),
    ]
    assert (named[-1].action, named[-1].state) == (1, 7)
    rows.restart(1)
    assert rows.row((1, 1, 0)).step_type == FIRST


def test_next_step_rows_from_the_previous_rows_flags() -> None:
    # env 0: a terminated episode of 2 transitions, then the reset row of its LAST (reward 0)
    # and the next episode's first row; env 1: a truncated end, flagged by a framework that
    # stores truncated (env 1) and by one that does not (env 2).
    rows = NextStepRows()
    stored = [  # (item, reward, terminated, truncated) of each row, in write order
        ((0, 0, 0), 1.0, False, False),
        ((0, 0, 1), 2.0, True, False),
        ((0, 0, 2), 0.0, False, False),
        ((0, 1, 0), 1.0, False, False),
        ((1, 0, 0), 1.0, False, False),
        ((1, 0, 1), 2.0, False, True),
        ((1, 0, 2), 0.0, False, False),
        ((1, 1, 0), 1.0, False, False),
        ((2, 0, 1), 2.0, False, False),  # truncated, unflagged
        ((2, 0, 2), 0.0, False, False),
        ((2, 1, 0), 1.0, False, False),
    ]
    named = []
    for item, reward, terminated, truncated in stored:
        step = rows.row(item, action=1)
        rows.follow(step, reward, terminated, truncated)
        named.append((step.item, step.step_type, step.reward, step.discount))
    assert named == [
        ((0, 0, 0), FIRST, 0.0, 1.0),
        ((0, 0, 1), MID, 1.0, 1.0),
        ((0, 0, 2), LAST, 2.0, 0.0),
        ((0, 1, 0), FIRST, 0.0, 1.0),  # after the LAST's reset row, with its reward
        ((1, 0, 0), FIRST, 0.0, 1.0),
        ((1, 0, 1), MID, 1.0, 1.0),
        ((1, 0, 2), LAST, 2.0, 1.0),  # truncated: discount 1
        ((1, 1, 0), FIRST, 0.0, 1.0),
        ((2, 0, 1), FIRST, 0.0, 1.0),  # the env's first row
        ((2, 0, 2), MID, 2.0, 1.0),  # nothing stored says the episode ended
        ((2, 1, 0), MID, 0.0, 1.0),
    ]
    assert rows.row((0, 1, 1), action=1).action == 1


def test_a_framework_mark_of_first_overrides_the_previous_row() -> None:
    # A row not marked FIRST after a done one carries the done row's reward (what the storage
    # implies); one marked FIRST carries 0 whatever precedes it; no previous row: 0.
    assert transition_step((0, 1, 0), (3.0, True), first=False) == Step((0, 1, 0), MID, 3.0)
    assert transition_step((0, 0, 2), (2.0, False), first=True).reward == 0.0
    assert transition_step((0, 0, 2), None, first=False) == Step((0, 0, 2), MID, 0.0)


def test_last_step_discount_follows_termination() -> None:
    assert last_step((0, 0, 3), 3.0, True) == Step((0, 0, 3), LAST, 3.0, 0.0)
    assert last_step((0, 0, 3), 3.0, False).discount == 1.0


def test_steps_from_columns_and_their_length_check() -> None:
    got = steps_from_columns(
        [(0, 0, 0), (1, 0, 0)],
        [FIRST, FIRST],
        np.asarray([0.0, 0.5], dtype=np.float32).tolist(),
        annotations=[1.0, 0.0],
    )
    assert got == [Step((0, 0, 0), FIRST, 0.0, annotation=1.0), Step((1, 0, 0), FIRST, 0.5)]
    with pytest.raises(ValueError, match="rewards: expected 2 values"):
        steps_from_columns([(0, 0, 0), (1, 0, 0)], [FIRST, FIRST], [0.0])


def test_events_hold_every_column_with_json_types() -> None:
    rows = [
        Step((0, 0, 1), MID, np.float32(1.0), action=np.int64(1)),  # type: ignore[arg-type]
        last_step((1, 0, 4), 4.0, True, policy_state=4),
    ]
    assert env_step(2, rows) == EnvStep(
        2, (0, 1), (0, 0), (1, 4), (MID, LAST), (1.0, 4.0), (1.0, 0.0), (1, 4), (1, -1)
    )
    event = store(2, rows)
    assert event == Store(
        2, (0, 1), (0, 0), (1, 4), (MID, LAST), (1.0, 4.0), (1.0, 0.0), (0.0, 0.0)
    )
    assert '"reward":[1.0,4.0]' in canonical_json(event)
    assert exclude(1, [(0, 0, 2)], "step") == Exclude(1, (0,), (0,), (2,), "step")
    assert hold(1, [(0, 0, 2), (0, 0, 3)]) == Hold(1, (0, 0), (0, 0), (2, 3))
    assert run_end(3, 12, "report") == RunEnd(3, 12, "report", (), (), ())
    assert run_end(3, 12, "flush", [(1, 2, 3)]) == RunEnd(3, 12, "flush", (1,), (2,), (3,))


def test_logged_rows_become_the_iterations_events_in_log_order_with_their_counts() -> None:
    from dataclasses import dataclass

    from xpspec.kit.events import logged_rows

    @dataclass(frozen=True)
    class Entry:
        kind: str
        steps: tuple[Step, ...]

    a = (Step((0, 0, 0), StepType.FIRST, 0.0, 1.0), Step((1, 0, 0), StepType.FIRST, 0.0, 1.0))
    b = (Step((0, 0, 1), StepType.MID, 1.0, 1.0),)
    events, unrolled, stored = logged_rows(3, [Entry("env", a), Entry("store", a), Entry("env", b)])
    assert [type(e) for e in events] == [EnvStep, Store, EnvStep]
    assert events == [env_step(3, a), store(3, a), env_step(3, b)]
    assert (unrolled, stored) == (3, 2)
