"""One executed mutant as a record of ``results.jsonl``, from cosmic-ray's work result.

The classes: ``check-fail`` (a check reported fail), ``other-red`` (the suite went red
otherwise: adapter failures, an incomplete run, a timeout, a crash of the test command),
``survived`` (every check passed), and three that are not mutants at all: ``no-mutation``
(cosmic-ray found nothing to mutate at that occurrence), ``invalid`` (the mutated module
is not valid Python, e.g. the keyword-only marker ``*`` of a signature taken for a
multiplication) and ``stillborn`` (the project's type check rejects the mutated tree, e.g.
``int | Fraction``: a change that could never be merged, so no behaviour refimpl could ship).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from mutation.verdict import parse_verdict

__all__ = ["NOT_MUTANTS", "MutantClass", "classify_result", "mutation_lines", "record"]

MutantClass = Literal["check-fail", "other-red", "survived", "no-mutation", "invalid", "stillborn"]

NOT_MUTANTS: Final = ("no-mutation", "invalid", "stillborn")
"""Classes left out of every count."""


def classify_result(
    worker_outcome: str, test_outcome: str | None, output: str
) -> tuple[MutantClass, str]:
    """The class of one work result (cosmic-ray's worker and test outcomes and the test
    command's standard output) and a one-line detail."""
    if worker_outcome == "no-test":
        return "no-mutation", ""
    if worker_outcome != "normal":
        lines = output.strip().splitlines()
        return "other-red", f"cosmic-ray worker {worker_outcome}: {lines[-1] if lines else ''}"
    if test_outcome == "killed" and output.strip() == "timeout":
        return "other-red", "timeout"
    verdict = parse_verdict(output)
    if verdict is None:
        return "other-red", f"the probe printed no verdict (test outcome {test_outcome})"
    if (verdict.run_class == "survived") != (test_outcome == "survived"):
        return "other-red", f"verdict {verdict.run_class} disagrees with outcome {test_outcome}"
    if verdict.run_class == "other-red" and "SyntaxError" in verdict.reason:
        return "invalid", verdict.reason
    if verdict.run_class == "stillborn":
        return "stillborn", verdict.reason
    if verdict.run_class == "check-fail":
        more = len(verdict.failed) - 1
        return "check-fail", verdict.failed[0] + (f" (+{more} more)" if more else "")
    return verdict.run_class, verdict.reason


def mutation_lines(diff: str) -> str:
    """The changed lines of a unified diff, ``-old`` / ``+new``, stripped, joined by `` → ``."""
    old = [line[1:].strip() for line in diff.splitlines() if _changed(line, "-")]
    new = [line[1:].strip() for line in diff.splitlines() if _changed(line, "+")]
    return " / ".join(old) + " → " + (" / ".join(new) if new else "(removed)")


def record(
    mutant: str,
    module: str,
    line: int,
    worker_outcome: str,
    test_outcome: str | None,
    output: str,
    diff: str,
) -> dict[str, Any]:
    """The JSON record of one executed mutant."""
    run_class, detail = classify_result(worker_outcome, test_outcome, output)
    return {
        "id": mutant,
        "module": module,
        "line": line,
        "class": run_class,
        "detail": detail,
        "mutation": mutation_lines(diff) if diff else "",
    }


def _changed(line: str, sign: str) -> bool:
    return line.startswith(sign) and not line.startswith(sign * 3)
