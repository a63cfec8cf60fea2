"""The ALF adapter's prioritized-replay row (:mod:`xpspec.adapters.alf_priority`): ALF's
``ReplayBuffer(prioritized_sampling=True)`` (snapshot 23aca492, run from a checkout) driven with
a replay scenario's priority spec, its masses updated by ``Algorithm._update_priority`` and its
loss weights computed by ``Algorithm._aggregate_loss``. The suite's way (a worker forking a
child per operation) for the recorded traces, and in this process with ALF's own methods
changed, to show that the recorded masses and weights are ALF's. Skipped when ALF is not on
the path."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

alf_adapter = pytest.importorskip("xpspec.adapters.alf")  # ModuleNotFoundError without ALF

from xpspec.adapters import alf_priority  # noqa: E402
from xpspec.conformance.catalog import CATALOG  # noqa: E402
from xpspec.conformance.checks.base import CheckFailure, Context  # noqa: E402
from xpspec.conformance.checks.registry import ALL_CHECKS  # noqa: E402
from xpspec.conformance.harness import connect  # noqa: E402
from xpspec.protocol.adapter import Unsupported  # noqa: E402
from xpspec.protocol.env_spec import EnvSpec  # noqa: E402
from xpspec.protocol.priority import PrioritySpec  # noqa: E402
from xpspec.protocol.sampling import SamplingSpec  # noqa: E402
from xpspec.protocol.scenario import ReplayScenario  # noqa: E402
from xpspec.protocol.schedule import FixedSchedule  # noqa: E402
from xpspec.protocol.trace import Trace  # noqa: E402

NEW_ITEMS = CATALOG["priority-new-items"]
assert isinstance(NEW_ITEMS, ReplayScenario)


@pytest.fixture(scope="module")
def adapter() -> Iterator[Any]:
    a = connect("alf")
    yield a
    a.close()


def _verify(name: str, scenario: ReplayScenario, trace: Trace) -> None:
    check = next(c for c in ALL_CHECKS if c.name == name)
    check.verify(scenario, trace, Context(None, lambda s: trace))


def _in_process(scenario: ReplayScenario) -> Trace:
    with tempfile.TemporaryDirectory(prefix="xpspec-alf-test-") as root:
        return alf_priority.run_prioritized(scenario, alf_adapter._learner_env, root)


def test_alf_stores_the_exponentiated_td_error_of_each_sampled_window(adapter: Any) -> None:
    # eps 1/100, alpha 3/5: Algorithm._update_priority stores (|td| + eps) ** alpha, and the
    # windows that become valid after each draw get ALF's initial priority
    trace = adapter.run_replay(NEW_ITEMS)
    for name in ("priority-update-sampled", "priority-new-at-max", "priority-eviction"):
        _verify(name, NEW_ITEMS, trace)
    masses = {m for e in trace.of_kind("priorities") for m in e.mass}
    assert any(abs(m - 1.51**0.6) < 1e-5 for m in masses)  # |td| 3/2 + eps, to the 3/5


def test_probabilities_are_masses_over_the_total_and_weights_the_batch_normalised(
    adapter: Any,
) -> None:
    trace = adapter.run_replay(NEW_ITEMS)
    _verify("priority-probabilities", NEW_ITEMS, trace)
    assert all(len(e.weight) == NEW_ITEMS.batch_size for e in trace.of_kind("prioritized"))
    # normalize_importance_weights_by_max divides by the batch's largest: the variant batch-max
    assert all(max(e.weight) == pytest.approx(1.0) for e in trace.of_kind("prioritized"))
    batch_max = replace(NEW_ITEMS, priority=replace(NEW_ITEMS.priority, weights="batch-max"))
    _verify("priority-weights", batch_max, trace)
    with pytest.raises(CheckFailure, match="importance weight"):
        _verify("priority-weights", NEW_ITEMS, trace)


def _two_windows(draws: str) -> ReplayScenario:
    # one env, two stored items of equal mass, batches of 2
    return ReplayScenario(
        EnvSpec(1, (FixedSchedule(5),)),
        capacity=4,
        fill_steps=2,
        batch_size=2,
        draws=40,
        priority=PrioritySpec(levels=1, draws=draws),  # type: ignore[arg-type]
    )


def test_the_scenarios_draws_pick_alfs_with_replacement_option(adapter: Any) -> None:
    # every window updated to the same priority (levels 1): the masses stay equal, so a
    # stratified batch of 2 holds both windows every time; independent draws repeat one
    def pairs(draws: str) -> list[tuple[Any, ...]]:
        trace = adapter.run_replay(_two_windows(draws))
        return [tuple(sorted(w[0] for w in e.windows)) for e in trace.of_kind("sampled")]

    stratified = pairs("stratified")
    assert set(stratified) == {((0, 0, 0), (0, 0, 1))}
    independent = pairs("independent")
    assert len(set(independent)) == 3  # both windows, or either one twice (p = 1/2 a batch)
    _verify(
        "priority-law", _two_windows("independent"), adapter.run_replay(_two_windows("independent"))
    )


def test_recorded_masses_are_what_alfs_update_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Perturbation: with ALF's ``Algorithm._update_priority`` made to store the TD error
    without ALF's exponent, the masses read from the sum tree change and the update check
    fails; the honest run passes it."""
    from alf.algorithms.algorithm import Algorithm

    honest = _in_process(NEW_ITEMS)
    _verify("priority-update-sampled", NEW_ITEMS, honest)

    def unexponentiated(self: Any, loss_info: Any, batch_info: Any, buffer: Any) -> None:
        buffer.update_priority(batch_info.env_ids, batch_info.positions, loss_info.priority)

    monkeypatch.setattr(Algorithm, "_update_priority", unexponentiated)
    perturbed = _in_process(NEW_ITEMS)
    assert list(perturbed.of_kind("priorities")) != list(honest.of_kind("priorities"))
    with pytest.raises(CheckFailure):
        _verify("priority-update-sampled", NEW_ITEMS, perturbed)


