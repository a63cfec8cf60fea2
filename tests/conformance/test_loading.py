"""Finding adapters: registered names are entry points (xpspec's own and any installed
package's), a module beside the user loads without PYTHONPATH, and an adapter's expectations
file is found beside its module without importing it."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import tomllib

from xpspec.conformance.harness import connect, expectations_path, load_adapter, registrations
from xpspec.conformance.harness.loading import ENTRY_POINT_GROUP, adapter_target
from xpspec.conformance.outcomes import AdapterUnavailable

ROOT = Path(__file__).resolve().parents[2]

ADAPTER_SOURCE = """
from xpspec.refimpl.adapter import RefimplAdapter


class Adapter(RefimplAdapter):
    pass
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _install(site: Path, distribution: str, entries: dict[str, str]) -> None:
    """The installed metadata of a distribution that registers ``entries`` (name -> target)."""
    info = site / f"{distribution.replace('-', '_')}-1.0.dist-info"
    _write(info / "METADATA", f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 1.0\n")
    lines = [f"[{ENTRY_POINT_GROUP}]", *(f"{n} = {t}" for n, t in entries.items())]
    _write(info / "entry_points.txt", "\n".join(lines) + "\n")


def test_the_registered_adapters_are_the_entry_points_of_pyproject() -> None:
    """What the installed metadata registers is the table in pyproject.toml (an install made
    before the table changed fails here: run `pip install -e .` again)."""
    table = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "entry-points"
    ][ENTRY_POINT_GROUP]
    ours = {
        name: found[0].target
        for name, found in registrations().items()
        if found[0].distribution == "xpspec"
    }
    assert ours == table
    assert table["refimpl"] == "xpspec.refimpl.adapter:RefimplAdapter"


def test_another_package_registers_its_own_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path / "tinyring_pkg" / "__init__.py", "")
    _write(tmp_path / "tinyring_pkg" / "adapter.py", ADAPTER_SOURCE)
    _write(tmp_path / "tinyring_pkg" / "adapter.expectations.toml", "")
    _install(tmp_path, "tinyring-xpspec", {"tinyring": "tinyring_pkg.adapter:Adapter"})
    monkeypatch.syspath_prepend(str(tmp_path))
    assert registrations()["tinyring"][0].distribution == "tinyring-xpspec"
    assert type(load_adapter("tinyring")).__module__ == "tinyring_pkg.adapter"
    assert expectations_path("tinyring") == tmp_path / "tinyring_pkg" / "adapter.expectations.toml"
    with pytest.raises(ValueError, match=r"did you mean 'tinyring'\?"):
        adapter_target("tinyrnig")


def test_a_name_two_packages_register_differently_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(tmp_path / "a", "first-xp", {"twice": "first_pkg:Adapter"})
    _install(tmp_path / "b", "second-xp", {"twice": "second_pkg:Adapter"})
    monkeypatch.syspath_prepend(str(tmp_path / "a"))
    monkeypatch.syspath_prepend(str(tmp_path / "b"))
    with pytest.raises(ValueError, match="registered more than once") as caught:
        load_adapter("twice")
    assert "first_pkg:Adapter (by first-xp)" in str(caught.value)
    assert "second_pkg:Adapter (by second-xp)" in str(caught.value)


def test_a_misspelt_name_lists_the_registered_ones() -> None:
    with pytest.raises(AdapterUnavailable) as caught:
        connect("tianshu")
    message = str(caught.value)
    assert "did you mean 'tianshou'?" in message
    assert all(name in message for name in ("refimpl", "sb3", "tianshou", "alf"))
    assert ENTRY_POINT_GROUP in message and "fix:" in message and "\n" not in message


@pytest.mark.parametrize("spec", ["sb3", "xpspec.adapters.sb3:SB3Adapter"])
def test_a_builtin_adapter_finds_its_expectations_by_name_or_path(spec: str) -> None:
    assert expectations_path(spec) == ROOT / "xpspec" / "adapters" / "sb3.expectations.toml"


def test_expectations_are_found_without_importing_the_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite's process never runs adapter code: not even the package's __init__."""
    _write(tmp_path / "explodes" / "__init__.py", "raise RuntimeError('imported')\n")
    _write(tmp_path / "explodes" / "adapter.py", "raise RuntimeError('imported')\n")
    toml = _write(tmp_path / "explodes" / "adapter.expectations.toml", "")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert expectations_path("explodes.adapter:Adapter") == toml
    assert "explodes" not in sys.modules
    assert expectations_path("explodes.other:Adapter") is None
    assert expectations_path("refimpl") is None  # the reference adapter declares nothing
    assert expectations_path("exec:./worker") is None


@pytest.fixture
def beside_me(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An adapter module in the current directory, with nothing making that directory
    importable: no PYTHONPATH, and (PYTHONSAFEPATH) no implicit entry for ``python -m``."""
    name = f"beside_me_{tmp_path.name.replace('-', '_')}"
    _write(tmp_path / f"{name}.py", ADAPTER_SOURCE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("PYTHONSAFEPATH", "1")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    return name


def _connected_name(spec: str, isolation: str) -> str:
    """The name the adapter ``spec`` gives once connected (its worker then stopped)."""
    adapter = connect(spec, isolation)  # type: ignore[arg-type]
    try:
        return adapter.info().name
    finally:
        close = getattr(adapter, "close", None)
        if callable(close):
            close()


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_a_module_in_the_current_directory_loads_without_pythonpath(
    beside_me: str, isolation: str
) -> None:
    assert _connected_name(f"{beside_me}:Adapter", isolation) == "refimpl"


def test_expectations_beside_a_module_in_the_current_directory(beside_me: str) -> None:
    toml = _write(Path.cwd() / f"{beside_me}.expectations.toml", "")
    assert expectations_path(f"{beside_me}:Adapter") == toml


def test_the_module_the_worker_runs_is_the_one_whose_expectations_apply(
    beside_me: str, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A module of the same name earlier on the path (a checkout's root, which pytest puts on
    # the suite's path) must neither be imported by the worker nor lend its (missing)
    # expectations file: the current directory's module comes first for both.
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    _write(elsewhere / f"{beside_me}.py", "raise RuntimeError('the module elsewhere')\n")
    monkeypatch.syspath_prepend(str(elsewhere))
    monkeypatch.setenv("PYTHONPATH", str(elsewhere))
    toml = _write(Path.cwd() / f"{beside_me}.expectations.toml", "")
    assert expectations_path(f"{beside_me}:Adapter") == toml
    assert _connected_name(f"{beside_me}:Adapter", "process") == "refimpl"


def test_a_bare_folder_named_like_the_package_does_not_hide_its_expectations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an empty folder `xpspec/` where the suite runs is a namespace portion, which the
    # installed package wins over at import: the expectations come from the package
    (tmp_path / "xpspec").mkdir()
    monkeypatch.chdir(tmp_path)
    assert expectations_path("sb3") == ROOT / "xpspec" / "adapters" / "sb3.expectations.toml"


def test_an_adapter_name_with_an_underscore_finds_its_normalised_extra() -> None:
    # extras' names are normalised (adapter-skrl-tlb), adapter names keep their underscore
    assert registrations()["skrl_tlb"][0].extra() == "adapter-skrl-tlb"
