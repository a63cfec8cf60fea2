"""sweeps/versions.toml, the releases ``nox -s sweep`` runs by default: one table per adapter
of the matrix, each naming the adapter's framework package, four to six releases in PEP 440
order, the release the adapter was written for among them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PLANS = tomllib.loads((ROOT / "sweeps" / "versions.toml").read_text(encoding="utf-8"))
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "optional-dependencies"
]


def _adapters() -> list[str]:
    """The noxfile's ADAPTERS (the noxfile imports nox, which the tests need not have)."""
    text = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    block = re.search(r"^ADAPTERS = \((.*?)^\)", text, re.MULTILINE | re.DOTALL)
    assert block is not None
    return re.findall(r'"([a-z_0-9]+)"', block[1])


def test_every_adapter_installed_from_pypi_has_a_plan() -> None:
    assert sorted(PLANS) == sorted(_adapters())


@pytest.mark.parametrize("adapter", sorted(PLANS))
def test_a_plan_names_the_framework_and_four_to_six_releases_oldest_first(adapter: str) -> None:
    plan = PLANS[adapter]
    assert set(plan) <= {"package", "framework", "versions", "with", "chosen"}
    versions = [Version(v) for v in plan["versions"]]
    assert 4 <= len(versions) <= 6 and versions == sorted(set(versions))
    assert not any(v.is_prerelease for v in versions)
    pinned = Requirement(EXTRAS[f"adapter-{adapter.replace('_', '-')}"][0])
    swept = Requirement(f"{plan['package']}=={plan['versions'][-1]}")
    assert (swept.name, swept.extras) == (pinned.name, pinned.extras)
    (written_for,) = [str(s.version) for s in pinned.specifier]
    assert written_for in plan["versions"], (adapter, written_for)
    # the adapter's info() names the framework so (a configuration such as skrl_tlb
    # inherits it from its framework's adapter)
    modules = {adapter, adapter.partition("_")[0]}
    source = "".join(
        (ROOT / "xpspec" / "adapters" / f"{m}.py").read_text(encoding="utf-8") for m in modules
    )
    assert f'framework="{plan["framework"]}"' in source
