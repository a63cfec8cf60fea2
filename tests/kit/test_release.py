"""The release check adapters call from ``smoke()`` (xpspec/kit/release.py): another release
stops the run, unless a version sweep asks for any."""

from __future__ import annotations

import pytest

from xpspec.kit.release import ANY_RELEASE, check_release, producer


def test_the_release_written_for_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ANY_RELEASE, raising=False)
    check_release("tianshou", "2.0.1", "2.0.1")


def test_another_release_is_refused_with_both_versions_and_the_way_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ANY_RELEASE, raising=False)
    with pytest.raises(RuntimeError) as info:
        check_release("tianshou", "2.0.0", "2.0.1")
    assert str(info.value) == (
        "tianshou: expected 2.0.1 (the release this adapter and its expectations were written "
        "for), got 2.0.0; XPSPEC_ANY_FRAMEWORK_VERSION=1 runs it anyway, as a version sweep "
        "(nox -s sweep) does"
    )


@pytest.mark.parametrize(("value", "lifted"), [("1", True), ("0", False), ("yes", False)])
def test_only_the_value_1_lifts_the_check(
    monkeypatch: pytest.MonkeyPatch, value: str, lifted: bool
) -> None:
    monkeypatch.setenv(ANY_RELEASE, value)
    if lifted:
        check_release("tianshou", "2.0.0", "2.0.1")
    else:
        with pytest.raises(RuntimeError, match=r"expected 2\.0\.1"):
            check_release("tianshou", "2.0.0", "2.0.1")


def test_the_producer_names_the_release_installed() -> None:
    # a sweep installs other releases than the one an adapter was written for: a trace names
    # the one that produced it
    assert producer("pytest") == f"pytest {pytest.__version__}"
