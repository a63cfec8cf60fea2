"""The recurrent operation's protocol part: :class:`RecurrentScenario` validates every field
and round-trips through JSON and its schema, :class:`TrainSequence` events round-trip through
both trace readers and the trace schema, the capability and the operation exist on every
adapter the suite itself provides, and malformed sequences are refused by trace validation."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from xpspec.conformance.given_trace import GivenTrace
from xpspec.conformance.harness.remote import RemoteAdapter
from xpspec.conformance.validate import TraceError, validate_trace
from xpspec.protocol import Request, decode_request, encode, load_schema
from xpspec.protocol.adapter import CAPABILITIES, Adapter, AdapterInfo
from xpspec.protocol.budget import BudgetError
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.errors import ConfigError
from xpspec.protocol.event_reader import read_jsonl
from xpspec.protocol.scenario import RecurrentScenario, scenario_from_json, scenario_to_json
from xpspec.protocol.trace import EnvStep, Trace, TrainSequence

SCENARIO = RecurrentScenario(EnvSpec(num_envs=2), steps=6, sequence_length=3, burn_in=1)


def test_defaults_and_kind() -> None:
    sc = RecurrentScenario(EnvSpec(), steps=4, sequence_length=2)
    assert (sc.burn_in, sc.boundary, sc.batch_size, sc.draws, sc.seed) == (0, "cross", 4, 2, 0)
    assert (sc.initial_state, sc.kind) == ("stored", "recurrent")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"steps": 0}, "steps: expected an integer >= 1, got 0"),
        ({"sequence_length": 0}, "sequence_length: expected an integer >= 1, got 0"),
        ({"burn_in": -1}, "burn_in: expected an integer >= 0, got -1"),
        ({"burn_in": 3}, "burn_in: expected less than sequence_length (3), got 3"),
        ({"batch_size": 0}, "batch_size: expected an integer >= 1, got 0"),
        ({"draws": True}, "draws: expected an integer >= 1, got True"),
        ({"boundary": "forbid"}, "boundary: expected 'cross' or 'pad', got 'forbid'"),
        ({"initial_state": "random"}, "initial_state: expected 'stored' or 'zeros', got 'random'"),
        ({"steps": 2}, "steps: expected at least sequence_length (3) with boundary 'cross', got 2"),
        (
            {"env": EnvSpec(autoreset="same-step")},
            "env.autoreset: expected 'next-step' for this kind of scenario, got 'same-step'",
        ),
    ],
)
def test_every_bad_field_is_one_config_error_naming_it(
    changes: dict[str, Any], message: str
) -> None:
    fields = {
        "env": SCENARIO.env,
        "steps": 6,
        "sequence_length": 3,
        "burn_in": 1,
        **changes,
    }
    with pytest.raises(ConfigError) as info:
        RecurrentScenario(**fields)
    assert str(info.value) == message


def test_a_short_run_may_pad_its_sequences() -> None:
    assert RecurrentScenario(EnvSpec(), steps=2, sequence_length=3, boundary="pad").steps == 2


def test_the_budget_bounds_the_sampled_items() -> None:
    with pytest.raises(BudgetError, match=r"^batch_size × sequence_length × draws: "):
        RecurrentScenario(EnvSpec(), steps=10, sequence_length=10, batch_size=1000, draws=1000)


def test_the_scenario_round_trips_through_json_and_follows_its_schema() -> None:
    for sc in (
        SCENARIO,
        RecurrentScenario(
            EnvSpec(num_envs=3),
            steps=5,
            sequence_length=4,
            boundary="pad",
            batch_size=2,
            draws=3,
            seed=7,
            initial_state="zeros",
        ),
    ):
        text = scenario_to_json(sc)
        assert json.loads(text)["kind"] == "recurrent"
        assert scenario_from_json(text) == sc
        jsonschema.Draft202012Validator(load_schema("scenario")).validate(json.loads(text))
        request = Request(5, "run", json.loads(text))
        assert decode_request(encode(request)) == request


def test_a_bad_field_in_json_names_its_path() -> None:
    data = json.loads(scenario_to_json(SCENARIO))
    with pytest.raises(ConfigError, match=r"^scenario\.boundary: expected "):
        scenario_from_json({**data, "boundary": "forbid"})


def _trace() -> Trace:
    step = EnvStep(0, (0, 1), (0, 0), (0, 0), (0, 0), (0.0, 0.0), (1.0, 1.0), (0, 0), (0, 0))
    return Trace(
        (
            step,
            TrainSequence(0, 0, ((0, 0, 0), (0, 0, 1), None), (0, 1, -1), (0, 1, 0)),
            TrainSequence(0, 1, ((1, 0, 1), (1, 0, 2), (1, 0, 3)), (1, 2, 3), (0, 1, 1)),
        ),
        {"producer": "test", "seed": 0},
    )


@pytest.mark.parametrize("fast", [True, False])
def test_train_sequences_round_trip_through_both_readers(fast: bool) -> None:
    text = _trace().to_jsonl()
    header, events = read_jsonl(text.splitlines(), fast)
    back = Trace(tuple(events), header)
    assert back.events == _trace().events
    assert back.to_jsonl() == text
    assert [e.index for e in back.of_kind("train_sequence")] == [0, 1]


def test_train_sequences_follow_the_trace_event_schema() -> None:
    validator = jsonschema.Draft202012Validator(load_schema("trace-event"))
    for line in _trace().to_jsonl().splitlines()[1:]:
        validator.validate(json.loads(line))
    bad = json.loads(_trace().to_jsonl().splitlines()[2])
    del bad["state_in"]
    assert not validator.is_valid(bad)


def test_the_capability_and_the_operation_exist() -> None:
    assert "recurrent" in CAPABILITIES
    assert AdapterInfo("x", "y", "1", capabilities=("recurrent",)).capabilities == ("recurrent",)
    assert "run_recurrent" in dir(Adapter)
    assert callable(RemoteAdapter.run_recurrent)
    given = GivenTrace(SCENARIO, _trace())
    assert given.run_recurrent(SCENARIO) == _trace()


def test_a_well_formed_trace_validates() -> None:
    validate_trace(SCENARIO, _trace())


@pytest.mark.parametrize(
    ("sequence", "problem"),
    [
        (TrainSequence(0, 0, (), (), ()), "a sequence of no positions"),
        (TrainSequence(0, 0, ((2, 0, 0),), (0,), (1,)), "item (2, 0, 0) decodes to no real step"),
        (TrainSequence(0, 0, ((0, 0, 0), None), (0,), (1, 0)), "state_in of length 1"),
        (TrainSequence(0, 0, ((0, 0, 0), None), (0, -1), (1,)), "loss_mask of length 1"),
        (TrainSequence(0, 0, ((0, 0, 0),), (0,), (2,)), "loss mask values [2]"),
        (TrainSequence(0, 0, ((0, 0, 0),), (-2,), (1,)), "state -2"),
    ],
)
def test_a_malformed_sequence_is_a_trace_error(sequence: TrainSequence, problem: str) -> None:
    with pytest.raises(TraceError) as info:
        validate_trace(SCENARIO, Trace((sequence,)))
    assert str(info.value).startswith("event #0 (train_sequence): " + problem)


def test_a_recurrent_run_crosses_the_worker_protocol_unchanged() -> None:
    from xpspec.conformance.catalog import CATALOG
    from xpspec.conformance.harness.connect import connect
    from xpspec.refimpl.adapter import RefimplAdapter

    scenario = CATALOG["recurrent-pad"]
    assert isinstance(scenario, RecurrentScenario)
    adapter = connect("refimpl")
    try:
        assert "recurrent" in adapter.info().capabilities
        remote = adapter.run_recurrent(scenario).to_jsonl()
    finally:
        adapter.close()  # type: ignore[attr-defined]
    assert remote == RefimplAdapter().run_recurrent(scenario).to_jsonl()
