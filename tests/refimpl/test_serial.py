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


def test_canonical_json_is_the_encoding_of_to_jsonable() -> None:
    # The fast path hands dataclass fields to the encoder directly; the text must be exactly
    # that of the plain conversion, for scenarios (fractions, nested dataclasses, unions) and
    # for every kind of trace event the catalogue produces.
    import json

    from adapters.refimpl import RefimplAdapter
    from conformance.catalog import CATALOG
    from refimpl.serial import canonical_json, to_jsonable

    def plain(value: object) -> str:
        return json.dumps(to_jsonable(value), sort_keys=True, separators=(",", ":"))

    adapter, kinds = RefimplAdapter(), set()
    for scenario in CATALOG.values():
        assert canonical_json(scenario) == plain(scenario)
        trace = getattr(adapter, f"run_{scenario.kind}")(scenario)
        for event in trace.events:
            kinds.add(event.kind)
            assert canonical_json(event) == plain(event)
    assert {"update", "sampled", "relabel", "advantages", "shard"} <= kinds
