"""Replay sampling throughput: ``ReplayBuffer.sample`` against a minimal hand-written baseline.

Both sample from the same 100k-item buffer (16 envs x 6250 items; fields observation [3]
float32, action int64, reward float32, discount float32, step_type int64) in one process with
one intra-op thread. The baseline keeps one flat tensor per field, draws env and offset with
``torch.randint`` and gathers with one ``index_select`` per field: the floor a torch sampler
can reach. A third row samples right after an ``add_row``, as a trainer that writes every step
does (the write invalidates the sampler's per-write cache). Each configuration is timed in
windows of about half a second, interleaved, and the median over ``repeats`` windows is
reported.

Run: ``python -m benchmarks.bench_sampling``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from functools import partial

import torch

from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.step_type import StepType
from xpspec.refimpl.replay import ReplayBuffer

__all__ = ["run"]

NUM_ENVS = 16
CAPACITY = 6250
BATCH = 256
WINDOWS = (1, 8)
FIELDS: dict[str, tuple[tuple[int, ...], torch.dtype]] = {
    "observation": ((3,), torch.float32),
    "action": ((), torch.int64),
    "reward": ((), torch.float32),
    "discount": ((), torch.float32),
    "step_type": ((), torch.int64),
}


def _row(t: int) -> dict[str, torch.Tensor]:
    """Vector step ``t`` of 16 envs whose episodes last 50 steps."""
    env = torch.arange(NUM_ENVS, dtype=torch.float32)
    phase = t % 50
    step = StepType.FIRST if phase == 0 else (StepType.LAST if phase == 49 else StepType.MID)
    return {
        "observation": torch.stack(
            [env, torch.full_like(env, t // 50), torch.full_like(env, phase)], 1
        ),
        "action": torch.full((NUM_ENVS,), t % 4, dtype=torch.int64),
        "reward": torch.full((NUM_ENVS,), float(phase)),
        "discount": torch.full((NUM_ENVS,), 0.0 if step == StepType.LAST else 1.0),
        "step_type": torch.full((NUM_ENVS,), int(step), dtype=torch.int64),
    }


class _Baseline:
    """Flat ``[num_envs * capacity, ...]`` storage, full, uniform (env, offset) windows."""

    def __init__(self) -> None:
        self.rings = {
            name: torch.zeros((NUM_ENVS, CAPACITY, *shape), dtype=dtype)
            for name, (shape, dtype) in FIELDS.items()
        }
        self.flat = {
            name: ring.view(NUM_ENVS * CAPACITY, *ring.shape[2:])
            for name, ring in self.rings.items()
        }
        self.end = 0

    def add_row(self, row: dict[str, torch.Tensor]) -> None:
        slot = self.end % CAPACITY
        for name, value in row.items():
            self.rings[name][:, slot] = value
        self.end += 1

    def sample(
        self, batch: int, length: int, generator: torch.Generator
    ) -> dict[str, torch.Tensor]:
        size = min(self.end, CAPACITY)
        earliest = self.end - size
        env = torch.randint(0, NUM_ENVS, (batch, 1), generator=generator)
        start = torch.randint(0, size - length + 1, (batch, 1), generator=generator) + earliest
        rows = (env * CAPACITY + (start + torch.arange(length)) % CAPACITY).view(-1)
        return {
            name: flat.index_select(0, rows).view(batch, length, *flat.shape[1:])
            for name, flat in self.flat.items()
        }


def _write_then_sample(
    buffer: ReplayBuffer,
    row: dict[str, torch.Tensor],
    spec: SamplingSpec,
    generator: torch.Generator,
) -> object:
    buffer.add_row(row)
    return buffer.sample(BATCH, spec, generator)


def _rate(call: Callable[[], object], transitions: int, seconds: float) -> float:
    """Transitions per second of ``call`` over a window of about ``seconds``."""
    for _ in range(20):
        call()
    calls = 1
    while True:  # calibrate to a window of >= seconds / 4
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds / 4:
            break
        calls *= 2
    calls = max(1, int(calls * seconds / elapsed))
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    return transitions * calls / (time.perf_counter() - t0)


def run(repeats: int = 5, seconds: float = 0.5) -> list[dict[str, object]]:
    """Median transitions/s over ``repeats`` interleaved windows for each (impl, window) pair;
    prints a table with the ratio to the baseline."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        buffer = ReplayBuffer(NUM_ENVS, CAPACITY, FIELDS)
        baseline = _Baseline()
        for t in range(CAPACITY + 1000):  # full, with the ring wrapped
            row = _row(t)
            buffer.add_row(row)
            baseline.add_row(row)
        writer_row = _row(0)
        generator = torch.Generator().manual_seed(0)
        calls: dict[tuple[str, int], Callable[[], object]] = {}
        for length in WINDOWS:
            spec = SamplingSpec(window_length=length)
            calls[("baseline", length)] = partial(baseline.sample, BATCH, length, generator)
            calls[("refimpl", length)] = partial(buffer.sample, BATCH, spec, generator)
            calls[("refimpl after add_row", length)] = partial(
                _write_then_sample, buffer, writer_row, spec, generator
            )
        rates: dict[tuple[str, int], list[float]] = {key: [] for key in calls}
        for _ in range(repeats):
            for key, call in calls.items():
                rates[key].append(_rate(call, BATCH * key[1], seconds))
    finally:
        torch.set_num_threads(threads)
    results: list[dict[str, object]] = []
    for (impl, length), values in rates.items():
        median = statistics.median(values)
        ratio = median / statistics.median(rates[("baseline", length)])
        results.append(
            {
                "impl": impl,
                "batch": BATCH,
                "window_length": length,
                "transitions_per_s": median,
                "min": min(values),
                "max": max(values),
                "us_per_call": 1e6 * BATCH * length / median,
                "ratio_to_baseline": ratio,
            }
        )
        print(
            f"{impl:>22s} {BATCH}x{length}: {median / 1e6:6.2f}M transitions/s "
            f"[{min(values) / 1e6:.2f}-{max(values) / 1e6:.2f}M], "
            f"{1e6 * BATCH * length / median:6.1f} us/call, {ratio:.2f}x baseline"
        )
    return results


if __name__ == "__main__":
    run()
