"""Large traces for the benchmarks, reproducible from their arguments.

A trace of the reference trainer on one scenario shape, as long as asked: ``B`` toy envs of
``RandomSchedule(5, 50)`` episodes, one vector step per iteration (``unroll_length = 1``), one
train call per iteration drawing ``WINDOWS`` windows of ``WINDOW`` items from rings of
``CAPACITY`` items per env, identity preprocessing, seed 0. The length is the number of
iterations; everything else stays, so a longer trace has the same shape (the same events per
iteration and the same buffer), which is what a memory comparison across lengths needs. The
default, 100,000 iterations of 16 envs, is the issue's "B = 16, 100k-step" trace; the suite's
resource budget (:mod:`xpspec.protocol.budget`) admits it (1.6M env steps, 1.6M sampled items).

Run: ``python -m benchmarks.trace_gen OUT.jsonl [--envs B] [--iterations N]``; it writes
``OUT.jsonl`` and the scenario beside it (``OUT.scenario.json``), the pair ``xpspec check``
takes.
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction
from pathlib import Path

from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import TrainerScenario, scenario_to_json
from xpspec.protocol.schedule import RandomSchedule
from xpspec.refimpl.trainer import Trainer

__all__ = ["CAPACITY", "WINDOW", "WINDOWS", "generate", "scenario", "scenario_path"]

WINDOWS = 8
"""Windows drawn per train call: half a window per env step at ``B = 16``."""
WINDOW = 2
CAPACITY = 1024


def scenario(num_envs: int = 16, iterations: int = 100_000) -> TrainerScenario:
    """The scenario of a generated trace (module docstring)."""
    return TrainerScenario(
        EnvSpec(num_envs, (RandomSchedule(5, 50),)),
        TrainerConfig(
            unroll_length=Fraction(1),
            num_iterations=iterations,
            mini_batch_size=WINDOWS,
            mini_batch_length=WINDOW,
            capacity=CAPACITY,
        ),
    )


def scenario_path(trace: Path) -> Path:
    """Where the scenario of the trace file ``trace`` is written."""
    return trace.with_name(trace.name.removesuffix(".jsonl") + ".scenario.json")


def generate(out: Path, num_envs: int = 16, iterations: int = 100_000) -> float:
    """Write the trace of ``scenario(num_envs, iterations)`` to ``out`` and its scenario
    beside it; return the seconds the reference trainer took to run and record it."""
    sc = scenario(num_envs, iterations)
    start = time.perf_counter()
    result = Trainer(sc.env, sc.trainer, sc.preprocess, sc.sampling, sc.seed, record=True).run()
    elapsed = time.perf_counter() - start
    out.write_text(result.trace.to_jsonl(), encoding="utf-8")
    scenario_path(out).write_text(scenario_to_json(sc) + "\n", encoding="utf-8")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=100_000)
    args = parser.parse_args()
    seconds = generate(args.out, args.envs, args.iterations)
    size = args.out.stat().st_size
    print(f"wrote {args.out} ({size / 1e6:.1f} MB) in {seconds:.1f} s of training")


if __name__ == "__main__":
    main()
