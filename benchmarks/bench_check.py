"""``xpspec check`` on long traces: peak memory against trace length, and time against the time
the reference trainer takes to produce the trace.

Two traces of :mod:`benchmarks.trace_gen`'s shape, ``N`` and ``5 N`` iterations (the same
envs, buffer and events per iteration), are generated, then each is checked by ``xpspec check``
in a process of its own, ``repeats`` times, alternating; the peak resident memory of each
process (its own ``VmHWM``) and its time are recorded, and medians compared. In each repeat
the reference trainer also produces each trace again (a recording run, as
:func:`~benchmarks.trace_gen.generate` times it), so that the time ratio compares medians
taken in the same run. ``--clock cpu`` times both by CPU time (the check process's user and
system time; the producing run's process time), which the load of a shared machine disturbs
less than wall time. The
check reads the trace from its file and runs the reference trainer for the exact comparisons,
the run handing its events to the checks as it makes them (nothing written and read back);
the checks run together, sharing their passes over the trace and the reference run
(:mod:`xpspec.conformance.fused`).

Targets (issue 15): the 5x longer trace peaks at most 1.5x the memory; a whole check costs at
most 1.5x the time the reference trainer takes to produce the same trace.

Run: ``python -m benchmarks.bench_check [--iterations N] [--repeats R] [--clock wall|cpu]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import trace_gen
from xpspec.refimpl.trainer import Trainer

__all__ = ["MAX_MEMORY_RATIO", "MAX_TIME_RATIO", "run"]

MAX_MEMORY_RATIO = 1.5
MAX_TIME_RATIO = 1.5
LONGER = 5


_CHECK = """
import sys
from xpspec.conformance.cli import main
code = main(["check", *sys.argv[1:]])
with open("/proc/self/status") as status:
    peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
print(f"xpspec-bench peak {peak} kB", file=sys.stderr)
sys.exit(code)
"""
"""``xpspec check`` run in a process that reports its own peak resident memory (``VmHWM`` of
its own address space: ``ru_maxrss`` would count the benchmark's own, inherited at exec)."""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _check(trace: Path, clock: str = "wall") -> tuple[float, float]:
    """Seconds (by ``clock``) and peak resident MB of ``xpspec check`` on ``trace``."""
    command = [sys.executable, "-c", _CHECK, str(trace_gen.scenario_path(trace)), str(trace)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    start, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start if clock == "wall" else _children_cpu() - cpu
    peaks = [line.split()[2] for line in done.stderr.splitlines() if "xpspec-bench peak" in line]
    if done.returncode != 0 or not peaks:
        raise RuntimeError(
            f"xpspec check {trace.name} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return elapsed, int(peaks[-1]) / 1024


def _produce(iterations: int, clock: str = "wall") -> float:
    """Seconds (by ``clock``) the reference trainer takes to produce the trace of
    ``iterations`` iterations (a recording run, as :func:`~benchmarks.trace_gen.generate`
    times it)."""
    sc = trace_gen.scenario(16, iterations)
    timer = time.perf_counter if clock == "wall" else time.process_time
    start = timer()
    Trainer(sc.env, sc.trainer, sc.preprocess, sc.sampling, sc.seed, record=True).run()
    return timer() - start


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def run(iterations: int = 4_000, repeats: int = 3, clock: str = "wall") -> dict[str, float]:
    """Print the table and the targets; return the figures."""
    with tempfile.TemporaryDirectory(prefix="xpspec-check-") as tmp:
        lengths = {"1x": iterations, f"{LONGER}x": LONGER * iterations}
        paths = {name: Path(tmp) / f"{name}.jsonl" for name in lengths}
        for name, n in lengths.items():
            trace_gen.generate(paths[name], 16, n)
        times: dict[str, list[float]] = {name: [] for name in lengths}
        peaks: dict[str, list[float]] = {name: [] for name in lengths}
        producing: dict[str, list[float]] = {name: [] for name in lengths}
        for repeat in range(repeats):
            for name in lengths if repeat % 2 == 0 else reversed(list(lengths)):
                elapsed, peak = _check(paths[name], clock)
                times[name].append(elapsed)
                peaks[name].append(peak)
                producing[name].append(_produce(lengths[name], clock))
        produced = {name: statistics.median(producing[name]) for name in lengths}
        sizes = {name: paths[name].stat().st_size / 1e6 for name in lengths}
    print(
        f"xpspec check, median of {repeats} runs each (B = 16, trace_gen's shape), "
        f"{clock} time, load average {os.getloadavg()[0]:.1f}"
    )
    for name, n in lengths.items():
        t, m = statistics.median(times[name]), statistics.median(peaks[name])
        print(
            f"  {n:>7} iterations ({sizes[name]:6.1f} MB): check {t:7.1f} s, peak {m:6.0f} MB; "
            f"produced by refimpl in {produced[name]:.1f} s ({t / produced[name]:.1f}x)"
        )
    memory = statistics.median(peaks[f"{LONGER}x"]) / statistics.median(peaks["1x"])
    slow = statistics.median(times[f"{LONGER}x"]) / produced[f"{LONGER}x"]
    print(
        f"  peak memory {LONGER}x / 1x: {memory:.2f} (target <= {MAX_MEMORY_RATIO}: "
        f"{_verdict(memory <= MAX_MEMORY_RATIO)})"
    )
    print(
        f"  check / produce on the {LONGER}x trace: {slow:.1f}x (target <= {MAX_TIME_RATIO}: "
        f"{_verdict(slow <= MAX_TIME_RATIO)})"
    )
    return {"memory_ratio": memory, "time_ratio": slow}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=4_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    run(args.iterations, args.repeats, args.clock)


if __name__ == "__main__":
    main()
