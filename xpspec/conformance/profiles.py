"""Framework profiles: what reproduces each framework's row of the compliance matrix.

A framework's known deviations are declared, variant by variant, in its adapter's
expectations file (``xpspec/adapters/NAME.expectations.toml``), and every declarable variant
has an executable model (:data:`xpspec.conformance.variants.VARIANTS`): the scenario's knobs
refimpl runs with to behave as that variant. A framework's **profile** is the list of its
declared variants with their knobs and the scenarios they are declared for; refimpl run with
all of them on a scenario (:func:`profile_scenario`, the model the suite itself compares the
framework's trace with) reproduces what the framework does there. Behaviour no variant
reproduces is declared as a finding instead, and is not part of a profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xpspec.conformance.expectations import Deviation, Expectations
from xpspec.conformance.variants import VARIANTS, model_scenario
from xpspec.protocol.scenario import Scenario

__all__ = ["ADAPTERS", "ProfileRow", "framework_profiles", "profile_scenario", "render_markdown"]

ADAPTERS = Path(__file__).resolve().parents[1] / "adapters"
"""The folder of the built-in adapters and their expectations files."""

_SUFFIX = ".expectations.toml"
_LISTED = 3
"""Up to this many scenarios are named; more are counted."""


@dataclass(frozen=True)
class ProfileRow:
    """One declared variant of one framework's adapter (or, for an adapter that declares
    none, one row saying so)."""

    adapter: str
    clause: str
    variant: str
    knobs: str
    """What refimpl sets to run as the variant, in the scenario file's field names."""
    scope: str
    """The scenarios the variant is declared for."""


def _scope(deviation: Deviation) -> str:
    if deviation.kinds:
        kinds = f" ({', '.join(deviation.kinds)} only)"
    elif deviation.except_kinds:
        kinds = f" (not {', '.join(deviation.except_kinds)})"
    else:
        kinds = ""
    if not deviation.scenarios:
        if deviation.kinds:
            return f"{', '.join(deviation.kinds)} scenarios"
        if deviation.except_kinds:
            return f"every scenario but {', '.join(deviation.except_kinds)} ones"
        return "every scenario"
    named = [s for s in deviation.scenarios if s != "generated"]
    generated = len(named) != len(deviation.scenarios)
    if len(named) <= _LISTED:
        return ", ".join(named + (["generated"] if generated else [])) + kinds
    scope = f"{len(named)} catalogue scenarios" + (" and generated ones" if generated else "")
    return scope + kinds


def _expectations(adapter: str, folder: Path) -> Expectations:
    return Expectations.load(folder / f"{adapter}{_SUFFIX}")


def framework_profiles(folder: Path = ADAPTERS) -> list[ProfileRow]:
    """The profile of every adapter with an expectations file in ``folder``, adapters by
    name, variants in the order their file declares them."""
    rows = []
    for path in sorted(folder.glob(f"*{_SUFFIX}")):
        adapter = path.name.removesuffix(_SUFFIX)
        declared = [d for d in _expectations(adapter, folder).deviations if d.variant]
        if not declared:
            rows.append(ProfileRow(adapter, "-", "-", "the spec's defaults", "every scenario"))
        for d in declared:
            model = VARIANTS[(d.clause, d.variant)]  # a loaded file declares modelled ones only
            rows.append(ProfileRow(adapter, d.clause, d.variant, model.knobs, _scope(d)))
    return rows


def profile_scenario(
    adapter: str, name: str, scenario: Scenario, folder: Path = ADAPTERS
) -> Scenario:
    """``scenario`` (the catalogue scenario ``name``, or ``"generated"``) with refimpl
    configured as every variant ``adapter``'s expectations declare for it: the model the
    suite compares that framework's trace with."""
    declared = [
        (d.clause, d.variant)
        for d in _expectations(adapter, folder).deviations
        if d.variant and d.applies_to(name, scenario.kind)
    ]
    return model_scenario(scenario, declared)


def render_markdown(rows: list[ProfileRow]) -> str:
    """The profiles as the Markdown table of the framework-profiles page (which the docs'
    tests compare with :func:`framework_profiles`): ``python -m xpspec.conformance.profiles``
    prints it."""
    lines = [
        "| framework | clause | variant | refimpl knobs | declared for |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        knobs = r.knobs if r.knobs == "the spec's defaults" else f"`{r.knobs}`"
        lines.append(f"| {r.adapter} | {r.clause} | {r.variant} | {knobs} | {r.scope} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_markdown(framework_profiles()), end="")
