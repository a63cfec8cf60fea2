"""The TorchRL adapter's prioritized-replay row (:mod:`xpspec.adapters.torchrl_priority`):
TorchRL 0.14.1's ``PrioritizedSampler`` over the replay row's storage, its segment trees the
extension ``torchrl._torchrl`` built for this torch by ``tools/torchrl_extension.py``. First
what TorchRL does alone, then the row's traces against the checks, and in this process with
TorchRL's own methods changed, to show that the recorded masses and weights are TorchRL's.
Skipped without TorchRL."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

pytest.importorskip("torchrl")

import torch
from tensordict import TensorDict
from torchrl.data import LazyTensorStorage, PrioritizedSampler, ReplayBuffer

from xpspec.adapters.torchrl import TorchRLAdapter
from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.registry import ALL_CHECKS
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.priority import PrioritySpec
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import ReplayScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace

ADAPTER = TorchRLAdapter()
NEW_ITEMS = CATALOG["priority-new-items"]
assert isinstance(NEW_ITEMS, ReplayScenario)
MASS_CHECKS = ("priority-update-sampled", "priority-new-at-max", "priority-eviction")


def _verify(name: str, scenario: ReplayScenario, trace: Trace) -> None:
    check = next(c for c in ALL_CHECKS if c.name == name)
    check.verify(scenario, trace, Context(lambda s: trace, lambda s: trace))


def test_the_prioritized_sampler_runs_on_the_extension_built_for_this_torch() -> None:
    """TorchRL alone. The wheel's ``torchrl._torchrl`` was built against another torch and does
    not load with torch 2.13.0 (ImportError: undefined symbol); the sessions build it from the
    sources the wheel ships. Here it loads and PrioritizedSampler does what TorchRL documents
    (data/replay_buffers/samplers/prioritized.py) and the row relies on: a written item gets
    the largest raw priority given so far (1.0 before any) as ``(p + eps) ** alpha``, an update
    stores ``(p + eps) ** alpha``, a drawn item's weight is ``(leaf / p_min) ** -beta``."""
    import torchrl._torchrl as extension
    from torchrl.data.replay_buffers.samplers import prioritized

    assert torch.__version__.split("+")[0] == "2.13.0"
    assert prioritized.SumSegmentTreeFp32 is extension.SumSegmentTreeFp32
    beta = 0.4
    sampler = PrioritizedSampler(max_capacity=4, alpha=0.5, beta=beta, eps=0.0)
    buffer = ReplayBuffer(
        storage=LazyTensorStorage(4), sampler=sampler, generator=torch.Generator().manual_seed(0)
    )
    buffer.extend(TensorDict(x=torch.arange(2), batch_size=[2]))
    assert [sampler._sum_tree[i] for i in range(2)] == [1.0, 1.0]
    buffer.update_priority(torch.tensor([0]), torch.tensor([4.0]))
    buffer.extend(TensorDict(x=torch.tensor([2]), batch_size=[1]))
    leaves = [sampler._sum_tree[i] for i in range(3)]
    assert leaves == pytest.approx([2.0, 1.0, 2.0])  # 4 ** 0.5, untouched 1, new at max 4
    _, info = buffer.sample(64, return_info=True)
    drawn = info["index"].tolist()
    assert set(drawn) == {0, 1, 2}
    assert info["priority_weight"].tolist() == pytest.approx([leaves[i] ** -beta for i in drawn])


def test_torchrl_stores_the_exponentiated_priority_of_each_sampled_window() -> None:
    # eps 1/100, alpha 3/5: the row hands TorchRL |td| + eps, which it stores to the alpha
    trace = ADAPTER.run_replay(NEW_ITEMS)
    for name in (*MASS_CHECKS, "priority-probabilities", "priority-weights"):
        _verify(name, NEW_ITEMS, trace)
    masses = {round(m, 5) for e in trace.of_kind("priorities") for m in e.mass}
    assert round(1.51**0.6, 5) in masses  # |td| 3/2 + eps, to the 3/5
    assert len(list(trace.of_kind("prioritized"))) == NEW_ITEMS.draws
    # TorchRL's one normalisation is by the buffer's smallest mass: a batch of 16 from 12
    # windows need not hold the lightest, so some batch's largest weight is below 1
    assert min(max(e.weight) for e in trace.of_kind("prioritized")) < 1.0


def test_a_batch_max_scenario_gets_torchrls_buffer_wide_weights() -> None:
    """TorchRL has one normalisation, by the smallest mass in the storage (``p_min`` from its
    min tree, PrioritizedSampler.sample): asked for batch-max weights, the weights it returns
    are still the buffer-wide ones, and the weight check of the batch-max scenario fails (the
    deviation in torchrl.expectations.toml)."""
    batch_max = replace(NEW_ITEMS, priority=replace(NEW_ITEMS.priority, weights="batch-max"))
    trace = ADAPTER.run_replay(batch_max)
    _verify("priority-weights", NEW_ITEMS, trace)  # the buffer-max law holds
    with pytest.raises(CheckFailure, match="importance weight"):
        _verify("priority-weights", batch_max, trace)


