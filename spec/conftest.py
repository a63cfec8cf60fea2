"""Run the worked examples of the spec pages (Sybil).

Every plain ```python fence of a page under this directory is executed, in page order, with
one namespace per page. Before a block runs, the Markdown table closest above it (after the
previous fence) is parsed into ``TABLE`` (a list of rows, each a tuple of cell strings, header
excluded), and ``check_table(rows)`` compares computed rows with it cell by cell after
``str()``. A block that asserts ``check_table(...)`` therefore proves that the table a reader
sees is the one the reference implementation computes. ``FENCES`` maps each language to the
body of the last fenced block of that language between the previous Python block and this
one (```` ```bash ````, ```` ```json ````, ...), so a block can run the very commands and read
the very files a reader sees.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sybil import Example, Sybil
from sybil.evaluators.python import PythonEvaluator
from sybil.parsers.markdown.codeblock import CodeBlockParser

__all__ = ["check_rows", "fenced_blocks", "last_table", "markdown_sybil"]

_FENCE = re.compile(r"^```", re.MULTILINE)
_BLOCK = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_SEPARATOR = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def _cells(line: str) -> tuple[str, ...]:
    inner = line.strip()
    if inner.startswith("|"):
        inner = inner[1:]
    if inner.endswith("|"):
        inner = inner[:-1]
    return tuple(_plain(cell.strip()) for cell in inner.split("|"))


def _plain(cell: str) -> str:
    """A cell's text without Markdown code ticks or emphasis."""
    return cell.replace("`", "").replace("**", "").strip()


def last_table(text: str) -> list[tuple[str, ...]] | None:
    """The body rows of the last Markdown table in ``text`` (header and rule excluded)."""
    lines = text.splitlines()
    found: list[tuple[str, ...]] | None = None
    i = 0
    while i < len(lines):
        if (
            lines[i].lstrip().startswith("|")
            and i + 1 < len(lines)
            and _SEPARATOR.match(lines[i + 1].strip())
        ):
            rows = []
            j = i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append(_cells(lines[j]))
                j += 1
            found = rows
            i = j
        else:
            i += 1
    return found


def fenced_blocks(text: str) -> dict[str, str]:
    """The body of the last fenced block of each language in ``text``."""
    return {m.group(1): m.group(2) for m in _BLOCK.finditer(text)}


def check_rows(shown: Sequence[Sequence[str]] | None, computed: Iterable[Sequence[Any]]) -> None:
    """Assert that ``computed`` rows, stringified, equal the ``shown`` table rows."""
    if shown is None:
        raise AssertionError("check_table: no Markdown table above this code block")
    got = [tuple(str(v) for v in row) for row in computed]
    want = [tuple(row) for row in shown]
    if got != want:
        lines = ["the table on the page differs from the computed one:"]
        for index in range(max(len(got), len(want))):
            page = want[index] if index < len(want) else "(missing)"
            comp = got[index] if index < len(got) else "(missing)"
            mark = "  " if page == comp else "!="
            lines.append(f"{mark} row {index + 1}: page {page} computed {comp}")
        raise AssertionError("\n".join(lines))


class _TableAwareEvaluator:
    """Runs a Python block after binding ``TABLE`` and ``check_table`` in its namespace.

    Blocks of a page build on each other. When a block runs in a process that has not run the
    page's earlier blocks (pytest-xdist may send them to another worker), those are run first,
    in page order, so every block sees the namespace the page promises.
    """

    def __init__(self) -> None:
        self._python = PythonEvaluator()

    def __call__(self, example: Example) -> None:
        __tracebackhide__ = True
        done: set[int] = example.document.__dict__.setdefault("_xpspec_done", set())
        for earlier in example.document.examples():
            if earlier.start >= example.start:
                break
            if earlier.start not in done and earlier.region.evaluator is self:
                self._run(earlier)
                done.add(earlier.start)
        self._run(example)
        done.add(example.start)

    def _run(self, example: Example) -> None:
        __tracebackhide__ = True
        text = example.document.text[: example.start]
        fences = list(_FENCE.finditer(text))
        # text after the closing fence of the previous block (fences come in pairs)
        since = fences[-1].end() if fences else 0
        table = last_table(text[since:])
        previous = max(
            (
                e.end
                for e in example.document.examples()
                if e.end <= example.start and e.region.evaluator is self
            ),
            default=0,
        )
        example.namespace["FENCES"] = fenced_blocks(text[previous:])
        example.namespace["TABLE"] = table
        example.namespace["check_table"] = lambda rows: check_rows(table, rows)
        self._python(example)


def markdown_sybil(directory: Path, patterns: Sequence[str] = ("*.md",)) -> Sybil:
    """A Sybil collecting the ```python fences of the Markdown files in ``directory``."""
    return Sybil(
        parsers=[CodeBlockParser(language="python", evaluator=_TableAwareEvaluator())],
        patterns=list(patterns),
        path=str(directory.resolve()),
    )


pytest_collect_file = markdown_sybil(Path(__file__).parent).pytest()
