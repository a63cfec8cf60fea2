"""pytest plugin: ``--adapter`` / ``XPSPEC_ADAPTER`` selects the implementation under test,
``--xpspec-report PATH`` writes the JSON Lines report, ``--xpspec-profile`` picks the
Hypothesis profile, ``--xpspec-isolation`` says where the adapter runs (``process``, the
default: a worker process under a time and memory limit; ``inline`` for debugging).
Registered as the ``xpspec`` pytest11 entry point, so
``pytest --pyargs xpspec.conformance.suite --adapter NAME`` works wherever xpspec is installed.

The report is streamed: a header record when the run starts, one result record per check,
each flushed as it is written, and a footer record saying how the run ended
(:data:`xpspec.conformance.outcomes.RUN_STATUSES`). A report without a footer is a run that died.
"""

from __future__ import annotations

import datetime
import gc
import json
import os
import platform
import sys
import time
import typing
import warnings
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pytest

from xpspec.conformance.outcomes import ADAPTER_FAILURES, AdapterUnavailable, ExitCode, RunStatus

if typing.TYPE_CHECKING:  # the plugin loads in every pytest run: the engine only when used
    from xpspec.conformance.checks import Check
    from xpspec.conformance.engine import Outcome
    from xpspec.protocol.adapter import Adapter
    from xpspec.protocol.scenario import Scenario

__all__ = ["Handoff", "XpspecSession", "run_profile", "run_settings"]


@dataclass(eq=False)
class Handoff:
    """An adapter the caller (``xpspec run``) already connected and smoke-checked, given to
    ``pytest.main(plugins=[...])`` so that the run does not start it twice."""

    adapter: Any


@dataclass
class _Run:
    """Per-run state, on the controlling process."""

    report: TextIO | None = None
    counts: dict[str, int] = field(default_factory=dict)
    started: float = 0.0
    deadline: float | None = None
    status: RunStatus = "complete"
    message: str = ""
    adapter: Any = None
    session: pytest.Session | None = None
    progress: Any = None  # a xpspec.conformance.progress.Progress under --xpspec-progress
    failed: set[str] = field(default_factory=set)  # node ids with a failed phase


_RUN = pytest.StashKey[_Run]()
_OUTER = pytest.StashKey["pytest.Config | None"]()
"""The config of the run this one was started inside (a worked example that runs the suite
from a test), restored when this one ends."""
_PROFILE = pytest.StashKey[str]()
_DESELECTED = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("xpspec")
    group.addoption(
        "--adapter",
        default=None,
        help="registered adapter name, package.module:object or exec:COMMAND "
        "(default: $XPSPEC_ADAPTER or refimpl)",
    )
    group.addoption(
        "--expectations",
        default=None,
        help="expectations TOML (default: MODULE.expectations.toml beside the adapter's "
        "module MODULE.py, if present)",
    )
    group.addoption("--xpspec-report", default=None, help="write the JSON Lines report here")
    group.addoption(
        "--xpspec-profile", default=None, help="Hypothesis profile: ci (default) or thorough"
    )
    group.addoption(
        "--xpspec-timeout", default=120.0, type=float, help="seconds per adapter operation"
    )
    group.addoption(
        "--xpspec-run-timeout",
        default=0.0,
        type=float,
        help="seconds for the whole run (0: no limit); past it the run stops, marked timeout",
    )
    group.addoption(
        "--xpspec-isolation",
        default="process",
        choices=("process", "inline"),
        help="where the adapter runs: a worker process (default) or this process (debugging)",
    )
    group.addoption(
        "--xpspec-strict",
        action="store_true",
        default=False,
        help="a SHOULD miss fails its test like a MUST failure (default: a warning)",
    )
    group.addoption(
        "--xpspec-progress",
        action="store_true",
        default=False,
        help="print lines with the count of checks done and the time left instead of "
        "pytest's dots (xpspec run sets it)",
    )
    group.addoption(
        "--xpspec-memory-limit",
        default="8G",
        help="resident memory per adapter worker, e.g. 8G or 512M; 0 for none (default 8G)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "clause(*ids): the spec clauses a test checks")
    config.addinivalue_line(
        "markers", "refimpl_only: a suite test about refimpl's own code (variant models)"
    )
    profile = config.getoption("--xpspec-profile", None) or os.environ.get("XPSPEC_PROFILE", "ci")
    if profile not in ("ci", "thorough"):
        raise pytest.UsageError(f"--xpspec-profile: expected 'ci' or 'thorough', got {profile!r}")
    # Loaded when the suite is collected (pytest_collection_modifyitems), not here: the plugin
    # is active in every pytest run of an environment xpspec is installed in, and a
    # framework's own tests must neither pay for importing the suite nor run under its
    # Hypothesis profile.
    config.stash[_PROFILE] = profile
    _limits(config)  # a bad limit is a usage error before anything runs
    given = config.getoption("--expectations", None)
    if given:  # so is a missing or malformed expectations file (not one error per test)
        from xpspec.conformance.expectations import Expectations

        try:
            Expectations.load(Path(given))
        except (OSError, ValueError) as exc:
            raise pytest.UsageError(f"--expectations: {exc}") from None
    config.stash[_RUN] = _Run()
    config.stash[_OUTER] = _CONFIG.get("config")
    _CONFIG["config"] = config
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "xpspec-xdist")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _CONFIG.get("config") is config:
        outer = config.stash.get(_OUTER, None)
        if outer is None:
            _CONFIG.pop("config", None)
        else:
            _CONFIG["config"] = outer


