"""The mutation session's classifier and table (docs/mutation.md): a mutant counts as caught
only when a check reported fail; adapter failures, timeouts and crashes are red otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mutation.results import classify_result, mutation_lines, record
from mutation.table import (
    DOCS,
    EQUIVALENT,
    RESULTS,
    SURVIVORS,
    Summary,
    category,
    load_reasons,
    load_results,
    render,
)
from mutation.verdict import Verdict, classify_run, parse_verdict


def _result(check: str, status: str) -> dict[str, Any]:
    return {"type": "result", "check": check, "scenario": "s", "status": status}


def _footer(status: str = "complete") -> dict[str, Any]:
    return {"type": "footer", "status": status, "message": ""}


def test_a_failing_check_kills_even_beside_adapter_errors() -> None:
    report = [_result("a", "pass"), _result("b", "error"), _result("c", "fail"), _footer()]
    verdict = classify_run(1, report)
    assert verdict.run_class == "check-fail"
    assert verdict.failed == ("c[s]",)
    assert verdict.broken == ("b[s]",)


@pytest.mark.parametrize("status", ["error", "crash", "timeout", "resource"])
def test_adapter_failures_alone_are_red_otherwise(status: str) -> None:
    verdict = classify_run(1, [_result("a", "pass"), _result("b", status), _footer()])
    assert verdict.run_class == "other-red"
    assert verdict.broken == ("b[s]",)


def test_a_missing_report_or_footer_or_an_incomplete_run_is_red_otherwise() -> None:
    assert classify_run(3, None).run_class == "other-red"
    assert classify_run(1, [_result("a", "pass")]).reason == "report has no footer"
    incomplete = classify_run(4, [_result("a", "pass"), _footer("crashed")])
    assert (incomplete.run_class, incomplete.reason) == ("other-red", "run crashed:")


def test_only_a_complete_passing_run_with_exit_zero_survives() -> None:
    assert classify_run(0, [_result("a", "pass"), _footer()]).run_class == "survived"
    assert classify_run(1, [_result("a", "pass"), _footer()]).run_class == "other-red"


def test_a_should_level_failure_with_exit_zero_still_kills() -> None:
    # exit 0 allows SHOULD misses; the check still reported fail
    assert classify_run(0, [_result("a", "fail"), _footer()]).run_class == "check-fail"


def test_the_verdict_line_round_trips_through_the_probe_output() -> None:
    verdict = Verdict("check-fail", 1, ("c[s]", "d[s]"), ("b[s]",), "", {"fail": 2})
    output = "noise\n" + verdict.to_line() + "\n"
    assert parse_verdict(output) == verdict
    assert parse_verdict("no verdict here") is None


def test_work_results_map_to_classes() -> None:
    killed = Verdict("check-fail", 1, ("c[s]", "d[s]")).to_line()
    assert classify_result("normal", "killed", killed) == ("check-fail", "c[s] (+1 more)")
    assert classify_result("normal", "killed", "timeout") == ("other-red", "timeout")
    assert classify_result("no-test", None, "") == ("no-mutation", "")
    assert classify_result("exception", "incompetent", "Traceback\nOSError: x")[0] == "other-red"
    assert classify_result("normal", "killed", "garbage")[0] == "other-red"
    unparsable = Verdict("other-red", 1, reason="no report (exit 1); SyntaxError: invalid syntax")
    assert classify_result("normal", "killed", unparsable.to_line())[0] == "invalid"
    survived = Verdict("survived", 0).to_line()
    assert classify_result("normal", "survived", survived) == ("survived", "")
    # a probe that says survived while the command failed is not trusted
    assert classify_result("normal", "killed", survived)[0] == "other-red"
    rejected = Verdict("stillborn", 1, reason="m.py:3: error: Unsupported operand types").to_line()
    assert classify_result("normal", "killed", rejected) == (
        "stillborn",
        "m.py:3: error: Unsupported operand types",
    )


def test_stillborn_mutants_are_left_out_of_the_score() -> None:
    rows = [
        *_rows(),
        record("m.py:Op:9", "m.py", 9, "normal", "killed", Verdict("stillborn", 1).to_line(), ""),
    ]
    assert Summary(rows, {}).run == Summary(_rows(), {}).run


def test_the_type_gate_rejects_a_mutant_mypy_rejects_and_passes_a_well_typed_one(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mypy", reason="the type gate runs mypy (the lint extra)")
    from mutation.typecheck import type_errors

    tree = tmp_path / "tree"
    module = tree / "xpspec" / "accounting.py"
    module.parent.mkdir(parents=True)
    (tree / "mutation").mkdir()
    (tree / "xpspec" / "__init__.py").write_text("")
    (tree / "mutation" / "__init__.py").write_text("")
    source = "from fractions import Fraction\n\n\ndef f(k: int, u: Fraction) -> Fraction:\n"
    module.write_text(source + "    return k * u\n")
    cache = tmp_path / "cache"
    assert type_errors(tree, ["xpspec/accounting.py"], cache) == []
    module.write_text(source + "    return k | u\n")  # same size: only the mtime tells
    errors = type_errors(tree, ["xpspec/accounting.py"], cache)
    assert any("Unsupported operand types for |" in error for error in errors)


def test_mutation_lines_show_the_changed_code() -> None:
    diff = "--- mutation diff ---\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-    a < b\n+    a <= b\n"
    assert mutation_lines(diff) == "a < b → a <= b"
    assert mutation_lines("--- a\n+++ b\n-    del x\n") == "del x → (removed)"


def _rows() -> list[dict[str, Any]]:
    return [
        record(
            "m.py:Op:0",
            "m.py",
            1,
            "normal",
            "killed",
            Verdict("check-fail", 1, ("c[s]",)).to_line(),
            "",
        ),
        record("m.py:Op:1", "m.py", 2, "normal", "survived", Verdict("survived", 0).to_line(), ""),
        record("m.py:Op:2", "m.py", 3, "normal", "survived", Verdict("survived", 0).to_line(), ""),
        record("m.py:Op:3", "m.py", 4, "normal", "killed", "timeout", ""),
        record("n.py:Op:0", "n.py", 1, "no-test", None, "", ""),
    ]


def test_the_score_is_check_fail_over_non_equivalent() -> None:
    summary = Summary(_rows(), {"m.py:Op:2": "dead code"})
    assert (summary.run, summary.equivalent, summary.non_equivalent) == (4, 1, 3)
    assert (summary.check_fail, summary.other_red, summary.survived) == (1, 1, 1)
    assert summary.score == pytest.approx(1 / 3)
    assert summary.red == pytest.approx(2 / 3)


def test_the_page_lists_uncaught_mutants_with_their_reasons_and_says_when_partial() -> None:
    header = {"type": "header", "executed": 4, "pending": 2}
    reasons = {"m.py:Op:1": "gap: no clause on x"}
    page = render(header, _rows(), {"m.py:Op:2": "dead code"}, reasons)
    assert "**partial**: 2 of the sample did not run" in page
    assert "**33%** of the 3 non-equivalent mutants" in page
    assert "| `m.py:Op:1` | 2 |" in page and "gap: no clause on x" in page
    assert "| gap | 1 |" in page and "| unclassified | 1 |" in page
    assert "other-red (timeout) | *not yet classified* |" in page
    assert "| `m.py:Op:2` | 3 |" in page and "dead code" in page


def test_reasons_are_one_line_each(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('["a.py:Op:1"]\nreason = "dead branch"\n', encoding="utf-8")
    assert load_reasons(good) == {"a.py:Op:1": "dead branch"}
    bad = tmp_path / "bad.toml"
    bad.write_text('["a.py:Op:1"]\nreason = ""\n', encoding="utf-8")
    with pytest.raises(ValueError, match="one-line reason"):
        load_reasons(bad)


def test_a_reason_s_category_is_its_first_word_when_known() -> None:
    assert category("variant: env-balanced has no scenario") == "variant"
    assert category("because: of things") == "unclassified"
    assert category("no category here") == "unclassified"


def test_the_committed_page_is_generated_from_the_committed_data() -> None:
    header, rows = load_results(RESULTS)
    page = render(header, rows, load_reasons(EQUIVALENT), load_reasons(SURVIVORS))
    assert DOCS.read_text(encoding="utf-8") == page, "run `python -m mutation --table-only`"
