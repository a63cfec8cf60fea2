"""Adapters that live outside the ``adapters`` package, loaded by module path like a
framework author's own adapter would be. Some are broken on purpose."""

from __future__ import annotations

import time

from xpspec.protocol.adapter import AdapterInfo, Unsupported
from xpspec.protocol.preprocessors import Identity
from xpspec.protocol.scenario import TrainerScenario
from xpspec.protocol.trace import EnvStep, Trace
from xpspec.refimpl.adapter import RefimplAdapter


class External(RefimplAdapter):
    """A well-behaved external adapter (delegates to refimpl)."""

    def info(self) -> AdapterInfo:
        return AdapterInfo("external", "external", "1.0", capabilities=("trainer", "replay", "env"))


class Raises(External):
    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        raise RuntimeError("framework exploded")


class Hangs(External):
    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        while True:
            time.sleep(0.01)


class Declines(External):
    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        raise Unsupported("no fractional unroll lengths")


class Malformed(External):
    """Names an item that is no real step of the env."""

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        trace = super().run_trainer(scenario)
        bogus = EnvStep(1, (0,), (0,), (999,), (1,), (0.0,), (1.0,), (0,), (0,))
        events = list(trace.events)
        events.insert(2, bogus)
        return Trace(tuple(events), trace.header)


INSTANCE = External()


class SameStepStrict(External):
    """Behaves like a transition-storing framework with a strict warm-up gate: refimpl with
    same-step auto-reset and the ``stored>`` gate, whatever the scenario asks."""

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        from dataclasses import replace

        if not isinstance(scenario.preprocess, Identity):
            raise Unsupported("identity preprocessing only")
        env = replace(scenario.env, autoreset="same-step")
        trainer = replace(scenario.trainer, warmup_gate="stored>")
        return super().run_trainer(replace(scenario, env=env, trainer=trainer))


class PlainWithoutCounter(External):
    """A framework with plain train accounting and no global counter: refimpl run as the
    ``plain`` variant of train.synced-schedule, its counters left at 0 (a stand-in the
    adapter would record, and does not declare as the observable ``counter``)."""

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        from dataclasses import replace

        from xpspec.conformance.variants import variant_scenario

        model = variant_scenario("train.synced-schedule", "plain", scenario)
        trace = super().run_trainer(scenario if model is None else model)
        events = tuple(replace(e, counter=0) if hasattr(e, "counter") else e for e in trace.events)
        return Trace(events, trace.header)
