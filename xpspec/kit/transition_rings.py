"""Rings of transition rows standing for the spec's ring of time steps (relabel scenarios).

SB3's ``HerReplayBuffer`` and Tianshou's ``HERVectorReplayBuffer`` store one row per env per
vector step, the transition from each time step but LAST; a row that ends an episode also
holds the LAST as its next observation, and the newest row, if it does not end its episode,
the next time step (which no row holds yet). A ring of ``n`` rows therefore holds ``n`` time
steps plus one per episode end among them plus that one, where a relabel scenario's ring holds
``capacity`` time steps (clause ``relabel.same-episode`` asks what is stored). Relabel
scenarios draw only after the fill, so matching the two at that moment is enough.
"""

from __future__ import annotations

from xpspec.protocol.scenario import RelabelScenario

__all__ = ["rows_within_capacity"]


def _done_rows(scenario: RelabelScenario, env: int) -> list[bool]:
    """Whether each of env ``env``'s ``fill_steps`` rows ends its episode (its successor is
    LAST): an episode of ``L`` transitions is ``L`` rows, the last one done."""
    dones: list[bool] = []
    k = 0
    while len(dones) < scenario.fill_steps:
        length = scenario.env.episode(scenario.seed, env, k).length
        dones.extend([False] * (length - 1) + [True])
        k += 1
    return dones[: scenario.fill_steps]


def rows_within_capacity(scenario: RelabelScenario) -> int:
    """Rows per env of a ring filled for ``fill_steps`` vector steps that holds nothing the
    scenario's ring of ``capacity`` time steps has evicted when the draws begin: the most
    rows ``n`` whose newest ``n`` rows and the next observations they alone hold are at most
    ``capacity`` time steps in every env; ``capacity`` itself when the whole fill fits (the
    ring never wraps)."""
    done_rows = [_done_rows(scenario, env) for env in range(scenario.env.num_envs)]
    rows = min(scenario.capacity, scenario.fill_steps)
    while rows > 1 and any(_held(d[-rows:]) > scenario.capacity for d in done_rows):
        rows -= 1
    return scenario.capacity if rows == scenario.fill_steps else rows


def _held(newest_rows: list[bool]) -> int:
    """Time steps held by the newest rows of an env (``True`` for a done row): one per row,
    one per LAST, and the newest row's next time step unless it is a LAST."""
    return len(newest_rows) + sum(newest_rows) + (not newest_rows[-1])
