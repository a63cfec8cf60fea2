"""An adapter that runs in a worker process: the suite's side of ``xpspec-worker/1``.

:class:`RemoteAdapter` offers the adapter protocol (:mod:`xpspec.protocol.adapter`) and
forwards every operation to a :class:`~xpspec.conformance.harness.process.WorkerProcess`. The
worker's answers become what an in-process adapter would have given (a trace, or
:class:`~xpspec.protocol.adapter.Unsupported`, or an adapter error); a worker that dies,
overruns its time or its memory becomes an :class:`~xpspec.conformance.outcomes.AdapterFailure`
whose status names it. A worker that failed is started afresh for the next operation.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from xpspec.conformance.harness.process import DEFAULT_LIMITS, Limits, WorkerProcess
from xpspec.conformance.outcomes import AdapterError, AdapterFailure
from xpspec.protocol import PROTOCOL, Request, Response
from xpspec.protocol.adapter import AdapterInfo, Unsupported
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

__all__ = ["RemoteAdapter"]


class RemoteAdapter:
    """The adapter served by the worker started from ``command``. ``deadline`` (a
    ``time.monotonic()`` value) bounds every operation by the run's remaining time."""

    isolated = True

    def __init__(
        self,
        command: Sequence[str],
        limits: Limits = DEFAULT_LIMITS,
        label: str = "adapter",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.label = label
        self.worker = WorkerProcess(command, limits, env=env, label=f"adapter {label!r}")
        self.deadline: float | None = None
        self._info: AdapterInfo | None = None
        self._starts = 0
        self._hello_sent: Request | None = None

    def begin(self) -> None:
        """Start the worker and send the handshake without waiting for the answer, so that
        the worker starts up while the caller does something else (:meth:`info` waits)."""
        if not self.worker.running:
            self._hello_sent = self.worker.send("hello")

    # -- the adapter protocol -------------------------------------------------------------------
    def info(self) -> AdapterInfo:
        if self._info is None:
            self._ensure_started()
        assert self._info is not None
        return self._info

    def smoke(self) -> None:
        response = self._request("smoke")
        if response.outcome == "error":
            raise AdapterError(f"smoke check failed: {response.error_type}: {response.message}")
        self._expect(response, "ok", "smoke")

    def run_env(self, scenario: EnvScenario) -> Trace:
        return self._run(scenario)

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        return self._run(scenario)

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        return self._run(scenario)

    def run_learner(self, scenario: LearnerScenario) -> Trace:
        return self._run(scenario)

    def run_relabel(self, scenario: RelabelScenario) -> Trace:
        return self._run(scenario)

    def run_recurrent(self, scenario: RecurrentScenario) -> Trace:
        return self._run(scenario)

    def run_stack(self, scenario: StackScenario) -> Trace:
        return self._run(scenario)

    def run_offline(self, scenario: OfflineScenario) -> Trace:
        return self._run(scenario)

    def run_async(self, scenario: AsyncScenario) -> Trace:
        return self._run(scenario)

    def close(self) -> None:
        self.worker.close()

    # -- plumbing -------------------------------------------------------------------------------
    def _hello(self) -> AdapterInfo:
        """The handshake every new worker answers first: protocol and adapter info."""
        pending, self._hello_sent = self._hello_sent, None
        if pending is not None and self.worker.running:
            response = self.worker.receive(pending)
        else:
            response = self.worker.request("hello")
        if response.outcome == "error":
            self.worker.stop()
            raise AdapterError(f"{response.error_type}: {response.message}")
        self._expect(response, "ok", "hello")
        if response.protocol != PROTOCOL:
            self.worker.stop()
            raise AdapterFailure(
                "error",
                f"adapter {self.label!r} speaks {response.protocol or 'no protocol'!r}, expected {PROTOCOL!r}",
            )
        try:
            return _adapter_info(response.info)
        except (TypeError, ValueError) as exc:
            self.worker.stop()
            raise AdapterFailure("error", f"adapter {self.label!r}: invalid info: {exc}") from None

    def _ensure_started(self) -> None:
        if self.worker.running and self._starts == self.worker.starts:
            return
        info = self._hello()
        if self._info is not None and info.capabilities != self._info.capabilities:
            raise AdapterFailure(
                "error",
                f"adapter {self.label!r} restarted with other capabilities: "
                f"{info.capabilities} instead of {self._info.capabilities}",
            )
        self._info = info
        self._starts = self.worker.starts

    def _timeout(self) -> float | None:
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise AdapterFailure("timeout", "the run's time budget is spent")
        return min(left, self.worker.limits.timeout)

    def _request(self, op: str, scenario: dict[str, Any] | None = None) -> Response:
        self._ensure_started()
        return self.worker.request(op, scenario, timeout=self._timeout())

    def _run(self, scenario: Scenario) -> Trace:
        response = self._request("run", json.loads(scenario_to_json(scenario)))
        if response.outcome == "unsupported":
            raise Unsupported(response.reason, response.link)
        if response.outcome == "error":
            raise AdapterError(f"{response.error_type}: {response.message}")
        self._expect(response, "trace", f"run_{scenario.kind}")
        try:
            return Trace.from_jsonl(response.trace)
        except ValueError as exc:
            raise AdapterError(f"malformed trace: {exc}") from None

    def _expect(self, response: Response, outcome: str, op: str) -> None:
        if response.outcome != outcome:
            self.worker.stop()
            raise AdapterFailure(
                "error",
                f"adapter {self.label!r} broke the protocol: {op} answered {response.outcome!r}, expected {outcome!r}",
            )


def _adapter_info(data: dict[str, Any]) -> AdapterInfo:
    known = {
        "name",
        "framework",
        "framework_version",
        "protocol_version",
        "capabilities",
        "issue_tracker",
        "notes",
        "extra_versions",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"info.{unknown[0]}: expected one of {sorted(known)}")
    for name in ("name", "framework", "framework_version"):
        if not isinstance(data.get(name), str):
            raise ValueError(f"info.{name}: expected a string, got {data.get(name)!r}")
    capabilities = data.get("capabilities", [])
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        raise ValueError(f"info.capabilities: expected a list of strings, got {capabilities!r}")
    return AdapterInfo(**{**data, "capabilities": tuple(capabilities)})
