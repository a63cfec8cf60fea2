"""Version sweeps (xpspec/conformance/sweeps.py): each release's run recorded as a committed
run, a release that could not be driven recorded with its reason, no machine path kept, and
per clause the releases where the outcome changed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conformance.sweep_fixture import (
    FIXED,
    GONE,
    NEW,
    SAME,
    write_report,
    write_sweep,
)
from xpspec.conformance.cli import main
from xpspec.conformance.runs import RUN_FORMAT
from xpspec.conformance.sweeps import (
    Change,
    changes,
    load_sweep,
    load_sweeps,
    record_run,
    record_unavailable,
    scrub,
)

ROOT = Path(__file__).resolve().parents[2]


def test_each_release_is_a_committed_run_and_the_unavailable_one_says_why(
    tmp_path: Path,
) -> None:
    out = write_sweep(tmp_path)
    assert sorted(p.name for p in out.iterdir()) == ["1.0.0.json", "2.0.0.json", "2.1.0.json"]
    unavailable = json.loads((out / "1.0.0.json").read_text())
    assert unavailable["format"] == RUN_FORMAT
    assert unavailable["cells"] == {}
    implementation = unavailable["implementation"]
    assert implementation["run"] == "adapter-unavailable"
    assert implementation["framework"] == "Fw" and implementation["framework_version"] == "1.0.0"
    assert implementation["run_message"] == (
        "adapter 'fw' cannot run: ImportError: cannot import name 'Algorithm' from 'fw' "
        "(site-packages/fw/__init__.py)"
    )
    ran = json.loads((out / "2.0.0.json").read_text())
    assert ran["implementation"]["run"] == "complete" and "run_message" not in ran["implementation"]
    assert ran["cells"][GONE]["variant"] == "finding"


def test_a_sweep_loads_oldest_release_first_in_pep440_order(tmp_path: Path) -> None:
    out = tmp_path / "fw"
    for version in ("2.10.0", "2.9.1", "2.9.1rc1"):
        record_unavailable("fw", "Fw", version, "does not install", out)
    sweep = load_sweep(out)
    assert sweep.versions == ("2.9.1rc1", "2.9.1", "2.10.0")
    assert (sweep.adapter, sweep.framework) == ("fw", "Fw")
    assert [r.status for r in sweep.runs] == ["adapter-unavailable"] * 3
    assert sweep.runs[0].reason == "does not install" and not sweep.runs[0].complete
    assert load_sweeps(tmp_path) == {"fw": sweep}
    assert load_sweeps(tmp_path / "absent") == {}


def test_a_run_of_another_release_is_refused(tmp_path: Path) -> None:
    report = write_report(tmp_path / "r.jsonl", "2.0.1", [])
    with pytest.raises(
        ValueError, match=r"r\.jsonl: expected a run of release 2\.0\.0, got one of 2\.0\.1"
    ):
        record_run(report, "2.0.0", tmp_path / "fw")


def test_a_file_whose_name_is_not_its_release_is_refused(tmp_path: Path) -> None:
    path = record_unavailable("fw", "Fw", "1.0.0", "r", tmp_path / "fw")
    path.rename(tmp_path / "fw" / "1.0.1.json")
    with pytest.raises(ValueError, match=r"1\.0\.1\.json: expected a run of fw 1\.0\.1"):
        load_sweep(tmp_path / "fw")


def test_changes_name_the_release_where_a_finding_appeared_or_disappeared(
    tmp_path: Path,
) -> None:
    """1.0.0 did not run, so 2.0.0 is compared with nothing; SAME is a finding in both."""
    found = changes(load_sweep(write_sweep(tmp_path)))
    assert found == [
        Change(GONE, "2.0.0", "2.1.0", "finding", "pass"),
        Change(NEW, "2.0.0", "2.1.0", "pass", "finding"),
        Change(FIXED, "2.0.0", "2.1.0", "fail", "pass"),
    ]
    assert [c.kind for c in found] == ["disappeared", "appeared", "changed"]
    assert SAME not in {c.clause for c in found}


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        ("pass", "finding", "appeared"),
        ("deviation", "finding", "appeared"),
        ("fail", "finding", "appeared"),
        ("finding", "pass", "disappeared"),
        ("finding", "downstream", "disappeared"),
        ("error", "finding", "changed"),
        ("not-applicable", "finding", "changed"),
        ("finding", "crash", "changed"),
        ("fail", "pass", "changed"),
    ],
)
def test_a_finding_appears_or_disappears_only_between_verdicts(
    before: str, after: str, kind: str
) -> None:
    """A release where the adapter broke (or no check ran) had no verdict: a finding after it
    was not shown absent before."""
    assert Change("c", "1", "2", before, after).kind == kind


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        (
            "from 'tianshou' (/opt/x/.nox/sweep/lib/python3.11/site-packages/tianshou/a.py)",
            "from 'tianshou' (site-packages/tianshou/a.py)",
        ),
        ("no path here: 1/2", "no path here: 1/2"),
    ],
)
def test_machine_paths_are_scrubbed(text: str, scrubbed: str) -> None:
    assert scrub(text) == scrubbed


def test_the_working_directory_and_home_are_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert scrub(f"{tmp_path}/reports/x.jsonl and {tmp_path}/home/y") == (
        "./reports/x.jsonl and ./home/y"
    )
    monkeypatch.chdir(ROOT)
    assert scrub(f"{tmp_path}/home/y") == "~/y"


def test_record_command_prints_each_release_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = write_report(tmp_path / "r.jsonl", "2.0.0", [])
    out = tmp_path / "sweeps" / "fw"
    assert main(["record", str(report), "--version", "2.0.0", "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("xpspec: fw 2.0.0: complete: ")
    assert (
        main(
            [
                *("record", "--version", "0.9.0", "--out", str(out), "--adapter", "fw"),
                *("--framework", "Fw", "--unavailable", "pip could not install fw==0.9.0"),
            ]
        )
        == 0
    )
    said = capsys.readouterr().out
    assert said.startswith("xpspec: fw 0.9.0: adapter-unavailable: pip could not install fw==0.9.0")
    assert load_sweep(out).versions == ("0.9.0", "2.0.0")
    assert main(["record", "--version", "1", "--out", str(out)]) == 2  # neither report nor reason


_ABSOLUTE_PATH = re.compile(r'["\s(\[]/[\w.-]+/')
"""An absolute path where a JSON string or a word starts (a URL's slashes follow a colon)."""


def test_the_committed_sweeps_load_and_hold_no_machine_path() -> None:
    """docs/sweeps/ADAPTER/VERSION.json: each loads, and none names a path of the machine
    that ran it: no absolute path at all (a framework's file is named relative to its
    package; links are URLs)."""
    committed = ROOT / "docs" / "sweeps"
    sweeps = load_sweeps(committed)
    for sweep in sweeps.values():
        assert len(sweep.runs) >= 1
    for path in sorted(committed.glob("*/*.json")):
        text = path.read_text(encoding="utf-8")
        found = _ABSOLUTE_PATH.search(text)
        assert found is None, f"{path}: a machine path ({found.group(0)!r})"
