"""Checks of experience preprocessing: conservation and the modes (clauses ``preprocess.*``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from fractions import Fraction
from itertools import zip_longest
from typing import cast

from xpspec.conformance.checks.base import CheckFailure, Context
from xpspec.conformance.checks.item_index import ItemBytes, shared_index
from xpspec.conformance.checks.views import (
    env_items,
    items_of,
    iterations,
    trainer_scenario,
)
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.codec import canonical_json
from xpspec.protocol.preprocessors import (
    EpisodeDelayed,
    ExcludeEpisodes,
    ExcludeSteps,
    ExcludeTasks,
    OverwriteStepType,
    RewardTransform,
)
from xpspec.protocol.scenario import Scenario, TrainerScenario
from xpspec.protocol.shared_pass import Same, once, together
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import EnvStep, Event, Item, RunEnd, Store, Trace

__all__ = [
    "check_conservation",
    "check_delayed_per_env",
    "check_exclusion",
    "check_identity_is_plain",
    "check_pending_at_end",
    "check_release_order",
    "check_store_order",
    "check_transform",
]


def _fates(sc: Scenario, trace: Trace) -> _Fates:
    """The :class:`_Fates` of ``trace``, computed once for the checks run together on it
    (:func:`~xpspec.protocol.shared_pass.once`: conservation and pending-at-end read the
    same tables)."""
    return once(("preprocessing._Fates", Same(sc), Same(trace)), lambda: _Fates(sc, trace))


class _Fates:
    """What became of every item of a trainer trace: how many times it was unrolled, stored,
    excluded and reported pending at the end, and whether it was held, a byte each per item
    (:class:`ItemBytes`), so that a long trace is judged in little memory. The items
    themselves are visited again, in the order they were first unrolled, by passes over the
    trace (:meth:`unrolled_items`). Read only once built: the checks may share one."""

    def __init__(self, sc: Scenario, trace: Trace) -> None:
        self.trace = trace
        index = shared_index(sc.env, sc.seed)
        self.unrolled, self.stored, self.excluded, self.pending, self.held = (
            ItemBytes(index) for _ in range(5)
        )
        self.index = index
        self.ended: dict[tuple[int, int], int] = {}  # episode -> iteration of its LAST
        tables: dict[str, ItemBytes] = {
            "env_step": self.unrolled,
            "store": self.stored,
            "exclude": self.excluded,
            "run_end": self.pending,
            "hold": self.held,
        }
        self._early: set[Item] = set()  # accounted for while not (yet) unrolled
        self.ends: list[RunEnd] = []
        """The ``run_end`` events, in order (pending-at-end reads them; a trace has one)."""
        for e in trace.events:
            table = tables.get(e.kind)
            if table is None:
                continue
            if e.kind == "run_end":
                self.ends.append(cast(RunEnd, e))
            items = items_of(e)  # type: ignore[arg-type]
            table.bump_all(items)
            if e.kind in ("store", "exclude", "run_end"):
                get = self.unrolled.get
                self._early.update(item for item in items if get(item) is None)
            if e.kind == "env_step":
                for item, step in zip(items_of(e), e.step_type):
                    if step == StepType.LAST:
                        self.ended.setdefault(item[:2], e.iteration)

    def count(self, table: ItemBytes, item: Item) -> int:
        return table.get(item) or 0

    def accounted(self, item: Item) -> int:
        return (
            (self.stored.get(item) or 0)
            + (self.excluded.get(item) or 0)
            + (self.pending.get(item) or 0)
        )

    def unrolled_items(self) -> Iterator[tuple[Item, int]]:
        """Each unrolled item once, with the iteration that first unrolled it, in that order."""
        seen = ItemBytes(self.index)
        for it, item, _, _ in env_items(self.trace):
            if seen.get(item) is None:
                seen[item] = 0
                yield item, it

    def visit_unrolled(self, visitor: Callable[[Item, int], None]) -> None:
        """``visitor(item, first)`` for each of :meth:`unrolled_items`; raise what the visitor
        raised (raising ends its visit). The checks run together that visit the same fates
        share one pass over the items (:func:`~xpspec.protocol.shared_pass.together`)."""
        raised = together(("preprocessing.unrolled", Same(self)), visitor, self._visit)
        if raised is not None:
            raise raised

    def _visit(self, visitors: Sequence[Callable[[Item, int], None]]) -> list[Exception | None]:
        """What each of ``visitors`` raised (None: nothing) on one pass over the items."""
        raised: list[Exception | None] = [None] * len(visitors)
        live = list(enumerate(visitors))
        for item, first in self.unrolled_items():
            for n, visit in live:
                try:
                    visit(item, first)
                except Exception as exc:
                    raised[n] = exc
            if any(raised[n] is not None for n, _ in live):
                live = [(n, v) for n, v in live if raised[n] is None]
                if not live:
                    break
        return raised

    def lost(self, item: Item, first: int) -> tuple[bool, int | None]:
        """Whether ``item`` (first unrolled in iteration ``first``) is lost, unrolled more
        often than it was stored, excluded or reported pending, in a way that is
        ``preprocess.conservation``'s concern, and the iteration in which its loss shows: an
        item never held is lost in the iteration that unrolled it, one held in an episode that
        ended at that episode's LAST. Items held in an episode still open at the end are not:
        reporting those is ``preprocess.pending-at-end``'s concern."""
        if self.count(self.unrolled, item) <= self.accounted(item):
            return False, None
        if item not in self.held:
            return True, first
        if item[:2] in self.ended:
            return True, self.ended[item[:2]]
        return False, None

    def never_unrolled(self) -> set[Item]:
        """Items stored, excluded or reported pending that were never unrolled."""
        return {item for item in self._early if item not in self.unrolled}


