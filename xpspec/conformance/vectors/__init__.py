"""The language-neutral test vectors: every scenario of the suite's catalogue
(:data:`xpspec.conformance.catalog.CATALOG`) with the reference implementation's trace of it.

A vector is two files in this package's directory, named after the catalogue scenario
(``/`` in a name becomes ``_``):

- ``NAME.scenario.json``, the scenario as ``xpspec trace`` and ``xpspec check`` read it;
- ``NAME.trace.jsonl``, the trace ``xpspec trace NAME.scenario.json --adapter refimpl``
  prints, byte for byte.

``index.json`` lists every vector with its kind and the clause ids of the checks that run on
it. The suite takes a committed trace, not a fresh run of the reference implementation, as
the reference of its exact comparisons, so a change of refimpl's behaviour on a vector
scenario fails the suite (see :func:`difference_note`). ``variant-digests.json`` pins refimpl
run as each variant model the same way, by digest (:mod:`xpspec.conformance.vectors.digests`).
``python -m xpspec.conformance.vectors --write`` regenerates the files; ``--check`` exits with
status 1 when they are stale.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from xpspec.protocol.scenario import Scenario, reference_form, scenario_from_json, scenario_to_json
from xpspec.protocol.trace import Trace

__all__ = [
    "INDEX",
    "INDEX_FORMAT",
    "Vector",
    "clauses_of",
    "committed",
    "default_directory",
    "difference_note",
    "first_difference",
    "generate",
    "main",
    "scenario_text",
    "stale_files",
    "stem",
    "vectors",
    "write",
]

INDEX = "index.json"
INDEX_FORMAT = "xpspec-vectors/1"


@dataclass(frozen=True)
class Vector:
    """One committed vector: a catalogue scenario and the reference trace of it."""

    name: str
    kind: str
    clauses: tuple[str, ...]
    scenario_file: str
    trace_file: str

    def scenario(self) -> Scenario:
        return scenario_from_json(_read(self.scenario_file))

    def trace_text(self) -> str:
        return _read(self.trace_file)

    def trace(self) -> Trace:
        return _parsed_trace(self.trace_file)


def stem(name: str) -> str:
    """The file name stem of catalogue scenario ``name``."""
    return name.replace("/", "_")


def default_directory() -> Path:
    """The directory the vectors live in (this package's)."""
    return Path(__file__).resolve().parent


def _read(file: str) -> str:
    return resources.files(__name__).joinpath(file).read_text(encoding="utf-8")


@functools.cache
def _parsed_trace(file: str) -> Trace:
    return Trace.from_jsonl(_read(file))


@functools.lru_cache(maxsize=1)
def vectors() -> tuple[Vector, ...]:
    """The committed vectors, as ``index.json`` lists them."""
    index = json.loads(_read(INDEX))
    if index.get("format") != INDEX_FORMAT:
        raise ValueError(f"{INDEX}: expected format {INDEX_FORMAT!r}, got {index.get('format')!r}")
    return tuple(
        Vector(v["name"], v["kind"], tuple(v["clauses"]), v["scenario"], v["trace"])
        for v in index["vectors"]
    )


@functools.lru_cache(maxsize=1)
def _by_scenario() -> dict[str, Vector]:
    return {scenario_to_json(v.scenario()): v for v in vectors()}


def committed(scenario: Scenario) -> Vector | None:
    """The committed vector whose scenario is ``scenario``'s reference form
    (:func:`~xpspec.protocol.scenario.reference_form`); ``None`` when there is none."""
    return _by_scenario().get(scenario_to_json(reference_form(scenario)))


# -- comparing with a vector ------------------------------------------------------------------
def first_difference(expected: str, actual: str) -> tuple[int, str, str] | None:
    """The first line (1-based) where two JSON Lines texts differ, with both lines
    (``"(end of trace)"`` past the end of one); ``None`` if the texts are equal."""
    if expected == actual:
        return None
    a, b = expected.splitlines(), actual.splitlines()
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else "(end of trace)"
        y = b[i] if i < len(b) else "(end of trace)"
        if x != y:
            return i + 1, x, y
    return len(a) + 1, "(end of trace)", "(end of trace)"  # they differ in line endings only


def _cut(line: str, limit: int = 400) -> str:
    return line if len(line) <= limit else line[:limit] + f"... ({len(line)} chars)"


def difference_note(vector: Vector, trace: Trace) -> str:
    """What a failing exact check adds when its reference was committed vector ``vector``:
    where the trace under test first departs from it."""
    where = f"xpspec/conformance/vectors/{vector.trace_file}"
    diff = first_difference(vector.trace_text(), trace.to_jsonl())
    if diff is None:
        return f"the reference is the committed vector {vector.name} ({where}); the trace equals it"
    line, expected, actual = diff
    note = (
        f"the trace differs from the committed vector {vector.name} ({where}), "
        f"first at line {line}\n  expected: {_cut(expected)}\n  actual:   {_cut(actual)}"
    )
    if trace.header.get("producer") == "refimpl":  # only refimpl's own traces are vectors
        note += (
            "\n  (if the reference implementation changed on purpose, regenerate the vectors "
            "with `python -m xpspec.conformance.vectors --write`)"
        )
    return note


# -- generating -------------------------------------------------------------------------------
def clauses_of(scenario: Scenario) -> tuple[str, ...]:
    """The clause ids of the suite's checks that run on ``scenario``."""
    from xpspec.conformance.checks import ALL_CHECKS

    return tuple(
        sorted(
            {
                clause
                for check in ALL_CHECKS
                if check.capability == scenario.kind and check.applies(scenario)
                for clause in check.clauses
            }
        )
    )


def scenario_text(scenario: Scenario) -> str:
    """A scenario as a ``NAME.scenario.json`` file holds it (the format ``xpspec trace`` and
    ``xpspec check`` read, indented, keys sorted)."""
    return json.dumps(json.loads(scenario_to_json(scenario)), indent=1, sort_keys=True) + "\n"


def _trace_text(scenario: Scenario) -> str:
    from xpspec.refimpl.adapter import RefimplAdapter

    trace: Trace = getattr(RefimplAdapter(), f"run_{scenario.kind}")(scenario)
    return trace.to_jsonl()


def generate(
    catalog: Mapping[str, Scenario] | None = None, *, models: bool = True
) -> dict[str, str]:
    """File name -> file text of every vector and of the index, from the catalogue, and with
    ``models`` of the variant models' digests (:mod:`xpspec.conformance.vectors.digests`,
    the bulk of the time: refimpl runs every model case)."""
    if catalog is None:
        from xpspec.conformance.catalog import CATALOG

        catalog = CATALOG
    files: dict[str, str] = {}
    entries = []
    for name, scenario in catalog.items():
        base = stem(name)
        files[f"{base}.scenario.json"] = scenario_text(scenario)
        files[f"{base}.trace.jsonl"] = _trace_text(scenario)
        entries.append(
            {
                "name": name,
                "kind": scenario.kind,
                "clauses": list(clauses_of(scenario)),
                "scenario": f"{base}.scenario.json",
                "trace": f"{base}.trace.jsonl",
            }
        )
    if len({e["scenario"] for e in entries}) != len(entries):
        raise ValueError("two catalogue names map to the same vector file name")
    index = {"format": INDEX_FORMAT, "vectors": entries}
    files[INDEX] = json.dumps(index, indent=1, sort_keys=True) + "\n"
    if models:
        from xpspec.conformance.vectors.digests import DIGESTS, digests_text

        files[DIGESTS] = digests_text(catalog)
    return files


def _data_files(directory: Path, models: bool = True) -> dict[str, Path]:
    from xpspec.conformance.vectors.digests import DIGESTS

    patterns = ("*.scenario.json", "*.trace.jsonl", INDEX, *((DIGESTS,) if models else ()))
    return {p.name: p for pattern in patterns for p in directory.glob(pattern)}


def write(directory: Path | None = None) -> list[str]:
    """Write every vector into ``directory`` (default: this package's), remove vector files
    no longer generated; return the names written."""
    directory = directory or default_directory()
    directory.mkdir(parents=True, exist_ok=True)
    files = generate()
    for name, path in _data_files(directory).items():
        if name not in files:
            path.unlink()
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    _clear_caches()
    return sorted(files)


def _clear_caches() -> None:
    from xpspec.conformance.vectors.digests import pins

    pins.cache_clear()
    vectors.cache_clear()
    _by_scenario.cache_clear()
    _parsed_trace.cache_clear()


def stale_files(
    directory: Path | None = None,
    *,
    catalog: Mapping[str, Scenario] | None = None,
    models: bool = True,
) -> list[str]:
    """Names of vector files that are missing, different or no longer generated (from
    ``catalog``, default the suite's; the variant models' digests only with ``models``)."""
    present = {
        name: path.read_text(encoding="utf-8")
        for name, path in _data_files(directory or default_directory(), models).items()
    }
    files = generate(catalog, models=models)
    differ = [name for name, text in files.items() if present.get(name) != text]
    extra = [name for name in present if name not in files]
    return sorted(differ + extra)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m xpspec.conformance.vectors --write|--check [--out DIR]``."""
    parser = argparse.ArgumentParser(
        prog="python -m xpspec.conformance.vectors", description=__doc__
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="(re)generate the vector files")
    action.add_argument("--check", action="store_true", help="exit 1 if the files are stale")
    parser.add_argument(
        "--out", type=Path, default=None, help="directory (default: the package's own)"
    )
    args = parser.parse_args(argv)
    directory = args.out or default_directory()
    if args.write:
        names = write(directory)
        print(f"wrote {len(names)} files to {directory}")
        return 0
    stale = stale_files(directory)
    if stale:
        print(f"stale vector files in {directory}: {', '.join(stale)}", file=sys.stderr)
        print("regenerate with: python -m xpspec.conformance.vectors --write", file=sys.stderr)
        return 1
    print(f"every vector file is up to date in {directory}")
    return 0
