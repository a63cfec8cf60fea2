"""Adapters that break the way real ones do, for the harness tests.

Each runs the reference trainer, except in its trainer operation on :data:`TARGET`, where
it misbehaves; other trainer scenarios are answered :class:`Unsupported` (to keep the
runs short), and its replay operation is the reference's, so that a test can see that the
other checks' verdicts are unaffected. Loaded by path, e.g.
``--adapter tests.conformance.broken_adapters:Abort``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from typing import Any

from xpspec.conformance.catalog import CATALOG
from xpspec.protocol.adapter import AdapterInfo, Unsupported
from xpspec.protocol.scenario import TrainerScenario, scenario_to_json
from xpspec.protocol.trace import Store, Trace
from xpspec.refimpl.adapter import RefimplAdapter

TARGET = "plain-u1-b1"
"""The one trainer scenario the broken adapters run (a plain run: a few checks apply)."""
_TARGET_JSON = scenario_to_json(CATALOG[TARGET])


class _Broken(RefimplAdapter):
    """The reference adapter with trainer and replay only, broken in :meth:`misbehave`."""

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name=type(self).__name__,
            framework="refimpl, broken on purpose",
            framework_version="0",
            capabilities=("trainer", "replay"),
        )

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        if scenario_to_json(scenario) != _TARGET_JSON:
            raise Unsupported(f"this test adapter runs only {TARGET!r}")
        return self.misbehave(scenario)

    def misbehave(self, scenario: TrainerScenario) -> Any:
        raise NotImplementedError


class Abort(_Broken):
    def misbehave(self, scenario: TrainerScenario) -> Any:
        os.abort()


class SysExit(_Broken):
    def misbehave(self, scenario: TrainerScenario) -> Any:
        sys.exit(0)


class OsExit(_Broken):
    def misbehave(self, scenario: TrainerScenario) -> Any:
        os._exit(3)


class NativeHang(_Broken):
    """Hangs where no Python signal handler can run: the signals a harness would use to
    interrupt it (alarm, terminate, interrupt) are blocked, as native code may leave them."""

    def misbehave(self, scenario: TrainerScenario) -> Any:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM, signal.SIGINT})
        libc = ctypes.CDLL(None)
        while True:
            libc.sleep(3600)


class BusyLoop(_Broken):
    def misbehave(self, scenario: TrainerScenario) -> Any:
        n = 0
        while True:
            n += 1


class StdoutNoise(_Broken):
    """Prints to standard output from Python and from native code, then answers right."""

    def misbehave(self, scenario: TrainerScenario) -> Any:
        print("noise from print()")
        sys.stdout.flush()
        os.write(1, b"noise written to fd 1\n")
        return RefimplAdapter.run_trainer(self, scenario)


class SmokeRaises(_Broken):
    def smoke(self) -> None:
        raise RuntimeError("the framework's license server is unreachable")


class MalformedTrace(_Broken):
    """Stores an item that is no step of the scenario's env."""

    def misbehave(self, scenario: TrainerScenario) -> Any:
        trace = RefimplAdapter.run_trainer(self, scenario)
        bogus = Store(1, (7,), (0,), (0,), (0,), (0.0,), (1.0,), (0.0,))
        return Trace((trace.events[0], bogus, *trace.events[1:]), trace.header)


class WrongType(_Broken):
    def misbehave(self, scenario: TrainerScenario) -> Any:
        return {"events": []}


class MemoryBomb(_Broken):
    def misbehave(self, scenario: TrainerScenario) -> Any:
        hoard = []
        while True:
            hoard.append(b"x" * (64 << 20))  # touched, so resident


class SlowButCorrect(_Broken):
    def misbehave(self, scenario: TrainerScenario) -> Any:
        time.sleep(1.0)
        return RefimplAdapter.run_trainer(self, scenario)


class Raises(_Broken):
    def misbehave(self, scenario: TrainerScenario) -> Any:
        raise KeyError("a bug in the adapter")


class LosesStores(RefimplAdapter):
    """Every trainer run loses its first store: conservation fails wherever anything is
    stored, so a generated conservation invariant must be recorded as failing."""

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            "LosesStores", "refimpl, broken on purpose", "0", capabilities=("trainer",)
        )

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        trace = RefimplAdapter.run_trainer(self, scenario)
        first = next((i for i, e in enumerate(trace.events) if e.kind == "store"), None)
        if first is None:
            return trace
        return Trace(trace.events[:first] + trace.events[first + 1 :], trace.header)