def test_a_draw_from_an_empty_storage_draws_nothing() -> None:
    scenario = ReplayScenario(
        EnvSpec(1, (FixedSchedule(3),)),
        capacity=4,
        fill_steps=0,
        batch_size=4,
        draws=3,
        priority=PrioritySpec(add_steps=1),
    )
    trace = ADAPTER.run_replay(scenario)
    sampled = [e.windows for e in trace.of_kind("sampled")]
    assert sampled[0] == () and all(len(w) == 4 for w in sampled[1:])
    for name in MASS_CHECKS:
        _verify(name, scenario, trace)


def _unexponentiate(monkeypatch: pytest.MonkeyPatch) -> None:
    """PrioritizedSampler.update_priority (PrioritizedSliceSampler's too) made to store the
    priority without TorchRL's exponent."""
    original = PrioritizedSampler.update_priority

    def unexponentiated(self: Any, index: Any, priority: Any, **kwargs: Any) -> None:
        alpha = self._alpha
        self._alpha = 1.0
        try:
            original(self, index, priority, **kwargs)
        finally:
            self._alpha = alpha

    monkeypatch.setattr(PrioritizedSampler, "update_priority", unexponentiated)


def test_recorded_masses_are_what_torchrls_update_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Perturbation: with PrioritizedSampler.update_priority storing the priority without
    TorchRL's exponent, the masses read from the sum tree change and the update check fails."""
    honest = ADAPTER.run_replay(NEW_ITEMS)
    _unexponentiate(monkeypatch)
    perturbed = ADAPTER.run_replay(NEW_ITEMS)
    assert list(perturbed.of_kind("priorities")) != list(honest.of_kind("priorities"))
    with pytest.raises(CheckFailure):
        _verify("priority-update-sampled", NEW_ITEMS, perturbed)


def test_recorded_weights_are_what_torchrls_sampler_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Perturbation: with PrioritizedSampler.sample returning weights of 1, the recorded
    weights are 1 and the weight check fails."""
    original = PrioritizedSampler.sample

    def unweighted(self: Any, storage: Any, batch_size: int) -> Any:
        index, info = original(self, storage, batch_size)
        return index, {**info, "priority_weight": torch.ones_like(info["priority_weight"])}

    monkeypatch.setattr(PrioritizedSampler, "sample", unweighted)
    perturbed = ADAPTER.run_replay(NEW_ITEMS)
    assert {w for e in perturbed.of_kind("prioritized") for w in e.weight} == {1.0}
    with pytest.raises(CheckFailure, match="importance weight"):
        _verify("priority-weights", NEW_ITEMS, perturbed)


def test_windows_that_may_cross_episodes_are_unsupported() -> None:
    with pytest.raises(Unsupported, match="within one trajectory"):
        ADAPTER.run_replay(CATALOG["priority-windows"])  # type: ignore[arg-type]


FORBID = replace(
    CATALOG["priority-windows"],  # type: ignore[type-var]
    sampling=SamplingSpec(window_length=3, boundary="forbid"),
)


def test_prioritized_slices_are_windows_within_an_episode_with_torchrls_masses() -> None:
    """PrioritizedSliceSampler on priority-windows with forbid: before the rings wrap, every
    drawn window is 3 consecutive items of one episode, its probability is its start's leaf
    over the scanned total, and the masses TorchRL reports pass the update check (the
    failures after the wrap and on new windows are the findings in the expectations)."""
    trace = ADAPTER.run_replay(FORBID)
    for e in trace.of_kind("sampled"):
        if e.draw < 2:  # the rings of 7 wrap at the 8th stored step (draw 3)
            assert e.windows
            for w in e.windows:
                assert all(i is not None for i in w)
                assert [(i.env, i.episode) for i in w] == [(w[0].env, w[0].episode)] * 3
                assert [i.t for i in w] == [w[0].t, w[0].t + 1, w[0].t + 2]
    for name in ("priority-update-sampled", "priority-probabilities"):
        _verify(name, FORBID, trace)


def test_recorded_slice_masses_are_what_torchrls_update_stores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Perturbation of the slice path: with the update storing unexponentiated priorities, the
    masses read where PrioritizedSliceSampler hands its tree to PrioritizedSampler.sample
    change and the update check fails."""
    honest = ADAPTER.run_replay(FORBID)
    _unexponentiate(monkeypatch)
    perturbed = ADAPTER.run_replay(FORBID)
    assert list(perturbed.of_kind("priorities")) != list(honest.of_kind("priorities"))
    with pytest.raises(CheckFailure):
        _verify("priority-update-sampled", FORBID, perturbed)
