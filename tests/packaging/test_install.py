"""Installing xpspec into a framework's environment (issue 14): pip keeps the torch already
there, and xpspec sits beside PyPI's ``adapters`` distribution without shadowing it.

Offline and isolated from the machine's pip configuration: the other torch is a stand-in
distribution (version 2.99.0), and the index the install resolves against holds xpspec's
wheel, a stand-in torch at the version CI pins (what a public index would offer) and a
stand-in of each other requirement at the version this environment has. pip resolves
xpspec's real metadata against them, so the test fails as soon as a requirement of xpspec
excludes the torch in place (the earlier ``torch==2.13.0`` pin did: pip replaced it)."""

from __future__ import annotations

import email
import importlib.metadata
import json
import os
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.packaging.envs import ROOT, make_venv, pip, run_in
from tests.packaging.standins import write_wheel

OTHER_TORCH = "2.99.0"  # a torch no index offers: the framework's own build
OLD_TORCH = "1.0.0"  # a torch xpspec does not support: pip must replace it


def _requirements(wheel: Path) -> list[Requirement]:
    """The wheel's runtime requirements that apply to this interpreter."""
    name, version = wheel.name.split("-")[:2]
    with zipfile.ZipFile(wheel) as archive:
        metadata = email.message_from_bytes(archive.read(f"{name}-{version}.dist-info/METADATA"))
    requirements = [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]
    return [r for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]


def _pinned_torch() -> str:
    lines = (ROOT / "constraints" / "torch.txt").read_text(encoding="utf-8").splitlines()
    (pin,) = [ln.split("#")[0].strip() for ln in lines if ln.strip().startswith("torch==")]
    return pin.removeprefix("torch==")


def _torch(directory: Path, version: str) -> Path:
    return write_wheel(
        directory, "torch", version, {"torch/__init__.py": f'__version__ = "{version}"\n'}
    )


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, xpspec_wheel: Path) -> Path:
    """A find-links directory standing in for a public index (see the module docstring)."""
    directory = tmp_path_factory.mktemp("index")
    for requirement in _requirements(xpspec_wheel):
        if requirement.name == "torch":
            _torch(directory, _pinned_torch())
            continue
        version = importlib.metadata.version(requirement.name)
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{requirement}: expected this environment's {requirement.name} to satisfy it, "
            f"got {version}"
        )
        write_wheel(directory, requirement.name, version)
    return directory


def _environment_with_torch(root: Path, version: str) -> Path:
    """A new environment holding a stand-in torch ``version``; returns its interpreter."""
    python = make_venv(root / "env")
    _torch(root / "own", version)
    pip(python, "install", "-q", "--no-index", "--find-links", str(root / "own"), "torch")
    return python


def _install(python: Path, wheel: Path, index: Path, report: Path, *options: str) -> dict[str, str]:
    """``pip install`` the wheel from the offline index; returns {name: version} of what pip
    installed (or would install, under --dry-run), from its installation report."""
    pip(
        python,
        *("install", "-q", "--no-index", "--find-links", str(index)),
        *("--report", str(report), *options, str(wheel)),
    )
    items = json.loads(report.read_text(encoding="utf-8"))["install"]
    return {item["metadata"]["name"]: item["metadata"]["version"] for item in items}


def test_installing_xpspec_keeps_the_torch_in_place(
    tmp_path: Path, xpspec_wheel: Path, index: Path
) -> None:
    python = _environment_with_torch(tmp_path, OTHER_TORCH)
    installed = _install(python, xpspec_wheel, index, tmp_path / "report.json")
    assert "xpspec" in installed and "torch" not in installed, installed
    versions = run_in(
        python,
        "import importlib.metadata, torch\n"
        "print(importlib.metadata.version('torch'), torch.__version__)",
    )
    assert versions.split() == [OTHER_TORCH, OTHER_TORCH]
    pip(python, "check")  # every requirement of every installed distribution is met
    # the installed package reads its data files (the protocol core needs no torch)
    where, *names = run_in(
        python,
        "import xpspec\n"
        "from xpspec.protocol.schemas import load_schema, schema_names\n"
        "print(xpspec.__file__, *[n for n in schema_names() if load_schema(n)])",
    ).split()
    assert Path(where).is_relative_to(tmp_path / "env"), where
    shipped = sorted(ROOT.joinpath("xpspec", "protocol", "schemas").glob("*.schema.json"))
    assert names == [p.name.removesuffix(".schema.json") for p in shipped]


def test_a_torch_xpspec_does_not_support_is_replaced(
    tmp_path: Path, xpspec_wheel: Path, index: Path
) -> None:
    """The control of the test above: the same install does touch torch when it must."""
    (torch,) = [r for r in _requirements(xpspec_wheel) if r.name == "torch"]
    assert OLD_TORCH not in torch.specifier
    python = _environment_with_torch(tmp_path, OLD_TORCH)
    installed = _install(python, xpspec_wheel, index, tmp_path / "report.json", "--dry-run")
    assert installed.get("torch") == _pinned_torch(), installed


def test_xpspec_installs_beside_pypis_adapters(tmp_path: Path, xpspec_wheel: Path) -> None:
    """PyPI's ``adapters`` (AdapterHub) is a top-level package ``adapters``; xpspec's adapters
    are ``xpspec.adapters``. Needs the network (the machine's own pip configuration)."""
    download = tmp_path / "download"
    try:
        pip(
            Path(sys.executable),
            *("download", "-q", "--no-deps", "--only-binary", ":all:", "--timeout", "30"),
            *("-d", str(download), "adapters"),
            env=dict(os.environ),
            timeout=180,
        )
    except AssertionError as exc:
        pytest.skip(f"could not download PyPI's adapters (no network?): {str(exc)[-300:]}")
    (theirs,) = download.glob("adapters-*.whl")
    python = make_venv(tmp_path / "env")
    pip(python, "install", "-q", "--no-index", "--no-deps", str(xpspec_wheel), str(theirs))
    found = json.loads(
        run_in(
            python,
            "import importlib.metadata as m, importlib.util as u, json, xpspec.adapters\n"
            "tops = m.packages_distributions()\n"
            "print(json.dumps({\n"
            "    'adapters': u.find_spec('adapters').origin,\n"
            "    'xpspec.adapters': xpspec.adapters.__file__,\n"
            "    'owners': sorted(set(tops.get('adapters', []))),\n"
            "    'xpspec_tops': sorted(t for t, d in tops.items() if 'xpspec' in d),\n"
            "    'shared': sorted({str(f) for f in m.files('xpspec')}\n"
            "                     & {str(f) for f in m.files('adapters')}),\n"
            "    'registered': sorted(e.name for e in m.entry_points(group='xpspec.adapters')),\n"
            "}))",
        )
    )
    site = Path(found["xpspec.adapters"]).parents[2]
    assert found["adapters"] == str(site / "adapters" / "__init__.py"), found
    assert found["xpspec.adapters"] == str(site / "xpspec" / "adapters" / "__init__.py")
    assert found["owners"] == ["adapters"], found
    assert found["xpspec_tops"] == ["xpspec"], found
    assert found["shared"] == [] and "sb3" in found["registered"], found
