"""Build the xpspec wheel and drive pip in throw-away environments, offline and isolated
from the machine's pip configuration (its index, find-links and constraints files)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

__all__ = ["ROOT", "build_wheel", "isolated_env", "make_venv", "pip", "run_in"]

ROOT = Path(__file__).resolve().parents[2]

# Left out of the copy the wheel is built from: caches, build output and environments.
_NOT_SOURCE = (
    *(".git", ".nox", ".venv", ".hypothesis", ".mutation", ".pytest_cache", ".mypy_cache"),
    *(".ruff_cache", "build", "site", "reports", "*.egg-info", "__pycache__"),
)


def isolated_env() -> dict[str, str]:
    """This process's environment without pip's: no PIP_* variable, and PIP_CONFIG_FILE set
    to the null device, which makes pip skip every configuration file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def _run(argv: list[str], *, env: dict[str, str], timeout: float, cwd: Path | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)}: expected exit 0, got {done.returncode}\n"
            f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
        )
    return done.stdout


def build_wheel(out: Path) -> Path:
    """Build xpspec's wheel from a copy of the source tree (so no build directory or stale
    egg-info of the checkout leaks in) with the setuptools of this environment, offline."""
    source = out / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    wheels = out / "wheels"
    options = ("--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(wheels))
    _run(
        [sys.executable, "-m", "pip", "wheel", *options, str(source)],
        env=isolated_env(),
        timeout=300,
    )
    (wheel,) = wheels.glob("xpspec-*.whl")
    return wheel


def make_venv(path: Path) -> Path:
    """A new virtual environment without pip (this process's pip, 22.3 or later, drives it
    through ``--python``); returns its interpreter."""
    venv.EnvBuilder(with_pip=False).create(path)
    if sys.platform == "win32":
        return path / "Scripts" / "python.exe"
    return path / "bin" / "python"


def pip(python: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    """Run this process's pip against the environment of ``python``; returns its stdout and
    raises AssertionError (with pip's output) unless it exits 0."""
    argv = [sys.executable, "-m", "pip", "--python", str(python), *args]
    return _run(argv, env=isolated_env() if env is None else env, timeout=timeout)


def run_in(python: Path, code: str) -> str:
    """Run ``code`` with the interpreter of a test environment, in isolated mode and outside
    the checkout (so nothing resolves to the source tree); returns its stdout."""
    root = python.parent.parent
    return _run([str(python), "-I", "-c", code], env=isolated_env(), timeout=120, cwd=root)
