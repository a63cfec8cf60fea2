"""The plugin is active in every pytest run of an environment xpspec is installed in: a
framework's own tests must not import the suite (nor torch through it) or run under the
suite's Hypothesis profile."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = """
import sys

from hypothesis import settings


def test_probe():
    loaded = sorted(m for m in ("torch", "xpspec.conformance.strategies", "xpspec.refimpl") if m in sys.modules)
    print("LOADED", loaded, "PROFILE", settings._current_profile)
"""


def _probe(tmp_path: Path, *options: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
            *options,
            "test_probe.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if "LOADED" in x)  # after other tests' dots
    return line[line.index("LOADED") :]


def test_a_project_s_own_tests_load_neither_the_suite_nor_its_profile(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    # --xpspec-profile is accepted only with the plugin loaded (from its entry point)
    with_plugin = _probe(tmp_path, "--xpspec-profile", "thorough")
    # Hypothesis picks its own profile from the environment (its built-in "ci" profile when a
    # CI variable is set), so the baseline is the same run with the plugin disabled.
    without_plugin = _probe(tmp_path, "-p", "no:xpspec")
    assert with_plugin.startswith("LOADED [] PROFILE "), with_plugin
    assert with_plugin == without_plugin


def test_a_suite_run_loads_the_profile_it_is_given(tmp_path: Path) -> None:
    # The probe runs in the same session as one check of the suite (refimpl, the default).
    (tmp_path / "test_probe.py").write_text(PROBE)
    line = _probe(
        tmp_path,
        "--xpspec-profile",
        "thorough",
        "--pyargs",
        "xpspec.conformance.suite",
        "-k",
        "probe or (test_check and plain-u2-b3 and conservation)",
    )
    assert "'xpspec.conformance.strategies'" in line and line.endswith("PROFILE thorough"), line
