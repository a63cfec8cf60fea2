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
            "only [[deviation]], [[silence]], [[finding]] and [[absent]] tables",
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
            "a key of [[deviation]] (clause, reason, variant, link, scenarios, kinds, except_kinds, versions)",
            "'reason2'",
        ),
        (
            GOOD + 'kinds = ["envs"]\n',
            "deviation[0].kinds[0]",
            "a kind of scenario (trainer, replay, env, learner, relabel, recurrent, stack, offline, async)",
            "'envs'",
        ),
        (
            GOOD + 'except_kinds = ["envs"]\n',
            "deviation[0].except_kinds[0]",
            "a kind of scenario (trainer, replay, env, learner, relabel, recurrent, stack, offline, async)",
            "'envs'",
        ),
        (
            GOOD + 'kinds = ["trainer"]\nexcept_kinds = ["env"]\n',
            "deviation[0].except_kinds",
            "either kinds or except_kinds, not both",
            "['env']",
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
        (GOOD + "versions = 2\n", "deviation[0].versions", "a string", "2"),
        (
            GOOD * 2 + 'versions = "2.0"\n',
            "deviation[1].versions",
            "a PEP 440 version specifier such as '>=2.0,<2.1'",
            "'2.0'",
        ),
        (
            GOOD + 'versions = ""\n',
            "deviation[0].versions",
            "a PEP 440 version specifier such as '>=2.0,<2.1'",
            "''",
        ),
        (
            '[[finding]]\nclauses = ["train.hooks"]\nreason = "r"\nversions = ">=two"\n',
            "finding[0].versions",
            "a PEP 440 version specifier such as '>=2.0,<2.1'",
            "'>=two'",
        ),
        (
            '[[silence]]\nclause = "timestep.loss-mask-last"\nreason = "r"\nversions = ">=1"\n',
            "silence[0].versions",
            "a key of [[silence]] (clause, reason)",
            "'versions'",
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


VERSIONED = (
    '[[deviation]]\nclause = "unroll.drain"\nreason = "every release"\n'
    '[[deviation]]\nclause = "replay.eviction"\nvariant = "floor"\nreason = "2.0 only"\n'
    'versions = ">=2.0,<2.1"\n'
    '[[finding]]\nclauses = ["train.idle-calls"]\nreason = "from 2.1"\nversions = ">=2.1"\n'
    '[[finding]]\nclauses = ["train.insufficient-data"]\nreason = "every release"\n'
)


@pytest.mark.parametrize(
    ("version", "deviations", "findings"),
    [
        ("1.2.0", ["every release"], ["every release"]),
        ("2.0.0", ["every release", "2.0 only"], ["every release"]),
        ("2.0.1", ["every release", "2.0 only"], ["every release"]),
        ("2.1.0rc1", ["every release"], ["every release"]),
        ("2.2.0rc1", ["every release"], ["from 2.1", "every release"]),
        ("2.1.0", ["every release"], ["from 2.1", "every release"]),
    ],
)
def test_an_entry_keyed_by_versions_applies_only_to_those_versions(
    tmp_path: Path, version: str, deviations: list[str], findings: list[str]
) -> None:
    loaded = _load(tmp_path, VERSIONED)
    assert [d.versions for d in loaded.deviations] == ["", ">=2.0,<2.1"]
    applied = loaded.for_version(version)
    assert [d.reason for d in applied.deviations] == deviations
    assert [f.reason for f in applied.findings] == findings
    assert applied.source == loaded.source
    # what the engine asks of them follows: the 2.0-only deviation explains nothing elsewhere
    explained = applied.find(("replay.eviction",), "any")
    assert (explained is not None) == ("2.0 only" in deviations)


def test_an_undecidable_version_is_refused_naming_the_file_and_the_entry(tmp_path: Path) -> None:
    """An entry keyed by versions cannot be decided for a framework version PEP 440 cannot
    read (ALF reports a git commit); without keyed entries any version is accepted."""
    loaded = _load(tmp_path, VERSIONED)
    with pytest.raises(ExpectationsError) as info:
        loaded.for_version("23aca492")
    assert str(info.value) == (
        f"{tmp_path / 'x.expectations.toml'}: deviation[1].versions ('>=2.0,<2.1'): expected "
        "the framework's version to be a PEP 440 version, got '23aca492'"
    )
    plain = _load(tmp_path, GOOD)
    assert plain.for_version("23aca492") is plain


def test_the_engine_applies_the_entries_of_the_version_under_test(tmp_path: Path) -> None:
    """The session keeps the entries that apply to its adapter's ``info().framework_version``
    (refimpl reports 0.1.0)."""
    from xpspec.conformance.engine import Session
    from xpspec.conformance.harness import load_adapter

    text = (
        '[[deviation]]\nclause = "unroll.drain"\nreason = "now"\nversions = "==0.1.*"\n'
        '[[deviation]]\nclause = "unroll.drain"\nreason = "later"\nversions = ">=0.2"\n'
    )
    adapter = load_adapter("refimpl")
    assert adapter.info().framework_version == "0.1.0"
    session = Session(adapter, "refimpl", _load(tmp_path, text))
    assert [d.reason for d in session.expectations.deviations] == ["now"]
