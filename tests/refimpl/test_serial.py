"""JSON round trips of the value types (xpspec/protocol/codec.py)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from xpspec.protocol.codec import from_jsonable, parse_fraction, to_jsonable
from xpspec.protocol.config import DrainSpec, TrainerConfig
from xpspec.protocol.errors import ConfigError


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

    from xpspec.conformance.catalog import CATALOG
    from xpspec.protocol.codec import canonical_json, to_jsonable
    from xpspec.refimpl.adapter import RefimplAdapter

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


# -- bad input: one ConfigError naming the field path, the value and what is allowed ----------


def test_a_missing_required_field_is_named() -> None:
    from xpspec.protocol.errors import MISSING
    from xpspec.protocol.schedule import RandomSchedule

    with pytest.raises(ConfigError) as info:
        from_jsonable(RandomSchedule, {"max_length": 3}, "env.schedules[0]")
    assert info.value.field == "env.schedules[0].min_length" and info.value.value is MISSING
    assert str(info.value) == (
        "env.schedules[0].min_length: expected a value (a required field of RandomSchedule), "
        "got nothing"
    )


def test_a_dataclass_error_names_the_full_path() -> None:
    from xpspec.protocol.env_spec import EnvSpec

    # EnvSpec names its fields "env.num_envs": the path is not repeated.
    with pytest.raises(ConfigError) as info:
        from_jsonable(EnvSpec, {"num_envs": 0}, "scenario.env")
    assert info.value.field == "scenario.env.num_envs"
    with pytest.raises(ConfigError, match=r"^scenario\.trainer\.num_updates_per_train_iter: "):
        from_jsonable(
            TrainerConfig,
            {"num_iterations": 1, "num_updates_per_train_iter": 0},
            "scenario.trainer",
        )


@pytest.mark.parametrize(
    ("data", "value"),
    [
        ({"length": 3}, "nothing"),
        ({"kind": "spiral"}, "'spiral'"),
        ({"kind": ["fixed"]}, r"\['fixed'\]"),
    ],
)
def test_a_missing_or_unknown_kind_is_named_with_the_kinds(data: dict, value: str) -> None:
    from xpspec.protocol.schedule import Schedule

    with pytest.raises(
        ConfigError, match=rf"^s\.kind: expected one of 'cycle', 'fixed' or 'random', got {value}$"
    ):
        from_jsonable(Schedule, data, "s")


@pytest.mark.parametrize("data", [[1, 2], 3, "fixed", None])
def test_a_non_object_where_a_kind_of_object_is_expected(data: object) -> None:
    from xpspec.protocol.schedule import Schedule

    with pytest.raises(ConfigError) as info:
        from_jsonable(Schedule, data, "s")
    assert str(info.value) == (
        f"""s: expected an object whose "kind" is one of 'cycle', 'fixed' or 'random', got {data!r}"""
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.25", Fraction(1, 4)),
        ("0.125", Fraction(1, 8)),
        ("0.1", Fraction(1, 10)),
        ("1.5", Fraction(3, 2)),
        ("0.0625", Fraction(1, 16)),
        ("0.001", Fraction(1, 1000)),
        ("-0.75", Fraction(-3, 4)),
        ("2.50", Fraction(5, 2)),
        ("1e-3", Fraction(1, 1000)),
        ("1/3", Fraction(1, 3)),
        ("3333333/10000000", Fraction(3333333, 10000000)),
    ],
)
def test_short_decimals_and_fractions_are_exact(text: str, value: Fraction) -> None:
    assert parse_fraction("u", text) == value


def test_a_long_decimal_is_refused_with_the_fraction_to_write() -> None:
    with pytest.raises(ConfigError) as info:
        parse_fraction("unroll_length", "0.3333333")
    assert str(info.value) == (
        "unroll_length: expected an exact rational such as 2, '1/4' or '0.25'; the decimal "
        "'0.3333333' is not exact here: write a fraction ('1/3' if that is what you mean, or "
        "'3333333/10000000'), got '0.3333333'"
    )


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("0.0001", "('0' if that is what you mean, or '1/10000')"),
        ("1e-4", "'1/10000'"),
        ("0.6667", "('2/3' if"),
    ],
)
def test_decimals_past_the_denominator_limit_are_refused(text: str, hint: str) -> None:
    with pytest.raises(ConfigError, match="is not exact here") as info:
        parse_fraction("ratio", text)
    assert info.value.field == "ratio" and info.value.value == text and hint in str(info.value)


def test_a_huge_exponent_is_refused_without_computing_it() -> None:
    with pytest.raises(
        ConfigError, match=r"^u: expected .*an exponent of at most 100.*got '1e999999999'$"
    ):
        parse_fraction("u", "1e999999999")


def test_a_long_value_is_shortened_in_the_message() -> None:
    error = ConfigError("env.schedules", list(range(10_000)), "one schedule per env")
    assert len(str(error)) < 300 and "characters)" in str(error) and len(error.value) == 10_000
    assert "an integer of 16610 bits" in str(ConfigError("seed", 10**5000, "a seed"))
