"""Adapters that ask for a fresh process per operation, for the harness tests: one whose
module-level counter would carry from one operation to the next without one, and the
adapters of :mod:`tests.conformance.broken_adapters` misbehaving in the child the host
forks. Loaded by path, e.g. ``--adapter tests.conformance.fresh_adapters:Abort``.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from tests.conformance import broken_adapters
from xpspec.protocol.adapter import AdapterInfo
from xpspec.protocol.scenario import EnvScenario, TrainerScenario
from xpspec.protocol.trace import Trace

_operations = 0
"""Operations this process has run (smoke included)."""
_prepared = 0
"""Calls of ``prepare()`` this process has seen (or inherited)."""


class Counting:
    """Answers each env scenario with an empty trace whose header says how many operations
    its process has run, that process's pid and its parent's, and how often ``prepare()``
    ran before."""

    fresh_process_per_operation = True

    def info(self) -> AdapterInfo:
        return AdapterInfo(type(self).__name__, "a counter", "0", capabilities=("env",))

    def prepare(self) -> None:
        global _prepared
        _prepared += 1

    def smoke(self) -> None:
        self._count()

    def run_env(self, scenario: EnvScenario) -> Trace:
        header = {
            "producer": "counting",
            "operations": self._count(),
            "prepared": _prepared,
            "pid": os.getpid(),
            "parent": os.getppid(),
        }
        return Trace((), header)

    def _count(self) -> int:
        global _operations
        _operations += 1
        return _operations


class CountingInOneProcess(Counting):
    """:class:`Counting` served by one process: the count carries over."""

    fresh_process_per_operation = False


class LeavesAProcessBehind(Counting):
    """Answers after forking a process that sleeps for a minute, holding every file the
    operation's process had open."""

    def run_env(self, scenario: EnvScenario) -> Trace:
        if os.fork() == 0:
            time.sleep(60.0)
            os._exit(0)
        return super().run_env(scenario)


class PrepareRaises(CountingInOneProcess):
    def prepare(self) -> None:
        raise OSError("the warm-up cache is unreadable")


class _Fresh:
    fresh_process_per_operation = True


class Abort(_Fresh, broken_adapters.Abort):
    pass


class SysExit(_Fresh, broken_adapters.SysExit):
    pass


class OsExit(_Fresh, broken_adapters.OsExit):
    pass


class NativeHang(_Fresh, broken_adapters.NativeHang):
    pass


class BusyLoop(_Fresh, broken_adapters.BusyLoop):
    pass


class StdoutNoise(_Fresh, broken_adapters.StdoutNoise):
    pass


class MalformedTrace(_Fresh, broken_adapters.MalformedTrace):
    pass


class WrongType(_Fresh, broken_adapters.WrongType):
    pass


class MemoryBomb(_Fresh, broken_adapters.MemoryBomb):
    pass


class SlowButCorrect(_Fresh, broken_adapters.SlowButCorrect):
    pass


class Raises(_Fresh, broken_adapters.Raises):
    pass


class HangsNamingItsPid(_Fresh, broken_adapters.NativeHang):
    """:class:`NativeHang` that first writes its pid to standard error (the suite quotes
    it), so that a test can see the child gone once the time limit has struck."""

    def misbehave(self, scenario: TrainerScenario) -> Any:
        print(f"hanging in pid {os.getpid()}", file=sys.stderr, flush=True)
        return super().misbehave(scenario)
