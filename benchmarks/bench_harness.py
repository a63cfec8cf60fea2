"""What process isolation costs: the ``ci`` suite against refimpl with the adapter in a
worker process (the default) against the same suite with the adapter imported inline.

Each repeat runs ``xpspec run`` twice as whole processes, one after the other in alternating
order (so drift on a shared machine hits both alike), and the ratio of the medians of the
wall times is reported with its target (at most 1.25). The process run pays for starting the
worker (it imports torch and the reference trainer while the suite imports its own), one
round trip per operation, and encoding every trace on one side and decoding it on the other.

Run: ``python -m benchmarks.bench_harness [--repeats N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

__all__ = ["TARGET", "run"]

TARGET = 1.25
"""The process-isolated suite may take at most this many times the inline one."""


def _wall(isolation: str, report: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "xpspec.conformance",
            "run",
            "--isolation",
            isolation,
            "--report",
            report,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"xpspec run --isolation {isolation} failed: {done.stderr[-2000:]}")
    return elapsed


def run(repeats: int = 5) -> float:
    """Print the medians and their ratio; return the ratio."""
    times: dict[str, list[float]] = {"process": [], "inline": []}
    with tempfile.TemporaryDirectory(prefix="xpspec-bench-") as tmp:
        for repeat in range(repeats):
            order = ("process", "inline") if repeat % 2 == 0 else ("inline", "process")
            for isolation in order:
                times[isolation].append(_wall(isolation, os.path.join(tmp, f"{isolation}.jsonl")))
    medians = {k: statistics.median(v) for k, v in times.items()}
    for isolation, values in times.items():
        print(
            f"  ci suite, isolation {isolation:<8} median {medians[isolation]:6.2f} s "
            f"[{min(values):.2f}-{max(values):.2f}] over {repeats} runs"
        )
    ratio = medians["process"] / medians["inline"]
    verdict = "ok" if ratio <= TARGET else "OVER TARGET"
    print(f"  process / inline: {ratio:.2f}x (target <= {TARGET}x: {verdict})")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    run(parser.parse_args().repeats)


if __name__ == "__main__":
    main()
