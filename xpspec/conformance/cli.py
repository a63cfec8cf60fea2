"""The ``xpspec`` command line (also ``python -m xpspec.conformance``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xpspec.conformance.outcomes import (
    ADAPTER_FAILURES,
    STATUSES,
    AdapterUnavailable,
    ExitCode,
)

if TYPE_CHECKING:  # the commands import what they use when they run
    from xpspec.conformance.checks import Check
    from xpspec.conformance.engine import Outcome
    from xpspec.protocol.scenario import Scenario

__all__ = ["build_parser", "main"]


_STATUSES = (*STATUSES[:2], "should-miss", STATUSES[2], "finding", *STATUSES[3:])
"""The summary's columns: the outcomes, with SHOULD misses apart from failures."""


def _limits(args: argparse.Namespace) -> Any:
    from xpspec.conformance.harness import Limits, parse_memory

    if args.op_timeout <= 0:
        raise ValueError(f"--op-timeout: expected seconds > 0, got {args.op_timeout:g}")
    return Limits(timeout=args.op_timeout, memory=parse_memory(args.memory_limit))


def _run(args: argparse.Namespace) -> int:
    import pytest

    from xpspec.conformance.expectations import Expectations
    from xpspec.conformance.harness import check_spec, connect
    from xpspec.conformance.outcomes import AdapterUnavailable
    from xpspec.conformance.pytest_plugin import Handoff
    from xpspec.conformance.report import read_run, should_miss, summarise

    if args.timeout < 0:
        raise ValueError(f"--timeout: expected seconds >= 0 (0: no limit), got {args.timeout:g}")
    limits = _limits(args)
    if args.expectations:
        Expectations.load(Path(args.expectations))  # a bad file stops the run before it starts
    report = Path(args.report or f"reports/{_safe_name(args.adapter)}.jsonl")
    report.unlink(missing_ok=True)  # never summarise an earlier run's report
    try:
        check_spec(args.adapter)  # a name that names no adapter leaves no report behind
    except AdapterUnavailable as exc:
        print(f"xpspec: {exc}", file=sys.stderr)
        return ExitCode.ADAPTER_UNAVAILABLE
    report.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"xpspec: running the conformance suite against {args.adapter!r} "
        f"(profile {args.profile}, isolation {args.isolation}; "
        f"{_expectations_used(args.adapter, args.expectations)})",
        flush=True,
    )
    try:
        adapter = connect(args.adapter, args.isolation, limits, meanwhile=_import_suite)
    except AdapterUnavailable as exc:
        _write_unavailable(report, args, str(exc))
        print(f"xpspec: {exc}", file=sys.stderr)
        return ExitCode.ADAPTER_UNAVAILABLE
    argv = [
        "--pyargs",
        "xpspec.conformance.suite",
        "-p",
        "no:cacheprovider",
        # pytest's log capture swaps handlers around every phase of every test (a few percent
        # of a run); a worker's logs never reach it, and an inline adapter's go to stderr
        "-p",
        "no:logging",
        f"--adapter={args.adapter}",
        f"--xpspec-report={report}",
        f"--xpspec-profile={args.profile}",
        f"--xpspec-isolation={args.isolation}",
        f"--xpspec-timeout={args.op_timeout}",
        f"--xpspec-run-timeout={args.timeout}",
        f"--xpspec-memory-limit={args.memory_limit}",
        *(["--xpspec-strict"] if args.strict else []),
        "--xpspec-progress",
        "-q",
        "-rfE",
        # xpspec is imported before pytest loads the plugin from its entry point, so pytest
        # cannot rewrite the plugin's asserts (it has none to rewrite) and would say so
        "-W",
        "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning",
    ]
    if args.expectations:
        argv.append(f"--expectations={args.expectations}")
    try:
        code = pytest.main(argv, plugins=[Handoff(adapter)])
    except Exception as exc:  # pytest itself broke, e.g. while it reported an interrupt
        interrupted = isinstance(exc.__context__, KeyboardInterrupt)
        what = "reporting an interrupt" if interrupted else "running the suite"
        print(f"xpspec: pytest broke while {what}: {type(exc).__name__}: {exc}", file=sys.stderr)
        _close_report(report, "interrupted" if interrupted else "crashed", exc)
        code = pytest.ExitCode.INTERRUPTED if interrupted else pytest.ExitCode.INTERNAL_ERROR
    finally:
        close = getattr(adapter, "close", None)
        if callable(close):
            close()
    if code == pytest.ExitCode.USAGE_ERROR:
        return ExitCode.BAD_INPUT
    if not report.exists():
        print(f"xpspec: the run wrote no report ({report})", file=sys.stderr)
        return ExitCode.INCOMPLETE
    run = read_run(report, allow_incomplete=True)
    results = run.results
    print(f"\nxpspec: summary by area ({len(results)} results; report {report})")
    print(f"  {'area':<12}" + "".join(f"{s:>15}" for s in _STATUSES))
    for area, counts in summarise(results).items():
        print(f"  {area:<12}" + "".join(f"{counts.get(s, 0):>15}" for s in _STATUSES))
    missed = sum(1 for r in results if should_miss(r))
    if missed:
        print(
            f"xpspec: {missed} SHOULD misses ("
            + ("failures under --strict)" if args.strict else "warnings: --strict fails on them; ")
            + ("" if args.strict else "silence accepted ones in the expectations file)")
        )
    if run.status == "adapter-unavailable":
        print(f"xpspec: {run.footer.get('message', '') if run.footer else ''}", file=sys.stderr)
        return ExitCode.ADAPTER_UNAVAILABLE
    if not run.complete:
        print(f"xpspec: INCOMPLETE: {run.problem()}", file=sys.stderr)
        return ExitCode.INCOMPLETE
    broke = sum(1 for r in results if r["status"] in ("error", "crash", "timeout", "resource"))
    failed = sum(
        1 for r in results if r["status"] == "fail" and (args.strict or not should_miss(r))
    )
    if broke:
        print(f"xpspec: the adapter broke in {broke} checks (error, crash, timeout or resource)")
    if failed or broke or code not in (0, 5):
        return ExitCode.FINDINGS
    return ExitCode.OK


