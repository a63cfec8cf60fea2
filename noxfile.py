"""Sessions of xpspec. Every session installs torch through constraints/torch.txt (any other
torch would pull several GB of CUDA packages) and the test tools through constraints/ci.txt;
those that install no framework also take numpy and gymnasium from
constraints/numpy-gymnasium.txt (a framework's session leaves them to the framework's own
requirements). pyproject.toml states ranges; these files are the exact versions CI runs.

- ``tests`` (default): the project's own tests, the executable docs and spec, and the
  conformance suite against the reference implementation.
- ``suite``: the main job — the conformance suite against refimpl, with its report and matrix.
- ``lint``: ruff format --check, ruff check, mypy.
- ``docs``: build the site in strict mode.
- ``browser``: the compliance site in Debian's headless Chromium, driven by Selenium: the
  standalone page and the built docs site load, filters work, links resolve, nothing a report
  supplies runs (needs ``apt-get install -y chromium chromium-driver``).
- ``sweep``: ``nox -s sweep -- ADAPTER [VERSION ...]`` runs an adapter's suite on several
  releases of its framework (by default those of sweeps/versions.toml), one venv per adapter
  (session ``sweep_releases(ADAPTER)``) reused across them, and records each release's run
  in docs/sweeps/ADAPTER/VERSION.json.
- ``bench``: throughput of the reference trainer and sampler beside hand-written torch loops,
  what running the adapter in a worker process costs, the trace codec on a large trace, and
  ``xpspec check`` on long traces (memory against length); each prints its targets.
- ``bench_peers(sb3|tianshou|torchrl)``: collection and storage of a framework beside
  refimpl's on the same work, in the framework's adapter venv.
- ``minimums``: the tests on the lower bounds pyproject.toml states (constraints/minimum.txt).
- ``mutation``: mutation testing of refimpl's semantic modules against the suite, with its
  table written to docs/mutation.md (long: about an hour for the default sample).
"""

from __future__ import annotations

import os

import nox

nox.needs_version = ">=2024.3"
nox.options.sessions = ["tests"]
nox.options.default_venv_backend = "virtualenv"

FRAMEWORK = ("-c", "constraints/torch.txt", "-c", "constraints/ci.txt")
"""The constraints of a session that installs a framework beside xpspec."""
CONSTRAINTS = (*FRAMEWORK, "-c", "constraints/numpy-gymnasium.txt")
"""The constraints of every other session."""
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
TESTS = ("tests", "spec", "docs", "--pyargs", "xpspec.conformance.suite")
"""What the tests session runs: unit tests, executable docs and spec, the suite on refimpl."""


def install(session: nox.Session, *extras: str, constraints: tuple[str, ...] = CONSTRAINTS) -> None:
    spec = f".[{','.join(extras)}]" if extras else "."
    session.install("-e", spec, *constraints)
    if "adapter-torchrl" in extras:
        # TorchRL's wheel holds a torchrl._torchrl built against another torch (it does not
        # load with 2.13.0): build it from the sources the wheel ships (cached per version).
        session.run("python", "tools/torchrl_extension.py")


def bytecode(session: nox.Session) -> dict[str, str]:
    """Compiled-module caches for the interpreters a session starts, kept in the session's
    virtualenv folder (not beside the sources; an absolute path, as tests start processes in
    other folders). The tests session starts dozens of interpreters (the xdist workers, whole
    ``xpspec run`` and pytest processes, adapter workers): where PYTHONDONTWRITEBYTECODE is
    set, each compiled xpspec from source again, and pytest rewrote the asserts of
    Hypothesis's modules again (about a second of CPU per process)."""
    return {
        "PYTHONDONTWRITEBYTECODE": "",  # empty: unset, as Python reads it
        "PYTHONPYCACHEPREFIX": os.path.join(session.virtualenv.location, "pycache"),
    }


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
        *TESTS,
        *session.posargs,
        env=THREADS | bytecode(session),
    )