def _adapter_name(config: pytest.Config) -> str:
    return config.getoption("--adapter", None) or os.environ.get("XPSPEC_ADAPTER") or "refimpl"


def _expectations_path(config: pytest.Config, name: str) -> Path | None:
    """``--expectations``, else the file beside the adapter's module (if there is one)."""
    given = config.getoption("--expectations", None)
    if given:
        return Path(given)
    from xpspec.conformance.harness import expectations_path

    return expectations_path(name)


def _limits(config: pytest.Config) -> Any:
    from xpspec.conformance.harness import Limits, parse_memory

    try:
        return Limits(
            timeout=config.getoption("--xpspec-timeout", 120.0),
            memory=parse_memory(str(config.getoption("--xpspec-memory-limit", "8G"))),
        )
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _connect(config: pytest.Config) -> Adapter:
    """The adapter under test, connected and smoke-checked (AdapterUnavailable if not)."""
    from xpspec.conformance.harness import connect

    return connect(
        _adapter_name(config), config.getoption("--xpspec-isolation", "process"), _limits(config)
    )


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class XpspecSession:
    """The session fixture's value: evaluates a check and turns its outcome into a pytest
    result (pass, failure, skip for not applicable, xfail for a known deviation)."""

    def __init__(self, config: pytest.Config, adapter: Adapter | None = None) -> None:
        from xpspec.conformance.engine import Session
        from xpspec.conformance.expectations import Expectations, ExpectationsError

        self.name = _adapter_name(config)
        if adapter is None:
            try:
                adapter = _connect(config)
            except AdapterUnavailable as exc:
                pytest.exit(f"xpspec: {exc}", returncode=int(ExitCode.ADAPTER_UNAVAILABLE))
        try:
            self.engine = Session(
                adapter,
                self.name,
                Expectations.load(_expectations_path(config, self.name)),
                timeout=config.getoption("--xpspec-timeout", 120.0),
            )
        except ExpectationsError as exc:  # e.g. versions that cannot be decided for this run
            pytest.exit(f"xpspec: {exc}", returncode=int(ExitCode.BAD_INPUT))
        run = config.stash[_RUN]
        self.engine.deadline = run.deadline
        if hasattr(adapter, "deadline"):
            adapter.deadline = run.deadline
        self.strict = bool(config.getoption("--xpspec-strict", False))
        self.node: Any = None

    def assert_outcome(self, check: Check, name: str, scenario: Scenario) -> None:
        """Evaluate ``check`` on ``scenario`` and turn the outcome into the test's result."""
        self.report(self.engine.evaluate(check, name, scenario))

    def record(self, outcome: Outcome) -> None:
        """Attach ``outcome`` to the current test (the report's record of it)."""
        if self.node is not None:
            self.node.user_properties[:] = [
                p for p in self.node.user_properties if p[0] != "xpspec"
            ]
            self.node.user_properties.append(("xpspec", outcome.__dict__))

    def report(self, outcome: Outcome) -> None:
        """Record ``outcome`` on the current test and raise the matching pytest result."""
        self.record(outcome)
        if outcome.stale:
            warnings.warn(outcome.message, stacklevel=2)
        if outcome.status == "not-applicable":
            pytest.skip(outcome.message)
        if outcome.status in ("deviation", "cut-short"):
            pytest.xfail(outcome.message)
        if outcome.status == "fail" and outcome.level == "SHOULD" and not self.strict:
            warnings.warn(f"SHOULD miss: {outcome.message}", stacklevel=2)
            return
        if outcome.status == "fail" or outcome.status in ADAPTER_FAILURES:
            pytest.fail(f"{outcome.status.upper()}: {outcome.message}", pytrace=False)

    def close(self) -> None:
        self.engine.close()


