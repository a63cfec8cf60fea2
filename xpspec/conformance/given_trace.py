"""A trace produced elsewhere, as an adapter, so that ``xpspec check`` evaluates it through the
engine ``xpspec run`` uses (:class:`~xpspec.conformance.engine.Session`): the same checks,
outcomes, blame and exit codes.

:class:`GivenTrace` answers its one scenario with the given trace, once. Any other run — a
different scenario a check compares with, or the same scenario run afresh (clause
``trace.deterministic``) — raises :class:`~xpspec.protocol.adapter.Unsupported`, so a check
that needs one is not applicable, as it is for an adapter that cannot express a scenario.
"""

from __future__ import annotations

from pathlib import Path

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
from xpspec.protocol.trace import Trace
from xpspec.protocol.trace_file import SpoolTrace, SpoolWriter
from xpspec.refimpl.adapter import RefimplAdapter
from xpspec.refimpl.trainer import trace_header, train

__all__ = ["FileReference", "GivenTrace"]


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
    """The reference implementation keeping the events of a train run in a file in
    ``directory`` as it runs, and answering with that file
    (:class:`~xpspec.protocol.trace_file.SpoolTrace`): the reference of a long given trace is
    as long, and is compared with it pass by pass, never held whole. The events are the run's
    own objects, pickled, not written as JSON and decoded again: the same events, as
    ``tests/conformance/test_streamed_check.py`` holds. Other kinds of scenario are answered
    as :class:`~xpspec.refimpl.adapter.RefimplAdapter` answers them."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._runs = 0

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        self._runs += 1
        path = self.directory / f"reference-{self._runs}.events.pickle"
        sc = scenario
        with SpoolWriter(path) as writer:
            train(sc.env, sc.trainer, sc.preprocess, sc.sampling, sc.seed, sink=writer)
        return SpoolTrace(path, trace_header(sc.seed))