@nox.session(python="3.11", default=False)
def minimums(session: nox.Session) -> None:
    """The tests on the lowest versions pyproject.toml admits (torch excepted: 2.13.0, the one
    installable here), so its lower bounds stay true."""
    install(
        session,
        "test",
        constraints=("-c", "constraints/torch.txt", "-c", "constraints/minimum.txt"),
    )
    session.run(
        "pytest", "-n", "2", "-p", "no:cacheprovider", *TESTS, *session.posargs, env=THREADS
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
        env=THREADS | bytecode(session),
    )
    session.run("xpspec", "report", "reports/refimpl.jsonl", "--out", "reports")


ADAPTERS = (
    "sb3",
    "tianshou",
    "torchrl",
    "flashbax",
    "rllib",
    "skrl",
    "skrl_tlb",
    "d3rlpy",
    "agilerl",
)


@nox.session(python="3.11", default=False, tags=["adapters"])
@nox.parametrize("adapter", [nox.param(a, id=a, tags=[a]) for a in ADAPTERS])
def conformance(session: nox.Session, adapter: str) -> None:
    """The adapter's own tests, then the suite against it, in a venv of its own (frameworks
    pin conflicting dependencies). Writes reports/<adapter>.jsonl and prints the wall time."""
    import glob
    import time

    install(session, f"adapter-{adapter}", constraints=FRAMEWORK)
    start = time.perf_counter()
    try:
        # The adapter's own tests (skipped in the default session, which lacks the framework;
        # importing the adapter first makes a broken install fail here instead of skipping).
        session.run("python", "-c", f"import xpspec.adapters.{adapter}")
        # test_<framework>.py and test_<framework>_findings.py: the findings' framework-alone
        # repros that the expectations file cites. The framework is the adapter's name up to
        # an underscore: a configuration of an adapter (skrl_tlb) runs its framework's tests.
        framework = adapter.partition("_")[0]
        tests = sorted(glob.glob(f"tests/adapters/test_{framework}.py"))
        tests += sorted(glob.glob(f"tests/adapters/test_{framework}_*.py"))
        session.run("pytest", "-p", "no:cacheprovider", "-q", *tests, env=THREADS)
        session.run(*suite_run(adapter, f"reports/{adapter}.jsonl"), *session.posargs, env=THREADS)
    finally:
        session.log(f"conformance({adapter}): {time.perf_counter() - start:.0f} s")


OP_TIMEOUTS = {"rllib": 300}
"""Seconds an operation may take, for adapters whose operations outlast the suite's default
(120 s): RLlib's asynchronous row starts a local Ray cluster with a worker process per remote
EnvRunner and builds IMPALA on it (53 to 97 s a run at a load of 16 to 20 on two cores)."""


def suite_run(adapter: str, report: str) -> tuple[str, ...]:
    """The command that runs the suite against ``adapter``: the conformance and sweep
    sessions run the same."""
    limit = ("--op-timeout", str(OP_TIMEOUTS[adapter])) if adapter in OP_TIMEOUTS else ()
    return ("xpspec", "run", "--adapter", adapter, "--report", report, *limit)


SWEEPS = "sweeps/versions.toml"
"""The releases a sweep runs by default, per adapter (and the framework's package)."""
ANY_RELEASE = {"XPSPEC_ANY_FRAMEWORK_VERSION": "1"}
"""Lets an adapter's smoke check accept a release it was not written for (xpspec.kit.release)."""


def sweep_plan(adapter: str) -> dict[str, object]:
    import tomllib

    with open(SWEEPS, "rb") as f:
        plans = tomllib.load(f)
    if adapter not in plans:
        raise ValueError(
            f"{SWEEPS}: expected a table [{adapter}], got only {', '.join(sorted(plans))}"
        )
    return dict(plans[adapter])


def pip_failure(output: str) -> str:
    """Why pip did not install, in one line: the requirements in conflict when it says
    (``The conflict is caused by:``), else its last error line."""
    lines = [ln.strip() for ln in output.splitlines()]
    if "The conflict is caused by:" in lines:
        start = lines.index("The conflict is caused by:") + 1
        end = next((i for i in range(start, len(lines)) if not lines[i]), len(lines))
        return "conflict: " + "; ".join(lines[start:end])
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    return (errors or [ln for ln in lines if ln] or ["no output"])[-1]