@pytest.fixture(scope="session")
def _xpspec(request: pytest.FixtureRequest) -> Any:
    config = request.config
    run = config.stash[_RUN]
    adapter, run.adapter = run.adapter, None  # connected at session start (not on xdist)
    session = XpspecSession(config, adapter)
    yield session
    session.close()


@pytest.fixture
def xpspec_session(_xpspec: XpspecSession, request: pytest.FixtureRequest) -> XpspecSession:
    _xpspec.node = request.node
    return _xpspec


# -- JSON Lines report ----------------------------------------------------------------------------
def _versions() -> dict[str, str]:
    import hypothesis

    versions = {"python": platform.python_version(), "hypothesis": hypothesis.__version__}
    torch = sys.modules.get("torch")
    if torch is not None:
        versions["torch"] = torch.__version__
    return versions


def run_profile(config: pytest.Config) -> str:
    """The run's profile, ``ci`` (the default) or ``thorough`` (``--xpspec-profile``)."""
    return config.stash.get(_PROFILE, "ci")


def run_settings(config: pytest.Config) -> dict[str, Any]:
    """The run's settings as the report header states them."""
    return {
        "profile": run_profile(config),
        "isolation": config.getoption("--xpspec-isolation", "process"),
        "timeout": config.getoption("--xpspec-timeout", 120.0),
        "run_timeout": config.getoption("--xpspec-run-timeout", 0.0) or 0.0,
        "memory_limit": str(config.getoption("--xpspec-memory-limit", "8G")),
        "strict": bool(config.getoption("--xpspec-strict", False)),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "started": _now(),
        "seed": 0,
        "versions": _versions(),
    }


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _handoff(config: pytest.Config) -> Handoff | None:
    for plugin in config.pluginmanager.get_plugins():
        if isinstance(plugin, Handoff):
            return plugin
    return None


def _targets_suite(config: pytest.Config) -> bool:
    """Whether this run is a conformance run (it names the suite or an xpspec report or
    adapter): only then is the adapter connected, and the run stopped if it cannot be, before
    any test; the plugin stays out of the way of every other pytest run."""
    named = any(
        "xpspec.conformance.suite" in a or "xpspec/conformance/suite" in a for a in config.args
    )
    given = config.getoption("--adapter", None) or config.getoption("--xpspec-report", None)
    return named or bool(given)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """On the controlling process (xdist workers forward their results to it): start the
    clock, connect the adapter (a run stops at once if it cannot), open the report and
    write its header."""
    config = session.config
    run = config.stash[_RUN]
    run.session = session
    run.started = time.monotonic()
    budget = config.getoption("--xpspec-run-timeout", 0.0)
    run.deadline = run.started + budget if budget and budget > 0 else None
    if _is_worker(config):
        run.deadline = getattr(config, "workerinput", {}).get("xpspec_deadline")
        return
    if not _targets_suite(config):
        return  # the suite's fixture connects if a suite test runs after all
    path = config.getoption("--xpspec-report", None)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        run.report = open(path, "w", encoding="utf-8")
    name = _adapter_name(config)
    described: dict[str, Any]
    try:
        handoff = _handoff(config)
        adapter = handoff.adapter if handoff is not None else _connect(config)
        info = adapter.info()
        described = {
            "name": info.name,
            "framework": info.framework,
            "framework_version": info.framework_version,
            "capabilities": list(info.capabilities),
            "notes": info.notes,
        }
    except AdapterUnavailable as exc:
        adapter = None
        described = {"framework": "", "framework_version": "", "capabilities": []}
        described["adapter_error"] = str(exc)
        run.status, run.message = "adapter-unavailable", str(exc)
    from xpspec.conformance.report import header_record

    _write(config, header_record(name, described, **run_settings(config)))
    if adapter is None:  # pytest calls no sessionfinish after this: end the report here
        _finish(config, run, collected=0, exitstatus=int(ExitCode.ADAPTER_UNAVAILABLE))
        pytest.exit(f"xpspec: {run.message}", returncode=int(ExitCode.ADAPTER_UNAVAILABLE))
    if config.pluginmanager.hasplugin("dsession"):  # xdist: every worker connects its own
        close = getattr(adapter, "close", None)
        if callable(close):
            close()
    else:
        run.adapter = adapter


