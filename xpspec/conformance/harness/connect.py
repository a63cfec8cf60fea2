"""From one ``--adapter`` string to a ready adapter: where it runs and how it is reached.

- ``NAME`` (a registered adapter, :mod:`xpspec.conformance.harness.loading`) or
  ``package.module:object``: with ``isolation="process"`` (the default) the adapter runs in a
  worker process (:mod:`xpspec.conformance.harness.host`); with ``"inline"`` it is imported into
  the suite's own process (for debugging: a crash then takes the run down and a hang in native
  code cannot be interrupted; an adapter that needs a fresh process per operation is refused).
  Either way a module in the current directory is importable without ``PYTHONPATH``.
- ``exec:COMMAND``: any program that speaks ``xpspec-worker/1`` on its standard streams,
  written in any language; COMMAND is split like a shell command line (no shell runs).

:func:`connect` also performs the handshake and the smoke check, so that a run stops at
once, with one line naming the adapter, the cause and the fix, when the adapter cannot run.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from typing import Any, Literal

from xpspec.conformance.frames import where
from xpspec.conformance.harness.loading import adapter_target, load_adapter, registrations
from xpspec.conformance.harness.process import DEFAULT_LIMITS, Limits
from xpspec.conformance.harness.remote import RemoteAdapter
from xpspec.conformance.outcomes import AdapterError, AdapterUnavailable
from xpspec.protocol.adapter import Adapter

__all__ = ["Isolation", "check_spec", "connect", "parse_memory"]

Isolation = Literal["process", "inline"]


def check_spec(spec: str) -> None:
    """Raise :class:`AdapterUnavailable` when ``spec`` names no adapter at all (a misspelt
    name: the message lists the registered ones and the closest)."""
    if spec.startswith("exec:"):
        if not shlex.split(spec[5:]):
            raise AdapterUnavailable(
                f"adapter {spec!r}: expected a command after 'exec:', got nothing; "
                "fix: e.g. --adapter 'exec:./my-worker --flag'"
            )
        return
    try:
        adapter_target(spec)
    except ValueError as exc:
        raise AdapterUnavailable(
            f"{exc}; fix: give a registered name, 'package.module:object' or 'exec:COMMAND'"
        ) from None


def _fix_for(spec: str, cause: str) -> str:
    name = spec.split(":", 1)[0] if ":" not in spec or spec.startswith("exec:") else spec
    if any(word in cause for word in ("ImportError", "ModuleNotFoundError", "No module named")):
        found = registrations().get(spec, ())
        extra = found[0].extra() if found else ""
        if extra and found[0].distribution == "xpspec":  # not on PyPI: from a checkout
            return (
                f"install the framework from your xpspec checkout: pip install -e "
                f"'.[{extra}]' -c constraints/torch.txt, or run nox -s 'conformance({spec})'"
            )
        if extra:
            return f"install the framework: pip install '{found[0].distribution}[{extra}]'"
        if found:
            return "install what the adapter's module imports (the error names it)"
        return "make the module importable (install its package, or run from its directory)"
    if "fresh process per operation" in cause:
        return "run it with --isolation process (the default)"
    if spec.startswith("exec:"):
        return f"run the command by hand and check that it answers 'hello' ({name})"
    return "run it with --isolation inline --debug to see the traceback"


def connect(
    spec: str,
    isolation: Isolation = "process",
    limits: Limits = DEFAULT_LIMITS,
    smoke: bool = True,
    meanwhile: Callable[[], object] | None = None,
) -> Adapter:
    """The adapter named by ``spec``, handshake (and smoke check) done. Raises
    :class:`AdapterUnavailable` with one line when it cannot be used. ``meanwhile`` runs
    while a worker starts up (e.g. the caller's own imports)."""
    check_spec(spec)
    if isolation not in ("process", "inline"):
        raise ValueError(f"isolation: expected 'process' or 'inline', got {isolation!r}")
    adapter: Any
    try:
        if spec.startswith("exec:"):
            adapter = RemoteAdapter(shlex.split(spec[5:]), limits, label=spec)
        elif isolation == "process":
            command = [sys.executable, "-m", "xpspec.conformance.harness.host", spec]
            adapter = RemoteAdapter(command, limits, label=spec, env=_worker_env())
        else:
            adapter = load_adapter(spec)
            _prepare_inline(adapter)
        if isinstance(adapter, RemoteAdapter):
            adapter.begin()
        if meanwhile is not None:
            meanwhile()
        adapter.info()
        if smoke:
            adapter.smoke()
    except (AdapterError, ImportError, ValueError, TypeError, AttributeError) as exc:
        cause = f"{type(exc).__name__}: {exc}" if isinstance(exc, ImportError) else str(exc)
        cause = " ".join(cause.split())
        if "adapter" in locals() and hasattr(adapter, "close"):
            adapter.close()
        raise AdapterUnavailable(
            f"adapter {spec!r} cannot run: {cause}; fix: {_fix_for(spec, cause)}"
        ) from None
    return adapter


def _prepare_inline(adapter: Any) -> None:
    """Refuse an adapter that needs a fresh process per operation (this process serves them
    all); else call its ``prepare()``, as the worker would."""
    from xpspec.protocol.adapter import needs_fresh_process

    if needs_fresh_process(adapter):
        raise AdapterError(
            "it needs a fresh process per operation (fresh_process_per_operation), which inline "
            "isolation cannot give"
        )
    prepare = getattr(adapter, "prepare", None)
    if callable(prepare):
        try:
            prepare()
        except Exception as exc:
            raise AdapterError(
                f"prepare() raised: {type(exc).__name__}: {exc}{where(exc)}"
            ) from exc


def _worker_env() -> dict[str, str]:
    """The worker's environment: the suite's, with the current directory importable (as
    ``python -m`` does for the suite) and the directory the suite itself was imported from
    (a checkout that is not installed)."""
    import xpspec

    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(xpspec.__file__)))
    paths = [os.getcwd(), root, *env.get("PYTHONPATH", "").split(os.pathsep)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    return env


def parse_memory(text: str) -> int:
    """Bytes from ``'8G'``, ``'512M'``, ``'1024K'``, a plain byte count, or ``'0'`` (none)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = units.get(value[-1:], 1)
    number = value[:-1] if value[-1:] in units else value
    try:
        amount = float(number)
    except ValueError:
        amount = -1
    if amount < 0:
        raise ValueError(
            f"--memory-limit: expected a size such as 8G, 512M or 0 (none), got {text!r}"
        )
    return int(amount * scale)
