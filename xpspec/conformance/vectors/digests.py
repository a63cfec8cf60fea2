"""Golden digests of refimpl's variant models: every catalogue scenario a variant model
changes (``variant_scenario(clause, variant, scenario)``, :mod:`xpspec.conformance.variants`),
with the sha256 of that model scenario and of refimpl's trace of it.

The variant models decide the verdicts of every framework that declares a variant, yet the
exact checks of a model scenario compare refimpl with a fresh run of itself, which no change
of the model can fail. ``variant-digests.json`` (written with the vectors by ``python -m
xpspec.conformance.vectors --write``) pins what each model did when it was written; the
suite's check ``pinned-model`` (:func:`pin_check`) holds refimpl to it, under the variant's
clause. A digest stands for the trace's bytes (``Trace.to_jsonl``, what ``xpspec trace``
prints), so the file stays small where the 900-odd traces would not.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources

from xpspec.conformance.checks.base import Check, CheckFailure, Context
from xpspec.protocol.scenario import Scenario, scenario_to_json
from xpspec.protocol.trace import Trace

__all__ = [
    "DIGESTS",
    "DIGESTS_FORMAT",
    "ModelCase",
    "Pin",
    "clause_checks",
    "digests_text",
    "model_cases",
    "pin_check",
    "pins",
    "render_digests",
    "scenario_digest",
    "trace_digest",
]

DIGESTS = "variant-digests.json"
DIGESTS_FORMAT = "xpspec-variant-digests/1"
_WHERE = f"xpspec/conformance/vectors/{DIGESTS}"


@dataclass(frozen=True)
class ModelCase:
    """Catalogue scenario ``name`` run as ``variant`` of ``clause``: the model ``scenario``."""

    name: str
    clause: str
    variant: str
    scenario: Scenario

    @property
    def label(self) -> str:
        """``<scenario>@<clause>/<variant>``, the key of its digest and its name in the suite."""
        return f"{self.name}@{self.clause}/{self.variant}"


@dataclass(frozen=True)
class Pin:
    """The committed digests of one model case: its scenario's and its trace's (sha256, hex)."""

    scenario: str
    trace: str


def model_cases(catalog: Mapping[str, Scenario] | None = None) -> tuple[ModelCase, ...]:
    """Every (variant, catalogue scenario) pair whose model scenario differs from the scenario,
    variants in sorted order, scenarios in catalogue order."""
    from xpspec.conformance.variants import VARIANTS, variant_scenario

    if catalog is None:
        from xpspec.conformance.catalog import CATALOG

        catalog = CATALOG
    cases = []
    for clause, variant in sorted(VARIANTS):
        for name, scenario in catalog.items():
            model = variant_scenario(clause, variant, scenario)
            if model is not None and model != scenario:
                cases.append(ModelCase(name, clause, variant, model))
    return tuple(cases)


def clause_checks(case: ModelCase) -> tuple[Check, ...]:
    """The suite's checks of the variant's clause that run on the case's model scenario."""
    from xpspec.conformance.checks import ALL_CHECKS

    model = case.scenario
    return tuple(
        check
        for check in ALL_CHECKS
        if case.clause in check.clauses and check.capability == model.kind and check.applies(model)
    )


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def scenario_digest(scenario: Scenario) -> str:
    """sha256 of the scenario's JSON (``scenario_to_json``)."""
    return _sha256(scenario_to_json(scenario))


def trace_digest(trace: Trace) -> str:
    """sha256 of the trace's canonical JSON Lines bytes (``Trace.to_jsonl``)."""
    return _sha256(trace.to_jsonl())


def digests_text(catalog: Mapping[str, Scenario] | None = None) -> str:
    """The text of ``variant-digests.json``: refimpl run (in this process) on every model case."""
    from xpspec.refimpl.adapter import RefimplAdapter

    adapter = RefimplAdapter()
    cases = model_cases(catalog)
    entries = {}
    for case in cases:
        trace: Trace = getattr(adapter, f"run_{case.scenario.kind}")(case.scenario)
        entries[case.label] = Pin(scenario_digest(case.scenario), trace_digest(trace))
    if len(entries) != len(cases):
        raise ValueError("two model cases share a label")
    return render_digests(entries)


def render_digests(entries: Mapping[str, Pin]) -> str:
    """The text of ``variant-digests.json`` holding ``entries`` (label -> pin)."""
    digests = {label: {"scenario": p.scenario, "trace": p.trace} for label, p in entries.items()}
    return (
        json.dumps({"format": DIGESTS_FORMAT, "digests": digests}, indent=1, sort_keys=True) + "\n"
    )


@functools.lru_cache(maxsize=1)
def pins() -> dict[str, Pin]:
    """The committed digests, by model case label (empty when the file is absent)."""
    source = resources.files(__package__ or "xpspec.conformance.vectors").joinpath(DIGESTS)
    if not source.is_file():
        return {}
    data = json.loads(source.read_text(encoding="utf-8"))
    if data.get("format") != DIGESTS_FORMAT:
        raise ValueError(
            f"{DIGESTS}: expected format {DIGESTS_FORMAT!r}, got {data.get('format')!r}"
        )
    return {label: Pin(d["scenario"], d["trace"]) for label, d in data["digests"].items()}


_REGENERATE = (
    "if the model changed on purpose, regenerate with `python -m xpspec.conformance.vectors "
    "--write`"
)


def _verify(case: ModelCase) -> Callable[[Scenario, Trace, Context], None]:
    def verify(scenario: Scenario, trace: Trace, ctx: Context) -> None:
        pin = pins().get(case.label)
        if pin is None:
            raise CheckFailure(
                f"a digest of {case.label} in {_WHERE} (a model case added since the "
                f"digests were written; {_REGENERATE})",
                "a pinned digest",
                None,
                clause=case.clause,
            )
        if scenario_digest(scenario) != pin.scenario:
            raise CheckFailure(
                f"sha256 of the model scenario of {case.clause}/{case.variant} on catalogue "
                f"scenario {case.name!r} ({_WHERE}): the catalogue scenario or the variant's "
                f"rewrite of it changed since the digests were written; {_REGENERATE}",
                pin.scenario,
                scenario_digest(scenario),
                clause=case.clause,
            )
        actual = trace_digest(trace)
        if actual != pin.trace:
            raise CheckFailure(
                f"sha256 of refimpl's trace as the model of variant {case.variant!r} of clause "
                f"{case.clause} on catalogue scenario {case.name!r}, pinned in {_WHERE}: the "
                "model no longer does what was pinned. To see the difference, run `xpspec "
                "trace s.json --adapter refimpl` on the scenario below here and at the commit "
                f"that last wrote the digests (`git log -1 -- {_WHERE}`), and diff the two "
                f"traces; {_REGENERATE}",
                pin.trace,
                actual,
                clause=case.clause,
            )

    return verify


def pin_check(case: ModelCase) -> Check:
    """The check ``pinned-model`` of one model case, under the variant's clause: refimpl's
    trace of the model scenario has the committed digest. Not one of ``ALL_CHECKS``: it is
    about refimpl's own models, and the suite runs it only when refimpl is under test."""
    return Check(
        name="pinned-model",
        clauses=(case.clause,),
        capability=case.scenario.kind,
        kind="exact",
        verify=_verify(case),
        whole_trace=True,
    )
