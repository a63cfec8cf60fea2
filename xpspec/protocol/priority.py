"""How a replay scenario asks for prioritized sampling (clauses ``priority.*``): the exponents,
the priority offset, the importance-weight normalisation, and the deterministic TD-error rule
by which every implementation updates the priorities of the windows it sampled, so that the
priorities of two implementations that drew the same windows are the same numbers. Standard
library only; the reference model is :mod:`xpspec.refimpl.priority`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from xpspec.protocol.codec import parse_fraction
from xpspec.protocol.errors import ConfigError

__all__ = ["Draws", "Normalization", "PrioritySpec", "td_error"]

Normalization = Literal["buffer-max", "batch-max"]
_NORMALIZATIONS = ("buffer-max", "batch-max")
Draws = Literal["independent", "stratified"]
_DRAWS = ("independent", "stratified")


def td_error(item: tuple[int, int, int], draw: int, levels: int) -> Fraction:
    """The TD error the scenario assigns to the window starting at ``item = (env, episode, t)``
    when it was sampled in draw ``draw``: ``(1 + (env + 2·episode + t + draw) mod levels) / 2``,
    a value in ``{1/2, 1, …, levels/2}`` (clause ``priority.update-sampled``). It depends on the
    window and the draw only, so every implementation computes the same one."""
    env, episode, t = item
    return Fraction(1 + (env + 2 * episode + t + draw) % levels, 2)


@dataclass(frozen=True)
class PrioritySpec:
    """Prioritized sampling of a replay scenario (clauses ``priority.*``).

    A valid window ``w`` has a priority ``p_w``; it is drawn with probability
    ``p_w^alpha / Σ_v p_v^alpha`` over the valid windows (``priority.sampling-law``), and
    carries the importance weight ``(N·P(w))^(-beta)`` divided by its maximum, over every
    valid window (``"buffer-max"``) or over the sampled batch (``"batch-max"``, a variant of
    ``priority.importance-weights``). After each draw the priority of every sampled window
    becomes ``|td_error(window start, draw, levels)| + eps`` and no other priority changes
    (``priority.update-sampled``); a window that becomes valid gets the largest priority ever
    assigned, 1 before any (``priority.new-at-max``). ``add_steps`` vector steps of the toy env
    are stored after every draw but the last, so new windows arrive, and with a small ring old
    ones are evicted, between updates (``priority.eviction``). ``draws``: the windows of a
    batch are drawn independently (``"independent"``) or one in each of ``b`` equal strata
    of the total mass (``"stratified"``, a variant of ``priority.sampling-law``).
    """

    alpha: Fraction = Fraction(3, 5)
    beta: Fraction = Fraction(2, 5)
    eps: Fraction = Fraction(0)
    levels: int = 4
    add_steps: int = 0
    weights: Normalization = "buffer-max"
    draws: Draws = "independent"

    def __post_init__(self) -> None:
        for name in ("alpha", "beta", "eps"):
            object.__setattr__(self, name, parse_fraction(name, getattr(self, name)))
        if not 0 < self.alpha <= 1:
            raise ConfigError("alpha", str(self.alpha), "a rational in (0, 1]")
        if not 0 <= self.beta <= 1:
            raise ConfigError("beta", str(self.beta), "a rational in [0, 1]")
        if self.eps < 0:
            raise ConfigError("eps", str(self.eps), "a rational >= 0")
        for name, minimum in (("levels", 1), ("add_steps", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ConfigError(name, value, f"an integer >= {minimum}")
        if self.weights not in _NORMALIZATIONS:
            raise ConfigError("weights", self.weights, "'buffer-max' or 'batch-max'")
        if self.draws not in _DRAWS:
            raise ConfigError("draws", self.draws, "'independent' or 'stratified'")

    def priority(self, item: tuple[int, int, int], draw: int) -> Fraction:
        """The priority a window starting at ``item`` gets after it was sampled in ``draw``."""
        return td_error(item, draw, self.levels) + self.eps
