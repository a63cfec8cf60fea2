"""Sessions of xpspec. Every session installs torch through constraints/torch.txt: any other
torch would pull several GB of CUDA packages.

- ``tests`` (default): the project's own tests, the executable docs and spec, and the
  conformance suite against the reference implementation.
- ``suite``: the main job — the conformance suite against refimpl, with its report and matrix.
- ``lint``: ruff format --check, ruff check, mypy.
- ``docs``: build the site in strict mode.
- ``bench``: throughput of the reference trainer and sampler beside minimal torch loops.
"""

from __future__ import annotations

import nox

nox.needs_version = ">=2024.3"
nox.options.sessions = ["tests"]
nox.options.default_venv_backend = "virtualenv"

CONSTRAINTS = ("-c", "constraints/torch.txt")
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def install(session: nox.Session, *extras: str) -> None:
    spec = f".[{','.join(extras)}]" if extras else "."
    session.install("-e", spec, *CONSTRAINTS)


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """Unit tests, docs and spec examples, and the suite against refimpl (in parallel)."""
    install(session, "test")
    session.run(
        "pytest",
        "-n",
        "2",
        "-p",
        "no:cacheprovider",
        "tests",
        "spec",
        "docs",
        "--pyargs",
        "conformance.suite",
        *session.posargs,
        env=THREADS,
    )


@nox.session(python="3.11", default=False)
def suite(session: nox.Session) -> None:
    """The main job: run the suite against refimpl, write the report and the matrix."""
    install(session)
    session.run(
        "xpspec",
        "run",
        "--adapter",
        "refimpl",
        "--report",
        "reports/refimpl.jsonl",
        *session.posargs,
        env=THREADS,
    )
    session.run("xpspec", "report", "reports/refimpl.jsonl", "--out", "reports")


ADAPTERS = ("sb3", "tianshou", "torchrl", "flashbax", "rllib")


@nox.session(python="3.11", default=False, tags=["adapters"])
@nox.parametrize("adapter", [nox.param(a, id=a, tags=[a]) for a in ADAPTERS])
def conformance(session: nox.Session, adapter: str) -> None:
    """The suite against one framework adapter, in a venv of its own (frameworks pin
    conflicting dependencies). Writes reports/<adapter>.jsonl and prints the wall time."""
    import time

    install(session, f"adapter-{adapter}")
    start = time.perf_counter()
    try:
        session.run(
            "xpspec",
            "run",
            "--adapter",
            adapter,
            "--report",
            f"reports/{adapter}.jsonl",
            *session.posargs,
            env=THREADS,
        )
    finally:
        session.log(f"conformance({adapter}): {time.perf_counter() - start:.0f} s")


@nox.session(python="3.11", default=False)
def report(session: nox.Session) -> None:
    """Fold every run in reports/*.jsonl into the matrix and its docs page."""
    import glob

    install(session)
    runs = sorted(glob.glob("reports/*.jsonl"))
    if not runs:
        session.error("no runs in reports/: run `nox -s suite` (and adapter sessions) first")
    session.run("xpspec", "report", *runs, "--out", "reports", "--docs", "docs/compliance.md")


@nox.session(python="3.11", default=False)
def lint(session: nox.Session) -> None:
    install(session, "lint")
    session.run("ruff", "format", "--check", ".")
    session.run("ruff", "check", ".")
    session.run("mypy", "refimpl", "conformance", "adapters")


@nox.session(python="3.11", default=False)
def docs(session: nox.Session) -> None:
    install(session, "docs")
    session.run("mkdocs", "build", "--strict")


@nox.session(python="3.11", default=False)
def bench(session: nox.Session) -> None:
    """Throughput medians over repeats, torch pinned to one thread, ratios to minimal loops."""
    install(session)
    session.run("python", "-m", "benchmarks.bench_sampling", env=THREADS)
    session.run("python", "-m", "benchmarks.bench_loop", *session.posargs, env=THREADS)
