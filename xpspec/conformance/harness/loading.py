"""From an ``--adapter`` name or path to the adapter object, and to its expectations file.

Adapters are registered as entry points of the group :data:`ENTRY_POINT_GROUP`, each
``NAME = "package.module:object"``: xpspec registers its own in its ``pyproject.toml``
(``refimpl``, the reference adapter, and one per framework), and any installed package can
register more. ``--adapter`` takes a registered name or a ``package.module:object`` path; a
module in the current directory is importable without ``PYTHONPATH`` (as with ``python -m``).

An adapter module ``x.py`` keeps its expectations file beside it, as ``x.expectations.toml``;
:func:`expectations_path` finds it without importing the module or its packages, so that the
suite's own process never runs adapter code (that is the worker's job).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from xpspec.protocol.adapter import Adapter

__all__ = [
    "ENTRY_POINT_GROUP",
    "Registration",
    "adapter_target",
    "expectations_path",
    "load_adapter",
    "registrations",
]

ENTRY_POINT_GROUP = "xpspec.adapters"
"""The entry-point group adapters are registered in."""


@dataclass(frozen=True)
class Registration:
    """One registered adapter: its name, its ``module:object`` target and the distribution
    (installed package) whose metadata registers it."""

    name: str
    target: str
    distribution: str

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    def extra(self) -> str:
        """The distribution's extra that installs the framework (``adapter-NAME``), or ""."""
        try:
            extras = importlib.metadata.metadata(self.distribution).get_all("Provides-Extra")
        except importlib.metadata.PackageNotFoundError:
            return ""
        wanted = f"adapter-{self.name}".replace("_", "-")  # extras' names are normalised
        return wanted if wanted in (extras or ()) else ""


def registrations() -> dict[str, tuple[Registration, ...]]:
    """Every registered adapter name, in name order, with its registrations (more than one
    when several installed packages register the same name)."""
    found: dict[str, list[Registration]] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        distribution = str(dist.metadata["Name"]) if dist is not None else ""
        registration = Registration(ep.name, ep.value, distribution)
        if registration not in found.setdefault(ep.name, []):
            found[ep.name].append(registration)
    return {name: tuple(found[name]) for name in sorted(found)}


def _unknown(spec: str, names: list[str]) -> str:
    """Why ``spec`` names no adapter, with the registered names and the closest one."""
    if not names:
        return (
            f"adapter {spec!r}: no such adapter, and no adapter is registered (no installed "
            f"package has entry points of the group {ENTRY_POINT_GROUP!r}: is xpspec installed?)"
        )
    close = difflib.get_close_matches(spec.lower(), names, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"adapter {spec!r}: no such adapter{hint}; expected a registered name "
        f"({', '.join(names)}: entry points of the group {ENTRY_POINT_GROUP!r}) "
        "or 'package.module:object'"
    )


def adapter_target(spec: str) -> str:
    """The ``module:object`` that ``spec`` names: a registered name's target, or ``spec``
    itself when it is such a path. Raises ValueError for anything else, naming the
    registered adapters (and the closest name), or the packages that register a name twice."""
    known = registrations()
    found = known.get(spec, ())
    if len({r.target for r in found}) > 1:
        where = "; ".join(
            f"{r.target} (by {r.distribution or 'an unnamed package'})" for r in found
        )
        raise ValueError(f"adapter {spec!r}: registered more than once, as {where}")
    if found:
        return found[0].target
    module, colon, attr = spec.partition(":")
    if colon and module and attr:
        return spec
    raise ValueError(_unknown(spec, list(known)))


def _cwd_importable() -> None:
    """Make modules in the current directory importable, as ``python -m`` does (a worker
    started that way has it already; an inline adapter or the ``xpspec`` script has not)."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def load_adapter(spec: str) -> Adapter:
    """The adapter a registered name or a ``package.module:object`` path names (imported
    here). The object may be an adapter instance, or a class or factory called without
    arguments. Raises ValueError when ``spec`` names nothing usable, ImportError when the
    module cannot be imported."""
    module_name, _, attr = adapter_target(spec).partition(":")
    _cwd_importable()
    module = importlib.import_module(module_name)
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"adapter: module {module_name!r} has no attribute {attr!r}") from None
    # A class or a factory is called; an instance (it has info()) is used as it is.
    is_instance = hasattr(obj, "info") and not isinstance(obj, type)
    adapter = obj if is_instance else obj()
    for method in ("info", "smoke"):
        if not callable(getattr(adapter, method, None)):
            raise ValueError(f"adapter {spec!r}: expected a method {method}(), got none")
    return adapter


def _module_file(name: str) -> Path | None:
    """The source file of module ``name``, found without importing it or its packages (a
    package's ``__init__`` may import the framework); ``None`` when there is none."""
    module = sys.modules.get(name)
    if module is not None:
        file = getattr(module, "__file__", None)
        return Path(file) if file else None
    top, *rest = name.split(".")
    # The worker imports the adapter as ``python -m`` does, the current directory first; look
    # there first too, so that a module of the same name elsewhere on this process's path (a
    # checkout's root, which pytest puts there) is not taken for the one the worker runs.
    spec = importlib.machinery.PathFinder.find_spec(top, [os.getcwd()])
    if spec is not None and spec.origin is None:  # a bare folder (a namespace portion): a
        spec = None  # regular package of that name elsewhere on the path wins the import
    if spec is None:
        try:
            spec = importlib.util.find_spec(top)  # a top-level name: nothing is imported
        except (ImportError, ValueError):
            spec = None
    for i in range(len(rest)):
        locations = spec.submodule_search_locations if spec is not None else None
        if not locations:
            return None
        spec = importlib.machinery.PathFinder.find_spec(
            ".".join([top, *rest[: i + 1]]), list(locations)
        )
    if spec is None or not spec.has_location or spec.origin is None:
        return None
    return Path(spec.origin)


def expectations_path(spec: str) -> Path | None:
    """The expectations file of the adapter ``spec`` names: ``x.expectations.toml`` beside its
    module ``x.py`` (for a registered name, the module of its entry point), or ``None`` when
    there is none (an ``exec:`` worker, a module without a file, or no such file)."""
    if spec.startswith("exec:"):
        return None
    try:
        module_name = adapter_target(spec).partition(":")[0]
    except ValueError:
        return None
    file = _module_file(module_name)
    if file is None:
        return None
    candidate = file.parent / f"{module_name.rpartition('.')[2]}.expectations.toml"
    return candidate if candidate.is_file() else None
