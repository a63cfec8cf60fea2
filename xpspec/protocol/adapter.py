"""The adapter protocol, version 1.

An adapter drives one real implementation on the spec's scenarios. It declares itself with
:meth:`Adapter.info`, proves it can run with :meth:`Adapter.smoke`, and offers one operation
per capability it declares. An operation that cannot express a scenario raises
:class:`Unsupported` (the check is *not applicable*); anything else it raises is an *error*.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from xpspec.protocol.scenario import (
    AsyncScenario,
    EnvScenario,
    LearnerScenario,
    OfflineScenario,
    RecurrentScenario,
    RelabelScenario,
    ReplayScenario,
    StackScenario,
    TrainerScenario,
)
from xpspec.protocol.trace import Trace

__all__ = [
    "CAPABILITIES",
    "PROTOCOL_VERSION",
    "Adapter",
    "AdapterInfo",
    "Unsupported",
    "needs_fresh_process",
]

PROTOCOL_VERSION = 1

CAPABILITIES = (
    "env",
    "trainer",
    "replay",
    "learner",
    "relabel",
    "counter",
    "update-counter",
    "hooks",
    "state",
    "bootstrap",
    "loss-mask",
    "caller-episodes",
    "nstep",
    "shards",
    "priorities",
    "importance-weights",
    "recurrent",
    # checkpoint and resume (clauses resume.*)
    "checkpoint",
    # frame stacking (clauses stack.*)
    "stack",
    # offline and hybrid replay (clauses offline.*)
    "offline",
    # asynchronous actors and policy lag (clauses async.*)
    "async",
)
"""The closed vocabulary of capabilities: nine operation families (one operation each), and
twelve observables that not every framework has: ``counter`` (a global counter the trainer
increments once per iteration, ``counter_mode`` per-iteration), ``update-counter`` (a count of
the gradient updates made so far, kept by the framework: the counter of ``counter_mode``
per-mini-batch), ``hooks`` (``after_update`` /
``after_train_iter`` calls), ``state`` (a policy state the trainer resets at FIRST),
``bootstrap`` (a bootstrap timestep the learner appends to each episode, row ``L``) and
``loss-mask`` (the per-item loss mask the trainer's own loss applies to a sampled window,
read from the framework's code path) and ``caller-episodes`` (each episode object handed to
the learner, read before and after the learner call), ``nstep`` (the n-step targets the
framework's learner computes) and ``shards`` (how the framework splits the episodes of one
update among several learners), ``priorities`` (prioritized replay: the adapter drives the
framework's prioritized buffer with a replay scenario's priority spec and records the
priorities and probabilities the framework holds) and ``importance-weights`` (the importance
weights the framework's prioritized sampler returns), ``checkpoint`` (a trainer scenario's
checkpoint spec: the adapter saves the trainer through the framework's own save API to bytes
or files, drops every live object of it, and restores a fresh trainer through the
framework's own load API, the env alone going on; clauses ``resume.*``); and a sixth
operation family, ``recurrent`` (a recurrent learner trained on sequences of stored
experience: the adapter records the state the framework's network received at each position
of each sequence and its loss mask, operation :meth:`Adapter.run_recurrent`); and a seventh,
``stack`` (frame stacking: the adapter records the stacked observation the framework's
policy received at each step and the stack each sampled item carries, read from the
framework's own objects, operation :meth:`Adapter.run_stack`); an eighth, ``offline``
(offline and hybrid replay: an offline dataset stored before training, online experience
written between updates, each update's batch drawn from both by the framework's own mixing,
operation :meth:`Adapter.run_offline`); and a ninth, ``async`` (asynchronous actors: the
adapter runs the framework's own remote actors and records each arriving fragment with the
policy version the framework recorded for each item, the behaviour logits and
log-probabilities it stored, and its env-step counter, then the items each learner update
trained on, operation :meth:`Adapter.run_async`). A framework without an observable records a stand-in (an empty
state, a zero row ``L`` with loss mask 0, a mask the adapter computes itself) that would make
its check pass by construction, so the checks of an observable the adapter does not declare
are not applicable, with that reason."""


class Unsupported(Exception):
    """The implementation cannot express this scenario: the check is not applicable."""

    def __init__(self, reason: str, link: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.link = link


@dataclass(frozen=True)
class AdapterInfo:
    """Who the adapter is and what it can do."""

    name: str
    framework: str
    framework_version: str
    protocol_version: int = PROTOCOL_VERSION
    capabilities: tuple[str, ...] = ()
    issue_tracker: str = ""
    notes: str = ""
    extra_versions: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [c for c in self.capabilities if c not in CAPABILITIES]
        if unknown:
            raise ValueError(f"capabilities: expected values from {CAPABILITIES}, got {unknown!r}")
        if self.protocol_version != PROTOCOL_VERSION:
            raise ValueError(
                f"protocol_version: expected {PROTOCOL_VERSION}, got {self.protocol_version!r}"
            )


@runtime_checkable
class Adapter(Protocol):
    """What the suite calls. Operations for undeclared capabilities are never called.

    Two optional members, looked up with ``getattr``:

    - ``fresh_process_per_operation`` (a class attribute, False when absent): True for an
      implementation with process-wide state that one operation would leak into the next
      (configuration that locks once read, global counters). The worker then answers
      :meth:`smoke` and each ``run_*`` call in a child process forked for that call alone
      (:mod:`xpspec.conformance.harness.host`); inline isolation refuses such an adapter.
    - ``prepare()``: called once after the adapter is loaded, before :meth:`info`, in the
      process that serves it: warm-up (imports, compiled caches) that every forked child
      then inherits. It should start no thread (a fork copies only the calling one) and
      touch none of the state the forks keep fresh.
    """

    def info(self) -> AdapterInfo: ...

    def smoke(self) -> None:
        """Raise if the implementation cannot run at all (missing install, broken import)."""

    def run_env(self, scenario: EnvScenario) -> Trace:
        """EnvStep events for ``scenario.steps`` vector steps (iteration 0)."""
        ...

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        """The full event trace of one train run."""
        ...

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        """Store events for the fill, then one Sampled event per draw."""
        ...

    def run_learner(self, scenario: LearnerScenario) -> Trace:
        """Advantages events (one per episode), NStep, UpdatePlan and Shard events."""
        ...

    def run_relabel(self, scenario: RelabelScenario) -> Trace:
        """Store events for the fill, then one Relabel event per draw."""
        ...

    def run_recurrent(self, scenario: RecurrentScenario) -> Trace:
        """One EnvStep event per vector step (``policy_state``: the state the policy
        received at each env), then one TrainSequence event per sequence trained on."""
        ...

    def run_stack(self, scenario: StackScenario) -> Trace:
        """One ``Stacked`` event per vector step (source ``rollout``: the stacks the policy
        received), then one per sampled batch (source ``sample``)."""
        ...

    def run_offline(self, scenario: OfflineScenario) -> Trace:
        """One ``Mixed`` event per update: the online items written before it, its batch,
        the offline buffer's items after it and the training-iteration counter."""
        ...

    def run_async(self, scenario: AsyncScenario) -> Trace:
        """One ``Arrived`` event per fragment the learner received, in the order it received
        them, each followed by the ``Trained`` event of the update made after it (if any)."""
        ...


def needs_fresh_process(adapter: object) -> bool:
    """Whether ``adapter`` declares ``fresh_process_per_operation`` (see :class:`Adapter`)."""
    return bool(getattr(adapter, "fresh_process_per_operation", False))
