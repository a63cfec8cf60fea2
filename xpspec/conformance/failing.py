"""Which of the suite's checks fail on one trace, as blame ranks them (:mod:`.blame`).

Both the engine (to mark a failure downstream of its scenario's cause) and ``xpspec explain``
(to say which clause a trace breaks) run the checks of a scenario on one trace this way: the
determinism checks are left out (they run the implementation again from scratch), and so is
every check of an observable the implementation does not declare and a check that needs a
run the context cannot make (it raises ``Unsupported``). A check that itself breaks (raises
anything else) judged nothing: it is listed as broken, with its error, never as passing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xpspec.conformance.blame import Failure
from xpspec.conformance.checks import ALL_CHECKS, Check
from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.clauses import ClauseRegistry
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import Scenario
from xpspec.protocol.trace import Trace

__all__ = ["Checked", "capabilities_needed", "check_trace", "failure_of", "runs_on"]


@dataclass(frozen=True)
class Checked:
    """The checks that judged a trace, in the suite's order, the failures among them, each
    with its message, and the checks that broke instead of judging, each with its error."""

    checks: tuple[str, ...]
    failures: tuple[tuple[Failure, str], ...]
    broken: tuple[tuple[str, str], ...] = ()


def capabilities_needed(check: Check, scenario: Scenario) -> tuple[str, ...]:
    """What an implementation must declare for ``check`` to judge its trace of ``scenario``:
    the check's capability and observables, ``priorities`` for a scenario with a priority
    spec (an implementation without a prioritized sampler would answer with its uniform one),
    and ``checkpoint`` for a scenario with a checkpoint spec (one that cannot save would run
    it uninterrupted)."""
    needed = (check.capability, *check.requires)
    if getattr(scenario, "priority", None) is not None and "priorities" not in needed:
        needed += ("priorities",)
    # checkpoint and resume: an implementation that cannot save would run the scenario through
    if getattr(scenario, "checkpoint", None) is not None and "checkpoint" not in needed:
        needed += ("checkpoint",)
    return needed


def runs_on(check: Check, scenario: Scenario, capabilities: Sequence[str] | None) -> bool:
    """Whether ``check`` judges a trace of ``scenario`` from an implementation declaring
    ``capabilities`` (``None``: every one)."""
    return (
        check.capability == scenario.kind
        and check.applies(scenario)
        and not check.name.startswith("deterministic")
        and (
            capabilities is None
            or all(n in capabilities for n in capabilities_needed(check, scenario))
        )
    )


def failure_of(check: Check, exc: CheckFailure) -> Failure:
    """``check``'s failure ``exc`` as blame ranks it: charged to the clause of its first
    violation (all the check's clauses when it names none of them)."""
    order = {c.id: i for i, c in enumerate(ClauseRegistry.load().clauses)}
    charged = check.charged(exc)
    return Failure(
        check.name,
        charged,
        check.kind == "exact",
        exc.iteration,
        min(order.get(c, len(order)) for c in charged),
        exc.diverged,
    )


def check_trace(
    scenario: Scenario,
    trace: Trace,
    context: Context,
    capabilities: Sequence[str] | None = None,
) -> Checked:
    """Run every check of ``scenario`` that :func:`runs_on` admits on ``trace``."""
    checks: list[str] = []
    failures: list[tuple[Failure, str]] = []
    broken: list[tuple[str, str]] = []
    for check in ALL_CHECKS:
        if not runs_on(check, scenario, capabilities):
            continue
        try:
            check.verify(scenario, trace, context)
        except CheckFailure as exc:
            failures.append((failure_of(check, exc), str(exc)))
        except Unsupported:  # a run the context cannot make
            continue
        except Exception as exc:  # the check itself broke
            broken.append((check.name, f"{type(exc).__name__}: {exc}"))
            continue
        checks.append(check.name)
    return Checked(tuple(checks), tuple(failures), tuple(broken))
