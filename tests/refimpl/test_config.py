"""Validation of trainer configuration (xpspec/protocol/config.py)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from xpspec.protocol.config import DrainSpec, TrainerConfig
from xpspec.protocol.errors import ConfigError


@pytest.mark.parametrize(
    ("knobs", "field"),
    [
        ({"unroll_length": -1}, "unroll_length"),
        ({"unroll_length": 0.25}, "unroll_length"),
        ({"unroll_length": "a/b"}, "unroll_length"),
        ({"unroll_length": 0}, "drain"),
        ({"mini_batch_length": 9, "capacity": 4}, "mini_batch_length"),
        ({"num_updates_per_train_iter": 0}, "num_updates_per_train_iter"),
        ({"clear": "all"}, "clear"),
        ({"mode": "on-policy", "unroll_length": "1/2"}, "unroll_length"),
        ({"warmup_gate": ">="}, "warmup_gate"),
        ({"num_iterations": 0}, "num_iterations"),
    ],
)
def test_invalid_knobs_name_the_field(knobs: dict, field: str) -> None:
    base = {"num_iterations": 1, **knobs}
    with pytest.raises(ConfigError) as info:
        TrainerConfig(**base)
    assert info.value.field == field
    assert "expected" in str(info.value) and "got" in str(info.value)


def test_rationals_are_exact() -> None:
    assert TrainerConfig(unroll_length="1/3", num_iterations=1).unroll_length == Fraction(1, 3)
    assert TrainerConfig(unroll_length="0.1", num_iterations=1).unroll_length == Fraction(1, 10)


def test_drain_spec_validates_arrivals() -> None:
    with pytest.raises(ConfigError, match=r"drain.arrivals\[1\]"):
        DrainSpec((1, -1))


def test_unknown_preprocessor_is_named() -> None:
    from xpspec.protocol.scenario import scenario_from_json
    from xpspec.refimpl.preprocess import build

    with pytest.raises(ConfigError, match=r"preprocess\.kind.*'magic'"):
        scenario_from_json(
            {
                "kind": "trainer",
                "env": {},
                "trainer": {"num_iterations": 1},
                "preprocess": {"kind": "magic"},
            }
        )
    with pytest.raises(ConfigError, match="named preprocessors"):
        build("identity")  # type: ignore[arg-type]


def test_mismatched_env_ids_are_named() -> None:
    import torch

    from xpspec.refimpl.replay import ReplayBuffer

    buffer = ReplayBuffer(2, 4, {"step_type": ((), torch.int64)})
    with pytest.raises(ConfigError, match=r"env_ids: expected ids in \[0, 2\)"):
        buffer.add_items(torch.tensor([0, 5]), {"step_type": torch.tensor([0, 1])})


def test_a_run_that_could_never_end_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"drain\.arrivals"):
        TrainerConfig(unroll_length=0, drain=DrainSpec((0, 0)), num_env_steps=5)
