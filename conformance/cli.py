"""The ``xpspec`` command line (also ``python -m conformance``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["main"]


def _run(args: argparse.Namespace) -> int:
    import pytest

    from conformance.report import read_run, summarise

    report = Path(args.report or f"reports/{args.adapter.replace(':', '_')}.jsonl")
    argv = [
        "--pyargs",
        "conformance.suite",
        "-p",
        "no:cacheprovider",
        f"--adapter={args.adapter}",
        f"--xpspec-report={report}",
        f"--xpspec-profile={args.profile}",
        "-q",
        "-rfE",
    ]
    if args.expectations:
        argv.append(f"--expectations={args.expectations}")
    print(
        f"xpspec: running the conformance suite against {args.adapter!r} (profile {args.profile})",
        flush=True,
    )
    code = pytest.main(argv)
    if not report.exists():
        print(f"xpspec: no report was written ({report})", file=sys.stderr)
        return 2
    _, results = read_run(report)
    print(f"\nxpspec: summary by area ({len(results)} results; report {report})")
    statuses = ["pass", "fail", "error", "deviation", "not-applicable"]
    print(f"  {'area':<12}" + "".join(f"{s:>16}" for s in statuses))
    for area, counts in summarise(results).items():
        print(f"  {area:<12}" + "".join(f"{counts.get(s, 0):>16}" for s in statuses))
    bad = sum(
        1
        for r in results
        if r["status"] == "error" or (r["status"] == "fail" and r.get("level", "MUST") == "MUST")
    )
    warned = sum(1 for r in results if r["status"] == "fail" and r.get("level") == "SHOULD")
    if warned:
        print(
            f"xpspec: {warned} SHOULD-level failures (warnings; silence them in the expectations file)"
        )
    return 1 if bad or code not in (0, 5) else 0


def _report(args: argparse.Namespace) -> int:
    from conformance.clauses import ClauseRegistry
    from conformance.report import build_compliance, render_html, render_markdown

    registry = ClauseRegistry.load()
    pages = {c.id: c.page for c in registry.clauses}
    doc = build_compliance([Path(p) for p in args.runs], registry.ids(), pages)
    _validate(doc)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compliance.json").write_text(
        json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    (out / "compliance.md").write_text(render_markdown(doc), encoding="utf-8")
    (out / "compliance.html").write_text(render_html(doc), encoding="utf-8")
    print(f"xpspec: wrote compliance.json, compliance.md and compliance.html to {out}")
    if args.docs:
        Path(args.docs).write_text(render_markdown(doc), encoding="utf-8")
        print(f"xpspec: wrote the matrix page {args.docs}")
    return 0


def _validate(doc: dict) -> None:
    from importlib import resources

    import jsonschema

    schema = json.loads(
        resources.files("conformance")
        .joinpath("compliance.schema.json")
        .read_text(encoding="utf-8")
    )
    jsonschema.validate(doc, schema)


def _diff(args: argparse.Namespace) -> int:
    from conformance.report import diff_reports, regressions

    a = json.loads(Path(args.a).read_text(encoding="utf-8"))
    b = json.loads(Path(args.b).read_text(encoding="utf-8"))
    changes = diff_reports(a, b)
    print("\n".join(changes) if changes else "no changes")
    return 1 if regressions(a, b) else 0


def _trace(args: argparse.Namespace) -> int:
    from conformance.engine import Session, load_adapter
    from conformance.scenario import scenario_from_json

    scenario = scenario_from_json(Path(args.scenario).read_text(encoding="utf-8"))
    session = Session(load_adapter(args.adapter), args.adapter)
    sys.stdout.write(session.run(scenario).to_jsonl())
    return 0


def _check(args: argparse.Namespace) -> int:
    from conformance.checks import ALL_CHECKS
    from conformance.checks.base import CheckFailure, Context
    from conformance.scenario import scenario_from_json
    from conformance.validate import validate_trace
    from refimpl.trace import Trace

    scenario = scenario_from_json(Path(args.scenario).read_text(encoding="utf-8"))
    trace = Trace.from_jsonl(Path(args.trace).read_text(encoding="utf-8"))
    validate_trace(scenario, trace)
    from adapters.refimpl import RefimplAdapter

    ref = RefimplAdapter()
    ctx = Context(
        lambda s: getattr(ref, f"run_{s.kind}")(s),
        lambda s: (_ for _ in ()).throw(RuntimeError("no adapter to re-run")),
    )
    failed = 0
    for check in ALL_CHECKS:
        if (
            check.capability != scenario.kind
            or not check.applies(scenario)
            or check.name.startswith("deterministic")
            or check.name == "excluded-earn-nothing"
        ):
            continue
        try:
            check.verify(scenario, trace, ctx)
            print(f"pass  {check.name} [{', '.join(check.clauses)}]")
        except CheckFailure as exc:
            failed += 1
            print(f"FAIL  {check.name} [{', '.join(check.clauses)}]: {exc}")
    return 1 if failed else 0


def _clauses(args: argparse.Namespace) -> int:
    from conformance.clauses import ClauseRegistry, parse_spec_pages

    if args.write:
        registry = ClauseRegistry(parse_spec_pages(Path(args.spec)))
        target = Path(__file__).parent / "clauses.json"
        target.write_text(registry.to_json(), encoding="utf-8")
        print(f"xpspec: wrote {len(registry.clauses)} clauses to {target.name}")
        return 0
    registry = ClauseRegistry.load()
    if args.json:
        sys.stdout.write(registry.to_json())
    else:
        for c in registry.clauses:
            print(f"{c.level:<6} {c.id:<40} {c.statement[:90]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="xpspec", description="Conformance suite for RL experience pipelines."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run the suite against one adapter")
    p.add_argument("--adapter", default="refimpl")
    p.add_argument("--profile", default="ci", choices=["ci", "thorough"])
    p.add_argument("--report", default=None)
    p.add_argument("--expectations", default=None)
    p.set_defaults(func=_run)
    p = sub.add_parser("report", help="fold run reports into the compliance matrix")
    p.add_argument("runs", nargs="+")
    p.add_argument("--out", default="reports")
    p.add_argument("--docs", default=None, help="also write the Markdown matrix to this docs page")
    p.set_defaults(func=_report)
    p = sub.add_parser("diff", help="compare two compliance.json files; exit 1 on regressions")
    p.add_argument("a")
    p.add_argument("b")
    p.set_defaults(func=_diff)
    p = sub.add_parser("trace", help="print an adapter's trace for one scenario")
    p.add_argument("scenario")
    p.add_argument("--adapter", default="refimpl")
    p.set_defaults(func=_trace)
    p = sub.add_parser("check", help="check a trace produced elsewhere")
    p.add_argument("scenario")
    p.add_argument("trace")
    p.set_defaults(func=_check)
    p = sub.add_parser("clauses", help="list the spec's clauses")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--write", action="store_true", help="regenerate the packaged registry from spec/"
    )
    p.add_argument("--spec", default="spec")
    p.set_defaults(func=_clauses)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (ValueError, FileNotFoundError) as exc:
        print(f"xpspec: {exc}", file=sys.stderr)
        return 2
