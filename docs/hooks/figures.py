"""MkDocs hook: the figures of the specification, drawn at build time by ``xpspec explain``'s
code (:mod:`xpspec.conformance.explain.figure`) from the reference implementation's runs.

A page asks for a figure with a line ``<!-- xpspec-figure: NAME -->``; the line is replaced by
the figure (an HTML comment, it shows nothing where the page is read unbuilt). Each figure is
computed here from a run, so it cannot drift from what refimpl does. An unknown name fails the
build.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from typing import Any

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.views import Clearing
from xpspec.conformance.explain.figure import (
    Cell,
    CellStrip,
    CellStyle,
    Marker,
    Span,
    cells_panel,
    render_figure,
    timeline_panel,
)
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import Trace
from xpspec.refimpl import (
    EnvSpec,
    EpisodeDelayed,
    ExcludeTasks,
    FixedSchedule,
    SamplingSpec,
    TrainerConfig,
    train,
)
from xpspec.refimpl.replay_view import replay_projection

MARKER = re.compile(r"^<!-- xpspec-figure: ([\w-]+) -->$", re.MULTILINE)


def _fraction(value: Fraction) -> str:
    return str(value)


def _accounting_rows(trace: Trace, num_envs: int, unroll: Fraction) -> dict[str, dict[int, str]]:
    """Per iteration: the effective iterations ``E_k``, the calls made so far ``C_k`` and the
    items held ``P_k`` (spec/index.md, notation), from the trace's own counts."""
    q = unroll * num_envs or Fraction(num_envs)
    unrolled = stored = calls = 0
    rows: dict[str, dict[int, str]] = {"E_k": {}, "C_k": {}, "P_k": {}}
    steps = 0
    for e in trace.events:
        if e.kind == "iteration":
            steps = e.unroll_steps
        elif e.kind == "train_call":
            calls += 1
        elif e.kind == "iteration_end":
            unrolled += steps * num_envs
            stored = e.stored_total
            rows["E_k"][e.iteration] = _fraction(e.iteration - Fraction(unrolled - stored) / q)
            rows["C_k"][e.iteration] = str(calls)
            rows["P_k"][e.iteration] = str(e.pending)
    return rows


def unroll_carry() -> str:
    """unroll.fractional-schedule: the exact carry against ALF's float carry, u = 1/10."""
    scenario = CATALOG["alf-float-u1/10"]
    assert isinstance(scenario, TrainerScenario)
    panels = []
    for title, carry in (
        ("exact carry (the spec)", "exact"),
        ("float carry (variant alf-float-carry)", "alf-float"),
    ):
        trainer = replace(scenario.trainer, unroll_carry=carry, num_iterations=22)
        run = train(scenario.env, trainer, seed=scenario.seed)
        done: dict[int, str] = {}
        so_far = 0
        for e in run.trace.events:
            if e.kind == "iteration":
                so_far += e.unroll_steps
                done[e.iteration] = str(so_far)
        panels.append(timeline_panel(title, run.trace, {"steps so far": done}))
    return render_figure(
        "unroll-carry",
        panels,
        "One env, u = 1/10, 22 iterations, run by the reference implementation. The exact "
        "carry unrolls a vector step in iterations 10 and 20 (⌊k·u⌋ steps after iteration k); "
        "the float carry, which adds 0.1 ten times to get 0.9999999999999999, in iterations 11 "
        "and 21. Each iteration makes its one train call either way (hollow while nothing is "
        "stored yet). Hover a mark for its event.",
    )


def delayed_lag() -> str:
    """train.synced-schedule and train.bounded-lag under episode-delayed storage."""
    env = EnvSpec(num_envs=2, schedules=(FixedSchedule(2), FixedSchedule(3)))
    run = train(env, TrainerConfig(num_iterations=8), EpisodeDelayed())
    rows = _accounting_rows(run.trace, env.num_envs, Fraction(1))
    return render_figure(
        "delayed-lag",
        [timeline_panel("episode-delayed storage, u = 1, two envs", run.trace, rows)],
        "The run of the table above. Each env holds its items (diamonds) until its LAST, then "
        "stores its whole episode (squares): env 0 every 3 items, env 1 every 4. Under the "
        "lanes, the effective iteration count E_k climbs by the stored items' worth, a "
        "staircase that stalls while items are held; the calls C_k follow ⌊E_k⌋, so they come "
        "in bursts at the releases and trail the iteration count by the held items P_k / q.",
    )


def carry_vs_floor() -> str:
    """train.synced-schedule against ALF PR 1768's floor, one env's item excluded each step."""
    env = EnvSpec(num_envs=2, schedules=(FixedSchedule(2),), num_tasks=2)
    panels = []
    for title, mode in (
        ("synced (the spec): the halves are carried", "synced"),
        ("alf-pr1768-floor: each iteration's half is floored away", "alf-pr1768-floor"),
    ):
        config = TrainerConfig(num_iterations=6, train_accounting=mode)  # type: ignore[arg-type]
        run = train(env, config, ExcludeTasks((1,)))
        rows = _accounting_rows(run.trace, env.num_envs, Fraction(1))
        del rows["P_k"]
        if mode != "synced":  # the floor does not carry E_k: only its calls are shown
            del rows["E_k"]
        panels.append(timeline_panel(title, run.trace, rows, lanes=[0, 1]))
    return render_figure(
        "carry-vs-floor",
        panels,
        "Two envs whose tasks alternate, task 1 excluded: at every vector step one env's item "
        "is excluded (crosses) and the other's stored, half an iteration's worth. The synced "
        "schedule carries the halves in E_k and trains every second iteration (C_k); the floor "
        "of each iteration's own worth, ⌊1/2⌋ = 0, drops them and never trains.",
    )


