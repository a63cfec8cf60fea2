"""A trace produced elsewhere, as an adapter, so that ``xpspec check`` evaluates it through the
engine ``xpspec run`` uses (:class:`~xpspec.conformance.engine.Session`): the same checks,
outcomes, blame and exit codes.

:class:`GivenTrace` answers its one scenario with the given trace, once. Any other run — a
different scenario a check compares with, or the same scenario run afresh (clause
``trace.deterministic``) — raises :class:`~xpspec.protocol.adapter.Unsupported`, so a check
that needs one is not applicable, as it is for an adapter that cannot express a scenario.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

from xpspec.conformance.frames import where
from xpspec.conformance.outcomes import AdapterError
from xpspec.protocol.adapter import CAPABILITIES, PROTOCOL_VERSION, AdapterInfo, Unsupported
from xpspec.protocol.scenario import (
    AsyncScenario,
    EnvScenario,
    LearnerScenario,
    OfflineScenario,
    RecurrentScenario,
    RelabelScenario,
    ReplayScenario,
    Scenario,
    StackScenario,
    TrainerScenario,
    scenario_to_json,
)
from xpspec.protocol.shared_pass import Closeable, current
from xpspec.protocol.trace import Event, Trace
from xpspec.refimpl.adapter import RefimplAdapter
from xpspec.refimpl.trainer import Trainer, trace_header

__all__ = ["FileReference", "GivenTrace", "RunEvents", "RunTrace"]


class GivenTrace:
    """The adapter whose only run is ``trace``, of ``scenario``. It declares every capability:
    a trace given without its implementation is held to every check of its scenario's kind."""

    def __init__(
        self,
        scenario: Scenario,
        trace: Trace,
        source: str = "the given trace",
        validated: bool = False,
    ) -> None:
        self.scenario, self.trace, self.source = scenario, trace, source
        self.validated = validated
        """Whether ``trace`` was validated against ``scenario`` already (the engine then does
        not validate it again)."""
        self._key = scenario_to_json(scenario)
        self._answered = False

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name="given-trace",
            framework=str(self.trace.header.get("producer", "unknown")),
            framework_version="",
            protocol_version=PROTOCOL_VERSION,
            capabilities=CAPABILITIES,
        )

    def smoke(self) -> None:
        """Nothing to run: the trace is already there."""

    def _answer(self, scenario: Scenario) -> Trace:
        if scenario_to_json(scenario) != self._key:
            raise Unsupported(
                f"{self.source} is a trace of one scenario; "
                "a check that compares it with a run of another scenario cannot run"
            )
        if self._answered:
            raise Unsupported(
                f"{self.source} is one run; a check that runs the scenario again cannot run"
            )
        self._answered = True
        return self.trace

    def run_env(self, scenario: EnvScenario) -> Trace:
        return self._answer(scenario)

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        return self._answer(scenario)

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        return self._answer(scenario)

    def run_learner(self, scenario: LearnerScenario) -> Trace:
        return self._answer(scenario)

    def run_relabel(self, scenario: RelabelScenario) -> Trace:
        return self._answer(scenario)

    def run_recurrent(self, scenario: RecurrentScenario) -> Trace:
        return self._answer(scenario)

    def run_stack(self, scenario: StackScenario) -> Trace:
        return self._answer(scenario)

    def run_offline(self, scenario: OfflineScenario) -> Trace:
        return self._answer(scenario)

    def run_async(self, scenario: AsyncScenario) -> Trace:
        return self._answer(scenario)


class FileReference(RefimplAdapter):
    """The reference implementation answering a trainer scenario with a trace whose events are
    handed over by a run of the reference trainer as it goes (:class:`RunTrace`): the
    reference of a long given trace is as long, and is compared with it pass by pass, never
    held whole, and never written and read back. Other kinds of scenario are answered as
    :class:`~xpspec.refimpl.adapter.RefimplAdapter` answers them."""

    def __init__(self) -> None:
        self._runs = 0

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        self._runs += 1
        return RunTrace(scenario, Path(f"<reference run {self._runs} of {id(self):x}>"))


class RunEvents:
    """The events of a run of the reference trainer on ``scenario``, handed over by the run as
    each iteration ends (its ``sink``): each iteration over them runs the trainer anew, from
    scratch (the trainer is deterministic, clause ``trace.deterministic``), and holds one
    iteration's events at a time. In a job of a
    :class:`~xpspec.protocol.shared_pass.LockStep`, the jobs that start a pass together share
    one run, as they share one reading of a file; ``path`` names the run for the group."""

    def __init__(self, scenario: TrainerScenario, path: Path) -> None:
        self.scenario, self.path = scenario, path
        self._first: tuple[Trainer, list[Event]] | None = self._trainer()
        """The first run's trainer, built at once (a scenario it refuses is refused here), and
        the list its sink fills."""

    def _trainer(self) -> tuple[Trainer, list[Event]]:
        """A trainer of the scenario, and the list its sink fills."""
        sc = self.scenario
        events: list[Event] = []
        trainer = Trainer(
            sc.env, sc.trainer, sc.preprocess, sc.sampling, sc.seed, sink=events.extend
        )
        return trainer, events

    def __iter__(self) -> Iterator[Event]:
        group = current()
        return self._run() if group is None else group.events(self)

    def open(self) -> tuple[Closeable, Iterator[Event]]:
        """A run, and its events as it hands them over (a pass of a
        :class:`~xpspec.protocol.shared_pass.LockStep`)."""
        run = self._run()
        return run, run

    def _run(self) -> Generator[Event, None, None]:
        """The events of one run: ``Trainer.run``'s own steps (``start``, ``run_iteration``
        until it says the run is over, ``finish``), each iteration's events handed over by
        the sink as that iteration ends, the objects the trainer made."""
        first, self._first = self._first, None
        trainer, events = self._trainer() if first is None else first
        try:
            trainer.start()
            over = False
            while not over:
                over = trainer.run_iteration()
                yield from events
                events.clear()
            trainer.finish()
        except Exception as exc:  # the reference broke: as the engine reports a run that broke
            raise AdapterError(f"{type(exc).__name__}: {exc}{where(exc)}") from exc
        yield from events

    def of_kind(self, kind: str) -> Iterator[Event]:
        """The events of one kind, in order."""
        return (e for e in self if e.kind == kind)

    def __repr__(self) -> str:
        return f"RunEvents({self.path})"


class RunTrace(Trace):
    """The trace of a run of the reference trainer on ``scenario``, its events those the run
    hands over as it goes (:class:`RunEvents`), iterated pass by pass as a
    :class:`~xpspec.protocol.trace_file.TraceFile` is; its header is the run's."""

    def __init__(self, scenario: TrainerScenario, path: Path) -> None:
        object.__setattr__(self, "events", RunEvents(scenario, path))
        object.__setattr__(self, "header", trace_header(scenario.seed))

    def of_kind(self, kind: str) -> Iterator[Event]:  # type: ignore[override]
        events: Any = self.events
        return events.of_kind(kind)
