"""Scenario validation (xpspec/protocol/scenario.py): every bad input is one ConfigError whose
message names the field path, the value and what is allowed."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.protocol.errors import MISSING, ConfigError
from xpspec.protocol.scenario import MAX_SEED, TrainerScenario, scenario_from_json, scenario_to_json

TRAINER = {"kind": "trainer", "env": {}, "trainer": {"num_iterations": 2}}
KINDS = (
    "'async', 'env', 'learner', 'offline', 'recurrent', 'relabel', 'replay', 'stack' or 'trainer'"
)


@pytest.mark.parametrize(
    ("data", "field", "kind"),
    [
        ({"kind": "trainer", "trainer": {"num_iterations": 2}}, "scenario.env", "TrainerScenario"),
        ({"kind": "trainer", "env": {}}, "scenario.trainer", "TrainerScenario"),
        ({"kind": "env", "env": {}}, "scenario.steps", "EnvScenario"),
        ({"kind": "replay", "env": {}, "capacity": 4}, "scenario.fill_steps", "ReplayScenario"),
    ],
)
def test_a_missing_required_field_names_its_path(data: dict, field: str, kind: str) -> None:
    with pytest.raises(ConfigError) as info:
        scenario_from_json(json.dumps(data))
    assert info.value.field == field and info.value.value is MISSING
    assert str(info.value) == f"{field}: expected a value (a required field of {kind}), got nothing"


@pytest.mark.parametrize(("kind", "got"), [(None, "nothing"), ("trainr", "'trainr'")])
def test_a_missing_or_unknown_kind_names_the_kinds(kind: str | None, got: str) -> None:
    data: dict[str, Any] = {k: v for k, v in TRAINER.items() if k != "kind"}
    if kind is not None:
        data["kind"] = kind
    with pytest.raises(ConfigError) as info:
        scenario_from_json(data)
    assert str(info.value) == f"scenario.kind: expected one of {KINDS}, got {got}"


@pytest.mark.parametrize("text", ["[1, 2]", "3", '"trainer"', "null"])
def test_a_top_level_that_is_no_object_says_what_was_expected(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        scenario_from_json(text)
    assert str(info.value) == (
        f'scenario: expected an object whose "kind" is one of {KINDS}, got {json.loads(text)!r}'
    )


def test_text_that_is_not_json_is_named_with_its_position() -> None:
    with pytest.raises(ConfigError, match=r"^scenario: expected JSON text \(.* at line 2, column"):
        scenario_from_json('{"kind": "env",\n "steps": 3,}')


def test_errors_inside_nested_values_name_the_full_path() -> None:
    with pytest.raises(ConfigError, match=r"^scenario\.env\.num_envs: expected an integer"):
        scenario_from_json({**TRAINER, "env": {"num_envs": 0}})
    with pytest.raises(ConfigError, match=r"^scenario\.trainer\.drain\.arrivals\[1\]: "):
        trainer = {"num_iterations": 2, "unroll_length": 0, "drain": {"arrivals": [1, -1]}}
        scenario_from_json({**TRAINER, "trainer": trainer})


def test_a_long_decimal_unroll_length_is_refused_with_the_fraction_to_write() -> None:
    trainer = {"num_iterations": 2, "unroll_length": "0.3333333"}
    with pytest.raises(ConfigError) as info:
        scenario_from_json({**TRAINER, "trainer": trainer})
    assert info.value.field == "scenario.trainer.unroll_length"
    assert "('1/3' if that is what you mean, or '3333333/10000000')" in str(info.value)
    trainer["unroll_length"] = "0.25"
    scenario = scenario_from_json({**TRAINER, "trainer": trainer})
    assert isinstance(scenario, TrainerScenario) and scenario.trainer.unroll_length == 0.25


@pytest.mark.parametrize(
    "name", ["plain-u1-b1", "replay-uniform", "env-mixed", "learner-mixed", "relabel-future"]
)
@pytest.mark.parametrize("seed", [2**64, 2**63 - 1, MAX_SEED + 1, -1])
def test_every_seed_is_bounded_by_what_every_consumer_takes(name: str, seed: object) -> None:
    data = json.loads(scenario_to_json(CATALOG[name]))
    with pytest.raises(ConfigError) as info:
        scenario_from_json({**data, "seed": seed})
    assert str(info.value) == (
        f"scenario.seed: expected an integer in [0, 4294967295] (2**32 - 1, the largest seed "
        f"numpy takes), got {seed!r}"
    )
    assert scenario_from_json({**data, "seed": MAX_SEED}).seed == MAX_SEED
    with pytest.raises(ConfigError, match=r"^scenario\.seed: expected an integer, got True$"):
        scenario_from_json({**data, "seed": True})


def test_the_largest_seed_runs() -> None:
    from xpspec.refimpl.adapter import RefimplAdapter

    scenario = replace(CATALOG["fractional-u3/2-b4"], seed=MAX_SEED)
    assert RefimplAdapter().run_trainer(scenario).events  # type: ignore[arg-type]
