"""The figures of the specification: every marker a page holds names a figure the docs' hook
draws, every figure is shown somewhere, and each renders as one figure element."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([*ROOT.joinpath("spec").glob("*.md"), *ROOT.joinpath("docs").glob("*.md")])


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("figures_hook", ROOT / "docs/hooks/figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOK = _hook()


def _markers() -> list[tuple[str, str]]:
    return [
        (page.name, name)
        for page in PAGES
        for name in HOOK.MARKER.findall(page.read_text(encoding="utf-8"))
    ]


def test_every_marker_names_a_figure_and_every_figure_is_shown() -> None:
    shown = {name for _, name in _markers()}
    assert shown == set(HOOK.FIGURES), (sorted(shown), sorted(HOOK.FIGURES))


@pytest.mark.parametrize("name", sorted(HOOK.FIGURES))
def test_each_figure_renders_as_one_figure(name: str) -> None:
    html = HOOK.substitute(f"before\n\n<!-- xpspec-figure: {name} -->\n\nafter\n")
    assert html.count('<figure class="xpspec-figure"') == 1 and f'data-figure="{name}"' in html
    assert "xpspec-figure:" not in html and "\n\n<figure" in html


def test_an_unknown_figure_fails_the_build() -> None:
    with pytest.raises(ValueError, match="unknown figure 'nope'"):
        HOOK.substitute("<!-- xpspec-figure: nope -->\n", "spec/x.md")


def test_a_marker_must_stand_alone_on_its_line() -> None:
    text = "text <!-- xpspec-figure: unroll-carry --> more\n"
    assert HOOK.substitute(text) == text
    assert re.search(HOOK.MARKER, "<!-- xpspec-figure: unroll-carry -->")
