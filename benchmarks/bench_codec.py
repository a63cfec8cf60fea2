"""The trace codec on a large generated trace: reading against writing, and what a read trace
holds in memory.

The trace is :mod:`benchmarks.trace_gen`'s (the reference trainer, ``B`` envs, one vector
step and one train call per iteration), written to a temporary file unless ``--trace`` names
one generated before. Each repeat times, one after the other in alternating order (so drift
on a shared machine hits all alike), ``Trace.to_jsonl`` of the read trace (writing),
``Trace.from_jsonl`` of its text (reading: msgspec's decoders when installed) and the same
read by the compiled decoder alone (``read_jsonl(..., fast=False)``: what reading costs with
the standard library only). Medians over the repeats; ratios of medians from this one run.
Memory is what ``tracemalloc`` sees held by the read trace (events, their tuples and
values), per env step of the trace.

Targets (issue 15): reading at least as fast as writing (read / write <= 1), decoding at least
50 MB/s, at most 300 bytes per env step held.

``--clock cpu`` times by the process's CPU time instead of the elapsed time: on a shared,
loaded machine it leaves out the waits for a core.

Run: ``python -m benchmarks.bench_codec [--iterations N] [--repeats R] [--trace PATH]
[--clock wall|cpu]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from benchmarks import trace_gen
from xpspec.protocol.event_reader import accelerated, paused_gc, read_jsonl
from xpspec.protocol.trace import Trace

__all__ = ["MAX_BYTES_PER_STEP", "MAX_READ_OVER_WRITE", "MIN_MB_PER_S", "run"]

MAX_READ_OVER_WRITE = 1.0
MIN_MB_PER_S = 50.0
MAX_BYTES_PER_STEP = 300.0
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _read_stdlib(text: str) -> Trace:
    with paused_gc():
        header, events = read_jsonl(text.splitlines(), fast=False)
        return Trace(tuple(events), header)


def _held(read: Callable[[str], Trace], text: str) -> tuple[int, int]:
    """Bytes held by the trace ``read`` makes of ``text``, and its env steps."""
    gc.collect()
    tracemalloc.start()
    try:
        trace = read(text)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    steps = sum(len(e.env) for e in trace.of_kind("env_step"))
    return held, steps


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def run(
    iterations: int = 20_000,
    repeats: int = 5,
    trace: Path | None = None,
    num_envs: int = 16,
    clock: str = "wall",
) -> dict[str, float]:
    """Print the table and the targets; return the figures (``clock``: a key of
    :data:`CLOCKS`)."""
    now = CLOCKS[clock]
    with tempfile.TemporaryDirectory(prefix="xpspec-codec-") as tmp:
        path = trace or Path(tmp) / "trace.jsonl"
        if trace is None:
            trace_gen.generate(path, num_envs, iterations)
        text = path.read_text(encoding="utf-8")
    size = len(text.encode())
    decoded = Trace.from_jsonl(text)
    if decoded.to_jsonl() != text:
        raise RuntimeError("the trace read back does not write the same bytes")
    calls: dict[str, Callable[[], object]] = {
        "write": decoded.to_jsonl,
        "read": lambda: Trace.from_jsonl(text),
        "read, standard library only": lambda: _read_stdlib(text),
    }
    times: dict[str, list[float]] = {name: [] for name in calls}
    for repeat in range(repeats):
        order = list(calls) if repeat % 2 == 0 else list(reversed(calls))
        for name in order:
            gc.collect()
            start = now()
            calls[name]()
            times[name].append(now() - start)
    medians = {name: statistics.median(values) for name, values in times.items()}
    held, steps = _held(Trace.from_jsonl, text)
    held_stdlib, _ = _held(_read_stdlib, text)
    print(
        f"trace: {path.name if trace else 'generated'}, {size / 1e6:.1f} MB, "
        f"{len(decoded.events)} events, {steps} env steps; msgspec "
        f"{'installed' if accelerated() else 'not installed'}; {clock} clock; median [min-max] "
        f"of {repeats}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    for name, values in times.items():
        print(
            f"  {name:<28} {medians[name]:7.3f} s [{min(values):.3f}-{max(values):.3f}]"
            f"  {size / 1e6 / medians[name]:7.1f} MB/s"
        )
    ratio = medians["read"] / medians["write"]
    rate = size / 1e6 / medians["read"]
    per_step, per_step_stdlib = held / steps, held_stdlib / steps
    before = medians["read, standard library only"] / medians["read"]
    print(
        f"  read / write: {ratio:.2f}x (target <= {MAX_READ_OVER_WRITE:g}x: "
        f"{_verdict(ratio <= MAX_READ_OVER_WRITE)}); standard library only "
        f"{medians['read, standard library only'] / medians['write']:.2f}x, "
        f"{before:.1f}x slower than read"
    )
    print(
        f"  decoding: {rate:.0f} MB/s (target >= {MIN_MB_PER_S:g}: {_verdict(rate >= MIN_MB_PER_S)})"
    )
    print(
        f"  held by the read trace: {per_step:.0f} bytes per env step (target <= "
        f"{MAX_BYTES_PER_STEP:g}: {_verdict(per_step <= MAX_BYTES_PER_STEP)}); "
        f"standard library only {per_step_stdlib:.0f}"
    )
    return {
        "read_over_write": ratio,
        "mb_per_s": rate,
        "bytes_per_env_step": per_step,
        "bytes_per_env_step_stdlib": per_step_stdlib,
        **{f"{name}_s": value for name, value in medians.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20_000)
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--trace", type=Path, default=None, help="a trace_gen trace to read")
    parser.add_argument(
        "--clock", choices=sorted(CLOCKS), default="wall", help="what a timing's time is"
    )
    args = parser.parse_args()
    run(args.iterations, args.repeats, args.trace, args.envs, args.clock)


if __name__ == "__main__":
    main()