class _XdistHooks:
    """Registered only where pytest-xdist is installed (its hooks are unknown elsewhere)."""

    @staticmethod
    def pytest_configure_node(node: Any) -> None:
        """Workers share the run's deadline (``time.monotonic`` is system-wide)."""
        node.workerinput["xpspec_deadline"] = node.config.stash[_RUN].deadline


def _write(config: pytest.Config, record: dict[str, Any]) -> None:
    run = config.stash.get(_RUN, None)
    if run is not None and run.report is not None:
        run.report.write(json.dumps(record, sort_keys=True) + "\n")
        run.report.flush()


_CONFIG: dict[str, pytest.Config] = {}


_SUITE = "xpspec.conformance.suite"


def _load_profile(config: pytest.Config) -> None:
    """The run's Hypothesis profile (``ci`` or ``thorough``), registered by the strategies."""
    from hypothesis import settings

    import xpspec.conformance.strategies  # noqa: F401  (registers the profiles)

    settings.load_profile(config.stash[_PROFILE])


def _holds_suite(items: list[pytest.Item]) -> bool:
    return any(
        getattr(getattr(item, "module", None), "__name__", "").startswith(_SUITE) for item in items
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """When the suite is collected, load its Hypothesis profile; deselect the suite tests
    about refimpl's own code when another adapter is under test: they are no check of it
    (and a run's completeness counts only what is selected)."""
    if _holds_suite(items):
        _load_profile(config)
    if _adapter_name(config) == "refimpl":
        return
    removed = [item for item in items if item.get_closest_marker("refimpl_only") is not None]
    if removed:
        config.hook.pytest_deselected(items=removed)
        items[:] = [item for item in items if item.get_closest_marker("refimpl_only") is None]
        config.stash[_DESELECTED] = len(removed)


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    """Say what the deselected suite tests are, beside pytest's bare count."""
    count = config.stash.get(_DESELECTED, 0)
    if not count:
        return None
    return (
        f"xpspec: {count} suite tests deselected: they check the reference implementation's "
        "own variant models, not the adapter under test"
    )


def _shows_progress(config: pytest.Config) -> bool:
    return bool(config.getoption("--xpspec-progress", False)) and not _is_worker(config)


def pytest_collection_finish(session: pytest.Session) -> None:
    """When the suite is collected, set apart from the cyclic garbage collector what the
    session then holds (modules, torch, the items and their scenarios): its full passes,
    which walked every one of those objects again (a sixth of a suite run's CPU in the main
    process, pytest's own passes at the end included), then scan only what the tests
    allocate. Other pytest runs are left alone. Under ``--xpspec-progress``, start counting
    the selected checks."""
    if _holds_suite(session.items):
        gc.freeze()
    if _shows_progress(session.config):
        from xpspec.conformance.progress import Progress

        session.config.stash[_RUN].progress = Progress(len(session.items), time.monotonic())


@pytest.hookimpl(wrapper=True)
def pytest_report_teststatus(
    report: pytest.TestReport, config: pytest.Config
) -> Generator[None, Any, Any]:
    """Under ``--xpspec-progress`` a check's outcome is counted, not printed as a letter (the
    progress lines and the short summary at the end say it)."""
    result = yield
    if result and _shows_progress(config):
        return (result[0], "", "")
    return result


def pytest_runtest_logfinish(nodeid: str) -> None:
    config = _CONFIG.get("config")
    run = config.stash.get(_RUN, None) if config is not None else None
    if run is None or run.progress is None:
        return
    line = run.progress.advance(time.monotonic(), failed=nodeid in run.failed)
    reporter = config.pluginmanager.get_plugin("terminalreporter") if config else None
    if line and reporter is not None:
        reporter.write_line(line)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Remember a suite test's clause ids, so that a test that breaks before it records an
    outcome is still reported, under its clauses."""
    marker = item.get_closest_marker("clause")
    if marker is not None:
        item.user_properties.append(("xpspec-clauses", list(marker.args)))


def _unrecorded(report: pytest.TestReport) -> dict[str, Any] | None:
    """An ``error`` outcome for a suite test that failed without recording one (e.g. its
    fixture or Hypothesis itself raised): never a missing record."""
    properties = dict(report.user_properties)
    if "xpspec-clauses" not in properties or not report.failed:
        return None
    test = report.nodeid.split("::")[-1]
    check, _, rest = test.partition("[")
    text = str(report.longrepr) if report.longrepr is not None else "no details"
    lines = [line for line in text.splitlines() if line.strip()]
    return {
        "check": check.removeprefix("test_"),
        "clauses": tuple(typing.cast(list[str], properties["xpspec-clauses"])),
        "scenario": rest.rstrip("]").split("[")[-1] if rest else "",
        "status": "error",
        "message": f"the test broke during {report.when} without an outcome: "
        + " | ".join(lines[-3:]),
        "variant": "",
        "stale": False,
        "seconds": round(report.duration, 4),
        "level": "MUST",
    }


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Write one record per suite test: its outcome, reported once (at the call, or at the
    setup when it was skipped there), or an ``error`` when it broke without one."""
    config = _CONFIG.get("config")
    if config is None:
        return
    outcome = dict(report.user_properties).get("xpspec")
    if isinstance(outcome, dict):
        due = report.when == "call" or (report.when == "setup" and report.skipped)
        record = outcome if due else None
    else:
        record = _unrecorded(report)
    if report.failed:
        config.stash[_RUN].failed.add(report.nodeid)
    if record is not None:
        run = config.stash[_RUN]
        _write(
            config,
            {
                "type": "result",
                "test": report.nodeid.split("::")[-1],
                **record,
                "clauses": list(record["clauses"]),
            },
        )
        run.counts[record["status"]] = run.counts.get(record["status"], 0) + 1
    _check_deadline(config)


def _check_deadline(config: pytest.Config) -> None:
    run = config.stash[_RUN]
    if run.deadline is not None and time.monotonic() >= run.deadline and run.session is not None:
        budget = config.getoption("--xpspec-run-timeout", 0.0)
        run.status = "timeout"
        run.message = f"the run's time budget ({budget:g} s) is spent"
        run.session.shouldstop = f"xpspec: {run.message}"


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """An interrupt ends the run ``interrupted``, whatever exit status pytest then gives.
    pytest's own report of an interrupt can raise (it takes each traceback entry's line as
    ``tb_lineno - 1``, and a signal that arrives at a function's first instruction leaves
    ``tb_lineno`` None on Python 3.11): the session then finishes with the exit status it had
    before the interrupt, and only this hook, which runs first, says why it ended."""
    config = _CONFIG.get("config")
    run = config.stash.get(_RUN, None) if config is not None else None
    if (
        run is not None
        and run.status == "complete"
        and isinstance(excinfo.value, KeyboardInterrupt)
    ):
        run.status = "interrupted"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    run = config.stash.get(_RUN, None)
    if run is None or _is_worker(config):
        return
    if run.adapter is not None:  # connected but never used (no suite test was collected)
        close = getattr(run.adapter, "close", None)
        if callable(close):
            close()
        run.adapter = None
    if run.report is None:
        return
    collected = sum(1 for item in session.items if item.get_closest_marker("clause") is not None)
    _finish(config, run, collected, int(exitstatus))


def _finish(config: pytest.Config, run: _Run, collected: int, exitstatus: int) -> None:
    """Write the footer (how the run ended) and close the report."""
    status = run.status
    if status == "complete":
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            status = "interrupted"
        elif exitstatus == pytest.ExitCode.INTERNAL_ERROR:
            status = "crashed"
    recorded = sum(run.counts.values())
    if status == "complete" and recorded < collected:
        status = "stopped"
        run.message = f"{recorded} of {collected} selected checks have an outcome"
    _write(
        config,
        {
            "type": "footer",
            "status": status,
            "message": run.message,
            "counts": run.counts,
            "collected": collected,
            "recorded": recorded,
            "exitstatus": exitstatus,
            "ended": _now(),
            "seconds": round(time.monotonic() - run.started, 3),
        },
    )
    if run.report is not None:
        run.report.close()
        run.report = None