def test_recorded_weights_are_what_alfs_loss_aggregation_applies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Perturbation: with ALF's ``Algorithm._aggregate_loss`` leaving the loss unweighted,
    every recorded weight is 1 and the (batch-max) weight check fails."""
    from alf.algorithms.algorithm import Algorithm

    batch_max = replace(NEW_ITEMS, priority=replace(NEW_ITEMS.priority, weights="batch-max"))
    monkeypatch.setattr(Algorithm, "_aggregate_loss", lambda self, loss, *a, **k: loss)
    perturbed = _in_process(batch_max)
    assert {w for e in perturbed.of_kind("prioritized") for w in e.weight} == {1.0}
    with pytest.raises(CheckFailure, match="importance weight"):
        _verify("priority-weights", batch_max, perturbed)


def test_windows_that_must_not_cross_episodes_are_unsupported(adapter: Any) -> None:
    scenario = replace(NEW_ITEMS, sampling=SamplingSpec(boundary="forbid"))
    with pytest.raises(Unsupported, match="cross episode boundaries"):
        adapter.run_replay(scenario)


def test_a_first_draw_of_windows_of_two_from_an_empty_buffer_stops_the_run(adapter: Any) -> None:
    # ALF raises from its segment tree (test_alf_findings.py); the trace names it
    scenario = CATALOG["priority-warmup"]
    trace = adapter.run_replay(scenario)
    assert "segment_tree.py" in trace.header["stopped"]
    assert "Expected reduction dim" in trace.header["stopped"]
    assert trace.events == ()
    # with one item stored first, the same draws go through (ALF refuses the short ones itself)
    assert isinstance(scenario, ReplayScenario)
    started = replace(scenario, fill_steps=1, priority=replace(scenario.priority, eps=Fraction(0)))
    trace = adapter.run_replay(started)
    assert "stopped" not in trace.header
    _verify("priority-weights", started, trace)


def test_a_new_window_starts_at_the_largest_mass_stored(adapter: Any) -> None:
    # one ring of 3, one window updated per draw (alpha 1: masses are priorities): once the
    # windows of priority 2 are evicted, a new window gets ALF's initial priority, the largest
    # stored (3/2), not the largest ever assigned (2): the finding of test_alf_findings.py
    scenario = ReplayScenario(
        EnvSpec(1, (FixedSchedule(50),)),
        capacity=3,
        fill_steps=3,
        batch_size=1,
        draws=20,
        priority=PrioritySpec(add_steps=1, alpha=Fraction(1)),
    )
    trace = adapter.run_replay(scenario)
    _verify("priority-update-sampled", scenario, trace)
    _verify("priority-eviction", scenario, trace)
    with pytest.raises(CheckFailure, match="the largest priority assigned so far"):
        _verify("priority-new-at-max", scenario, trace)
