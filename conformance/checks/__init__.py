"""All checks of the suite, by capability."""

from conformance.checks.base import Check, CheckFailure, Context
from conformance.checks.learner import LEARNER_CHECKS
from conformance.checks.other import DETERMINISM, ENV_CHECKS, REPLAY_CHECKS
from conformance.checks.relabel import RELABEL_CHECKS
from conformance.checks.trainer import TRAINER_CHECKS

__all__ = ["ALL_CHECKS", "Check", "CheckFailure", "Context"]

ALL_CHECKS: tuple[Check, ...] = (
    TRAINER_CHECKS + REPLAY_CHECKS + ENV_CHECKS + DETERMINISM + LEARNER_CHECKS + RELABEL_CHECKS
)
