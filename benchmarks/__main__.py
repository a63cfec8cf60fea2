"""Run every benchmark in one process: ``python -m benchmarks``.

Sampling throughput (:mod:`benchmarks.bench_sampling`), then the full loop
(:mod:`benchmarks.bench_loop`); each pins torch to one thread while it measures.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported


def main() -> None:
    from benchmarks import bench_loop, bench_sampling

    print("== replay sampling ==")
    bench_sampling.run()
    print("\n== full loop ==")
    bench_loop.run()


if __name__ == "__main__":
    main()
