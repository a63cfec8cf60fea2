"""The RLlib adapter's loss-mask row: DQN's trainer windows of two or more items are its padded
sequences, and each window's loss mask is the ``LOSS_MASK`` RLlib 2.60.0's DQN loss received
(clause ``timestep.loss-mask-last``); the check fails when the framework side masks otherwise.
Skipped when RLlib is not installed."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.connectors.common import add_time_dim_to_batch_and_zero_pad as pad_connector

from xpspec.adapters.rllib import RLlibAdapter
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.timesteps import check_loss_mask
from xpspec.conformance.validate import validate_trace
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.sampling import SamplingSpec
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.schedule import FixedSchedule
from xpspec.protocol.trace import Trace

pytestmark = pytest.mark.filterwarnings("ignore:.*Overriding environment")

ADAPTER = RLlibAdapter()
CONTEXT = Context(ADAPTER.run_trainer, ADAPTER.run_trainer)
# Two envs with episodes of 2 and 3 transitions, rounds of 2 steps, windows of 3 items under
# the pad policy: sequences clipped at episode ends and at the newest stored step are padded.
SCENARIO = TrainerScenario(
    EnvSpec(2, (FixedSchedule(2), FixedSchedule(3))),
    TrainerConfig(unroll_length=2, num_iterations=6, mini_batch_length=3),
    sampling=SamplingSpec(boundary="pad"),
)


@pytest.fixture(scope="module")
def trace() -> Trace:
    return ADAPTER.run_trainer(SCENARIO)


def _windows(trace: Trace) -> list[tuple[Any, tuple[int, ...]]]:
    return [(w, m) for u in trace.of_kind("update") for w, m in zip(u.windows, u.loss_mask)]


def test_windows_are_padded_sequences_masked_as_rllib_masks_them(trace: Trace) -> None:
    validate_trace(SCENARIO, trace)
    windows = _windows(trace)
    assert windows and all(len(w) == 3 and len(m) == 3 for w, m in windows)
    padded = [(w, m) for w, m in windows if None in w]
    assert padded and any(w[1] is not None for w, _ in padded)  # a sequence of two steps
    # The padding is a tail, and the loss mask is 0 exactly there.
    for window, mask in windows:
        real = sum(item is not None for item in window)
        assert all(item is not None for item in window[:real])
        assert mask == (1,) * real + (0,) * (3 - real)
        # A window is one episode's consecutive time steps.
        firsts = [item for item in window if item is not None]
        assert all(
            (b[0], b[1], b[2]) == (a[0], a[1], a[2] + 1) for a, b in itertools.pairwise(firsts)
        )
    check_loss_mask(SCENARIO, trace, CONTEXT)


def test_windows_of_one_item_carry_no_loss_mask_and_count_every_row() -> None:
    # A stateless learner module: DQN's loss batch has no LOSS_MASK and its mean is over
    # every row.
    scenario = dataclasses.replace(
        SCENARIO,
        trainer=dataclasses.replace(SCENARIO.trainer, mini_batch_length=1),
        sampling=SamplingSpec(),
    )
    one = ADAPTER.run_trainer(scenario)
    windows = _windows(one)
    assert windows and all(len(w) == 1 and m == (1,) for w, m in windows)
    check_loss_mask(scenario, one, CONTEXT)


def test_the_mask_is_the_one_rllib_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    """Perturbation on the framework side: the learner connector's mask maker
    (``create_mask_and_seq_lens``, which AddTimeDimToBatchAndZeroPad calls) marks the padding
    1 too; that mask reaches DQN's loss, and the check fails on the padded positions."""
    make = pad_connector.create_mask_and_seq_lens

    def unmasked(*args: Any, **kwargs: Any) -> Any:
        mask, lengths = make(*args, **kwargs)
        return np.ones_like(mask), lengths

    monkeypatch.setattr(pad_connector, "create_mask_and_seq_lens", unmasked)
    perturbed = ADAPTER.run_trainer(SCENARIO)
    assert any(None in w and 0 not in m for w, m in _windows(perturbed))
    with pytest.raises(CheckFailure, match="loss mask"):
        check_loss_mask(SCENARIO, perturbed, CONTEXT)


@pytest.mark.parametrize(
    ("boundary", "match"), [("cross", "never runs on"), ("forbid", "burn_in_len")]
)
def test_windows_under_other_boundary_policies_are_unsupported(boundary: Any, match: str) -> None:
    scenario = dataclasses.replace(SCENARIO, sampling=SamplingSpec(boundary=boundary))
    with pytest.raises(Unsupported, match=match):
        ADAPTER.run_trainer(scenario)
