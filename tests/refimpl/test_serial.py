"""JSON round trips of the value types (refimpl/serial.py)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from refimpl.config import DrainSpec, TrainerConfig
from refimpl.errors import ConfigError
from refimpl.serial import from_jsonable, parse_fraction, to_jsonable


def test_optional_dataclass_without_kind_round_trips() -> None:
    cfg = TrainerConfig(unroll_length=0, drain=DrainSpec((1, 2), 3, 4), num_iterations=2)
    assert from_jsonable(TrainerConfig, to_jsonable(cfg)) == cfg


def test_fractions_are_strings_and_floats_are_refused() -> None:
    assert to_jsonable(Fraction(1, 3)) == "1/3"
    assert parse_fraction("u", "0.1") == Fraction(1, 10)
    with pytest.raises(ConfigError, match="not a float"):
        parse_fraction("u", 0.1)


def test_unknown_field_is_named() -> None:
    with pytest.raises(ConfigError, match=r"value\.bogus"):
        from_jsonable(TrainerConfig, {"num_iterations": 1, "bogus": 2})
