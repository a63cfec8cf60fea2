"""The replay checks: refimpl passes every one of them on every replay scenario of the
catalogue, and each check fails on a sampler broken the way a real one plausibly is (and no
check fails that the breakage does not drag along)."""

from __future__ import annotations

import pytest
import torch

from adapters.refimpl import RefimplAdapter
from conformance.catalog import CATALOG
from conformance.scenario import ReplayScenario
from refimpl.trace import Sampled, Trace
from tests.conformance.helpers import assert_breaks, failures


def _failures(adapter: RefimplAdapter) -> dict[str, list[str]]:
    return failures(adapter, "replay")


def _with_draws(trace: Trace, draws: list[Sampled]) -> Trace:
    kept = tuple(e for e in trace.events if e.kind != "sampled")
    return Trace(kept + tuple(draws), trace.header)


def test_reference_passes_every_replay_check() -> None:
    assert _failures(RefimplAdapter()) == {}


def test_the_catalogue_has_draws_with_and_without_a_valid_window() -> None:
    empty = {
        name: not any(e.windows for e in RefimplAdapter().run_replay(s).of_kind("sampled"))
        for name, s in CATALOG.items()
        if s.kind == "replay"
    }
    assert empty["replay-empty"] and empty["replay-too-short"]
    assert not empty["replay-uniform"]


class UninitialisedSlots(RefimplAdapter):
    """Asked for windows the buffer cannot give, returns windows of zeroed slots, which decode
    to item (0, 0, 0) (Flashbax 0.1.3 sampling before can_sample)."""

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        trace = super().run_replay(scenario)
        zeros = ((0, 0, 0),) * scenario.sampling.window_length
        draws = [
            e if e.windows else Sampled(e.draw, (zeros,) * scenario.batch_size)
            for e in trace.of_kind("sampled")
        ]
        return _with_draws(trace, draws)


class GatesOnBatchItems(RefimplAdapter):
    """Returns nothing while the buffer holds fewer items than one batch of windows covers
    (batch_size x window_length), though valid windows exist: a mistaken "enough data" gate."""

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        trace = super().run_replay(scenario)
        counts = [0] * scenario.env.num_envs
        for e in trace.of_kind("store"):
            for env in e.env:
                counts[env] += 1
        held = sum(min(c, scenario.capacity) for c in counts)
        short = held < scenario.batch_size * scenario.sampling.window_length
        draws = [Sampled(e.draw, ()) if short else e for e in trace.of_kind("sampled")]
        return _with_draws(trace, draws)


class PastTheNewestWrite(RefimplAdapter):
    """Every window shifted one step later, so the newest valid window reaches one step past
    the newest write (items that exist in the env but were never stored)."""

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        trace = super().run_replay(scenario)
        draws = [
            Sampled(e.draw, tuple(tuple(_next(scenario, i) for i in w) for w in e.windows))
            for e in trace.of_kind("sampled")
        ]
        return _with_draws(trace, draws)


def _next(
    scenario: ReplayScenario, item: tuple[int, int, int] | None
) -> tuple[int, int, int] | None:
    if item is None:
        return None
    env, episode, t = item
    length = scenario.env.episode(scenario.seed, env, episode).length
    return (env, episode, t + 1) if t < length else (env, episode + 1, 0)


class FirstWindowTwice(RefimplAdapter):
    """Every other window replaced by the first window of the batch: a sampler whose draws
    are not independent."""

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        trace = super().run_replay(scenario)
        draws = [
            Sampled(e.draw, tuple(e.windows[0] if i % 2 else w for i, w in enumerate(e.windows)))
            for e in trace.of_kind("sampled")
        ]
        return _with_draws(trace, draws)


class Unseeded(RefimplAdapter):
    """Returns each draw's windows in an order taken from the process-wide random state."""

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        trace = super().run_replay(scenario)
        draws = [
            Sampled(e.draw, tuple(e.windows[i] for i in torch.randperm(len(e.windows)).tolist()))
            for e in trace.of_kind("sampled")
        ]
        return _with_draws(trace, draws)


BROKEN = [
    pytest.param(
        UninitialisedSlots,
        "replay-no-window",
        {"replay-windows", "replay-uniform"},
        marks=pytest.mark.clause("replay.no-window"),
        id="uninitialised-slots",
    ),
    pytest.param(
        GatesOnBatchItems,
        "replay-no-window",
        set(),
        marks=pytest.mark.clause("replay.no-window"),
        id="gates-on-batch-items",
    ),
    pytest.param(
        PastTheNewestWrite,
        "replay-windows",
        {"replay-uniform"},
        marks=pytest.mark.clause("replay.window-validity"),
        id="past-the-newest-write",
    ),
    pytest.param(
        FirstWindowTwice,
        "replay-uniform",
        set(),
        marks=pytest.mark.clause("replay.uniform-windows"),
        id="first-window-twice",
    ),
    pytest.param(
        Unseeded,
        "deterministic-replay",
        set(),
        marks=pytest.mark.clause("trace.deterministic"),
        id="unseeded",
    ),
]


@pytest.mark.parametrize(("adapter", "breaks", "also"), BROKEN)
def test_broken_sampler_fails_its_check(
    adapter: type[RefimplAdapter], breaks: str, also: set[str]
) -> None:
    assert_breaks(adapter(), "replay", breaks, also)