def _expectations_used(adapter: str, given: str | None) -> str:
    """Which expectations file the run applies, in words (a file beside the module that the
    suite does not find is the usual reason a declared deviation still fails)."""
    from xpspec.conformance.harness import expectations_path

    if given:
        return f"expectations {given}"
    found = expectations_path(adapter)
    if found is None:
        return "no expectations file beside the adapter's module; --expectations names one"
    try:
        shown = found.relative_to(Path.cwd())
    except ValueError:
        shown = found
    return f"expectations {shown}"


def _close_report(report: Path, status: str, exc: BaseException) -> None:
    """Give a report the test runner left without a footer one that says how the run ended
    (``interrupted`` or ``crashed``), so that it is never taken for a complete run."""
    import datetime
    import json

    if not report.exists():
        return
    lines = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines() if line]
    if lines and lines[-1].get("type") == "footer":
        return
    counts: dict[str, int] = {}
    for record in lines:
        if record.get("type") == "result":
            counts[record["status"]] = counts.get(record["status"], 0) + 1
    footer = {
        "type": "footer",
        "status": status,
        "message": f"the test runner failed: {type(exc).__name__}: {exc}",
        "counts": counts,
        "collected": sum(counts.values()),
        "recorded": sum(counts.values()),
        "ended": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    with report.open("a", encoding="utf-8") as out:
        out.write(json.dumps(footer) + "\n")
    print(f"xpspec: the run was {status}: {footer['message']}", file=sys.stderr)


def _import_suite() -> None:
    """What the suite imports anyway (checks, catalogue, the reference trainer), done while
    the adapter's worker starts up."""
    import xpspec.conformance.suite.test_catalog  # noqa: F401


def _safe_name(adapter: str) -> str:
    name = adapter.removeprefix("exec:").split()[0] if adapter.startswith("exec:") else adapter
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(name).name) or "adapter"


