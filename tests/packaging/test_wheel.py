"""What the wheel holds: the ``xpspec`` package and nothing beside it (no top-level
``adapters``, ``conformance`` or ``refimpl`` to shadow another distribution), every file of
the package's source tree, data files included, and package-data globs that all match."""

from __future__ import annotations

import fnmatch
import sys
import zipfile
from pathlib import Path

from tests.packaging.envs import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return [n for n in archive.namelist() if not n.endswith("/")]


def _dist_info(wheel: Path) -> str:
    name, version = wheel.name.split("-")[:2]
    return f"{name}-{version}.dist-info"


def test_the_wheel_holds_the_xpspec_package_and_its_metadata_only(xpspec_wheel: Path) -> None:
    info = _dist_info(xpspec_wheel)
    names = _names(xpspec_wheel)
    assert {n.split("/")[0] for n in names} == {"xpspec", info}
    with zipfile.ZipFile(xpspec_wheel) as archive:
        top_level = archive.read(f"{info}/top_level.txt").decode().split()
        record = archive.read(f"{info}/RECORD").decode().splitlines()
    assert top_level == ["xpspec"]
    assert sorted(line.rsplit(",", 2)[0] for line in record if line) == sorted(names)


def test_every_file_of_the_package_source_is_in_the_wheel(xpspec_wheel: Path) -> None:
    """Data files included: the clause registry, the schemas, the test vectors, the
    expectations files and the py.typed markers are read from the installed package."""
    source = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "xpspec").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    shipped = {n for n in _names(xpspec_wheel) if n.startswith("xpspec/")}
    assert sorted(source - shipped) == [], "files of the package the wheel leaves out"
    assert sorted(shipped - source) == [], "files in the wheel that the source does not have"
    # what the package reads at run time, wherever its source tree keeps it
    read = (
        "xpspec/conformance/clauses.json",
        "xpspec/conformance/compliance.schema.json",
        "xpspec/protocol/schemas/*.schema.json",
        "xpspec/conformance/vectors/index.json",
        "xpspec/conformance/vectors/*.scenario.json",
        "xpspec/conformance/vectors/*.trace.jsonl",
        "xpspec/adapters/*.expectations.toml",
        "xpspec/py.typed",
    )
    assert [p for p in read if not fnmatch.filter(shipped, p)] == []


def test_every_package_data_glob_matches_a_file() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    package_data: dict[str, list[str]] = config["tool"]["setuptools"]["package-data"]
    empty = [
        f"{package}: {pattern}"
        for package, patterns in package_data.items()
        for pattern in patterns
        if not any(p.is_file() for p in ROOT.joinpath(*package.split(".")).glob(pattern))
    ]
    assert empty == [], "package-data globs that match no file"