@nox.session(python=False, default=False)
def sweep(session: nox.Session) -> None:
    """``nox -s sweep -- ADAPTER [VERSION ...]``: the adapter's suite on each release (by
    default those sweeps/versions.toml lists), run by the session ``sweep_releases(ADAPTER)``
    in the adapter's own venv; each release's run goes to docs/sweeps/ADAPTER/VERSION.json."""
    if not session.posargs:
        session.error("usage: nox -s sweep -- ADAPTER [VERSION ...]")
    adapter, *versions = session.posargs
    if adapter not in ADAPTERS:
        session.error(
            f"sweep: expected an adapter installed from PyPI ({', '.join(ADAPTERS)}), got "
            f"{adapter!r} (ALF is not on PyPI: a sweep across its commits is not built)"
        )
    try:
        plan = sweep_plan(adapter)
    except ValueError as exc:
        session.error(str(exc))
    versions = versions or [str(v) for v in plan["versions"]]  # type: ignore[attr-defined]
    session.log(f"sweep({adapter}): {len(versions)} releases: {', '.join(versions)}")
    session.notify(f"sweep_releases({adapter})", posargs=versions)


@nox.session(python="3.11", default=False)
@nox.parametrize("adapter", [nox.param(a, id=a) for a in ADAPTERS])
def sweep_releases(session: nox.Session, adapter: str) -> None:
    """The releases given as arguments (default: sweeps/versions.toml's), one after the
    other in this one venv: each installed with xpspec under the sessions' constraints
    (``pip install -e . PACKAGE==VERSION``: torch stays 2.13.0), the suite run against it,
    and its run recorded in docs/sweeps/ADAPTER/VERSION.json. A release that does not install
    or that the adapter cannot drive is recorded as adapter-unavailable, with the reason."""
    import subprocess
    import sys
    import time

    plan = sweep_plan(adapter)
    package, framework = str(plan["package"]), str(plan["framework"])
    extra = [str(r) for r in plan.get("with", [])]  # type: ignore[attr-defined]
    versions = list(session.posargs) or [str(v) for v in plan["versions"]]  # type: ignore[attr-defined]
    out = f"docs/sweeps/{adapter}"
    python = str(session.bin) + ("/python.exe" if sys.platform == "win32" else "/python")
    install(session, constraints=FRAMEWORK)  # xpspec records a release that does not install
    for n, version in enumerate(versions, 1):
        start = time.perf_counter()
        requirement = f"{package}=={version}"
        session.log(f"sweep({adapter}) {n}/{len(versions)}: installing {requirement}")
        pip = subprocess.run(
            [python, "-m", "pip", "install", "-e", ".", requirement, *extra, *FRAMEWORK],
            capture_output=True,
            text=True,
        )
        record = ("xpspec", "record", "--version", version, "--framework", framework, "--out", out)
        if pip.returncode != 0:
            why = pip_failure(pip.stdout + "\n" + pip.stderr)
            session.log(f"sweep({adapter}) {version}: pip could not install it: {why}")
            session.run(
                *record,
                "--adapter",
                adapter,
                "--unavailable",
                f"pip could not install {requirement} beside xpspec with torch 2.13.0: {why}",
            )
            continue
        if package == "torchrl":  # its extension, built for this torch (as install() does); a
            # release whose build fails still runs, its prioritized rows failing with TorchRL's error
            session.run("python", "tools/torchrl_extension.py", success_codes=[0, 1])
        report = f"reports/sweeps/{adapter}/{version}.jsonl"
        session.log(f"sweep({adapter}) {n}/{len(versions)}: running the suite on {version}")
        # 0: no failure, 1: failures or adapter errors, 3: adapter unavailable, 4: incomplete;
        # each is that release's outcome (2, a usage error, stops the sweep)
        session.run(
            *suite_run(adapter, report), env=THREADS | ANY_RELEASE, success_codes=[0, 1, 3, 4]
        )
        session.run(*record, report)
        session.log(f"sweep({adapter}) {version}: {time.perf_counter() - start:.0f} s")