def check_conservation(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """preprocess.conservation: every unrolled item is stored, excluded or reported pending,
    exactly once. An item held in an episode still open at the end and not reported pending
    is left to ``preprocess.pending-at-end``."""
    fates = _fates(scenario, trace)

    def visit(item: Item, first: int) -> None:
        n, accounted = fates.count(fates.unrolled, item), fates.accounted(item)
        if accounted == n:
            return
        lost, iteration = fates.lost(item, first)
        if accounted > n or lost:
            where = {
                "stored": fates.count(fates.stored, item),
                "excluded": fates.count(fates.excluded, item),
                "pending": fates.count(fates.pending, item),
            }
            raise CheckFailure(
                f"fate of unrolled item {item}",
                "exactly one of stored/excluded/pending",
                where,
                iteration=iteration,
            )

    fates.visit_unrolled(visit)
    extra = sorted(fates.never_unrolled())
    if extra:
        raise CheckFailure(
            "items stored, excluded or pending that were never unrolled", [], extra[:5]
        )


def check_identity_is_plain(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """preprocess.identity-is-plain: every vector step's items are stored right after it,
    unchanged and with annotation 0; nothing else is stored, excluded or held; and the whole
    event sequence equals the run with train accounting ``plain`` (when the adapter can
    express that run: otherwise only the store sequence is checked)."""
    steps = stores = 0
    step: EnvStep | None = None  # the vector step whose store must come next
    for i, e in enumerate(trace.events):
        if step is not None:
            _stored_right_after(step, e)
            step = None
        if e.kind in ("exclude", "hold"):
            raise CheckFailure(
                f"event #{i}: identity preprocessing {e.kind}s {items_of(e)}", "nothing", e.kind
            )
        if e.kind == "store":
            stores += 1
        if e.kind == "env_step":
            steps += 1
            step = e
    if step is not None:
        _stored_right_after(step, None)
    if stores != steps:
        raise CheckFailure("store events under identity (one per vector step)", steps, stores)
    sc = trainer_scenario(scenario)
    if sc.trainer.train_accounting == "plain":
        return
    try:
        plain = ctx.rerun(replace(sc, trainer=replace(sc.trainer, train_accounting="plain")))
    except Unsupported:
        return  # the adapter cannot run without a hook: the store sequence is what is checked
    pairs = zip_longest(trace.events, plain.events)
    for first, (a, b) in enumerate(pairs):
        mine, theirs = _line(a), _line(b)
        if mine != theirs:
            at = a if a is not None else b
            raise CheckFailure(
                f"event #{first} vs the same run with train accounting plain",
                theirs,
                mine,
                iteration=at.iteration if hasattr(at, "iteration") else None,
                diverged=at.kind,
            )


def _line(event: Event | None) -> list[str]:
    """The canonical line of ``event`` as a list of one (none past the end of its trace)."""
    return [] if event is None else [canonical_json(event)]


def _stored_right_after(e: EnvStep, nxt: Event | None) -> None:
    """preprocess.identity-is-plain: ``nxt``, the event after the vector step ``e``, stores
    its items unchanged, with annotation 0."""
    if nxt is None or not isinstance(nxt, Store) or items_of(nxt) != items_of(e):
        raise CheckFailure(
            f"iteration {e.iteration}: store right after the unroll step of {items_of(e)}",
            "a store of the same items",
            nxt,
        )
    for name in ("step_type", "reward", "discount"):
        if getattr(nxt, name) != getattr(e, name):
            raise CheckFailure(
                f"iteration {e.iteration}: stored {name} under identity",
                getattr(e, name),
                getattr(nxt, name),
            )
    if any(nxt.annotation):
        raise CheckFailure(
            f"iteration {e.iteration}: stored annotation under identity",
            (0.0,) * len(nxt.annotation),
            nxt.annotation,
        )


def check_store_order(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """preprocess.store-order: each env's items are stored in the order they were unrolled
    (the order of the ``env_step`` events); items of different envs may interleave, and an
    item never unrolled is out of order wherever it is stored."""
    unroll_index = _unroll_order(scenario, trace)
    last: dict[int, tuple[int, Item]] = {}
    for e in trace.of_kind("store"):
        for item in items_of(e):
            n = unroll_index(item)
            if item[0] in last and n <= last[item[0]][0]:
                raise CheckFailure(
                    f"iteration {e.iteration}: env {item[0]} stores {item} after {last[item[0]][1]}",
                    "unroll order",
                    "out of order",
                )
            last[item[0]] = (n, item)


def _unroll_order(scenario: Scenario, trace: Trace) -> Callable[[Item], int]:
    """A number per item that orders the items of one env as they were unrolled (-1 for an
    item never unrolled). When every env unrolls its time steps in order, once each (as
    ``timestep.auto-reset`` wants), that is the item's slot (:class:`ItemIndex`) and costs a
    byte per item; otherwise it is its place in the unroll, kept in a dictionary."""
    index = shared_index(scenario.env, scenario.seed)
    unrolled = ItemBytes(index)
    newest: dict[int, int] = {}
    for _, item, _, _ in env_items(trace):
        slot = index.slot(item)
        if slot is None or slot <= newest.get(item[0], -1):
            places = {item: n for n, (_, item, _, _) in enumerate(env_items(trace))}
            return lambda item: places.get(item, -1)
        newest[item[0]] = slot
        unrolled[item] = 0

    def slot_of(item: Item) -> int:
        slot = index.slot(item)
        return slot if slot is not None and item in unrolled else -1

    return slot_of


def _stored_as_unrolled(
    sc: TrainerScenario,
    trace: Trace,
    want: Callable[[Item, int, float, float], tuple[int, float, float]],
) -> None:
    """Every stored item's (step type, reward, discount) equals ``want`` of its unrolled
    fields (what its clause says the mode stores); an item never unrolled fails too."""
    unrolled: dict[Item, tuple[int, float, float]] = {}
    for _, item, step, i in env_items(trace):
        unrolled[item] = (step.step_type[i], step.reward[i], step.discount[i])
    for e in trace.of_kind("store"):
        for item, st, reward, discount in zip(items_of(e), e.step_type, e.reward, e.discount):
            if item not in unrolled:
                raise CheckFailure(
                    f"stored item {item} under {sc.preprocess}",
                    "an unrolled item",
                    "never unrolled",
                )
            expected = want(item, *unrolled[item])
            if (st, reward, discount) != expected:
                raise CheckFailure(
                    f"iteration {e.iteration}: stored (step type, reward, discount) of {item} "
                    f"under {sc.preprocess}",
                    expected,
                    (st, reward, discount),
                )


def _as_unrolled(item: Item, st: int, reward: float, discount: float) -> tuple[int, float, float]:
    return st, reward, discount


def check_delayed_per_env(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """preprocess.delayed-per-env: under episode-delayed preprocessing each store or
    exclusion made within an iteration releases one env's whole episode (rows ``t = 0..L``)
    in the iteration that unrolled its LAST; the episode is stored, with annotation 1.0 if
    it terminated and 0.0 if it was truncated, when ``keep`` admits its outcome (``all``;
    ``success``: terminated; ``failure``: truncated), and excluded with reason ``outcome``
    otherwise; every episode whose LAST was unrolled is released; stored items keep their
    unrolled step type, reward and discount. What a flush after the last iteration stores is
    ``preprocess.pending-at-end``'s."""
    sc = trainer_scenario(scenario)
    last_at: dict[tuple[int, int], int] = {}
    for it, (env, episode, _), step, i in env_items(trace):
        if step.step_type[i] == StepType.LAST:
            last_at[(env, episode)] = it
    closed: set[int] = set()
    released: set[tuple[int, int]] = set()
    for e in trace.events:
        if e.kind == "iteration_end":
            closed.add(e.iteration)
        if e.kind in ("store", "exclude") and e.iteration not in closed:
            items = items_of(e)
            episodes = {(env, ep) for env, ep, _ in items}
            if len(episodes) != 1:
                raise CheckFailure(
                    f"iteration {e.iteration}: one release holds",
                    "exactly one env's episode",
                    sorted(episodes),
                )
            ((env, ep),) = episodes
            plan = sc.env.episode(sc.seed, env, ep)
            if [t for _, _, t in items] != list(range(plan.length + 1)):
                raise CheckFailure(
                    f"iteration {e.iteration}: released episode {(env, ep)}",
                    list(range(plan.length + 1)),
                    [t for _, _, t in items],
                )
            if last_at.get((env, ep)) != e.iteration:
                raise CheckFailure(
                    f"release of episode {(env, ep)}",
                    f"iteration {last_at.get((env, ep))} (its LAST)",
                    f"iteration {e.iteration}",
                )
            keep = sc.preprocess.keep if isinstance(sc.preprocess, EpisodeDelayed) else "all"
            kept = keep == "all" or (keep == "success") == (plan.ending == "terminated")
            if (e.kind == "store") != kept:
                raise CheckFailure(
                    f"iteration {e.iteration}: episode {(env, ep)} ({plan.ending}) under "
                    f"keep={keep!r}",
                    "stored" if kept else "excluded with reason outcome",
                    "stored" if e.kind == "store" else "excluded",
                )
            if e.kind == "exclude" and e.reason != "outcome":
                raise CheckFailure(
                    f"iteration {e.iteration}: reason of excluding episode {(env, ep)} "
                    f"({plan.ending}) under keep={keep!r} (preprocess.delayed-per-env)",
                    "outcome",
                    e.reason,
                )
            released.add((env, ep))
            if e.kind == "store":
                want = 1.0 if plan.ending == "terminated" else 0.0
                if set(e.annotation) != {want}:
                    raise CheckFailure(
                        f"annotation of episode {(env, ep)} ({plan.ending})",
                        want,
                        sorted(set(e.annotation)),
                    )
    unreleased = sorted(set(last_at) - released)
    if unreleased:
        env, ep = unreleased[0]
        raise CheckFailure(
            f"episode {(env, ep)}: its LAST was unrolled in iteration {last_at[(env, ep)]}",
            "released (stored or excluded) in that vector step",
            f"never released ({len(unreleased)} such episodes)",
        )
    _stored_as_unrolled(sc, trace, _as_unrolled)


def check_release_order(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """preprocess.release-order: every release (a store or exclusion of episode-delayed mode
    during an iteration) follows the unroll of the vector step that holds its episode's LAST,
    before the next vector step and before the iteration's train calls; the releases of one
    vector step are in increasing env order. (That a release is one whole episode is
    ``preprocess.delayed-per-env``'s.)"""
    step_lasts: set[tuple[int, int]] | None = None  # (env, episode) ending in the open step
    step_iteration, released_envs = 0, list[int]()
    closed: set[int] = set()
    for e in trace.events:
        if e.kind == "iteration_end":
            closed.add(e.iteration)
        if e.kind == "env_step":
            step_lasts = {
                (env, ep)
                for (env, ep, _), st in zip(items_of(e), e.step_type)
                if st == StepType.LAST
            }
            step_iteration, released_envs = e.iteration, []
        elif e.kind in ("train_call", "update", "hook", "iteration_end", "iteration"):
            step_lasts = None  # the unroll of the iteration is over
        elif e.kind in ("store", "exclude") and e.iteration not in closed:
            items = items_of(e)
            if not items:
                continue
            episode = items[0][:2]
            if step_lasts is None or e.iteration != step_iteration or episode not in step_lasts:
                raise CheckFailure(
                    f"iteration {e.iteration}: release ({e.kind}) of episode {episode} "
                    "(preprocess.release-order: in the vector step that unrolls its LAST, "
                    "before the next vector step and the train calls)",
                    "right after the unroll step holding its LAST",
                    "outside that vector step"
                    if step_lasts is not None
                    else "after the iteration's unroll ended",
                )
            if released_envs and episode[0] <= released_envs[-1]:
                raise CheckFailure(
                    f"iteration {e.iteration}: releases of one vector step "
                    "(preprocess.release-order: increasing env order)",
                    sorted([*released_envs, episode[0]]),
                    [*released_envs, episode[0]],
                )
            released_envs.append(episode[0])


def _selected(sc: TrainerScenario, item: Item) -> bool:
    env, episode, t = item
    p = sc.preprocess
    if isinstance(p, ExcludeSteps):
        return t % p.every == p.offset
    if isinstance(p, ExcludeEpisodes):
        return episode % p.every == p.offset
    if isinstance(p, ExcludeTasks):
        return sc.env.task_id(env, episode) in p.task_ids
    return False


def check_exclusion(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """preprocess.exclusion: every item the scenario's exclusion preprocessor selects (``t``
    for ``ExcludeSteps``, the episode index for ``ExcludeEpisodes``, the episode's task id
    for ``ExcludeTasks``) is excluded with a non-empty reason and never stored; every other
    item is stored, never excluded, with its unrolled step type, reward and discount."""
    sc = trainer_scenario(scenario)
    fates = _fates(sc, trace)
    for item, _ in fates.unrolled_items():
        want = _selected(sc, item)
        stored, excluded = fates.count(fates.stored, item), fates.count(fates.excluded, item)
        if want and (stored or not excluded):
            raise CheckFailure(
                f"selected item {item} under {sc.preprocess}",
                "excluded",
                "stored" if stored else "missing",
            )
        if not want and excluded:
            raise CheckFailure(
                f"unselected item {item} under {sc.preprocess}", "stored", "excluded"
            )
    for e in trace.of_kind("exclude"):
        if not e.reason:
            raise CheckFailure(
                f"iteration {e.iteration}: exclusion reason", "a non-empty reason", e.reason
            )
    _stored_as_unrolled(sc, trace, _as_unrolled)


def check_transform(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """preprocess.transform: the transformed field as the clause says, every other field
    (the discount included) as unrolled; under the variant ``transition-rows``
    (``first="unheld"``) a FIRST's reward as unrolled too."""
    sc = trainer_scenario(scenario)
    p = sc.preprocess

    def want(item: Item, st: int, reward: float, discount: float) -> tuple[int, float, float]:
        if isinstance(p, RewardTransform) and not (p.first == "unheld" and st == StepType.FIRST):
            reward = float(Fraction(reward) * p.scale + p.shift)
        if isinstance(p, OverwriteStepType):
            hit = item[2] == p.t if p.when == "t" else (st == StepType.LAST and discount != 0)
            st = int(StepType[p.to]) if hit else st
        return st, reward, discount

    _stored_as_unrolled(sc, trace, want)


def check_pending_at_end(scenario: Scenario, trace: Trace, ctx: Context) -> None:
    """The run end reports exactly the items neither stored nor excluded; under ``flush``
    that is nothing, because the held items were stored."""
    sc = trainer_scenario(scenario)
    fates = _fates(sc, trace)
    held_open: Counter[Item] = Counter()

    def visit(item: Item, first: int) -> None:
        left = fates.count(fates.unrolled, item) - fates.count(fates.stored, item)
        left -= fates.count(fates.excluded, item)
        if left > 0 and not fates.lost(item, first)[0]:  # lost: conservation's concern
            held_open[item] = left

    fates.visit_unrolled(visit)
    ends = fates.ends  # read in the pass that built the fates
    if len(ends) != 1:
        raise CheckFailure("run end events", 1, len(ends))
    pending = Counter(item for e in ends for item in items_of(e))
    last = max(iterations(trace), default=None)  # the run end follows the last iteration
    if sc.trainer.pending_at_end == "flush" and pending:
        raise CheckFailure(
            "items left pending under policy flush", [], sorted(pending)[:8], iteration=last
        )
    if sorted(pending.elements()) != sorted(held_open.elements()):
        raise CheckFailure(
            "items reported pending at the end",
            sorted(held_open)[:8],
            sorted(pending)[:8],
            iteration=last,
        )
