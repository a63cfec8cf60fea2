"""Framework profiles and the scenario-field table: generated from the expectations files and
the scenario schema, and true to what they summarise."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from xpspec.conformance.catalog import CATALOG
from xpspec.conformance.profiles import (
    ADAPTERS,
    framework_profiles,
    profile_scenario,
    render_markdown,
)
from xpspec.conformance.scenario_fields import REQUIRED, scenario_fields
from xpspec.conformance.variants import VARIANTS, model_scenario
from xpspec.protocol import config, env_spec, preprocessors, sampling, scenario, schedule
from xpspec.protocol.codec import to_jsonable

_DECLARED = """
[[deviation]]
clause = "timestep.auto-reset"
variant = "same-step"
reason = "resets in the step that ends an episode"

[[deviation]]
clause = "train.synced-schedule"
variant = "plain"
reason = "one call per iteration"
scenarios = ["exclude-steps", "exclude-tasks", "exclude-episodes-b1", "delayed-b1", "generated"]

[[deviation]]
clause = "replay.period-anchor"
variant = "oldest-anchored"
reason = "grid anchored at the oldest item"
scenarios = ["replay-period-absolute", "generated"]

[[deviation]]
clause = "replay.period-anchor"
variant = "oldest-anchored"
reason = "the same, outside env scenarios"
scenarios = ["replay-period-absolute"]
except_kinds = ["env"]

[[deviation]]
clause = "timestep.auto-reset"
variant = "same-step"
reason = "the same, outside env scenarios"
except_kinds = ["env"]

[[deviation]]
clause = "train.warmup-gate"
reason = "no variant: accepted on its reason"
"""


def test_a_profile_lists_the_declared_variants_their_knobs_and_scope(tmp_path: Path) -> None:
    (tmp_path / "mine.expectations.toml").write_text(_DECLARED, encoding="utf-8")
    (tmp_path / "plain.expectations.toml").write_text("", encoding="utf-8")
    rows = [
        (r.adapter, r.clause, r.variant, r.knobs, r.scope) for r in framework_profiles(tmp_path)
    ]
    assert rows == [
        (
            "mine",
            "timestep.auto-reset",
            "same-step",
            'env.autoreset = "same-step"',
            "every scenario",
        ),
        (
            "mine",
            "train.synced-schedule",
            "plain",
            'trainer.train_accounting = "plain"',
            "4 catalogue scenarios and generated ones",
        ),
        (
            "mine",
            "replay.period-anchor",
            "oldest-anchored",
            'sampling.anchor = "oldest"',
            "replay-period-absolute, generated",
        ),
        (
            "mine",
            "replay.period-anchor",
            "oldest-anchored",
            'sampling.anchor = "oldest"',
            "replay-period-absolute (not env)",
        ),
        (
            "mine",
            "timestep.auto-reset",
            "same-step",
            'env.autoreset = "same-step"',
            "every scenario but env ones",
        ),
        ("plain", "-", "-", "the spec's defaults", "every scenario"),
    ]
    assert render_markdown(framework_profiles(tmp_path)).count("\n") == len(rows) + 2


def test_a_profile_scenario_is_the_model_the_suite_compares_with(tmp_path: Path) -> None:
    (tmp_path / "mine.expectations.toml").write_text(_DECLARED, encoding="utf-8")
    for name in ("exclude-steps", "plain-u1-b1"):
        got = profile_scenario("mine", name, CATALOG[name], tmp_path)
        declared = [("timestep.auto-reset", "same-step")]
        if name == "exclude-steps":
            declared.append(("train.synced-schedule", "plain"))
        assert got == model_scenario(CATALOG[name], declared)
    assert got.env.autoreset == "same-step" and got.trainer.train_accounting == "synced"


def test_every_built_in_adapter_has_a_profile() -> None:
    adapters = {r.adapter for r in framework_profiles()}
    shipped = {p.name.split(".")[0] for p in ADAPTERS.glob("*.expectations.toml")}
    assert adapters == shipped and "alf" in adapters


@pytest.mark.parametrize(("clause", "variant"), sorted(VARIANTS))
def test_every_variant_model_names_fields_a_scenario_file_has(clause: str, variant: str) -> None:
    names = {f.name for f in scenario_fields()}
    knobs = VARIANTS[(clause, variant)].knobs
    named = [part.split("=")[0].strip().rsplit(".", 1)[-1] for part in knobs.split(", ")]
    assert any(n in names for n in named), knobs


_CLASSES = {
    cls.__name__: cls
    for module in (scenario, config, env_spec, preprocessors, sampling, schedule)
    for cls in vars(module).values()
    if dataclasses.is_dataclass(cls) and isinstance(cls, type)
}


def test_the_field_table_states_the_defaults_the_types_have() -> None:
    rows = scenario_fields()
    assert {r.owner for r in rows} <= set(_CLASSES)
    for row in rows:
        field = {f.name: f for f in dataclasses.fields(_CLASSES[row.owner])}[row.name]
        has_default = field.default is not dataclasses.MISSING or (
            field.default_factory is not dataclasses.MISSING
        )
        if row.default == REQUIRED:
            assert not has_default or row.name == "kind", row
            continue
        value = (
            field.default if field.default is not dataclasses.MISSING else field.default_factory()
        )  # type: ignore[misc]
        if row.default == "all defaults":
            assert value == type(value)(), row
        else:
            assert json.loads(row.default) == to_jsonable(value), row


def test_the_profiles_page_holds_the_table_the_expectations_files_give() -> None:
    page = (Path(__file__).parents[2] / "docs" / "framework-profiles.md").read_text()
    table = render_markdown(framework_profiles())
    assert table in page, (
        "docs/framework-profiles.md is stale: paste `python -m xpspec.conformance.profiles`"
    )