def _write_unavailable(report: Path, args: argparse.Namespace, message: str) -> None:
    """A report that says the run could not start (so that no matrix is built from it)."""
    import datetime

    from xpspec.conformance.report import header_record

    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    header = header_record(
        args.adapter,
        {"framework": "", "framework_version": "", "capabilities": [], "adapter_error": message},
        profile=args.profile,
        isolation=args.isolation,
        command=["xpspec", *sys.argv[1:]],
        started=now,
    )
    footer = {
        "type": "footer",
        "status": "adapter-unavailable",
        "message": message,
        "counts": {},
        "collected": 0,
        "recorded": 0,
        "ended": now,
    }
    report.write_text(
        "\n".join(json.dumps(r, sort_keys=True) for r in (header, footer)) + "\n", encoding="utf-8"
    )


def _report(args: argparse.Namespace) -> int:
    from xpspec.conformance.clauses import ClauseRegistry
    from xpspec.conformance.report import (
        build_compliance,
        column_name,
        read_run,
        render_html,
        render_markdown,
    )

    registry = ClauseRegistry.load()
    pages = {c.id: c.page for c in registry.clauses}
    order = [n for n in (args.order or "").split(",") if n]
    if args.runs_dir:
        doc = _merged_compliance(args, registry, pages, order)
    elif not args.runs:
        raise ValueError("report: expected run reports, or --runs DIR with committed runs")
    else:
        runs = [Path(p) for p in args.runs]
        if order:  # the named first, in that order, then the others by name
            names = {p: column_name(read_run(p, allow_incomplete=True).header) for p in runs}
            rank = {n: i for i, n in enumerate(order)}
            runs.sort(key=lambda p: (rank.get(names[p], len(rank)), names[p]))
        doc = build_compliance(
            runs,
            registry.ids(),
            pages,
            allow_incomplete=args.allow_incomplete,
            aliases=registry.aliases,
        )
    doc = _with_sweeps(doc, args.sweeps)
    _validate(doc, "the compliance document")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compliance.json").write_text(
        json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    (out / "compliance.md").write_text(render_markdown(doc), encoding="utf-8")
    (out / "compliance.html").write_text(render_html(doc), encoding="utf-8")
    print(f"xpspec: wrote compliance.json, compliance.md and compliance.html to {out}")
    if args.docs:
        Path(args.docs).write_text(render_markdown(doc, links=True), encoding="utf-8")
        print(f"xpspec: wrote the matrix page {args.docs}")
    return 0


def _with_sweeps(doc: dict[str, Any], directory: str | None) -> dict[str, Any]:
    """``doc`` with the summaries of the version sweeps committed in ``directory`` (the
    matrix page links to their pages)."""
    from xpspec.conformance.sweeps import load_sweeps, summaries

    if not directory:
        return doc
    return {**doc, "sweeps": summaries(load_sweeps(Path(directory)).values())}


def _record(args: argparse.Namespace) -> int:
    """One release's run of a version sweep, as a committed run (``OUT/VERSION.json``)."""
    from collections import Counter

    from xpspec.conformance.compliance_site.outcomes import classify
    from xpspec.conformance.runs import read_committed
    from xpspec.conformance.sweeps import record_run, record_unavailable

    out = Path(args.out)
    if args.unavailable is not None:
        if args.report or not args.adapter:
            raise ValueError("record: --unavailable takes --adapter and no run report")
        path = record_unavailable(args.adapter, args.framework, args.version, args.unavailable, out)
    elif not args.report:
        raise ValueError("record: expected a run report, or --unavailable REASON")
    else:
        path = record_run(Path(args.report), args.version, out, args.framework)
    run = read_committed(path)
    implementation = run.column["implementation"]
    status = str(implementation.get("run") or "complete")
    if status == "complete":
        tally = Counter(classify(cell) for cell in run.column["cells"].values())
        said = ", ".join(f"{n} {key}" for key, n in sorted(tally.items()))
    else:
        said = str(implementation.get("run_message") or "")
    print(f"xpspec: {run.name} {args.version}: {status}: {said} ({path})")
    return 0