@nox.session(python="3.11", default=False)
def report(session: nox.Session) -> None:
    """Merge the runs in reports/*.jsonl with the committed ones in docs/runs/ (the newest run
    of each adapter wins, and is written back to docs/runs/), then build the matrix from all
    of them and write its docs page: an adapter not run again keeps its committed column.
    The page links to the version sweeps committed in docs/sweeps/."""
    import glob

    install(session)
    order = ["refimpl", *ADAPTERS, "alf"]  # the matrix's columns: reference first
    session.run(
        "xpspec",
        "report",
        *sorted(glob.glob("reports/*.jsonl")),
        "--runs",
        "docs/runs",
        "--sweeps",
        "docs/sweeps",
        "--order",
        ",".join(order),
        "--out",
        "reports",
        "--docs",
        "docs/compliance.md",
    )


@nox.session(python="3.11", default=False)
def lint(session: nox.Session) -> None:
    """ruff (format and rules) and mypy, at the versions the lint extra pins."""
    install(session, "lint")
    session.run("ruff", "format", "--check", ".")
    session.run("ruff", "check", ".")
    session.run("mypy", "xpspec", "mutation", "tools")


@nox.session(python="3.11", default=False)
def docs(session: nox.Session) -> None:
    install(session, "docs")
    session.run("mkdocs", "build", "--strict")


@nox.session(python="3.11", default=False)
def browser(session: nox.Session) -> None:
    """The compliance site's tests in a real browser (tests/browser): Debian's chromium and
    chromium-driver, which this session does not install (CI installs them with apt-get). In
    the tests session these tests skip without them; here a missing browser fails them."""
    install(session, "test", "browser", "docs")
    session.run(
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "tests/browser",
        *session.posargs,
        env={"XPSPEC_BROWSER": "required", "NO_MKDOCS_2_WARNING": "1"},
    )


@nox.session(python="3.11", default=False)
def bench(session: nox.Session) -> None:
    """Throughput medians over repeats, torch pinned to one thread, ratios to minimal loops."""
    install(session)
    session.run("python", "-m", "benchmarks.bench_sampling", env=THREADS)
    session.run("python", "-m", "benchmarks.bench_loop", *session.posargs, env=THREADS)
    session.run("python", "-m", "benchmarks.bench_harness", env=THREADS)
    session.run("python", "-m", "benchmarks.bench_codec", env=THREADS)
    session.run("python", "-m", "benchmarks.bench_check", env=THREADS)


PEERS = ("sb3", "tianshou", "torchrl")
"""The frameworks ``bench_peers`` times beside refimpl."""


@nox.session(python="3.11", default=False, tags=["bench"])
@nox.parametrize("framework", [nox.param(f, id=f) for f in PEERS])
def bench_peers(session: nox.Session, framework: str) -> None:
    """Collection and storage of a framework beside refimpl's on the same work, in the venv
    of that framework's adapter (its install list), ratios from one run each."""
    install(session, f"adapter-{framework}", constraints=FRAMEWORK)
    session.run(
        "python",
        "-m",
        "benchmarks.bench_peers",
        "--framework",
        framework,
        *session.posargs,
        env=THREADS,
    )


@nox.session(python="3.11", default=False)
def mutation(session: nox.Session) -> None:
    """Mutants of refimpl's semantic modules (cosmic-ray, pinned in constraints/mutation.txt),
    each run against the suite in a copy of the tree; classifies them and writes
    docs/mutation.md. Arguments go to ``python -m mutation`` (e.g. ``-- --sample 50``,
    ``-- --all``, ``-- --resume``)."""
    install(session, "lint")  # mypy: the type gate of each mutant (mutation/typecheck.py)
    session.install("-r", "constraints/mutation.txt", *CONSTRAINTS)
    session.run("python", "-m", "mutation", *session.posargs, env=THREADS)


