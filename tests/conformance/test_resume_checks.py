"""The resume checks (xpspec.conformance.checks.resume): a restore that loses one part of the
trainer fails that part's clause and the whole trace's, and no other (refimpl's restore with
parts left out, xpspec.refimpl.checkpoint)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.registry import RESUME_CHECKS
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.checkpoint import CheckpointSpec
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.errors import ConfigError
from xpspec.protocol.scenario import Scenario, TrainerScenario
from xpspec.protocol.trace import Resume, Trace
from xpspec.refimpl.adapter import RefimplAdapter
from xpspec.refimpl.checkpoint import run_checkpointed

REFIMPL = RefimplAdapter()
CONTEXT = Context(REFIMPL.run_trainer, REFIMPL.run_trainer, REFIMPL.run_trainer)


def _verdicts(scenario: Scenario, trace: Trace) -> dict[str, str]:
    out = {}
    for check in RESUME_CHECKS:
        try:
            check.verify(scenario, trace, CONTEXT)
        except CheckFailure as exc:
            assert exc.clause == check.clauses[0]
            out[check.name] = "fail"
        except Unsupported:
            out[check.name] = "n/a"
    return out


SAME = "resume-same-trace"
# (scenario, parts a restore leaves out, the checks that fail or are not applicable)
CASES = [
    ("resume-plain", (), {}),
    ("resume-fractional", ("unroll_schedule",), {"resume-accounting": "fail"}),
    ("resume-delayed", ("train_schedule",), {"resume-accounting": "fail"}),
    ("resume-delayed", ("preprocess",), {"resume-accounting": "fail"}),
    ("resume-plain", ("run",), {"resume-accounting": "fail"}),
    ("resume-plain", ("policy_state",), {"resume-accounting": "fail"}),
    ("resume-plain", ("generator",), {"resume-rng": "fail"}),
    ("resume-plain", ("buffer",), {"resume-buffer": "fail"}),
]


@pytest.mark.parametrize(("name", "forget", "expected"), CASES)
def test_a_lost_part_fails_its_own_clause(
    name: str, forget: tuple[str, ...], expected: dict
) -> None:
    scenario = CATALOG[name]
    assert isinstance(scenario, TrainerScenario)
    verdicts = _verdicts(scenario, run_checkpointed(scenario, forget))
    failed = {k: v for k, v in verdicts.items() if v == "fail" and k != SAME}
    assert failed == expected
    assert (SAME in verdicts) == bool(forget)


def test_a_lost_buffer_leaves_the_random_streams_unjudged() -> None:
    scenario = CATALOG["resume-plain"]
    verdicts = _verdicts(scenario, run_checkpointed(scenario, ("buffer",)))  # type: ignore[arg-type]
    assert verdicts["resume-rng"] == "n/a"


def test_an_env_reset_at_resume_fails_env_continues() -> None:
    """A restore that resets the env (as a framework that loses its last observation does)."""
    scenario = CATALOG["resume-plain"]
    assert isinstance(scenario, TrainerScenario)
    trace = run_checkpointed(scenario)
    uninterrupted = REFIMPL.run_trainer(replace(scenario, checkpoint=None))
    # Shift every time step after the resume by one step of its episode: the env went on
    # from another time step than the one the trainer last saw.
    events = list(trace.events)
    index = next(i for i, e in enumerate(events) if isinstance(e, Resume))
    shifted = [
        replace(e, t=tuple(t + 1 for t in e.t)) if i > index and e.kind == "env_step" else e
        for i, e in enumerate(events)
    ]
    assert uninterrupted.events != tuple(shifted)
    with pytest.raises(CheckFailure) as failure:
        RESUME_CHECKS[0].verify(scenario, Trace(tuple(shifted), trace.header), CONTEXT)
    assert failure.value.clause == "resume.env-continues"


def test_the_resume_event_must_follow_the_checkpointed_iteration() -> None:
    scenario = CATALOG["resume-plain"]
    assert isinstance(scenario, TrainerScenario)
    events = [e for e in run_checkpointed(scenario).events if not isinstance(e, Resume)]
    for check in RESUME_CHECKS:
        with pytest.raises(CheckFailure, match="resume events"):
            check.verify(scenario, Trace(tuple(events)), CONTEXT)


def test_a_checkpoint_needs_iterations_after_it() -> None:
    scenario = CATALOG["resume-plain"]
    assert isinstance(scenario, TrainerScenario)
    with pytest.raises(ConfigError, match="after_iteration"):
        replace(scenario, checkpoint=CheckpointSpec(scenario.trainer.num_iterations))
    with pytest.raises(ConfigError, match="num_iterations alone"):
        replace(
            scenario,
            trainer=TrainerConfig(num_env_steps=10),
            checkpoint=CheckpointSpec(1),
        )
    with pytest.raises(ConfigError, match="after_iteration"):
        CheckpointSpec(0)
