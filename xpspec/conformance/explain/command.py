"""``xpspec explain``: obtain the trace and its reference, explain, write the page or the text.

The trace is an adapter's run of the scenario (``--adapter``, through the worker harness as
``xpspec trace`` runs it) or a file (``--trace``). The reference is a file (``--reference``)
or, by default, what the suite compares with: the committed vector of a catalogue scenario,
else the reference implementation's run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from xpspec.conformance.explain.explanation import Explanation, explain
from xpspec.conformance.explain.html_page import render_html
from xpspec.conformance.explain.summary import headline
from xpspec.conformance.explain.text_view import render_text
from xpspec.conformance.outcomes import AdapterError, ExitCode
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import Scenario
from xpspec.protocol.trace import Trace

__all__ = ["DEFAULT_PAGE", "Request", "explain_command", "explain_run", "read_trace"]

DEFAULT_PAGE = "xpspec-explain.html"
"""Where the HTML page goes without ``--out``."""


@dataclass(frozen=True)
class Request:
    """What the command line asks for."""

    scenario: Scenario
    name: str
    adapter: str
    trace: str | None
    reference: str | None
    format: Literal["html", "text"]
    out: str | None


def read_trace(path: str) -> Trace:
    """A trace file; a file that cannot be read or parsed raises ``ValueError`` naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise ValueError(f"{path}: cannot read it ({reason})") from None
    try:
        return Trace.from_jsonl(text)
    except ValueError as exc:
        raise ValueError(f"{path}: malformed trace: {exc}") from None


def _default_reference(scenario: Scenario) -> tuple[Trace, str]:
    """The committed vector of ``scenario``, else the reference implementation's run."""
    from xpspec.conformance.vectors import committed

    vector = committed(scenario)
    if vector is not None:
        return vector.trace(), f"committed vector {vector.name}"
    from xpspec.refimpl.adapter import RefimplAdapter

    run: Callable[[Scenario], Trace] = getattr(RefimplAdapter(), f"run_{scenario.kind}")
    return run(scenario), "the reference implementation's run"


def _from_files(request: Request) -> Explanation:
    assert request.trace is not None
    trace = read_trace(request.trace)
    if request.reference is not None:
        reference, against = read_trace(request.reference), f"trace {request.reference}"
    else:
        reference, against = _default_reference(request.scenario)
    return explain(
        request.scenario,
        trace,
        reference,
        name=request.name,
        subject=f"trace {request.trace}",
        against=against,
    )


def explain_run(request: Request, session: Any) -> Explanation | str:
    """The run of ``request.scenario`` by the adapter of ``session`` (an engine
    :class:`~xpspec.conformance.engine.Session`) explained, or why there is no run to explain.
    The reference is the session's (the committed vector, else refimpl's run) unless the
    request names a file; the checks may run the adapter again, and those of observables it
    does not declare do not run, as in a run of the suite."""
    try:
        trace = session.run(request.scenario)
    except Unsupported as exc:
        return f"not applicable: {request.adapter!r} cannot express it: {exc.reason}"
    except AdapterError as exc:
        return f"{exc.status}: {' '.join(str(exc).split())}"
    if request.reference is not None:
        reference, against = read_trace(request.reference), f"trace {request.reference}"
    else:
        vector = session.vector(request.scenario)
        reference = session.reference(request.scenario)
        against = (
            f"committed vector {vector.name}"
            if vector is not None
            else "the reference implementation's run"
        )
    return explain(
        request.scenario,
        trace,
        reference,
        name=request.name,
        subject=f"adapter {request.adapter!r}",
        against=against,
        rerun=session.run,
        capabilities=session.info.capabilities,
        reference_of=session.reference,
    )


def explain_command(
    request: Request, out: IO[str], session: Callable[[], Any] | None = None
) -> int:
    """Write the explanation (text to ``out`` or ``--out``; the page to ``--out`` or
    :data:`DEFAULT_PAGE`). ``session`` opens an engine session on the adapter when the trace
    is not a file. Exit status 1 when a check fails or there is no trace to explain."""
    if request.trace is not None:
        explanation = _from_files(request)
    else:
        assert session is not None, "explain: an adapter session is needed without --trace"
        opened = session()
        try:
            result = explain_run(request, opened)
        finally:
            opened.close()
        if isinstance(result, str):
            print(f"xpspec: {result}", file=sys.stderr)
            return ExitCode.FINDINGS
        explanation = result
    page = render_text(explanation) if request.format == "text" else render_html(explanation)
    target = request.out or (None if request.format == "text" else DEFAULT_PAGE)
    if target is None or target == "-":
        out.write(page)
        out.flush()
    else:
        Path(target).write_text(page, encoding="utf-8")
        print(f"xpspec: wrote {target}: {headline(explanation)}", file=sys.stderr)
    v = explanation.verdict
    failed = v.failures or v.malformed or v.broken
    return ExitCode.FINDINGS if failed else ExitCode.OK
