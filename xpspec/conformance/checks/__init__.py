"""All checks of the suite, by capability."""

from xpspec.conformance.checks.base import Check, CheckFailure, Context
from xpspec.conformance.checks.learner import LEARNER_CHECKS
from xpspec.conformance.checks.other import DETERMINISM, ENV_CHECKS, REPLAY_CHECKS
from xpspec.conformance.checks.relabel import RELABEL_CHECKS
from xpspec.conformance.checks.trainer import TRAINER_CHECKS

__all__ = ["ALL_CHECKS", "Check", "CheckFailure", "Context"]

ALL_CHECKS: tuple[Check, ...] = (
    TRAINER_CHECKS + REPLAY_CHECKS + ENV_CHECKS + DETERMINISM + LEARNER_CHECKS + RELABEL_CHECKS
)
