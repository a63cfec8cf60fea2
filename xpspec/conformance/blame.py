"""Blame: which clause a scenario's failures are charged to, and which follow from it.

One bug usually fails several checks: a store released one vector step late fails the store
order, then the schedule that counts stores, then the windows drawn from them. The suite
reports the *cause* as the failure and marks the others *downstream* of it.

Data flows through the pipeline in stages (unroll, time steps, preprocessing, replay, train
accounting, learner, relabeling, recurrent training, frame stacking, offline and hybrid
replay, asynchronous actors); a wrong value upstream makes later stages diverge, rarely the
other way. The cause among the failures of one scenario is therefore the one that is
first in this order:

1. the earliest stage: of the clause the failure is charged to (see :data:`STAGE`), or, for a
   comparison of whole event sequences, of the first event that differs (:data:`EVENT_STAGE`);
2. a stated violation before a comparison with the reference or another run (the violation
   says *what* is wrong, the comparison only *that* something differs);
3. the earliest iteration the failure names (unknown counts as last);
4. the clause's order in the registry.

A failure of a check that compares the adapter's run with another run of it (e.g. the same
run without exclusions) is downstream of that other run's cause when the other run fails a
check of its own.

One stage is not a pipeline: the learner's outputs (advantages and value targets, normalised
advantages, the loss mask, n-step returns, the update plan, the shards) are computed side by
side from the same episodes, and each learner check judges one of them on its own terms (the
normalisation check standardises the trace's own advantages, whatever their values). Two
failures there follow from one another only when they judge the same output
(:data:`LEARNER_OUTPUT`: a wrong GAE fails both ``learner.gae`` and
``learner.truncation-bootstraps``); otherwise each is its own failure (:func:`follows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "EVENT_STAGE",
    "INDEPENDENT_STAGES",
    "LEARNER_OUTPUT",
    "STAGE",
    "Failure",
    "cause_of",
    "follows",
    "stage",
]

STAGE: Final[dict[str, int]] = {
    "trace": 0,
    "env": 0,
    "unroll": 1,
    "timestep": 2,
    "preprocess": 3,
    "replay": 4,
    "priority": 4,
    "train": 5,
    "learner": 6,
    "relabel": 7,
    "recurrent": 8,
    "stack": 9,
    "offline": 10,
    "async": 11,
}
"""Pipeline stage of a clause's area (unknown areas count as last)."""

INDEPENDENT_STAGES: Final[frozenset[int]] = frozenset({STAGE["learner"]})
"""Stages whose checks judge outputs computed side by side: a failure there follows from
another of the same stage only when both judge the same output (:data:`LEARNER_OUTPUT`)."""

LEARNER_OUTPUT: Final[dict[str, str]] = {
    "learner.gae": "advantages",
    "learner.truncation-bootstraps": "advantages",
    "learner.stats-exclude-bootstrap": "normalised advantages",
    "learner.bootstrap-timestep-masked": "loss mask",
    "learner.episode-unmodified": "episodes handed in",
    "learner.nstep-episode-end": "n-step returns",
    "learner.update-count": "update plan",
    "learner.shard-episodes": "shards",
}
"""The output of the learner each learner clause judges (a clause not listed is its own)."""

_LATER_THAN_AREA: Final[dict[str, int]] = {
    # The loss mask is read from the training windows, after they are drawn from replay.
    "timestep.loss-mask-last": STAGE["train"],
}


EVENT_STAGE: Final[dict[str, int]] = {
    "iteration": STAGE["unroll"],
    "env_step": STAGE["unroll"],
    "store": STAGE["preprocess"],
    "exclude": STAGE["preprocess"],
    "hold": STAGE["preprocess"],
    "sampled": STAGE["replay"],
    "priorities": STAGE["replay"],
    "prioritized": STAGE["replay"],
    "train_call": STAGE["train"],
    "update": STAGE["train"],
    "hook": STAGE["train"],
    "iteration_end": STAGE["train"],
    "run_end": STAGE["train"],
    "advantages": STAGE["learner"],
    "nstep": STAGE["learner"],
    "update_plan": STAGE["learner"],
    "shard": STAGE["learner"],
    "relabel": STAGE["relabel"],
    "train_sequence": STAGE["recurrent"],
    "stacked": STAGE["stack"],
    "mixed": STAGE["offline"],
    "arrived": STAGE["async"],
    "trained": STAGE["async"],
    "resume": STAGE["train"],
}
"""Pipeline stage of a trace event kind."""


def stage(clause: str) -> int:
    """The pipeline stage of ``clause``."""
    return _LATER_THAN_AREA.get(clause, STAGE.get(clause.split(".", 1)[0], len(STAGE)))


@dataclass(frozen=True)
class Failure:
    """One failing check on one scenario, as blame sees it."""

    check: str
    charged: tuple[str, ...]
    """The clauses the failure itself is charged to."""
    exact: bool
    iteration: int | None
    order: int
    """Position of the first charged clause in the registry (the last tie-breaker)."""
    diverged: str | None = None
    """For a comparison of event sequences: the kind of the first event that differs."""

    def key(self) -> tuple[int, int, float, int]:
        if self.diverged is not None:
            where = EVENT_STAGE.get(self.diverged, len(STAGE))
        else:
            where = min(stage(c) for c in self.charged)
        return (
            where,
            int(self.exact or self.diverged is not None),
            float("inf") if self.iteration is None else self.iteration,
            self.order,
        )


def cause_of(failures: Sequence[Failure]) -> Failure:
    """The failure the others follow from (see the module docstring)."""
    if not failures:
        raise ValueError("cause_of: expected at least one failure, got none")
    return min(failures, key=Failure.key)


def follows(failure: Failure, cause: Failure) -> bool:
    """Whether ``failure`` is downstream of ``cause``, the scenario's cause (see the module
    docstring): always, but for two failures of one stage in :data:`INDEPENDENT_STAGES` that
    judge different outputs."""
    if failure == cause:
        return False
    here, there = failure.key()[0], cause.key()[0]
    if here != there or here not in INDEPENDENT_STAGES:
        return True
    judged = {LEARNER_OUTPUT.get(c, c) for c in failure.charged}
    return bool(judged & {LEARNER_OUTPUT.get(c, c) for c in cause.charged})
