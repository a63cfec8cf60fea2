"""The checks of one trace run together, sharing their passes over trace files.

``xpspec check`` reads a long trace from its file, and each check makes its own passes over
it. :func:`run_together` verifies the checks of one scenario at once, each in a thread of its
own within a :class:`~xpspec.protocol.shared_pass.LockStep`, so that their passes over the
trace (and over the reference trace, for the checks that compare with it) are one reading of
each file, decoded once. What each check's ``verify`` raised is kept, with the references it
asked for, and the checks are handed back with a ``verify`` that asks for the same references
and raises the same thing for that trace: the engine then evaluates them one by one as ever
(outcomes, expectations, blame and messages unchanged). Any other call (another trace, a
second call) runs the check itself. A check that asks for another run of the implementation
(``rerun``, ``fresh``) is not run together: it runs, unchanged, when the engine evaluates it;
except, when the adapter answers a ``rerun`` without running anything (a given trace, which
answers another scenario with ``Unsupported`` and its own with the trace the session holds),
a check's ``rerun`` is answered in the group, through the session (which keeps the answer),
and asked for again when its verdict is replayed.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace

from xpspec.conformance.checks.base import Check, Context
from xpspec.conformance.engine import Session
from xpspec.conformance.failing import capabilities_needed
from xpspec.protocol.scenario import Scenario
from xpspec.protocol.shared_pass import LockStep
from xpspec.protocol.trace import Trace

__all__ = ["run_together"]


class _Alone(Exception):
    """Raised in a check run together that asks for another run of the implementation."""


@dataclass(frozen=True)
class _Verdict:
    """What ``verify`` raised (``None``: it returned) and the runs it asked for, in order:
    ``("reference", scenario)`` or ``("rerun", scenario)``."""

    raised: BaseException | None
    asked: tuple[tuple[str, Scenario], ...]


def run_together(
    session: Session,
    scenario: Scenario,
    checks: Sequence[Check],
    alongside: Sequence[Callable[[], None]] = (),
    reruns_answered: bool = False,
) -> list[Check]:
    """``checks`` verified together on the trace ``session`` holds for ``scenario``, handed
    back as checks that replay their verdicts (module docstring); ``alongside`` runs in the
    same group (a validation of the trace), and the first error it raised is raised after the
    group ends. ``reruns_answered``: the session's adapter answers a ``rerun`` without
    running anything, so a check asking for one still runs together."""
    try:
        trace = session.run(scenario)
    except Exception:  # the engine reports it for each check
        trace = None
    lock = threading.Lock()
    together = [
        n
        for n, c in enumerate(checks)
        if trace is not None
        and all(n in session.info.capabilities for n in capabilities_needed(c, scenario))
    ]
    asked: list[list[tuple[str, Scenario]]] = [[] for _ in together]

    def job(check: Check, runs: list[tuple[str, Scenario]]) -> Callable[[], None]:
        def reference(s: Scenario) -> Trace:
            with lock:  # one reference run of a scenario, whichever check asks first
                runs.append(("reference", s))
                return session.reference(s)

        def rerun(s: Scenario) -> Trace:
            if not reruns_answered:
                raise _Alone
            with lock:  # the session keeps the answer: the replay is handed the same
                runs.append(("rerun", s))
                return session.run(s)

        def alone(s: Scenario) -> Trace:
            raise _Alone

        def verify() -> None:
            assert trace is not None
            check.verify(scenario, trace, Context(reference, rerun, alone))

        return verify

    jobs = [job(checks[n], refs) for n, refs in zip(together, asked, strict=True)]
    with _fewer_collections():
        raised = LockStep().run([*alongside, *jobs])
    for error in raised[: len(alongside)]:
        if error is not None:
            raise error
    verdicts = {
        n: _Verdict(r, tuple(refs))
        for n, r, refs in zip(together, raised[len(alongside) :], asked, strict=True)
        if not isinstance(r, _Alone)
    }
    return [
        _replaying(c, scenario, trace, verdicts[n]) if n in verdicts else c
        for n, c in enumerate(checks)
    ]


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Fewer runs of the cyclic garbage collector while the checks run together: what exists
    already (modules, torch, the scenario) is set apart from its scans (``gc.freeze``), and the
    youngest generation is collected after 50,000 new objects rather than 700 (the checks'
    states, all alive at once, are long-lived and scanned again at every collection of an
    older generation; decoded events are freed by reference counting)."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], 50_000), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _replaying(check: Check, scenario: Scenario, trace: Trace | None, verdict: _Verdict) -> Check:
    """``check`` whose first ``verify`` of ``trace`` asks for the runs ``verdict`` names (a
    rerun's answer, the session's kept one, is what the check was handed: what it did with it
    is in the verdict) and raises what it raised; every other call is the check's own."""
    original = check.verify
    spent = threading.Event()

    def verify(s: Scenario, t: Trace, context: Context) -> None:
        if spent.is_set() or t is not trace or s != scenario:
            return original(s, t, context)
        spent.set()
        for how, other in verdict.asked:
            if how == "reference":
                context.reference(other)
                continue
            with suppress(Exception):  # the check met the same answer in the group
                context.rerun(other)
        if verdict.raised is not None:
            raise verdict.raised

    return replace(check, verify=verify)