def _merged_compliance(
    args: argparse.Namespace, registry: Any, pages: dict[str, str], order: list[str]
) -> Any:
    """The matrix of the committed runs of ``--runs DIR`` merged with the given run reports,
    the newest run of each implementation winning; the winners are written back to DIR."""
    from xpspec.conformance.report import compliance_from_columns, read_run
    from xpspec.conformance.runs import from_report, load_runs, newest, ordered, write_runs

    directory = Path(args.runs_dir)
    committed = load_runs(directory)
    fresh = [
        from_report(read_run(Path(p), args.allow_incomplete), registry.aliases) for p in args.runs
    ]
    merged = newest(committed, fresh)
    for run, path in zip(fresh, args.runs):
        kept = committed.get(run.name)
        if merged[run.name] is not run:
            print(
                f"xpspec: {path}: not used, the committed run of {run.name} is newer "
                f"({kept.started if kept else '?'} > {run.started})",
                file=sys.stderr,
            )
    for path in write_runs(directory, merged.values()):
        print(f"xpspec: updated the committed run {path}")
    columns = [dict(run.column) for run in ordered(merged, order)]
    if not columns:
        raise ValueError(f"report: no runs given and none committed in {directory}")
    return compliance_from_columns(columns, registry.ids(), pages, registry.aliases)


def _validate(doc: Any, what: str) -> None:
    """Raise ValueError naming the first place where ``doc`` is not a compliance document."""
    from importlib import resources

    import jsonschema

    schema = json.loads(
        resources.files("xpspec.conformance")
        .joinpath("compliance.schema.json")
        .read_text(encoding="utf-8")
    )
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(doc)
    )
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ValueError(f"{what}: not an xpspec compliance document at {where}: {error.message}")


