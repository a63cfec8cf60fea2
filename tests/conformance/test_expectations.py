"""Loading expectations files (xpspec/conformance/expectations.py): a file that cannot be used is
one ExpectationsError naming the file, the entry and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpspec.conformance.expectations import Expectations, ExpectationsError

ADAPTERS = Path(__file__).resolve().parents[2] / "xpspec" / "adapters"
GOOD = '[[deviation]]\nclause = "unroll.drain"\nreason = "r"\n'


def _load(tmp_path: Path, text: str) -> Expectations:
    path = tmp_path / "x.expectations.toml"
    path.write_text(text, encoding="utf-8")
    return Expectations.load(path)


def test_no_path_means_no_expectations_and_the_shipped_files_load() -> None:
    assert Expectations.load(None) == Expectations()
    for path in sorted(ADAPTERS.glob("*.expectations.toml")):
        assert Expectations.load(path).source == str(path)


def test_a_path_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "missing.toml"
    with pytest.raises(ExpectationsError) as info:
        Expectations.load(path)
    assert str(info.value) == f"{path}: expected an expectations file, got no such file"


def test_a_syntax_error_names_the_file_and_the_line(tmp_path: Path) -> None:
    with pytest.raises(
        ExpectationsError,
        match=r"x\.expectations\.toml: expected TOML, got a syntax error: .*line 1",
    ):
        _load(tmp_path, "[[deviation]\nclause = 1\n")


@pytest.mark.parametrize(
    ("text", "where", "expected", "got"),
    [
        ('deviation = "x"\n', "deviation", "an array of tables ([[deviation]] entries)", "'x'"),
        (
            '[[deviations]]\nclause = "unroll.drain"\nreason = "r"\n',
            "deviations",
            "only [[deviation]], [[silence]] and [[finding]] tables",
            "'deviations'",
        ),
        (
            '[[deviation]]\nreason = "r"\n',
            "deviation[0].clause",
            "a non-empty string (required)",
            "nothing",
        ),
        (
            '[[deviation]]\nclause = "unroll.drain"\n',
            "deviation[0].reason",
            "a non-empty string (required)",
            "nothing",
        ),
        (
            GOOD * 3 + '[[deviation]]\nclause = 3\nreason = "r"\n',
            "deviation[3].clause",
            "a non-empty string",
            "3",
        ),
        (
            GOOD + 'reason2 = "r"\n',
            "deviation[0].reason2",
            "a key of [[deviation]] (clause, reason, variant, link, scenarios)",
            "'reason2'",
        ),
        (
            GOOD + 'scenarios = "plain-u1-b1"\n',
            "deviation[0].scenarios",
            "a list of non-empty strings",
            "'plain-u1-b1'",
        ),
        (GOOD + "variant = 1\n", "deviation[0].variant", "a string", "1"),
        (
            '[[deviation]]\nclause = "unroll.drian"\nreason = "r"\n',
            "deviation[0].clause",
            "a clause id of the spec; close matches: unroll.drain, unroll.budget-run-end",
            "'unroll.drian'",
        ),
        (
            '[[silence]]\nclause = "no.such-clause"\nreason = "r"\n',
            "silence[0].clause",
            "a clause id of the spec",
            "'no.such-clause'",
        ),
        (
            '[[silence]]\nclause = "timestep.loss-mask-last"\n',
            "silence[0].reason",
            "a non-empty string (required)",
            "nothing",
        ),
        (
            '[[finding]]\nclauses = []\nreason = "r"\n',
            "finding[0].clauses",
            "a non-empty list of clause ids",
            "[]",
        ),
        (
            '[[finding]]\nclauses = ["train.hooks", "train.hook"]\nreason = "r"\n',
            "finding[0].clauses[1]",
            "a clause id of the spec; close matches: train.hooks",
            "'train.hook'",
        ),
        (
            '[[finding]]\nclauses = ["train.hooks"]\nreason = "r"\nstopped = 3\n',
            "finding[0].stopped",
            "a string",
            "3",
        ),
    ],
)
def test_a_bad_entry_is_named_with_what_was_expected(
    tmp_path: Path, text: str, where: str, expected: str, got: str
) -> None:
    with pytest.raises(ExpectationsError) as info:
        _load(tmp_path, text)
    assert (
        str(info.value)
        == f"{tmp_path / 'x.expectations.toml'}: {where}: expected {expected}, got {got}"
    )
    assert isinstance(info.value, ValueError)


def test_a_variant_the_clause_does_not_name_is_refused(tmp_path: Path) -> None:
    text = '[[deviation]]\nclause = "train.warmup-gate"\nvariant = "strcit"\nreason = "r"\n'
    with pytest.raises(ExpectationsError) as info:
        _load(tmp_path, text)
    assert str(info.value) == (
        f"{tmp_path / 'x.expectations.toml'}: deviation[0].variant: expected a variant "
        "train.warmup-gate names (variants: strict, capped-size, unrolled), got 'strcit'"
    )


def test_a_variant_with_no_executable_model_is_refused_with_the_reason(tmp_path: Path) -> None:
    from xpspec.conformance.variants import UNDECLARABLE

    clause, variant = next(iter(UNDECLARABLE))
    text = f'[[deviation]]\nclause = "{clause}"\nvariant = "{variant}"\nreason = "r"\n'
    with pytest.raises(ExpectationsError) as info:
        _load(tmp_path, text)
    assert str(info.value) == (
        f"{tmp_path / 'x.expectations.toml'}: deviation[0].variant: "
        f"{clause}/{variant} cannot be declared: {UNDECLARABLE[(clause, variant)]}"
    )


def test_a_modelled_variant_is_declarable(tmp_path: Path) -> None:
    text = '[[deviation]]\nclause = "replay.eviction"\nvariant = "floor"\nreason = "r"\n'
    assert _load(tmp_path, text).deviations[0].variant == "floor"


def test_an_alias_of_split_clauses_applies_to_every_part(tmp_path: Path) -> None:
    """Ids the spec split (xpspec.conformance.clauses aliases) stay valid: an entry naming one
    applies to all its parts, a deviation with a variant to the parts that name it."""
    loaded = _load(
        tmp_path,
        '[[deviation]]\nclause = "train.hooks"\nreason = "r"\n'
        '[[deviation]]\nclause = "unroll.num-env-steps"\nvariant = "non-first"\nreason = "r"\n'
        '[[finding]]\nclauses = ["train.insufficient-data", "train.idle-calls"]\nreason = "r"\n',
    )
    assert [(d.clause, d.variant) for d in loaded.deviations] == [
        ("train.after-update", ""),
        ("train.after-train-iter", ""),
        ("unroll.num-env-steps", "non-first"),
    ]
    assert loaded.find(("train.after-train-iter",), "any") is not None
    assert loaded.find(("unroll.budget-run-end",), "any") is None
    assert loaded.findings[0].clauses == ("train.insufficient-data", "train.idle-calls")
    assert loaded.finding(("train.idle-calls",), "any") is not None


def test_a_variant_no_part_of_an_alias_names_is_refused(tmp_path: Path) -> None:
    text = '[[deviation]]\nclause = "train.hooks"\nvariant = "strict"\nreason = "r"\n'
    with pytest.raises(ExpectationsError) as info:
        _load(tmp_path, text)
    assert str(info.value) == (
        f"{tmp_path / 'x.expectations.toml'}: deviation[0].variant: expected a variant "
        "train.hooks (an alias of train.after-update, train.after-train-iter) names "
        "(variants: alf-drain-empty), got 'strict'"
    )
