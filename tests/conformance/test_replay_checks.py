"""The replay checks: refimpl passes every one of them on every replay scenario of the
catalogue, and each check fails on a sampler broken the way a real one plausibly is (and no
check fails that the breakage does not drag along)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
import torch

from tests.conformance.helpers import assert_breaks, failures
from tests.conformance.zoo import MUTANTS, MutantAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.replay import within_batch_dispersion
from xpspec.protocol.scenario import ReplayScenario
from xpspec.protocol.trace import Sampled, Trace
from xpspec.refimpl.adapter import RefimplAdapter


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
        if scenario.priority is not None:  # a uniform sampler's breakage (test_priority_checks)
            return trace
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
        if scenario.priority is not None:  # a uniform sampler's breakage (test_priority_checks)
            return trace
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
        if scenario.priority is not None:  # a uniform sampler's breakage (test_priority_checks)
            return trace
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
        if scenario.priority is not None:  # a uniform sampler's breakage (test_priority_checks)
            return trace
        draws = [
            Sampled(e.draw, tuple(e.windows[0] if i % 2 else w for i, w in enumerate(e.windows)))
            for e in trace.of_kind("sampled")
        ]
        return _with_draws(trace, draws)


class Unseeded(RefimplAdapter):
    """Returns each draw's windows in an order taken from the process-wide random state."""

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        trace = super().run_replay(scenario)
        if scenario.priority is not None:  # a uniform sampler's breakage (test_priority_checks)
            return trace
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
        {"replay-uniform"},
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


# -- replay.uniform-windows, joint law of a batch ---------------------------------------------
# replay-uniform's size: two envs of 8 items, windows of 3 (12 valid windows), 40 batches of 64.
_W, _B, _D = 12, 64, 40


def _independent(g: torch.Generator) -> list[list[int]]:
    return [torch.randint(0, _W, (_B,), generator=g).tolist() for _ in range(_D)]


