"""Run every benchmark in one process: ``python -m benchmarks``.

Sampling throughput (:mod:`benchmarks.bench_sampling`), the full loop
(:mod:`benchmarks.bench_loop`), and the cost of process isolation
(:mod:`benchmarks.bench_harness`); each pins torch to one thread while it measures.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported


def main() -> None:
    from benchmarks import bench_harness, bench_loop, bench_sampling

    print("== replay sampling ==")
    bench_sampling.run()
    print("\n== full loop ==")
    bench_loop.run()
    print("\n== process isolation ==")
    bench_harness.run()


if __name__ == "__main__":
    main()
