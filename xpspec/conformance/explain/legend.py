"""How each kind of mark looks: a shape and a colour on the page (the shapes alone tell the
kinds apart in greyscale; a hollow triangle is a train call that made no update), one
character in the terminal."""

from __future__ import annotations

from dataclasses import dataclass

from xpspec.conformance.explain.timeline import Mark

__all__ = ["LEGEND", "MarkStyle", "style_of", "symbol"]


@dataclass(frozen=True)
class MarkStyle:
    """The look of one kind of mark."""

    kind: str
    label: str
    symbol: str
    """Its character in text mode (unique: it names the style)."""
    shape: str
    """``dot``, ``square``, ``diamond``, ``cross``, ``triangle``, ``bar``, ``bracket``,
    ``tick``, ``flag`` or ``ring`` (drawn by the page's template)."""
    colour: str
    filled: bool = True
    on_page: bool = True
    """Whether the page's legend shows it (a mark drawn alike on the page may have a
    character of its own in text mode)."""


_NOT_TRAINED = "train call without update (warm-up, no data)"

LEGEND: tuple[MarkStyle, ...] = (
    MarkStyle("env_step", "env step", "o", "dot", "#7f7f7f"),
    MarkStyle("hold", "hold", "h", "diamond", "#e69f00", filled=False),
    MarkStyle("store", "store", "#", "square", "#0072b2"),
    MarkStyle("exclude", "exclude", "x", "cross", "#d55e00"),
    MarkStyle("train_call", "train call", "T", "triangle", "#009e73"),
    MarkStyle("train_call", _NOT_TRAINED, "t", "triangle", "#009e73", filled=False),
    MarkStyle("update", "update", "U", "bar", "#cc79a7"),
    MarkStyle("window", "sampled window", "w", "bracket", "#56b4e9"),
    MarkStyle("window", "several windows", "W", "bracket", "#56b4e9", on_page=False),
    MarkStyle("hook", "hook", ":", "tick", "#000000"),
    MarkStyle("run_end", "run end", "$", "flag", "#000000", filled=False),
    MarkStyle("other", "other event", "*", "ring", "#555555", filled=False),
)
"""Every style, in the legend's order."""

_BY_SYMBOL = {s.symbol: s for s in LEGEND}
_SYMBOL_OF_KIND = {s.kind: s.symbol for s in reversed(LEGEND)}  # the first style of each kind


def symbol(mark: Mark) -> str:
    """``mark``'s character in text mode: that of its kind; ``t`` for a train call that did
    not train, ``W`` for several windows of one env, ``*`` for any other kind of event."""
    if mark.kind == "train_call" and mark.variant != "trained":
        return "t"
    if mark.kind == "window" and len(mark.rows) > 1:
        return "W"
    return _SYMBOL_OF_KIND.get(mark.kind, "*")


def style_of(mark: Mark) -> MarkStyle:
    """The style of ``mark``."""
    return _BY_SYMBOL[symbol(mark)]
