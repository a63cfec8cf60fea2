"""The table of ``docs/mutation.md``, written from committed data only: the executed mutants
(``results.jsonl``), the mutants declared equivalent (``equivalent.toml``) and the reasons
the other non-killed mutants are not caught (``survivors.toml``), each keyed by mutant id.

The score is the share of non-equivalent mutants that made a check fail; a mutant that only
made the suite red otherwise (adapter error, timeout, crash) does not count as caught.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from mutation.results import NOT_MUTANTS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "CATEGORIES",
    "DOCS",
    "RESULTS",
    "Summary",
    "category",
    "load_reasons",
    "load_results",
    "render",
    "write_docs",
]

HERE: Final = Path(__file__).resolve().parent
RESULTS: Final = HERE / "results.jsonl"
EQUIVALENT: Final = HERE / "equivalent.toml"
SURVIVORS: Final = HERE / "survivors.toml"
DOCS: Final = HERE.parent / "docs" / "mutation.md"
GOAL: Final = 0.90

_UNCLASSIFIED: Final = "*not yet classified*"
CATEGORIES: Final = {
    "gap": "a clause should catch it and does not (the reason names it)",
    "variant": "variant code: the refimpl run has no scenario that runs this variant",
    "oracle": "the check computes its expected value with the mutated refimpl function",
    "validation": "argument or config validation: no clause covers refimpl's own errors",
    "unreached": "no scenario of the suite reaches this code",
    "crash": "the mutant raises or hangs: the suite is red only through adapter failures",
}
"""The categories a reason in ``survivors.toml`` starts with (``"gap: ..."``)."""


class Summary:
    """Counts of one group of mutants (a module, or all), equivalent ones apart."""

    def __init__(self, rows: Sequence[Mapping[str, Any]], equivalent: Mapping[str, str]) -> None:
        counted = [r for r in rows if r["class"] not in NOT_MUTANTS]
        self.run = len(counted)
        self.equivalent = sum(1 for r in counted if r["id"] in equivalent)
        rest = [r for r in counted if r["id"] not in equivalent]
        self.check_fail = sum(1 for r in rest if r["class"] == "check-fail")
        self.other_red = sum(1 for r in rest if r["class"] == "other-red")
        self.survived = sum(1 for r in rest if r["class"] == "survived")
        self.non_equivalent = len(rest)

    @property
    def score(self) -> float | None:
        """Check-fail over non-equivalent (``None`` when there is none)."""
        return self.check_fail / self.non_equivalent if self.non_equivalent else None

    @property
    def red(self) -> float | None:
        """Red for any reason over non-equivalent."""
        red = self.check_fail + self.other_red
        return red / self.non_equivalent if self.non_equivalent else None


def load_results(path: Path = RESULTS) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the mutant records of a results file."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    if not lines or lines[0].get("type") != "header":
        raise ValueError(f"{path}: expected a header line first, got {lines[:1]}")
    return lines[0], lines[1:]


def load_reasons(path: Path) -> dict[str, str]:
    """Mutant id -> one-line reason, from a TOML file of ``["<id>"] reason = "..."`` tables."""
    if not path.is_file():
        return {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    reasons: dict[str, str] = {}
    for mutant, entry in data.items():
        reason = entry.get("reason", "") if isinstance(entry, dict) else ""
        if not isinstance(reason, str) or not reason.strip() or "\n" in reason.strip():
            raise ValueError(f"{path}: [{mutant!r}] needs a one-line reason, got {reason!r}")
        reasons[mutant] = reason.strip()
    return reasons


def render(
    header: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    equivalent: Mapping[str, str],
    reasons: Mapping[str, str],
) -> str:
    """The markdown page."""
    total = Summary(rows, equivalent)
    modules = sorted({r["module"] for r in rows})
    partial = header.get("pending", 0) > 0
    out = [
        "# Mutation testing",
        "",
        "How much of refimpl's behaviour the suite pins down: mechanical mutants of refimpl's",
        "semantic modules (accounting, preprocess, replay, relabel, trainer and the learner",
        "package, variant code included, and the preprocessing and sampling values of the",
        "protocol core they validate) are each run against the suite, and a mutant counts",
        "as caught only when **a check reports fail**. A run that goes red only through",
        "adapter failures (the mutant raised, timed out, or broke the trace format) is",
        "counted apart: such a mutant is noticed, but no clause says what it got wrong.",
        "Before the suite runs, each mutated tree is type-checked as the `lint` session does;",
        "a mutant mypy rejects (`int | Fraction`, a `None` where a value is required) could",
        "never be merged, so it is *stillborn* and left out of the score, like one whose module",
        "no longer parses.",
        "",
        "`nox -s mutation` makes the mutants with cosmic-ray (pinned in",
        "`constraints/mutation.txt`), runs `xpspec run --adapter refimpl --isolation inline`",
        "against each in a copy of the tree, and rewrites this page from the committed data",
        "in `mutation/`: `results.jsonl` (every executed mutant and its class),",
        "`equivalent.toml` (mutants that change nothing a clause could observe, with the",
        "reason) and `survivors.toml` (why each other uncaught mutant is not caught). Arguments",
        "after `--` go to `python -m mutation`: `--sample N` and `--seed S` choose the seeded",
        "random sample (150 by default: about an hour on a busy two-core machine), `--all` runs every",
        "mutant, `--resume` goes on with a stopped session, `--table-only` rewrites this page",
        "from the data. It is not part of CI.",
        "",
        "A mutant's id is its module, cosmic-ray's operator and the occurrence of that operator",
        "in the module: it is stable while the module's source is unchanged, so after an edit",
        "of a module its entries in the two TOML files need a look.",
        "",
        "## The run",
        "",
        f"- Tool: {header.get('tool', '?')}; {header.get('mutants', '?')} mutants in all;",
        f"  sample: {header.get('sample', '?')} (seed {header.get('seed', '?')}).",
        f"- Executed: {header.get('executed', len(rows))} mutants"
        + (
            f", **partial**: {header['pending']} of the sample did not run (the executed ones"
            " are a random sub-sample: the sample runs in a seeded random order)."
            if partial
            else "."
        ),
        f"- Not mutants (left out): {sum(1 for r in rows if r['class'] == 'invalid')} whose"
        " module no longer parses, "
        f"{sum(1 for r in rows if r['class'] == 'no-mutation')} where cosmic-ray found nothing"
        f" to change, {sum(1 for r in rows if r['class'] == 'stillborn')} that the type check"
        " rejects (stillborn: a change the `lint` session would refuse).",
        f"- Baseline: the unmutated suite passes in {header.get('baseline_seconds', '?')} s;"
        f" per-mutant timeout {header.get('timeout', '?')} s.",
        f"- Started {header.get('started', '?')}, ended {header.get('ended', '?')}.",
        "",
        "## Score",
        "",
        f"**{_percent(total.score)}** of the {total.non_equivalent} non-equivalent mutants made a"
        f" check fail (goal: at least {GOAL:.0%}); {_percent(total.red)} made the suite red for"
        f" any reason. Declared equivalent: {total.equivalent}.",
        "",
        "| module | run | equivalent | check fail | red otherwise | survived | score |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for module in modules:
        s = Summary([r for r in rows if r["module"] == module], equivalent)
        out.append(_summary_row(f"`{module}`", s))
    out.append(_summary_row("**all**", total))
    uncaught = [
        r for r in rows if r["class"] in ("survived", "other-red") and r["id"] not in equivalent
    ]
    out += [
        "",
        "## Not caught by a check",
        "",
        "Survivors (every check passed) and mutants that made the suite red only otherwise,",
        "each with the reason no check catches it: which clause should and does not, or why",
        "no clause can.",
        "",
    ]
    out += _category_table(uncaught, reasons)
    out.append("")
    out += _mutant_table(uncaught, reasons)
    killed_equivalent = [r for r in rows if r["id"] in equivalent and r["class"] == "check-fail"]
    declared = [r for r in rows if r["id"] in equivalent]
    out += [
        "",
        "## Equivalent mutants",
        "",
        "Mutants that change nothing a clause could observe (left out of the score).",
        "",
    ]
    out += _mutant_table(declared, equivalent)
    if killed_equivalent:
        out += [
            "",
            "!!! warning",
            "    Declared equivalent, yet a check failed: "
            + ", ".join(f"`{r['id']}`" for r in killed_equivalent),
        ]
    return "\n".join(out) + "\n"


def write_docs(results: Path = RESULTS, docs: Path = DOCS) -> None:
    """Rewrite the docs page from the committed data."""
    header, rows = load_results(results)
    page = render(header, rows, load_reasons(EQUIVALENT), load_reasons(SURVIVORS))
    docs.write_text(page, encoding="utf-8")


def _summary_row(name: str, s: Summary) -> str:
    cells = [name, s.run, s.equivalent, s.check_fail, s.other_red, s.survived, _percent(s.score)]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _mutant_table(rows: Sequence[Mapping[str, Any]], reasons: Mapping[str, str]) -> list[str]:
    if not rows:
        return ["None."]
    out = [
        "| mutant | line | mutation | class | reason |",
        "| --- | ---: | --- | --- | --- |",
    ]
    for r in sorted(rows, key=lambda r: (r["module"], r["line"], r["id"])):
        cls = r["class"] + (
            f" ({r['detail']})" if r["class"] == "other-red" and r["detail"] else ""
        )
        out.append(
            f"| `{r['id']}` | {r['line']} | `{_code(r['mutation'])}` | {_cell(cls)} |"
            f" {_cell(reasons.get(r['id'], _UNCLASSIFIED))} |"
        )
    return out


def category(reason: str) -> str:
    """The category a survivor's reason starts with, or ``unclassified``."""
    head, sep, _ = reason.partition(":")
    return head if sep and head in CATEGORIES else "unclassified"


def _category_table(rows: Sequence[Mapping[str, Any]], reasons: Mapping[str, str]) -> list[str]:
    counts: dict[str, int] = {}
    for r in rows:
        name = category(reasons.get(r["id"], ""))
        counts[name] = counts.get(name, 0) + 1
    out = ["| category | mutants | meaning |", "| --- | ---: | --- |"]
    for name, meaning in [*CATEGORIES.items(), ("unclassified", "no reason recorded yet")]:
        if counts.get(name):
            out.append(f"| {name} | {counts[name]} | {meaning} |")
    return out


def _code(text: str) -> str:
    """A code span's text: Python-Markdown's tables leave a pipe inside backticks alone."""
    return " ".join(text.split()).replace("`", "'")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"
