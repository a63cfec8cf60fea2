"""The out-of-process harness: every adapter runs in a worker process that speaks
``xpspec-worker/1`` (:mod:`xpspec.protocol`), under a time limit per operation and a memory
limit, so that no adapter can take a run down, hang it, or write into its verdicts.

- :mod:`~xpspec.conformance.harness.loading` finds an adapter by its registered name (an entry
  point) or its ``package.module:object`` path, and its expectations file;
- :func:`~xpspec.conformance.harness.connect.connect` turns an ``--adapter`` string into a ready
  adapter (a worker for a Python adapter or an ``exec:`` program, or the adapter imported
  inline for debugging);
- :class:`~xpspec.conformance.harness.remote.RemoteAdapter` is the suite's side of the protocol;
- :mod:`xpspec.conformance.harness.host` is the worker that serves a Python adapter (forking a
  child per operation for one that needs a fresh process each time);
- :class:`~xpspec.conformance.harness.process.WorkerProcess` owns one worker process.
"""

from xpspec.conformance.harness.connect import Isolation, check_spec, connect, parse_memory
from xpspec.conformance.harness.loading import (
    ENTRY_POINT_GROUP,
    expectations_path,
    load_adapter,
    registrations,
)
from xpspec.conformance.harness.process import Limits, WorkerProcess
from xpspec.conformance.harness.remote import RemoteAdapter

__all__ = [
    "ENTRY_POINT_GROUP",
    "Isolation",
    "Limits",
    "RemoteAdapter",
    "WorkerProcess",
    "check_spec",
    "connect",
    "expectations_path",
    "load_adapter",
    "parse_memory",
    "registrations",
]