@nox.session(name="conformance(alf)", python="3.11", default=False, tags=["adapters", "alf"])
def conformance_alf(session: nox.Session) -> None:
    """The suite against ALF (HorizonRobotics/alf), which is not on PyPI: it runs from the
    checkout named by ALF_SOURCE. The venv gets torch (constraints/torch.txt), ALF's import-time
    dependencies (constraints/alf.txt), the checkout on its path (a .pth file) and two stand-ins
    written into the venv's own site-packages: a ``torchvision`` package (only ALF's
    supervised-learning data loaders import it, and the PyPI wheel for torch 2.13 is a CUDA
    build) and an empty ``alf.environments._penv`` used only when the checkout has no compiled
    one (the extension serves subprocess environments, which the adapter does not use).
    Writes reports/alf.jsonl and prints the wall time."""
    import os
    import time
    from pathlib import Path

    source = os.environ.get("ALF_SOURCE", "")
    if not source:
        session.skip(
            "ALF_SOURCE is not set: point it at a checkout of HorizonRobotics/alf, "
            "e.g. ALF_SOURCE=$HOME/src/alf nox -s 'conformance(alf)'"
        )
    root = Path(source).expanduser().resolve()
    if not (root / "alf" / "algorithms" / "rl_algorithm.py").is_file():
        session.error(f"ALF_SOURCE={source}: not a checkout of HorizonRobotics/alf")
    install(session, constraints=FRAMEWORK)
    session.install(
        *("absl-py", "gin-config", "cnest", "fasteners", "six", "psutil", "tensorboard", "gym"),
        *FRAMEWORK,
        *("-c", "constraints/alf.txt"),
    )
    (site,) = Path(session.virtualenv.location).glob("lib/python3*/site-packages")
    (site / "xpspec-alf-source.pth").write_text(f"{root}\n", encoding="utf-8")
    (site / "torchvision").mkdir(exist_ok=True)
    (site / "torchvision" / "__init__.py").write_text(
        '"""Stand-in written by the conformance(alf) session: ALF imports torchvision only in\n'
        'alf/utils/datagen.py (supervised-learning data sets), which RL training never calls."""\n'
        "import types\n\n"
        'datasets = types.ModuleType("torchvision.datasets")\n'
        'transforms = types.ModuleType("torchvision.transforms")\n',
        encoding="utf-8",
    )
    (site / "xpspec_alf_penv.py").write_text(
        '"""Stand-in written by the conformance(alf) session: an empty alf.environments._penv\n'
        "when the checkout has no compiled one (it serves subprocess environments only).\n"
        'The finder comes last, so a built extension always wins."""\n'
        "import importlib.abc\nimport importlib.machinery\nimport sys\n\n\n"
        "class _EmptyPenv(importlib.abc.MetaPathFinder, importlib.abc.Loader):\n"
        "    def find_spec(self, name, path, target=None):\n"
        '        if name == "alf.environments._penv":\n'
        "            return importlib.machinery.ModuleSpec(name, self)\n"
        "        return None\n\n"
        "    def create_module(self, spec):\n        return None\n\n"
        "    def exec_module(self, module):\n        pass\n\n\n"
        "sys.meta_path.append(_EmptyPenv())\n",
        encoding="utf-8",
    )
    (site / "xpspec-alf-penv.pth").write_text("import xpspec_alf_penv\n", encoding="utf-8")
    start = time.perf_counter()
    try:
        session.run("python", "-c", "import xpspec.adapters.alf")
        session.run(
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "tests/adapters/test_alf.py",
            "tests/adapters/test_alf_checkpoint.py",
            "tests/adapters/test_alf_env.py",
            "tests/adapters/test_alf_findings.py",
            "tests/adapters/test_alf_offline.py",
            "tests/adapters/test_alf_priority.py",
            "tests/adapters/test_alf_recurrent.py",
            "tests/adapters/test_alf_stack.py",
            env=THREADS,
        )
        session.run(
            "xpspec",
            "run",
            "--adapter",
            "alf",
            "--report",
            "reports/alf.jsonl",
            *session.posargs,
            env=THREADS,
        )
    finally:
        session.log(f"conformance(alf): {time.perf_counter() - start:.0f} s")
