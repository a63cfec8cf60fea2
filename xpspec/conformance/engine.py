"""Evaluate checks against an adapter: run the operation (cached, under a timeout), verify,
and classify the outcome as pass, fail, error, deviation or not applicable.

This is the one place where outcomes are decided; the pytest suite, the command line and
the mutant zoo all call :func:`Session.evaluate`.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from xpspec.conformance.blame import Failure, cause_of, follows
from xpspec.conformance.checks.base import Check, CheckFailure, Context
from xpspec.conformance.expectations import Deviation, Expectations, Finding
from xpspec.conformance.frames import where
from xpspec.conformance.outcomes import AdapterError, AdapterFailure, Status
from xpspec.conformance.validate import TraceError, validate_trace
from xpspec.conformance.vectors import Vector, committed, difference_note
from xpspec.protocol.adapter import Adapter, Unsupported
from xpspec.protocol.scenario import Scenario, scenario_to_json
from xpspec.protocol.trace import Trace

__all__ = ["GENERATED", "AdapterError", "Outcome", "Session"]

GENERATED = "generated"
"""The scenario name of every Hypothesis-generated scenario (expectations scope to it)."""


@dataclass(frozen=True)
class Outcome:
    """The verdict of one check on one scenario."""

    check: str
    clauses: tuple[str, ...]
    scenario: str
    status: Status
    message: str = ""
    variant: str = ""
    stale: bool = False
    seconds: float = 0.0
    level: str = "MUST"
    """``SHOULD`` when every clause of the check is SHOULD-level: its failure is a warning."""
    charged: tuple[str, ...] = ()
    """For a failure or a deviation: the clauses it is charged to (those of ``clauses`` the
    check's first violation belongs to; the check stopped there, so it judged no other)."""
    downstream_of: str = ""
    """For a failure: the clause of the earlier failure it follows from ("" if it is the
    cause), see :mod:`xpspec.conformance.blame`."""
    absent: str = ""
    """For a check not applicable because the adapter declares no capability it needs: the
    kind of the expectations' ``[[absent]]`` entry of that capability ("" for none)."""


def _validated(adapter: Adapter) -> bool:
    """Whether ``adapter`` hands over traces validated already: a given trace that
    ``xpspec check`` validated when it read it."""
    from xpspec.conformance.given_trace import GivenTrace

    return isinstance(adapter, GivenTrace) and adapter.validated


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt an inline operation after ``seconds`` (main thread only; elsewhere no
    limit). Python code is interrupted; native code that never returns to the interpreter
    is not: that is what process isolation is for."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise AdapterFailure("timeout", f"the operation did not end within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _repro(name: str, scenario: Scenario, command: str, explain: str = "") -> str:
    """The scenario of an outcome, and a copy-pasteable ``command`` that reproduces it (none
    when ``command`` is "": the user holds the scenario already), then the ``explain`` command
    that draws where the run parts from the reference, if any."""
    if not command:
        return f"scenario {name!r}"
    text = (
        f"scenario {name!r}:\n  {scenario_to_json(scenario)}\n"
        f"  reproduce: save the JSON above as s.json, then `{command}`"
    )
    if explain:
        text += (
            f"\n  explain: `{explain}` shows where it parts from the reference and the clause "
            "it breaks (without --format: a page)"
        )
    return text


def _no_rerun(scenario: Scenario) -> Trace:
    """The rerun a check judging a variant's reference trace may not make: that trace has no
    adapter behind it (the staleness test then assumes the variant shows)."""
    raise Unsupported("a variant's reference trace has no adapter run to repeat")


def _stopped(trace: Trace) -> str:
    """The trace header's ``stopped`` (why the framework ended the run early), or ""."""
    return str(trace.header.get("stopped", ""))


class Session:
    """One adapter under test, with its expectations, a trace cache and the reference: the
    committed vector of a catalogue scenario (:mod:`xpspec.conformance.vectors`), else a run of
    ``reference`` (refimpl by default; passing one turns the vectors off unless ``vectors``
    says otherwise). ``reproduce`` is the
    command a failure's message gives to reproduce its scenario's trace (default ``xpspec
    trace s.json --adapter ADAPTER_NAME``; "" for none)."""

    def __init__(
        self,
        adapter: Adapter,
        adapter_name: str,
        expectations: Expectations | None = None,
        timeout: float = 120.0,
        reference: Adapter | None = None,
        reproduce: str | None = None,
        vectors: bool | None = None,
    ) -> None:
        self.adapter, self.adapter_name = adapter, adapter_name
        self.reproduce = (
            f"xpspec trace s.json --adapter {adapter_name}" if reproduce is None else reproduce
        )
        self.explain = (
            f"xpspec explain s.json --adapter {adapter_name} --format text"
            if reproduce is None
            else ""
        )
        """The command a failure's message gives to draw where the run parts from the
        reference ("" when ``reproduce`` is given: the caller holds the trace)."""
        self.info = adapter.info()
        self.expectations = (expectations or Expectations()).for_version(
            self.info.framework_version
        )
        """The entries that apply to the framework version under test (``versions``)."""
        self.timeout = timeout
        self.deadline: float | None = None
        """``time.monotonic()`` past which no inline operation may run (the run's budget)."""
        self._cache: dict[tuple[str, str], Trace | BaseException] = {}
        self._vectors = reference is None if vectors is None else vectors
        """Whether a committed vector, where one exists, is the reference (not a fresh run)."""
        if reference is None:
            from xpspec.refimpl.adapter import RefimplAdapter

            reference = RefimplAdapter()
        self._reference = reference
        self._registry: Any = None
        self._failure_cache: dict[str, list[Failure]] = {}
        self._keys: dict[int, tuple[Scenario, str]] = {}
        """id -> (scenario, its JSON): the caches' key of a scenario object, computed once
        (a suite evaluates dozens of checks on each scenario object). Holding the scenario
        keeps its id from being reused."""

    def _key(self, scenario: Scenario) -> str:
        """``scenario_to_json(scenario)``, once per scenario object."""
        known = self._keys.get(id(scenario))
        if known is None:
            known = (scenario, scenario_to_json(scenario))
            self._keys[id(scenario)] = known
        return known[1]

    # -- running operations ---------------------------------------------------------------------
    def _operation(self, adapter: Adapter, scenario: Scenario) -> Callable[[Scenario], Trace]:
        return getattr(adapter, f"run_{scenario.kind}")

    def _call(self, adapter: Adapter, scenario: Scenario) -> Trace:
        """One operation; an adapter in a worker is timed by its harness, one inline here."""
        if getattr(adapter, "isolated", False) or adapter is self._reference:
            return self._operation(adapter, scenario)(scenario)
        limit = self.timeout
        if self.deadline is not None:
            limit = min(limit, self.deadline - time.monotonic())
            if limit <= 0:
                raise AdapterFailure("timeout", "the run's time budget is spent")
        with _time_limit(limit):
            return self._operation(adapter, scenario)(scenario)

    def run(self, scenario: Scenario, who: str = "adapter") -> Trace:
        """The trace of ``scenario`` (cached). Raises Unsupported or AdapterError (an
        AdapterFailure when the worker crashed, timed out or ran out of memory)."""
        key = (who, self._key(scenario))
        if key not in self._cache:
            adapter = self.adapter if who == "adapter" else self._reference
            try:
                trace = self._call(adapter, scenario)
                if not isinstance(trace, Trace):
                    raise AdapterError(
                        f"run_{scenario.kind} returned {type(trace).__name__}, expected a Trace"
                    )
                # The reference implementation's traces are validated where it is the
                # implementation under test, not each time it serves as the reference; a
                # given trace (``xpspec check``) was validated when it was read.
                if who == "adapter" and not _validated(adapter):
                    validate_trace(scenario, trace)
                self._cache[key] = trace
            except Unsupported as exc:
                self._cache[key] = exc
            except TraceError as exc:
                self._cache[key] = AdapterError(f"malformed trace: {exc}")
            except AdapterError as exc:
                self._cache[key] = exc
            except Exception as exc:  # the adapter broke: report, never crash the suite
                self._cache[key] = AdapterError(f"{type(exc).__name__}: {exc}{where(exc)}")
        result = self._cache[key]
        if isinstance(result, BaseException):
            raise result
        return result

    def _level(self, check: Check) -> str:
        """SHOULD iff every clause of ``check`` is a SHOULD clause of the registry."""
        from xpspec.conformance.clauses import ClauseRegistry

        if self._registry is None:
            self._registry = ClauseRegistry.load()
        levels = {self._registry[c].level if c in self._registry else "MUST" for c in check.clauses}
        return "SHOULD" if levels == {"SHOULD"} else "MUST"

    def _declared(self, name: str, scenario: Scenario) -> list[Deviation]:
        """The deviations the expectations declare for catalogue scenario ``name``."""
        return [d for d in self.expectations.deviations if d.applies_to(name, scenario.kind)]

    def _explain(
        self,
        check: Check,
        name: str,
        scenario: Scenario,
        trace: Trace,
        message: str,
        level: str,
        finding: Finding | None,
        out: Callable[..., Outcome],
    ) -> Outcome:
        """A failing check against the declared deviations. The declared variants together
        are the adapter's model: refimpl run as all of them. If the check passes on the
        model scenario, the failure is a known deviation (whether or not its own clause was
        declared: it may follow from another declared variant); if a variant has no
        executable model or the model does not pass, it stays a failure unless a declared
        finding covers it (a finding names what no variant reproduces, e.g. a run the framework
        ended by raising). A deviation declared for this clause without a variant is accepted
        on its reason alone."""
        from xpspec.conformance.variants import VARIANTS, model_scenario

        own = self.expectations.find(check.clauses, name, scenario.kind)
        with_variant = [(d.clause, d.variant) for d in self._declared(name, scenario) if d.variant]
        if with_variant:
            missing = [f"{c}/{v}" for c, v in with_variant if (c, v) not in VARIANTS]
            if missing:
                problem = f"no executable model of {missing[0]}"
            else:
                model = model_scenario(scenario, with_variant)
                problem = self._model_problem(check, model, trace)
            variants = ", ".join(f"{c}/{v}" for c, v in with_variant)
            if not problem:
                reasons = own.reason if own is not None else "follows from the declared variants"
                return out(
                    "deviation",
                    f"known deviation, reproduced by refimpl run as {variants}: {reasons}\n{message}",
                    # The clause's own declared variant, or the model the failure follows from.
                    variant=own.variant
                    if own is not None and own.variant
                    else "via " + ",".join(v for _, v in with_variant),
                    level=level,
                )
            unexplained = f"declared variants ({variants}) do not reproduce the trace: {problem}"
            if own is not None and own.variant and finding is None:
                return out("fail", f"{message}\n{unexplained}", level=level)
            if finding is not None:
                message = f"{message}\n{unexplained}"
        if finding is not None:
            return out(
                "deviation",
                f"finding (no spec variant reproduces it): {finding.reason}\n{message}",
                variant="finding",
                level=level,
            )
        if own is not None and not own.variant:
            return out(
                "deviation", f"known deviation (no variant): {own.reason}\n{message}", level=level
            )
        return out("fail", message, level=level)

    def _model_problem(self, check: Check, model: Scenario, trace: Trace) -> str:
        """Why ``trace`` is not what refimpl run as ``model`` allows ("" if it is). A check
        that concerns the model scenario is verified on it; one that does not (it is about the
        default behaviour the variant replaces) gives way to every check of its capability
        that concerns the model and that the adapter's observables let run (a check of an
        undeclared observable would compare the adapter's stand-in), the exact comparisons with
        refimpl run as the model included."""
        from xpspec.conformance.checks import ALL_CHECKS

        if check.applies(model):
            candidates: tuple[Check, ...] = (check,)
        else:
            candidates = tuple(
                c
                for c in ALL_CHECKS
                if c.capability == check.capability
                and all(needed in self.info.capabilities for needed in c.requires)
                and c.applies(model)
                and not c.name.startswith("deterministic")
                and c.name != "excluded-earn-nothing"  # compares two adapter runs, not a model
            )
        context = Context(self.reference, self.run, self._fresh)
        for candidate in candidates:
            try:
                candidate.verify(model, trace, context)
            except CheckFailure as exc:
                return f"{candidate.name}: {exc}"
            except Unsupported:
                continue  # the trace holds nothing this check judges: no objection from it
        return ""

    def _fresh(self, scenario: Scenario) -> Trace:
        """Run ``scenario`` again, bypassing the cache (for the determinism check)."""
        return self._call(self.adapter, scenario)

    def vector(self, scenario: Scenario) -> Vector | None:
        """The committed vector that is the reference of ``scenario``, if any."""
        return committed(scenario) if self._vectors else None

    def reference(self, scenario: Scenario) -> Trace:
        """The reference trace: the committed vector of the scenario when there is one (so
        the reference implementation is held to it as every adapter is), else a run of the
        reference implementation."""
        vector = self.vector(scenario)
        if vector is not None:
            return vector.trace()
        return self.run(scenario, "reference")

    def close(self) -> None:
        """Stop the adapter's worker, if it has one, and let go of the cached traces (freed
        here, as they are, rather than walked by the garbage collector's full passes that
        pytest makes at its end)."""
        close = getattr(self.adapter, "close", None)
        if callable(close):
            close()
        self._cache.clear()
        self._failure_cache.clear()
        self._keys.clear()

    # -- evaluating -----------------------------------------------------------------------------
    def evaluate(self, check: Check, name: str, scenario: Scenario) -> Outcome:
        start = time.perf_counter()
        outcome = self._evaluate(check, name, scenario)
        return Outcome(**{**outcome.__dict__, "seconds": round(time.perf_counter() - start, 4)})

    def undeclared(self, check: Check, name: str, capability: str, why: str = "") -> Outcome:
        """Not applicable: the adapter declares no ``capability``, for the reason its
        expectations' ``[[absent]]`` entry gives (quoted, with its kind), if any."""
        message = f"adapter declares no capability {capability!r}{why}"
        absent = self.expectations.why_absent(capability)
        if absent is not None:
            message += f": {absent.describe()}"
        return Outcome(
            check.name,
            check.clauses,
            name,
            "not-applicable",
            message,
            absent=absent.kind if absent is not None else "",
        )

    def _evaluate(self, check: Check, name: str, scenario: Scenario) -> Outcome:
        def out(status: Status, message: str = "", **kw: Any) -> Outcome:
            return Outcome(check.name, check.clauses, name, status, message, **kw)

        from xpspec.conformance.failing import capabilities_needed

        for needed in capabilities_needed(check, scenario):
            if needed not in self.info.capabilities:
                own = needed in (check.capability, *check.requires)
                spec = "checkpoint" if needed == "checkpoint" else "priority"
                why = "" if own else f" (the scenario's {spec} spec)"
                return self.undeclared(check, name, needed, why)
        try:
            trace = self.run(scenario)
        except Unsupported as exc:
            return out("not-applicable", f"unsupported: {exc.reason}")
        except AdapterError as exc:
            return out(
                exc.status,
                f"{self.adapter_name} broke on {_repro(name, scenario, self.reproduce)}\n{exc}",
            )
        reruns: list[Scenario] = []
        consulted: list[Vector] = []

        def rerun(other: Scenario) -> Trace:
            reruns.append(other)
            return self.run(other)

        def reference(s: Scenario) -> Trace:
            vector = self.vector(s)
            if vector is not None and s == scenario:
                consulted.append(vector)
            return self.reference(s)

        context = Context(reference, rerun, self._fresh)
        deviation = self.expectations.find(check.clauses, name, scenario.kind)
        try:
            check.verify(scenario, trace, context)
        except CheckFailure as exc:
            note = difference_note(consulted[0], trace) if consulted else ""
            outcome = self._judge(check, name, scenario, trace, exc, out, note)
            if outcome.status == "fail":
                return self._blame(check, scenario, exc, reruns, outcome)
            return replace(outcome, charged=check.charged(exc))
        except (Unsupported, AdapterError) as exc:  # a re-run inside the check
            status: Status = "not-applicable" if isinstance(exc, Unsupported) else exc.status
            return out(status, str(exc))
        except Exception as exc:  # a bug in the check itself: report it, keep the suite going
            return out(
                "error", f"check {check.name} crashed on {name!r}: {type(exc).__name__}: {exc}"
            )
        stopped = _stopped(trace)
        if stopped and not check.whole_trace and not self._reference_stops(scenario):
            return self._cut_short(check, name, scenario, trace, stopped, out)
        # A generated scenario may or may not provoke a declared deviation: staleness is
        # judged on the named catalogue scenarios only, and only where the declared variant
        # would behave otherwise than the spec (a pass is no evidence against a variant that
        # the scenario cannot show).
        if deviation is not None and name != GENERATED and self._shows(deviation, check, scenario):
            return out(
                "pass", f"stale expectation: {deviation.clause} is declared but passes", stale=True
            )
        return out("pass")

    def _shows(self, deviation: Deviation, check: Check, scenario: Scenario) -> bool:
        """Whether ``scenario`` can show ``deviation`` to ``check``: refimpl run as its
        variant records other events than refimpl run to the spec, and ``check`` fails that
        variant's trace (a statistical check may have no power to tell a variant's draws from
        the law on a short scenario). A deviation without an executable model (no variant, or
        one that does not fit the scenario alone), or a check that needs another run to judge,
        is assumed to show."""
        from xpspec.conformance.variants import variant_scenario

        if not deviation.variant:
            return True
        model = variant_scenario(deviation.clause, deviation.variant, scenario)
        if model is None:
            return True
        if model == scenario:  # the variant does not concern this kind of scenario
            return False
        try:
            variant = self.reference(model)
            if variant.events == self.reference(scenario).events:
                return False
            check.verify(scenario, variant, Context(self.reference, _no_rerun, _no_rerun))
        except (CheckFailure, Unsupported, AdapterError):
            return True
        return False

    def _judge(
        self,
        check: Check,
        name: str,
        scenario: Scenario,
        trace: Trace,
        exc: CheckFailure,
        out: Callable[..., Outcome],
        note: str = "",
    ) -> Outcome:
        """A check failed: a failure, a warning, or a deviation the expectations explain.
        ``note`` (where the trace parts from the committed vector) ends the message."""
        message = f"[{', '.join(check.clauses)}] {check.name}: {exc}\n{_repro(name, scenario, self.reproduce, self.explain)}"
        if note:
            message += "\n" + note
        level = self._level(check)
        finding = self.expectations.finding(check.clauses, name, _stopped(trace))
        if not self._declared(name, scenario) and finding is None:
            silenced = self.expectations.silence(check.clauses) if level == "SHOULD" else None
            if silenced is not None:
                return out(
                    "deviation",
                    f"silenced SHOULD-level failure: {silenced.reason}\n{message}",
                    level=level,
                )
            return out("fail", message, level=level)
        return self._explain(check, name, scenario, trace, message, level, finding, out)

    def _reference_stops(self, scenario: Scenario) -> bool:
        """Whether the reference run of ``scenario`` stops early too (then a stopped trace is
        what the spec allows, and a passing check is judged as on any run)."""
        try:
            return bool(_stopped(self.reference(scenario)))
        except (Unsupported, AdapterError):
            return False

    def _cut_short(
        self,
        check: Check,
        name: str,
        scenario: Scenario,
        trace: Trace,
        stopped: str,
        out: Callable[..., Outcome],
    ) -> Outcome:
        """A check passed on a run the framework ended early by raising: it saw only what
        came before the stop, so the clause is not shown to hold there and the outcome is no
        pass. A finding that declares the stop (its ``stopped`` text) makes it ``cut-short``
        (no verdict on the check's clauses there); otherwise it fails, downstream of the cause of
        the scenario's other failures if any."""
        level = self._level(check)
        what = (
            f"the framework ended the run early ({stopped}); this check passed on what the "
            "trace holds before the stop, but the rest of the run the clause speaks of is missing"
        )
        message = f"[{', '.join(check.clauses)}] {check.name}: {what}\n" + _repro(
            name, scenario, self.reproduce, self.explain
        )
        finding = self.expectations.stop(name, stopped)
        if finding is not None:
            return out("cut-short", f"{message}\nthe stop is a declared finding: {finding.reason}")
        exc = CheckFailure(what, "a run to its end", f"stopped: {stopped}")
        return self._blame(check, scenario, exc, [], out("fail", message, level=level))

    # -- blame ----------------------------------------------------------------------------------
    def _blame(
        self,
        check: Check,
        scenario: Scenario,
        exc: CheckFailure,
        reruns: list[Scenario],
        outcome: Outcome,
    ) -> Outcome:
        """Charge a failure to its clause, and mark it downstream of the scenario's cause
        (or of the cause in another run the check compared with) when that is not itself."""
        outcome = replace(outcome, charged=check.charged(exc))
        own = self._key(scenario)
        for other in reruns:
            if self._key(other) == own:
                continue
            failures = self._failures(other)
            if failures:
                cause = cause_of(failures)
                return self._downstream(outcome, cause, "in the run it was compared with")
        failures = self._failures(scenario)
        if not failures:  # the check fails only with the reruns it made here
            return outcome
        cause = cause_of(failures)
        from xpspec.conformance.failing import failure_of

        if cause.check == check.name or not follows(failure_of(check, exc), cause):
            return outcome
        return self._downstream(outcome, cause, "in this run")

    @staticmethod
    def _downstream(outcome: Outcome, cause: Failure, where: str) -> Outcome:
        at = f", iteration {cause.iteration}" if cause.iteration is not None else ""
        return replace(
            outcome,
            downstream_of=cause.charged[0],
            message=f"downstream of {', '.join(cause.charged)} ({cause.check}{at}) "
            f"{where}: this failure follows from that one\n{outcome.message}",
        )

    def _failures(self, scenario: Scenario) -> list[Failure]:
        """Every check the adapter can run that fails on ``scenario`` (cached), as
        :func:`xpspec.conformance.failing.check_trace` runs them: the determinism checks are
        left out, so blame never costs more than the runs the suite makes anyway."""
        from xpspec.conformance.failing import check_trace

        key = self._key(scenario)
        if key not in self._failure_cache:
            try:
                trace = self.run(scenario)
            except (Unsupported, AdapterError):
                self._failure_cache[key] = []
            else:
                context = Context(self.reference, self.run, self._fresh)
                checked = check_trace(scenario, trace, context, self.info.capabilities)
                self._failure_cache[key] = [failure for failure, _ in checked.failures]
        return self._failure_cache[key]