def _without_replacement(g: torch.Generator) -> list[list[int]]:
    rounds = -(-_B // _W)
    return [
        torch.cat([torch.randperm(_W, generator=g) for _ in range(rounds)])[:_B].tolist()
        for _ in range(_D)
    ]


def _one_env(g: torch.Generator) -> list[list[int]]:
    half = _W // 2
    return [
        (
            int(torch.randint(0, 2, (1,), generator=g)) * half
            + torch.randint(0, half, (_B,), generator=g)
        ).tolist()
        for _ in range(_D)
    ]


def _sticky(rho: float) -> Any:
    def draw(g: torch.Generator) -> list[list[int]]:
        batches = []
        for _ in range(_D):
            fresh = torch.randint(0, _W, (_B,), generator=g).tolist()
            repeat = (torch.rand(_B, generator=g) < rho).tolist()
            batch = [fresh[0]]
            for i in range(1, _B):
                batch.append(batch[-1] if repeat[i] else fresh[i])
            batches.append(batch)
        return batches

    return draw


def _rejections(sampler: Any, runs: int) -> tuple[float, list[float]]:
    g = torch.Generator().manual_seed(0)
    zs = [within_batch_dispersion(sampler(g), _W) for _ in range(runs)]
    return sum(abs(z) > 5 for z in zs) / runs, zs


@pytest.mark.clause("replay.uniform-windows")
def test_joint_test_is_calibrated_under_independent_draws() -> None:
    # The false-alarm rate 6e-7 is too small to simulate; the z-scores of independent draws
    # must look standard normal and stay far from 5.
    rate, zs = _rejections(_independent, 400)
    mean = sum(zs) / len(zs)
    sd = (sum((z - mean) ** 2 for z in zs) / (len(zs) - 1)) ** 0.5
    assert rate == 0 and abs(mean) < 0.2 and 0.85 < sd < 1.15 and max(map(abs, zs)) < 4.5


@pytest.mark.clause("replay.uniform-windows")
@pytest.mark.parametrize(
    ("sampler", "runs", "power"),
    [
        pytest.param(_without_replacement, 50, 1.0, id="without-replacement"),
        pytest.param(_one_env, 50, 1.0, id="one-env-per-batch"),
        pytest.param(_sticky(0.25), 200, 0.97, id="repeat-previous-p0.25"),
    ],
)
def test_joint_test_power_stated_by_the_check(sampler: Any, runs: int, power: float) -> None:
    # The powers check_uniform's docstring states (repeat-previous: 0.995 measured over 400
    # runs, asserted with slack for 200).
    rate, _ = _rejections(sampler, runs)
    assert rate >= power


@pytest.mark.clause("replay.uniform-windows")
@pytest.mark.parametrize("name", ["sample-without-replacement", "one-env-per-batch"])
def test_joint_test_catches_what_the_marginal_test_cannot(name: str) -> None:
    # On replay-uniform both zoo mutants keep every window's count within 5 sd of N/W: only
    # the joint test tells them from independent draws.
    mutant = next(m for m in MUTANTS if m.name == name)
    trace = MutantAdapter(mutant).run_replay(CATALOG["replay-uniform"])
    starts = [[(w[0][0], w[0][1], w[0][2]) for w in d.windows] for d in trace.of_kind("sampled")]
    counts = Counter(s for batch in starts for s in batch)
    n = sum(counts.values())
    assert len(counts) == _W
    sd = (n * (1 / _W) * (1 - 1 / _W)) ** 0.5
    assert all(abs(c - n / _W) <= 5 * sd for c in counts.values())
    assert abs(within_batch_dispersion(starts, _W)) > 5
    reference = RefimplAdapter().run_replay(CATALOG["replay-uniform"])
    ref_starts = [[tuple(w[0]) for w in d.windows] for d in reference.of_kind("sampled")]
    assert abs(within_batch_dispersion(ref_starts, _W)) <= 5


class DrawsUniformWindows(RefimplAdapter):
    """A sampler that draws every valid window alike whatever distribution it is asked for."""

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        uniform = replace(scenario.sampling, distribution="uniform-windows")
        return super().run_replay(replace(scenario, sampling=uniform))


def _law_check_on_variant(adapter: RefimplAdapter, variant: str) -> Any:
    """The outcome of replay-uniform for ``adapter`` on replay-uniform's scenario as
    ``variant`` of ``replay.uniform-windows`` models it (refimpl run as the variant passes)."""
    from xpspec.conformance.checks import ALL_CHECKS
    from xpspec.conformance.engine import Session
    from xpspec.conformance.variants import variant_scenario

    check = next(c for c in ALL_CHECKS if c.name == "replay-uniform")
    model = variant_scenario("replay.uniform-windows", variant, CATALOG["replay-uniform"])
    assert model is not None and check.applies(model)
    assert Session(RefimplAdapter(), "refimpl").evaluate(check, "m", model).status == "pass"
    return Session(adapter, "x").evaluate(check, "m", model)


@pytest.mark.clause("replay.uniform-windows")
@pytest.mark.parametrize("variant", ["uniform-episodes", "uniform-episodes-forbid"])
def test_a_declared_distribution_variant_is_held_to_its_law(variant: str) -> None:
    # refimpl run as the variant passes the law check on the variant's scenario; a sampler
    # that ignores the variant's law (uniform over windows instead of over episodes first)
    # fails it, where before only the windows' validity was checked.
    outcome = _law_check_on_variant(DrawsUniformWindows(), variant)
    assert outcome.status == "fail" and "uniform-episodes" in outcome.message


class HalfBatches(RefimplAdapter):
    """Draws half the windows a batch asks for, from the law it is asked for."""

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        trace = super().run_replay(scenario)
        if scenario.priority is not None:  # a uniform sampler's breakage (test_priority_checks)
            return trace
        half = [Sampled(e.draw, e.windows[: len(e.windows) // 2]) for e in trace.of_kind("sampled")]
        return _with_draws(trace, half)


@pytest.mark.clause("replay.uniform-windows")
@pytest.mark.parametrize("variant", ["env-balanced", "uniform-episodes"])
def test_a_short_batch_fails_the_law_check_under_every_distribution(variant: str) -> None:
    # The law check is the only check of a variant's draws (the exact windows check does not
    # run on variant models): a draw of fewer windows than the batch asks for, while valid
    # windows exist, fails it, so a sampler that draws nothing cannot pass it vacuously.
    outcome = _law_check_on_variant(HalfBatches(), variant)
    assert outcome.status == "fail" and "windows in draw 0" in outcome.message, outcome.message


@pytest.mark.clause("replay.uniform-windows")
def test_env_balanced_owes_no_batch_while_an_env_holds_no_valid_window() -> None:
    # replay.no-window: under env-balanced a full batch is owed only when every env holds a
    # valid window; refimpl then draws nothing, and the law check must not call that short.
    from xpspec.conformance.checks import ALL_CHECKS
    from xpspec.conformance.engine import Session
    from xpspec.protocol.env_spec import EnvSpec
    from xpspec.protocol.sampling import SamplingSpec
    from xpspec.protocol.schedule import FixedSchedule

    scenario = ReplayScenario(
        EnvSpec(num_envs=2, schedules=(FixedSchedule(9), FixedSchedule(1))),
        capacity=8,
        fill_steps=6,
        batch_size=8,
        draws=3,
        sampling=SamplingSpec(window_length=3, boundary="forbid", distribution="env-balanced"),
    )
    trace = RefimplAdapter().run_replay(scenario)
    assert all(not e.windows for e in trace.of_kind("sampled"))  # env 1 has no valid window
    check = next(c for c in ALL_CHECKS if c.name == "replay-uniform")
    assert check.applies(scenario)
    assert Session(RefimplAdapter(), "refimpl").evaluate(check, "s", scenario).status == "pass"
