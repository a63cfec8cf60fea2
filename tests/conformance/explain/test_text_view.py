"""Text mode: per iteration a line of marks per lane, the divergence marked and spelled out,
and nothing from a trace able to forge a line or drive the terminal."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.conformance.explain.perturb import (
    extra_update,
    reference,
    store_one_iteration_later,
    with_events,
)
from xpspec.conformance.explain import explain, render_text


def _text(name: str, events: list[Any] | None = None, **header: Any) -> str:
    scenario, trace = reference(name)
    perturbed = with_events(trace, list(trace.events) if events is None else events, **header)
    return render_text(
        explain(scenario, perturbed, trace, name=name, subject="t", against=f"vector {name}")
    )


def _block(lines: list[str], head: str) -> list[str]:
    """The lane lines under the line ``head`` (up to the next line that is no lane)."""
    start = lines.index(head) + 1
    block = []
    for line in lines[start:]:
        if not line.startswith(("  env ", "  trainer")):
            break
        block.append(line)
    return block


def test_equal_traces_are_all_marks_and_no_divergence() -> None:
    _, trace = reference("plain-u2-b3")  # 3 envs, 2 vector steps per iteration
    lines = _text("plain-u2-b3").splitlines()
    assert [line for line in lines if line.startswith(">")] == []
    block = _block(lines, "  iteration 1")
    # each step stored right after it, then a call with one update and its two hooks
    assert [line[:15] for line in block[:3]] == [f"  env {e}    o#o#" for e in range(3)]
    assert block[3] == "  trainer      TU::"
    # a window mark in the lanes of the envs the update drew windows from, under its U
    update = next(trace.of_kind("update"))
    envs = {item[0] for window in update.windows for item in window if item is not None}
    assert {e for e in range(3) if block[e][15:].strip() in ("w", "W")} == envs
    assert all(block[e][15:].strip() == "" for e in range(3) if e not in envs)
    assert "no divergence: the trace equals the reference, event for event" in lines
    assert lines[-1].startswith("no divergence; no check fails")


def test_a_late_store_is_shown_in_its_iteration_next_to_the_reference() -> None:
    _, trace = reference("delayed-mixed-b3")
    events = list(trace.events)
    where = store_one_iteration_later(events, iteration=4, env=0)
    lines = _text("delayed-mixed-b3", events).splitlines()
    assert [line for line in lines if line.startswith(">")] == ["> iteration 4"]
    ours = _block(lines, "> iteration 4")
    theirs = _block(lines, "  reference, iteration 4:")
    assert len(ours) == len(theirs) == 4
    assert "#" not in ours[0] and "#" in theirs[0]  # env 0 stores here in the reference only
    assert ours[1:3] == theirs[1:3]  # envs 1 and 2 agree
    caret = lines[lines.index(ours[-1]) + 1]
    assert caret.endswith(f"^ first divergence (event #{where})")
    assert theirs[0][caret.index("^")] == "#"  # the caret points at the missing store
    assert f"first divergence: iteration 4, env 0, event #{where}" in lines
    assert "  the trace lacks 1 event of the reference here (store)" in lines
    expected = next(line for line in lines if line.startswith("  expected: "))
    assert (
        expected
        == "  expected: store of (0, 0, 0) FIRST, (0, 0, 1) MID, (0, 0, 2) MID, (0, 0, 3) LAST"
    )
    assert next(line for line in lines if line.startswith("  actual: ")).startswith(
        "  actual:   train_call"
    )
    assert "clause: preprocess.delayed-per-env (charged by check delayed-per-env)" in lines
    assert any(line.startswith("  downstream of it (") for line in lines)


def test_an_extra_update_is_spelled_out() -> None:
    _, trace = reference("plain-u2-b3")
    events = list(trace.events)
    where = extra_update(events, call=3)
    text = _text("plain-u2-b3", events)
    lines = text.splitlines()
    assert trace.events[where - 2].iteration == 4
    trainer = _block(lines, "> iteration 4")[-1]
    assert trainer.count("U") == 2  # two updates in iteration 4's call
    assert "  the trace has 2 events the reference has not (update, hook)" in lines
    assert "clause: train.updates-per-call (charged by check updates-per-call)" in lines


def test_control_characters_from_a_trace_are_escaped() -> None:
    _, trace = reference("exclude-episodes")
    events = list(trace.events)
    first = next(n for n, e in enumerate(events) if e.kind == "exclude")
    forged = "episode\n> iteration 99\x1b[2J\r"
    events[first] = replace(events[first], reason=forged)
    events[first + 1 :] = events[first + 1 : first + 2]  # cut: the divergence is the exclude
    text = _text("exclude-episodes", events, producer="x\x1b]0;title\x07")
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    assert "> iteration 99" not in text.splitlines()
    assert "episode\\n> iteration 99\\x1b[2J\\r" in text


def test_a_long_trace_shows_the_columns_around_the_divergence_and_says_what_it_left_out() -> None:
    from xpspec.conformance.explain.text_view import AROUND

    _, trace = reference("delayed-mixed-b3")
    events = list(trace.events)
    store_one_iteration_later(events, iteration=4, env=0)
    lines = _text("delayed-mixed-b3", events).splitlines()
    shown = [line.strip("> ") for line in lines if line.startswith(("  iteration", "> iteration"))]
    assert shown == [f"iteration {i}" for i in range(4 - AROUND, 4 + AROUND + 1)]
    assert "  … iteration 1 left out (1; the page shows every one)" in lines
    after = [line for line in lines if line.startswith(f"  … iteration {4 + AROUND + 1} to ")]
    assert len(after) == 1 and after[0].endswith("; the page shows every one)")


def test_a_trace_that_ends_early_shows_its_last_columns() -> None:
    from xpspec.conformance.explain.text_view import AROUND

    _, trace = reference("delayed-mixed-b3")
    cut = [e for e in trace.events if getattr(e, "iteration", 0) <= 6 and e.kind != "run_end"]
    lines = _text("delayed-mixed-b3", cut).splitlines()
    shown = [line.strip() for line in lines if line.startswith("  iteration")]
    assert shown == [f"iteration {i}" for i in range(7 - AROUND, 7)]
    assert "> (the trace ends here)" in lines
    assert f"  … iteration 1 to iteration {6 - AROUND} left out" in "\n".join(lines)
