"""Prioritized replay (clauses ``priority.*``): the priorities of the valid windows, the law
they sample by, the importance weights, and the update after each draw.

A window is keyed by its first item ``(env, episode, t)``: the priority belongs to the window
that starts there (``priority.sampling-law``). :class:`PriorityModel` holds the priority of
every valid window; :class:`StoredItems` the items each env's ring holds, from the trace's
:class:`~xpspec.protocol.trace.Store` events. The conformance checks replay a framework's own
trace through both, so what they compare with the framework's numbers is computed from the
draws the framework made. :func:`run_prioritized` is refimpl's prioritized replay scenario.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from fractions import Fraction

import torch

from xpspec.protocol.priority import PrioritySpec
from xpspec.protocol.scenario import ReplayScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Event, Priorities, Prioritized, Sampled, Store, Trace, Window
from xpspec.refimpl.recorder import Recorder
from xpspec.refimpl.toy_envs.batched import ToyBatchEnv

__all__ = ["Item", "PriorityModel", "StoredItems", "run_prioritized"]

Item = tuple[int, int, int]

_FIRST, _LAST = int(StepType.FIRST), int(StepType.LAST)


class StoredItems:
    """The items each env's ring of ``capacity`` holds, oldest first (clause
    ``replay.eviction``), with their stored step types."""

    def __init__(self, num_envs: int, capacity: int) -> None:
        self.capacity = capacity
        self.live: list[deque[tuple[Item, int]]] = [deque() for _ in range(num_envs)]

    def add(self, store: Store) -> None:
        for item in zip(store.env, store.episode, store.t, store.step_type):
            ring = self.live[item[0]]
            ring.append(((item[0], item[1], item[2]), item[3]))
            if len(ring) > self.capacity:
                ring.popleft()

    def valid_starts(self, length: int, forbid: bool) -> list[Item]:
        """The first item of every valid window of ``length`` items (period 1), env-major,
        oldest first (clauses ``replay.window-validity``, ``replay.boundary-policy``)."""
        starts = []
        for ring in self.live:
            steps = [st for _, st in ring]
            for i in range(len(ring) - length + 1):
                if forbid and any(
                    steps[q] == _LAST or steps[q + 1] == _FIRST for q in range(i, i + length - 1)
                ):
                    continue
                starts.append(ring[i][0])
        return starts

    def window(self, start: Item, length: int) -> Window:
        """The ``length`` items from ``start`` on."""
        ring = [item for item, _ in self.live[start[0]]]
        i = ring.index(start)
        return tuple(ring[i : i + length])


class PriorityModel:
    """The priority of every valid window (clauses ``priority.*``); ``max_priority`` is the
    largest priority ever assigned, 1 before any (``priority.new-at-max``)."""

    def __init__(self, spec: PrioritySpec) -> None:
        self.spec = spec
        self.priority: dict[Item, Fraction] = {}
        self.max_priority = Fraction(1)

    def new_priority(self) -> Fraction:
        """The priority of a window that has just become valid (``priority.new-at-max``)."""
        return self.max_priority

    def sync(self, valid: Sequence[Item]) -> None:
        """Keep the priorities of the windows still valid, give the new ones
        :meth:`new_priority` and forget the others (``priority.eviction``)."""
        self.priority = {
            s: self.priority[s] if s in self.priority else self.new_priority() for s in valid
        }

    def mass(self, start: Item) -> float:
        """``p^alpha`` of the window starting at ``start``."""
        return float(self.priority[start]) ** float(self.spec.alpha)

    def sampling_masses(self, valid: Sequence[Item]) -> list[float]:
        """The masses a draw samples ``valid`` by: their ``p^alpha`` (a mutant samples by
        other ones)."""
        return [self.mass(s) for s in valid]

    def probabilities(self) -> dict[Item, float]:
        """``P(w) = p_w^alpha / Σ_v p_v^alpha`` of every valid window (``priority.sampling-law``)."""
        masses = {s: self.mass(s) for s in self.priority}
        total = sum(masses.values())
        return {s: m / total for s, m in masses.items()}

    def weights(self, batch: Sequence[Item]) -> list[float]:
        """The importance weights of ``batch``: ``(N·P(w))^(-beta)`` divided by its largest
        value over every valid window (``buffer-max``) or over the batch (``batch-max``)
        (``priority.importance-weights``); the ``N·P`` and the total cancel, leaving
        ``(m_w / m_min)^(-beta)``."""
        beta = float(self.spec.beta)
        pool = batch if self.spec.weights == "batch-max" else list(self.priority)
        smallest = min(self.mass(s) for s in pool)
        return [(self.mass(s) / smallest) ** -beta for s in batch]

    def update(self, batch: Sequence[Item], draw: int) -> None:
        """After draw ``draw``: each sampled window's priority becomes the spec's
        ``|td| + eps``, no other changes (``priority.update-sampled``)."""
        for start in batch:
            p = self.spec.priority(start, draw)
            self.priority[start] = p
            self.max_priority = max(self.max_priority, p)


def _draw(
    masses: Sequence[float], batch_size: int, spec: PrioritySpec, generator: torch.Generator
) -> list[int]:
    """Indices into ``masses``, each drawn with probability ``mass / total``: independently
    (``torch.multinomial`` with replacement), or under ``draws="stratified"`` one in each of
    ``batch_size`` equal strata of the total (``u_i = (i + U_i) / b · total`` looked up in
    the prefix sums, as Flashbax 0.1.3 ``sum_tree.stratified_sample``)."""
    weights = torch.tensor(masses, dtype=torch.float64)
    if spec.draws == "independent":
        picks = torch.multinomial(weights, batch_size, replacement=True, generator=generator)
        return [int(k) for k in picks.tolist()]
    cumulative = torch.cumsum(weights, 0)
    strata = torch.arange(batch_size, dtype=torch.float64)
    u = (strata + torch.rand(batch_size, generator=generator, dtype=torch.float64)) / batch_size
    found = torch.searchsorted(cumulative, u * cumulative[-1], right=True)
    return [int(k) for k in found.clamp(max=len(masses) - 1).tolist()]


def run_prioritized(
    scenario: ReplayScenario, model_type: type[PriorityModel] = PriorityModel
) -> Trace:
    """Refimpl's prioritized replay scenario: ``fill_steps`` vector steps stored, then per
    draw a :class:`Priorities` event (the masses before the draw), the :class:`Sampled`
    windows drawn with ``torch.multinomial`` from one seeded generator, a
    :class:`Prioritized` event (their probabilities and importance weights), the update of
    their priorities, and ``priority.add_steps`` more vector steps stored (but after the
    last draw). A draw with no valid window is empty and updates nothing
    (``replay.no-window``)."""
    spec = scenario.priority
    assert spec is not None, "run_prioritized needs a scenario with a priority spec"
    length, forbid = scenario.sampling.window_length, scenario.sampling.boundary == "forbid"
    env = ToyBatchEnv(scenario.env, scenario.seed)
    stored = StoredItems(env.num_envs, scenario.capacity)
    model = model_type(spec)
    recorder = Recorder()
    action = torch.zeros(env.num_envs, dtype=torch.int64)
    events: list[Event] = []
    started = False

    def store(steps: int) -> None:
        nonlocal started
        for _ in range(steps):
            ts = env.step(action) if started else env.reset()
            started = True
            rows = {
                "observation": ts.observation,
                "step_type": ts.step_type,
                "reward": ts.reward,
                "discount": ts.discount,
                "annotation": torch.zeros(env.num_envs),
            }
            recorder.store(0, rows)
        for event in recorder.drain():
            assert isinstance(event, Store)
            stored.add(event)
            events.append(event)

    store(scenario.fill_steps)
    generator = torch.Generator().manual_seed(scenario.seed)
    for draw in range(scenario.draws):
        valid = stored.valid_starts(length, forbid)
        model.sync(valid)
        masses = tuple(model.mass(s) for s in valid)
        events.append(
            Priorities(
                draw,
                tuple(s[0] for s in valid),
                tuple(s[1] for s in valid),
                tuple(s[2] for s in valid),
                masses,
            )
        )
        if valid:
            picks = _draw(model.sampling_masses(valid), scenario.batch_size, spec, generator)
            batch = [valid[k] for k in picks]
            law = model.probabilities()
            events.append(Sampled(draw, tuple(stored.window(s, length) for s in batch)))
            events.append(
                Prioritized(draw, tuple(law[s] for s in batch), tuple(model.weights(batch)))
            )
            model.update(batch, draw)
        else:
            events.append(Sampled(draw, ()))
            events.append(Prioritized(draw, (), ()))
        if draw < scenario.draws - 1:
            store(spec.add_steps)
    return Trace(tuple(events), {"producer": "refimpl"})