def ring_positions() -> str:
    """The storage model of spec/replay.md: absolute positions, physical slots, the write
    head, and the valid windows of the period grid."""
    env = EnvSpec(num_envs=1, schedules=(FixedSchedule(100),))
    capacity, written, length = 8, 11, 3
    view = replay_projection(
        env, capacity, written, SamplingSpec(window_length=length, period=2), seed=0
    )
    stored = [t for _, _, t in view["stored"][0]]  # one long episode: t is the position
    starts = [w["start"] for w in view["windows"]]
    by_slot = {p % capacity: p for p in stored}
    head = written % capacity
    physical = CellStrip(
        "slots",
        tuple(Cell(str(by_slot[s]), f"slot {s}") for s in range(capacity)),
        (
            *(Span(s % capacity, (s + length - 1) % capacity, f"start {s}") for s in starts),
            Span(
                (written - 1) % capacity,
                (written - 1 + length - 1) % capacity,
                "across the write head: invalid",
                "invalid",
            ),
        ),
        (Marker(head, f"write head (next: {written})"),),
    )
    absolute = CellStrip(
        "positions",
        tuple(Cell(str(p), f"slot {p % capacity}") for p in stored),
        tuple(Span(s - stored[0], s - stored[0] + length - 1, f"start {s}") for s in starts),
    )
    return render_figure(
        "ring-positions",
        [
            cells_panel(
                f"a ring of {capacity} after {written} writes, windows of {length}, period 2",
                [physical, absolute],
            )
        ],
        "The ring of the table above. Each cell shows an item's absolute position (top) and the "
        "physical slot it sits in "
        "(bottom). Above: the ring in slot order; the write head is the slot the next write "
        "goes to, position 11 into slot 3, which holds the oldest item. Below: the same items "
        "in absolute order. The valid windows (blue) start on the absolute grid 4, 6, 8; the "
        "one starting at 6 wraps around the physical end of the ring and is still "
        "consecutive positions. A window read in slot order from the newest item (red) joins "
        "position 10 to 3 and 4: it crosses the write head and is never valid.",
    )


def _style(trained: bool, kept: bool) -> CellStyle:
    if not trained:
        return "untrained"
    return "kept" if kept else "item"


def whole_buffer_chunks() -> str:
    """replay.whole-buffer and replay.clear: each call's chunks, what it leaves untrained, and
    what the clear keeps."""
    length = 3
    strips = []
    for clear in ("keep-one-step",):
        run = train(
            EnvSpec(num_envs=1, schedules=(FixedSchedule(100),)),
            TrainerConfig(
                num_iterations=3,
                unroll_length=Fraction(4),
                whole_buffer=True,
                mini_batch_length=length,
                clear=clear,  # type: ignore[arg-type]
            ),
        )
        ring: list[int] = []
        chunks: list[tuple[int, ...]] = []
        call = 0
        for e in run.trace.events:
            if e.kind == "store":
                ring += list(e.t)
            elif e.kind == "train_call":
                chunks = []
            elif e.kind == "update":
                chunks += [tuple(item[2] for item in w if item is not None) for w in e.windows]
            elif e.kind == "iteration_end":
                (keep,) = Clearing(clear, length).kept([len(ring)])
                kept = ring[len(ring) - keep :]
                trained = {t for c in chunks for t in c}
                cells = tuple(
                    Cell(str(t), "kept" if t in kept else "", _style(t in trained, t in kept))
                    for t in ring
                )
                spans = tuple(
                    Span(ring.index(c[0]), ring.index(c[-1]), "chunk", "chunk")
                    for c in sorted(set(chunks))
                )
                call += 1
                strips.append(CellStrip(f"call {call}", cells, spans))
                ring = kept
    return render_figure(
        "whole-buffer-chunks",
        [cells_panel("one env, u = 4, chunks of 3, clear keep-one-step", strips)],
        "Each call's ring, oldest item first (the cells are the items' t). A call trains on "
        "the whole chunks of 3 from the oldest item (pink); the newest items that do not fill "
        "a chunk are not trained in that call (grey) and the clear keeps them for the next "
        "call, so every item is trained in exactly one call. Under keep-one-step a ring of "
        "whole chunks (call 3) keeps its newest item too, trained again with its successor. "
        "What the last call keeps is never trained: the run ends.",
    )


FIGURES: dict[str, Callable[[], str]] = {
    "unroll-carry": unroll_carry,
    "delayed-lag": delayed_lag,
    "carry-vs-floor": carry_vs_floor,
    "ring-positions": ring_positions,
    "whole-buffer-chunks": whole_buffer_chunks,
}
"""Every figure a page may ask for, by name."""


def substitute(markdown: str, where: str = "page") -> str:
    """``markdown`` with every figure marker replaced by its figure."""

    def figure(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in FIGURES:
            raise ValueError(f"{where}: unknown figure {name!r}; expected one of {sorted(FIGURES)}")
        return FIGURES[name]()

    return MARKER.sub(figure, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return substitute(markdown, page.file.src_uri)