def _read_json(path: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(
            f"{path}: cannot read it ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None


def _diff(args: argparse.Namespace) -> int:
    from xpspec.conformance.clauses import ClauseRegistry
    from xpspec.conformance.report import IncompleteRun, diff_reports, regressions

    docs = []
    for path in (args.a, args.b):
        doc = _read_json(path)
        _validate(doc, path)
        incomplete = [
            f"{i['adapter']} ({i['run']})"
            for i in doc["implementations"]
            if i.get("run", "complete") != "complete"
        ]
        if incomplete and not args.allow_incomplete:
            raise IncompleteRun(
                f"{path}: built from incomplete runs: {', '.join(incomplete)}; "
                "pass --allow-incomplete to compare it anyway"
            )
        docs.append(doc)
    a, b = docs
    aliases = ClauseRegistry.load().aliases
    changes = diff_reports(a, b, aliases)
    print("\n".join(changes) if changes else "no changes")
    return 1 if regressions(a, b, strict=args.strict, aliases=aliases) else 0


def _read_scenario(path: str) -> Scenario:
    """A scenario file, or the name of a catalogue scenario when no such file exists."""
    from xpspec.conformance.catalog import CATALOG
    from xpspec.protocol.scenario import scenario_from_json

    if not Path(path).exists():
        if path in CATALOG:
            return CATALOG[path]
        raise ValueError(
            f"{path}: expected a scenario JSON file or a catalogue scenario name "
            "(`xpspec scenarios` lists them); it is neither"
        )
    data = _read_json(path)
    try:
        return scenario_from_json(data)
    except ValueError as exc:
        raise ValueError(f"{path}: invalid scenario: {exc}") from None


def _trace(args: argparse.Namespace) -> int:
    """The adapter's trace on standard output, and nothing else: the adapter's own output
    goes to standard error (a worker's log, or fd 1 redirected while it runs inline)."""
    from xpspec.conformance.engine import Session
    from xpspec.conformance.harness import connect
    from xpspec.conformance.outcomes import AdapterError
    from xpspec.protocol.adapter import Unsupported

    scenario = _read_scenario(args.scenario)
    with _stdout_to_stderr(args.isolation == "inline") as out:
        adapter = connect(args.adapter, args.isolation, _limits(args), smoke=False)
        session = Session(adapter, args.adapter, timeout=args.op_timeout)
        try:
            trace = session.run(scenario)
        except Unsupported as exc:
            print(
                f"xpspec: not applicable: {args.adapter!r} cannot express it: {exc.reason}",
                file=sys.stderr,
            )
            return ExitCode.FINDINGS
        except AdapterError as exc:
            print(f"xpspec: {exc.status}: {' '.join(str(exc).split())}", file=sys.stderr)
            return ExitCode.FINDINGS
        finally:
            session.close()
        out.write(trace.to_jsonl())
        out.flush()
    return 0


class _stdout_to_stderr:
    """Point file descriptor 1 at standard error for the block (``enabled``), handing the
    block the real standard output to write to."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._saved = -1

    def __enter__(self) -> Any:
        if not self.enabled:
            return sys.stdout
        import os

        sys.stdout.flush()
        self._saved = os.dup(1)
        os.dup2(2, 1)
        return open(os.dup(self._saved), "w", encoding="utf-8", closefd=True)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            import os

            sys.stdout.flush()
            os.dup2(self._saved, 1)
            os.close(self._saved)


def _check(args: argparse.Namespace) -> int:
    """Check a trace produced elsewhere: every check of its scenario, evaluated by the engine of
    ``xpspec run`` on an adapter whose only run is that trace
    (:class:`~xpspec.conformance.given_trace.GivenTrace`), with the same outcomes, blame
    (:mod:`xpspec.conformance.blame`) and exit codes. A check that needs another run of the
    implementation is not applicable. The trace stays in its file and is read pass by pass
    (:class:`~xpspec.protocol.trace_file.TraceFile`); the reference trainer's run, when it is
    the reference, hands its events over as it makes them, a run per pass
    (:class:`~xpspec.conformance.given_trace.RunTrace`): a long trace is checked in the memory
    of the checks' own state. The checks (and the trace's validation) run together, sharing
    their passes over the trace and the reference run
    (:func:`~xpspec.conformance.fused.run_together`)."""
    from xpspec.conformance.engine import Session
    from xpspec.conformance.fused import run_together
    from xpspec.conformance.given_trace import FileReference, GivenTrace
    from xpspec.conformance.validate import validate_trace

    scenario = _read_scenario(args.scenario)
    trace = _trace_file(args.trace)
    session = Session(
        GivenTrace(scenario, trace, args.trace, validated=True),
        args.trace,
        reproduce="",
        reference=FileReference(),
        vectors=True,
    )
    try:
        checks = run_together(
            session,
            scenario,
            _checks_of(scenario),
            [lambda: validate_trace(scenario, trace)],
            reruns_answered=True,  # a given trace runs nothing again
        )
    except ValueError as exc:
        raise ValueError(f"{args.trace}: malformed trace: {exc}") from None
    outcomes = []
    for check in checks:
        outcome = session.evaluate(check, args.scenario, scenario)
        print(_check_line(outcome, args.strict), flush=True)
        outcomes.append(outcome)
    failed = any(o.status == "fail" and (args.strict or o.level != "SHOULD") for o in outcomes)
    broke = any(o.status in ADAPTER_FAILURES for o in outcomes)
    return ExitCode.FINDINGS if failed or broke else ExitCode.OK


def _trace_file(path: str) -> Any:
    """The trace file ``path``, read pass by pass; one that cannot be opened or whose header is
    malformed raises ``ValueError`` naming it."""
    from xpspec.protocol.trace_file import TraceFile

    try:
        return TraceFile(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise ValueError(f"{path}: cannot read it ({reason})") from None
    except ValueError as exc:
        raise ValueError(f"{path}: malformed trace: {exc}") from None


def _checks_of(scenario: Scenario) -> list[Check]:
    """The suite's checks that run on ``scenario``, in the suite's order."""
    from xpspec.conformance.checks import ALL_CHECKS

    return [c for c in ALL_CHECKS if c.capability == scenario.kind and c.applies(scenario)]


def _check_line(outcome: Outcome, strict: bool) -> str:
    """One outcome of ``xpspec check``: a word, the check and its clauses (for a failure, the
    clauses it is charged to and the clause it is downstream of), then why, indented."""
    clauses = outcome.charged or outcome.clauses
    head = f"{outcome.check} [{', '.join(clauses)}]"
    if outcome.status == "pass":
        return f"pass  {head}"
    if outcome.status == "not-applicable":
        return f"n/a   {head}: {outcome.message}"
    if outcome.status == "fail" and outcome.level == "SHOULD" and not strict:
        word, head = "WARN", f"{head} (a SHOULD miss: --strict fails on it)"
    elif outcome.status == "fail":
        word = "FAIL"
    else:
        word = outcome.status.upper()
    if outcome.downstream_of:
        head += f" (downstream of {outcome.downstream_of})"
    detail = "\n".join(f"      {line}" for line in outcome.message.splitlines())
    return f"{word:<5} {head}\n{detail}"


def _explain(args: argparse.Namespace) -> int:
    """Draw where a trace parts from its reference (:mod:`xpspec.conformance.explain`)."""
    from xpspec.conformance.engine import Session
    from xpspec.conformance.explain.command import Request, explain_command
    from xpspec.conformance.harness import connect

    scenario = _read_scenario(args.scenario)
    request = Request(
        scenario, args.scenario, args.adapter, args.trace, args.reference, args.format, args.out
    )

    def session() -> Any:
        adapter = connect(args.adapter, args.isolation, _limits(args), smoke=False)
        return Session(adapter, args.adapter, timeout=args.op_timeout)

    with _stdout_to_stderr(args.isolation == "inline" and args.trace is None) as out:
        return explain_command(request, out, session)


def _clauses(args: argparse.Namespace) -> int:
    from xpspec.conformance.clauses import ClauseRegistry, parse_spec_pages

    if args.write:
        registry = ClauseRegistry(parse_spec_pages(Path(args.spec)))
        target = Path(__file__).parent / "clauses.json"
        target.write_text(registry.to_json(), encoding="utf-8")
        print(f"xpspec: wrote {len(registry.clauses)} clauses to {target.name}")
        return 0
    registry = ClauseRegistry.load()
    if args.json or args.format == "json":
        sys.stdout.write(registry.to_json())
        return 0
    for c in registry.clauses:
        print(_wrapped(f"{c.level:<6} {c.id:<40} ", c.statement))
    for old, parts in registry.aliases.items():
        print(f"{'alias':<6} {old:<40} -> {', '.join(parts)}")
    return 0


def _wrapped(head: str, text: str, width: int = 100) -> str:
    """``head`` then ``text`` filled to ``width`` columns on word boundaries, its continuation
    lines indented under the first; a single word longer than a line is kept whole."""
    import textwrap

    return textwrap.fill(
        " ".join(text.split()),
        width=max(width, len(head) + 20),
        initial_indent=head,
        subsequent_indent=" " * len(head),
        break_long_words=False,
        break_on_hyphens=False,
    )


def _scenarios(args: argparse.Namespace) -> int:
    """List the catalogue's scenarios with the clauses checked on each, or export each as
    ``NAME.scenario.json`` in the format of the committed vectors (``/`` written ``_``)."""
    from xpspec.conformance.catalog import CATALOG
    from xpspec.conformance.vectors import clauses_of, scenario_text, stem

    entries: list[dict[str, Any]] = [
        {
            "name": name,
            "kind": scenario.kind,
            "clauses": list(clauses_of(scenario)),
            "file": f"{stem(name)}.scenario.json",
        }
        for name, scenario in CATALOG.items()
    ]
    if args.export:
        out = Path(args.export)
        out.mkdir(parents=True, exist_ok=True)
        for entry in entries:
            text = scenario_text(CATALOG[entry["name"]])
            (out / entry["file"]).write_text(text, encoding="utf-8")
        print(f"xpspec: wrote {len(entries)} scenario files to {out}", file=sys.stderr)
    if args.format == "json":
        sys.stdout.write(json.dumps(entries, indent=1) + "\n")
    elif not args.export:
        width = max(len(e["name"]) for e in entries)
        for e in entries:
            print(_wrapped(f"{e['name']:<{width}} {e['kind']:<8} ", " ".join(e["clauses"])))
    return 0


def _schemas(args: argparse.Namespace) -> int:
    """List the protocol's JSON Schemas, print one, or regenerate the derived ones."""
    from xpspec.protocol import load_schema, schema_names

    if args.write:
        from xpspec.conformance.schemas import write_schemas

        for path in write_schemas():
            print(f"xpspec: wrote {path.name}")
        return 0
    if args.name:
        sys.stdout.write(json.dumps(load_schema(args.name), indent=1) + "\n")
        return 0
    print("\n".join(schema_names()))
    return 0


def _adapter_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--adapter",
        default="refimpl",
        help="a registered name (an entry point of the group xpspec.adapters), "
        "package.module:object, or exec:COMMAND (default refimpl)",
    )
    p.add_argument(
        "--isolation",
        default="process",
        choices=["process", "inline"],
        help="run the adapter in a worker process (default) or in this process (debugging)",
    )
    p.add_argument(
        "--op-timeout",
        type=float,
        default=120.0,
        help="seconds one adapter operation may take before its worker is killed (default 120)",
    )
    p.add_argument(
        "--memory-limit",
        default="8G",
        help="resident memory of the adapter's worker, e.g. 8G, 512M, 0 for none (default 8G)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``xpspec`` argument parser: every subcommand and option has a help text."""
    from xpspec.conformance import __version__

    parser = argparse.ArgumentParser(
        prog="xpspec", description="Conformance suite for RL experience pipelines."
    )
    parser.add_argument(
        "--version", action="version", version=f"xpspec {__version__}", help="print the version"
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("run", help="run the suite against one adapter")
    _adapter_options(p)
    p.add_argument(
        "--profile",
        default="ci",
        choices=["ci", "thorough"],
        help="Hypothesis profile: ci (default, quick) or thorough (more generated scenarios)",
    )
    p.add_argument(
        "--report",
        default=None,
        metavar="PATH",
        help="the JSON Lines report to write (default reports/ADAPTER.jsonl)",
    )
    p.add_argument(
        "--expectations",
        default=None,
        metavar="TOML",
        help="the adapter's expectations file (default: MODULE.expectations.toml beside the "
        "adapter's module MODULE.py, if present)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        help="seconds for the whole run (0: no limit); past it the run stops, marked timeout",
    )
    p.add_argument(
        "--strict", action="store_true", help="a SHOULD miss fails the run like a MUST failure"
    )
    p.set_defaults(func=_run)
    p = sub.add_parser("report", help="fold run reports into the compliance matrix")
    p.add_argument("runs", nargs="*", metavar="RUN", help="run reports (JSON Lines) to fold")
    p.add_argument(
        "--runs",
        dest="runs_dir",
        default=None,
        metavar="DIR",
        help="merge with the committed runs of DIR (NAME.json each), the newest run of each "
        "adapter winning, and write the winners back to DIR",
    )
    p.add_argument(
        "--order",
        default=None,
        metavar="NAMES",
        help="the matrix's first columns, comma-separated (the others follow by name)",
    )
    p.add_argument(
        "--out",
        default="reports",
        metavar="DIR",
        help="where compliance.json, .md and .html go (default reports)",
    )
    p.add_argument("--docs", default=None, help="also write the Markdown matrix to this docs page")
    p.add_argument(
        "--sweeps",
        default=None,
        metavar="DIR",
        help="link the version sweeps committed in DIR (ADAPTER/VERSION.json each) from the "
        "matrix page",
    )
    p.add_argument(
        "--allow-incomplete", action="store_true", help="accept runs that did not complete"
    )
    p.set_defaults(func=_report)
    p = sub.add_parser(
        "record", help="record one release's run of a version sweep as a committed run"
    )
    p.add_argument(
        "report", nargs="?", default=None, metavar="RUN", help="the release's run report"
    )
    p.add_argument(
        "--version", required=True, help="the framework release the run drove (the file's name)"
    )
    p.add_argument(
        "--out", required=True, metavar="DIR", help="the sweep's folder, e.g. docs/sweeps/sb3"
    )
    p.add_argument(
        "--framework", default="", help="the framework's name, for a run that never started"
    )
    p.add_argument(
        "--adapter", default="", help="the adapter's name (with --unavailable, instead of RUN)"
    )
    p.add_argument(
        "--unavailable",
        default=None,
        metavar="REASON",
        help="record the release as adapter-unavailable for REASON (it never ran: e.g. it "
        "does not install beside the pinned torch)",
    )
    p.set_defaults(func=_record)
    p = sub.add_parser("diff", help="compare two compliance.json files; exit 1 on regressions")
    p.add_argument("a", metavar="BEFORE", help="the earlier compliance.json")
    p.add_argument("b", metavar="AFTER", help="the later compliance.json")
    p.add_argument("--allow-incomplete", action="store_true", help="accept incomplete runs")
    p.add_argument("--strict", action="store_true", help="a new SHOULD miss is a regression too")
    p.set_defaults(func=_diff)
    p = sub.add_parser("trace", help="print an adapter's trace for one scenario")
    p.add_argument("scenario", help="a scenario JSON file or a catalogue scenario name")
    _adapter_options(p)
    p.set_defaults(func=_trace)
    p = sub.add_parser("check", help="check a trace produced elsewhere")
    p.add_argument("scenario", help="a scenario JSON file or a catalogue scenario name")
    p.add_argument("trace", help="the trace to check (JSON Lines, as `xpspec trace` prints it)")
    p.add_argument(
        "--strict", action="store_true", help="a SHOULD miss fails the check like a MUST failure"
    )
    p.set_defaults(func=_check)
    p = sub.add_parser(
        "explain", help="draw where a trace parts from its reference, and the clause it breaks"
    )
    p.add_argument("scenario", help="a scenario JSON file or a catalogue scenario name")
    _adapter_options(p)
    p.add_argument(
        "--trace",
        default=None,
        metavar="PATH",
        help="explain this trace (JSON Lines) instead of running the adapter",
    )
    p.add_argument(
        "--reference",
        default=None,
        metavar="PATH",
        help="the reference trace (default: the scenario's committed vector, else refimpl's run)",
    )
    p.add_argument(
        "--format",
        default="html",
        choices=["html", "text"],
        help="html: a self-contained page with SVG timelines (default); text: for a terminal",
    )
    p.add_argument(
        "--out",
        default=None,
        metavar="PATH",
        help="where to write it, - for standard output (default: xpspec-explain.html for "
        "html, standard output for text)",
    )
    p.set_defaults(func=_explain)
    p = sub.add_parser(
        "scenarios", help="list the catalogue's scenarios and the clauses checked on each"
    )
    p.add_argument(
        "--export",
        default=None,
        metavar="DIR",
        help="write each as DIR/NAME.scenario.json, the format `xpspec trace` and `check` read",
    )
    p.add_argument(
        "--format", default="text", choices=["text", "json"], help="output format (default text)"
    )
    p.set_defaults(func=_scenarios)
    p = sub.add_parser("clauses", help="list the spec's clauses")
    p.add_argument(
        "--format", default="text", choices=["text", "json"], help="output format (default text)"
    )
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument(
        "--write", action="store_true", help="regenerate the packaged registry from spec/"
    )
    p.add_argument(
        "--spec", default="spec", metavar="DIR", help="the spec pages for --write (default spec)"
    )
    p.set_defaults(func=_clauses)
    p = sub.add_parser("schemas", help="the protocol's JSON Schemas (for workers in any language)")
    p.add_argument("name", nargs="?", help="print this schema (default: list them)")
    p.add_argument(
        "--write", action="store_true", help="regenerate the schemas derived from the data model"
    )
    p.set_defaults(func=_schemas)
    return parser


_LISTINGS = (_clauses, _scenarios, _schemas)
"""Commands that only print a listing: a reader may stop early."""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is met below
        return code
    except AdapterUnavailable as exc:
        if args.debug:
            raise
        print(f"xpspec: {exc}", file=sys.stderr)
        return ExitCode.ADAPTER_UNAVAILABLE
    except BrokenPipeError:  # the reader stopped reading (`xpspec clauses | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        # a listing the reader had enough of is no error; a command whose verdict went
        # unread did not complete
        return ExitCode.OK if args.func in _LISTINGS else ExitCode.INCOMPLETE
    except (ValueError, OSError) as exc:
        if args.debug:
            raise
        text = " ".join(str(exc).split()) if not isinstance(exc, OSError) else _os_error(exc)
        print(f"xpspec: {text}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except KeyboardInterrupt:
        print("xpspec: interrupted", file=sys.stderr)
        return ExitCode.INCOMPLETE


def _os_error(exc: OSError) -> str:
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"
