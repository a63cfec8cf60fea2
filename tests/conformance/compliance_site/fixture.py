"""A compliance document with every outcome the site shows, and one whose adapter and report
supply markup and script in every field they own."""

from __future__ import annotations

from typing import Any

from xpspec.conformance.clauses import ClauseRegistry
from xpspec.conformance.report import compliance_from_columns

REGISTRY = ClauseRegistry.load()
CLAUSES = REGISTRY.ids()
PAGES = {c.id: c.page for c in REGISTRY.clauses}
SHOULD = next(c.id for c in REGISTRY.clauses if c.level == "SHOULD")
MUSTS = [c for c in CLAUSES if c != SHOULD]

SCENARIO_JSON = '{"kind":"replay","seed":3}'
FAIL_MESSAGE = (
    "[replay.eviction] windows-valid: a window crosses an evicted item\n"
    "  expected: [(0, 0, 4)]\n"
    "  actual:   [(0, 0, 5)]"
)


def _cell(status: str, **extra: Any) -> dict[str, Any]:
    return {
        "status": status,
        "check": "c",
        "scenario": "plain-u1-b1",
        "message": "",
        "variant": "",
    } | extra


OUTCOMES: dict[str, dict[str, Any]] = {
    "pass": _cell("pass"),
    "deviation": _cell("deviation", variant="same-step", message="known deviation, reproduced"),
    "finding": _cell("deviation", variant="finding", message="finding (no spec variant …): x"),
    "fail": _cell(
        "fail",
        scenario="generated",
        message=FAIL_MESSAGE.splitlines()[0],
        text=FAIL_MESSAGE,
        expected="[(0, 0, 4)]",
        actual="[(0, 0, 5)]",
        scenario_json=SCENARIO_JSON,
    ),
    "downstream": _cell("fail", downstream_of=MUSTS[0], message="downstream of it"),
    "error": _cell("error", message="adapter raised ValueError"),
    "crash": _cell("crash", message="worker died: signal 9"),
    "timeout": _cell("timeout", message="run_trainer overran 120 s"),
    "resource": _cell("resource", message="worker went over 8G"),
    "not-applicable": _cell(
        "not-applicable",
        message="unsupported: no drain",
        reasons=["unsupported: no drain", "declares no 'state'"],
    ),
    "owed": _cell(
        "not-applicable",
        message="adapter declares no capability 'checkpoint': … owed: fw 1.2.3 has save",
        reasons=["adapter declares no capability 'checkpoint': … owed: fw 1.2.3 has save"],
        owed=True,
    ),
}
"""A cell of each outcome key (the SHOULD miss is the fail of :data:`SHOULD`)."""


def implementation(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "adapter": name,
        "framework": f"{name}-framework",
        "framework_version": "1.2.3",
        "suite": "xpspec 0.1.0",
        "spec": "0.1",
        "profile": "ci",
        "notes": f"notes of {name}",
        "versions": {"python": "3.11.7", "torch": "2.13.0"},
        "run": "complete",
        "started": "2026-11-27T02:15:08+00:00",
        "ended": "2026-11-27T02:15:25+00:00",
    } | extra


def every_outcome() -> dict[str, Any]:
    """Column ``all`` has one clause of each outcome (in :data:`OUTCOMES` order, then the
    SHOULD miss) and passes the rest; column ``late`` did not complete and passes all."""
    keys = list(OUTCOMES)
    cells = {
        cid: OUTCOMES[keys[n]] if n < len(keys) else OUTCOMES["pass"] for n, cid in enumerate(MUSTS)
    }
    cells[SHOULD] = _cell("fail", level="SHOULD", message="a SHOULD miss")
    columns = [
        {"implementation": implementation("all"), "cells": cells},
        {
            "implementation": implementation("late", run="interrupted", started="", ended=""),
            "cells": {cid: OUTCOMES["pass"] for cid in CLAUSES},
        },
    ]
    return compliance_from_columns(columns, CLAUSES, PAGES, REGISTRY.aliases)


EVIL = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">\'"&'
"""Markup and script, which every page must show as text."""


def hostile() -> dict[str, Any]:
    """One column whose adapter and report put :data:`EVIL` into every field they own."""
    impl = implementation(
        EVIL,
        framework=EVIL,
        framework_version=EVIL,
        notes=EVIL,
        suite=EVIL,
        profile=EVIL,
        versions={EVIL: EVIL},
        started=EVIL,
        run="stopped",
    )
    cells = {
        MUSTS[0]: _cell(
            "fail",
            scenario=EVIL,
            message=EVIL,
            text=EVIL + "\n" + EVIL,
            expected=EVIL,
            actual=EVIL,
            scenario_json=EVIL,
            check=EVIL,
            downstream_of=EVIL,
        ),
        MUSTS[1]: _cell("deviation", variant=EVIL, message=EVIL, scenario=EVIL),
        MUSTS[2]: _cell("not-applicable", reasons=[EVIL], message=EVIL),
    }
    return compliance_from_columns(
        [{"implementation": impl, "cells": cells}], CLAUSES, PAGES, REGISTRY.aliases
    )
