"""The timeline: lanes, columns, one slot per event, marks per kind."""

from __future__ import annotations

from tests.conformance.explain.perturb import extra_update, reference, with_events
from xpspec.conformance.explain.timeline import TRAINER, build_timeline


def test_a_trainer_trace_has_a_lane_per_env_and_a_column_per_iteration() -> None:
    _, trace = reference("plain-u2-b3")  # 3 envs, 10 iterations of 2 vector steps
    timeline = build_timeline(trace.events)
    assert timeline.lanes == (0, 1, 2)
    assert [c.label for c in timeline.columns] == [f"iteration {i}" for i in range(1, 11)] + ["end"]
    # 20 vector steps and 20 stores (identity: one per step) of 3 envs: a mark per env each
    assert timeline.count("env_step") == 60 and timeline.count("store") == 60
    # one train call with one update and two hooks per iteration, on the trainer lane
    assert (timeline.count("train_call"), timeline.count("update"), timeline.count("hook")) == (
        10,
        10,
        20,
    )
    assert {m.lane for m in timeline.marks if m.kind in ("train_call", "update", "hook")} == {
        TRAINER
    }
    assert timeline.count("run_end") == 1


def test_every_window_is_in_the_lane_of_its_env() -> None:
    _, trace = reference("plain-u2-b3")
    timeline = build_timeline(trace.events)
    windows = timeline.lane_marks(0, "window") + timeline.lane_marks(1, "window")
    windows += timeline.lane_marks(2, "window")
    assert len(windows) == timeline.count("window") > 0
    total = sum(len(e.windows) for e in trace.of_kind("update"))
    assert sum(len(m.rows) for m in windows) == total  # each window in exactly one mark
    for mark in windows:
        event = trace.events[mark.event]
        for w in mark.rows:
            assert {item[0] for item in event.windows[w] if item is not None} == {mark.lane}


def test_the_marks_of_one_event_share_its_slot_and_slots_follow_the_trace() -> None:
    _, trace = reference("delayed-mixed-b3")
    timeline = build_timeline(trace.events)
    marked = sorted({m.event for m in timeline.marks})
    assert [timeline.slot_of[e] for e in marked] == list(range(len(marked)))
    for mark in timeline.marks:
        assert mark.slot == timeline.slot_of[mark.event]
    bounds = [n for n, e in enumerate(trace.events) if e.kind in ("iteration", "iteration_end")]
    assert bounds and all(not timeline.marks_of(n) for n in bounds)  # they take no slot


def test_holds_and_excludes_are_marked_in_the_lanes_of_their_envs() -> None:
    _, delayed = reference("delayed-mixed-b3")  # 14 holds of 3 envs each
    assert build_timeline(delayed.events).count("hold") == 42
    _, excluded = reference("exclude-episodes")
    timeline = build_timeline(excluded.events)
    expected = sum(len(set(e.env)) for e in excluded.of_kind("exclude"))
    assert timeline.count("exclude") == expected > 0


def test_an_event_of_several_items_of_one_env_is_one_mark_with_their_positions() -> None:
    _, trace = reference("delayed-mixed-b3")
    release = next(e for e in trace.of_kind("store") if len(e.env) > 1)
    index = trace.events.index(release)
    (mark,) = build_timeline(trace.events).marks_of(index)
    assert mark.lane == release.env[0] and mark.rows == tuple(range(len(release.env)))


def test_an_extra_update_is_one_more_update_and_hook() -> None:
    _, trace = reference("plain-u2-b3")
    events = list(trace.events)
    extra_update(events, call=3)
    before, after = build_timeline(trace.events), build_timeline(with_events(trace, events).events)
    assert after.count("update") == before.count("update") + 1
    assert after.count("hook") == before.count("hook") + 1
    assert after.slots == before.slots + 2


def test_replay_and_learner_traces_have_columns_of_their_own() -> None:
    _, replay = reference("replay-uniform")
    timeline = build_timeline(replay.events)
    draws = len(list(replay.of_kind("sampled")))
    assert [c.label for c in timeline.columns] == ["iteration 0"] + [
        f"draw {d}" for d in range(draws)
    ]
    assert timeline.count("window") > 0 and timeline.count("sampled") == 0
    _, learner = reference("learner-mixed")
    labels = [c.label for c in build_timeline(learner.events).columns]
    assert labels == ["advantages", "caller_episode", "nstep", "update_plan", "shard"]
