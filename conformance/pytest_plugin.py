"""pytest plugin: ``--adapter`` / ``XPSPEC_ADAPTER`` selects the implementation under test,
``--xpspec-report PATH`` writes the JSON Lines report, ``--xpspec-profile`` picks the
Hypothesis profile. Registered as the ``xpspec`` pytest11 entry point, so
``pytest --pyargs conformance.suite --adapter NAME`` works wherever xpspec is installed."""

from __future__ import annotations

import json
import os
import platform
import warnings
from pathlib import Path
from typing import Any, TextIO

import pytest

__all__ = ["XpspecSession"]

REPORT_FORMAT = "xpspec-report/1"

# Per-run state kept on the pytest config.
_PROFILE = pytest.StashKey[str]()
_REPORT = pytest.StashKey[TextIO | None]()
_COUNTS = pytest.StashKey[dict[str, int]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("xpspec")
    group.addoption(
        "--adapter",
        default=None,
        help="registered adapter name or package.module:object (default: $XPSPEC_ADAPTER or refimpl)",
    )
    group.addoption(
        "--expectations",
        default=None,
        help="expectations TOML (default: adapters/<name>.expectations.toml if present)",
    )
    group.addoption("--xpspec-report", default=None, help="write the JSON Lines report here")
    group.addoption(
        "--xpspec-profile", default=None, help="Hypothesis profile: ci (default) or thorough"
    )
    group.addoption(
        "--xpspec-timeout", default=120.0, type=float, help="seconds per adapter operation"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "clause(*ids): the spec clauses a test checks")
    from hypothesis import settings

    import conformance.strategies  # noqa: F401  (registers the profiles)

    profile = config.getoption("--xpspec-profile", None) or os.environ.get("XPSPEC_PROFILE", "ci")
    settings.load_profile(profile)
    config.stash[_PROFILE] = profile
    _CONFIG["config"] = config


def _adapter_name(config: pytest.Config) -> str:
    return config.getoption("--adapter", None) or os.environ.get("XPSPEC_ADAPTER") or "refimpl"


def _expectations_path(config: pytest.Config, name: str) -> Path | None:
    given = config.getoption("--expectations", None)
    if given:
        return Path(given)
    import adapters

    candidate = Path(adapters.__file__).parent / f"{name}.expectations.toml"
    return candidate if candidate.exists() else None


class XpspecSession:
    """The session fixture's value: evaluates a check and turns its outcome into a pytest
    result (pass, failure, skip for not applicable, xfail for a known deviation)."""

    def __init__(self, config: pytest.Config) -> None:
        from conformance.engine import Session, load_adapter
        from conformance.expectations import Expectations

        self.name = _adapter_name(config)
        adapter = load_adapter(self.name)
        adapter.smoke()
        self.engine = Session(
            adapter,
            self.name,
            Expectations.load(_expectations_path(config, self.name)),
            timeout=config.getoption("--xpspec-timeout", 120.0),
        )
        self.node: Any = None

    def assert_outcome(self, check: Any, name: str, scenario: Any) -> None:
        """Evaluate ``check`` on ``scenario`` and turn the outcome into the test's result."""
        self.report(self.engine.evaluate(check, name, scenario))

    def report(self, outcome: Any) -> None:
        """Record ``outcome`` on the current test and raise the matching pytest result."""
        if self.node is not None:
            self.node.user_properties[:] = [
                p for p in self.node.user_properties if p[0] != "xpspec"
            ]
            self.node.user_properties.append(("xpspec", outcome.__dict__))
        if outcome.stale:
            warnings.warn(outcome.message, stacklevel=2)
        if outcome.status == "not-applicable":
            pytest.skip(outcome.message)
        if outcome.status == "deviation":
            pytest.xfail(outcome.message)
        if outcome.status == "fail" and outcome.level == "SHOULD":
            warnings.warn(f"SHOULD-level failure: {outcome.message}", stacklevel=2)
            return
        if outcome.status in ("fail", "error"):
            pytest.fail(f"{outcome.status.upper()}: {outcome.message}", pytrace=False)


@pytest.fixture(scope="session")
def _xpspec(request: pytest.FixtureRequest) -> XpspecSession:
    return XpspecSession(request.config)


@pytest.fixture
def xpspec_session(_xpspec: XpspecSession, request: pytest.FixtureRequest) -> XpspecSession:
    _xpspec.node = request.node
    return _xpspec


# -- JSON Lines report ----------------------------------------------------------------------------
def _versions() -> dict[str, str]:
    import hypothesis
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "hypothesis": hypothesis.__version__,
    }


def pytest_sessionstart(session: pytest.Session) -> None:
    """Open the report on the controlling process only (xdist workers forward their
    results to it), and write the header."""
    config = session.config
    config.stash[_REPORT] = None
    config.stash[_COUNTS] = {}
    path = config.getoption("--xpspec-report", None)
    if not path or hasattr(config, "workerinput"):
        return
    from conformance import __version__, spec_version
    from conformance.engine import load_adapter

    name = _adapter_name(config)
    try:
        info = load_adapter(name).info()
        described = {
            "framework": info.framework,
            "framework_version": info.framework_version,
            "capabilities": list(info.capabilities),
            "notes": info.notes,
        }
    except Exception as exc:  # the tests will report the broken adapter; keep the header
        described = {
            "framework": "",
            "framework_version": "",
            "capabilities": [],
            "adapter_error": str(exc),
        }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    config.stash[_REPORT] = open(path, "w", encoding="utf-8")
    _write(
        config,
        {
            "type": "header",
            "format": REPORT_FORMAT,
            "suite": f"xpspec {__version__}",
            "spec": spec_version(),
            "adapter": name,
            **described,
            "profile": config.stash.get(_PROFILE, "ci"),
            "seed": 0,
            "versions": _versions(),
        },
    )


def _write(config: pytest.Config, record: dict[str, Any]) -> None:
    handle = config.stash.get(_REPORT, None)
    if handle is not None:
        handle.write(json.dumps(record, sort_keys=True) + "\n")


_CONFIG: dict[str, pytest.Config] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    outcome = dict(report.user_properties).get("xpspec")
    if (
        not isinstance(outcome, dict)
        or report.when == "teardown"
        or (report.when == "setup" and not report.skipped)
    ):
        return
    config = _CONFIG.get("config")
    if config is None or config.stash.get(_REPORT, None) is None:
        return
    record: dict[str, Any] = {"type": "result", "test": report.nodeid.split("::")[-1], **outcome}
    record["clauses"] = list(record["clauses"])
    _write(config, record)
    counts = config.stash[_COUNTS]
    counts[outcome["status"]] = counts.get(outcome["status"], 0) + 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    handle = session.config.stash.get(_REPORT, None)
    if handle is None:
        return
    _write(
        session.config,
        {"type": "footer", "counts": session.config.stash[_COUNTS], "exitstatus": int(exitstatus)},
    )
    handle.close()
