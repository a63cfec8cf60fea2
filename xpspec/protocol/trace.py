"""The trace: the ordered, typed record of what a trainer did with experience.

Every event names the items it concerns by ``(env, episode, t)`` (decoded from the toy
env's observations), so traces from different implementations can be compared item by item.
Columnar events hold one tuple per coordinate. A trace serialises to JSON Lines: a header
line, then one canonical line per event; the same trace always gives the same bytes
(clause ``trace.deterministic``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, overload

from xpspec.protocol.codec import canonical_json, to_jsonable

__all__ = [
    "TRACE_FORMAT",
    "Advantages",
    "Arrived",
    "CallerEpisode",
    "EnvStep",
    "Event",
    "Exclude",
    "Hold",
    "Hook",
    "Item",
    "IterationEnd",
    "IterationStart",
    "Mixed",
    "NStep",
    "Priorities",
    "Prioritized",
    "Relabel",
    "Resume",
    "RunEnd",
    "Sampled",
    "Shard",
    "Stacked",
    "Store",
    "Trace",
    "TrainCall",
    "TrainSequence",
    "Trained",
    "Update",
    "UpdatePlan",
    "Window",
]

TRACE_FORMAT = "xpspec-trace/3"

Item = tuple[int, int, int]
"""``(env, episode, t)``."""

Ints = tuple[int, ...]
Floats = tuple[float, ...]
Window = tuple[tuple[int, int, int] | None, ...]
"""A sampled window: its items in order, ``None`` for padding."""


@dataclass(frozen=True)
class IterationStart:
    """A train iteration begins; ``unroll_steps`` is the planned steps per env."""

    iteration: int
    counter: int
    unroll_steps: int
    kind: Literal["iteration"] = "iteration"


@dataclass(frozen=True)
class EnvStep:
    """One vector step as the trainer saw it (the pre-step time step of each env)."""

    iteration: int
    env: Ints
    episode: Ints
    t: Ints
    step_type: Ints
    reward: Floats
    discount: Floats
    policy_state: Ints
    action: Ints
    kind: Literal["env_step"] = "env_step"


@dataclass(frozen=True)
class Store:
    """Items written to the replay buffer, in write order, with their stored fields."""

    iteration: int
    env: Ints
    episode: Ints
    t: Ints
    step_type: Ints
    reward: Floats
    discount: Floats
    annotation: Floats
    kind: Literal["store"] = "store"


@dataclass(frozen=True)
class Exclude:
    """Items the preprocessing excluded from storage, with the reason."""

    iteration: int
    env: Ints
    episode: Ints
    t: Ints
    reason: str
    kind: Literal["exclude"] = "exclude"


@dataclass(frozen=True)
class Hold:
    """Items the preprocessing holds back for later release."""

    iteration: int
    env: Ints
    episode: Ints
    t: Ints
    kind: Literal["hold"] = "hold"


@dataclass(frozen=True)
class TrainCall:
    """One train call; ``status`` says whether it trained or why it did not."""

    iteration: int
    call: int
    counter: int
    status: Literal["trained", "warmup", "no-data"]
    stored_total: int
    kind: Literal["train_call"] = "train_call"


@dataclass(frozen=True)
class Update:
    """One gradient update: the sampled windows (``None`` marks padding) and the loss mask."""

    iteration: int
    call: int
    index: int
    counter: int
    windows: tuple[Window, ...]
    loss_mask: tuple[Ints, ...]
    kind: Literal["update"] = "update"


@dataclass(frozen=True)
class Sampled:
    """Windows drawn by a replay-sampling operation (no training attached)."""

    draw: int
    windows: tuple[Window, ...]
    kind: Literal["sampled"] = "sampled"


@dataclass(frozen=True)
class Priorities:
    """The priorities an implementation holds before draw ``draw`` of a prioritized replay
    scenario, read from its own store (a sum tree's leaves): for every window it can sample,
    named by its first item ``(env, episode, t)``, its sampling mass ``p^alpha`` (clauses
    ``priority.new-at-max``, ``priority.update-sampled``, ``priority.eviction``)."""

    draw: int
    env: Ints
    episode: Ints
    t: Ints
    mass: Floats
    kind: Literal["priorities"] = "priorities"


@dataclass(frozen=True)
class Prioritized:
    """What the implementation computed for the windows of draw ``draw`` (one entry per
    window of the :class:`Sampled` event, in its order): the probability with which it drew
    each (``priority.sampling-law``) and the importance weight it returned
    (``priority.importance-weights``; empty when it returns none)."""

    draw: int
    probability: Floats
    weight: Floats
    kind: Literal["prioritized"] = "prioritized"


@dataclass(frozen=True)
class Relabel:
    """One relabeled batch of sampled transitions: row ``i`` is the transition from
    ``(env, episode, t)`` to its successor; ``(goal_env[i], goal_episode[i], goal_t[i])`` is
    the time step whose achieved goal became its goal (the spec wants one of the row's own
    episode), or ``(-1, -1, -1)`` where the row kept its own goal; ``goal[i]`` is the row's
    goal after relabeling, as the implementation's batch holds it (the named step's achieved
    goal if relabeled, the stored desired goal if kept); ``reward`` is the row's reward after
    relabeling."""

    draw: int
    env: Ints
    episode: Ints
    t: Ints
    goal_env: Ints
    goal_episode: Ints
    goal_t: Ints
    goal: tuple[Floats, ...]
    reward: Floats
    kind: Literal["relabel"] = "relabel"


@dataclass(frozen=True)
class TrainSequence:
    """One sequence a recurrent learner trained on (clauses ``recurrent.*``): its items in
    order (``None`` for a padding position), the state the learner's network received at
    each position (the counting network's count, read from the network's own input; -1 at a
    padding position the network was not run on) and the loss mask of each position."""

    draw: int
    index: int
    items: Window
    state_in: Ints
    loss_mask: Ints
    kind: Literal["train_sequence"] = "train_sequence"


@dataclass(frozen=True)
class Stacked:
    """Stacked observations (clauses ``stack.*``): row ``i`` is item ``(env[i], episode[i],
    t[i])`` with the stack ``frames[i]`` the implementation gave it, ``num_frames`` frames
    oldest first, each frame the item its observation decodes to (an all-zero frame decodes
    to ``(0, 0, 0)``). ``source`` ``"rollout"``: the stacks the policy received at vector
    step ``index``; ``"sample"``: the stacks of the items of sampled batch ``index``."""

    source: Literal["rollout", "sample"]
    index: int
    env: Ints
    episode: Ints
    t: Ints
    frames: tuple[tuple[Item, ...], ...]
    kind: Literal["stacked"] = "stacked"


@dataclass(frozen=True)
class Mixed:
    """One update of a hybrid run (clauses ``offline.*``): ``written``, the online items
    written since the previous update, in write order; ``batch``, the items of the update's
    batch as the implementation returned them, in its order, each decoded from its
    observation; ``offline_held``, the items the offline buffer holds after the update, in
    its storage order; ``counter``, the implementation's training-iteration counter after the
    update, ``None`` when it keeps none."""

    update: int
    written: tuple[Item, ...]
    batch: tuple[Item, ...]
    offline_held: tuple[Item, ...]
    counter: int | None
    kind: Literal["mixed"] = "mixed"


@dataclass(frozen=True)
class Arrived:
    """A fragment of an actor reaching the learner (clauses ``async.*``): arrival ``index``
    (from 0, in the order the learner received them) of actor ``actor``, delivered when the
    learner had made ``learner_version`` updates. Row ``i`` is item ``(env[i], episode[i],
    t[i])`` acted with ``action[i]``; ``version[i]`` is the policy version the implementation
    recorded for it, ``logits[i]`` the behaviour policy's logits it computed and
    ``log_prob[i]`` the log-probability of the action it stored with the item.
    ``env_steps`` is the implementation's env-step counter after this arrival."""

    index: int
    actor: int
    learner_version: int
    env: Ints
    episode: Ints
    t: Ints
    action: Ints
    version: Ints
    logits: tuple[Floats, ...]
    log_prob: Floats
    env_steps: int
    kind: Literal["arrived"] = "arrived"


@dataclass(frozen=True)
class Trained:
    """One learner update (clause ``async.lag-bounded``): the update made with ``version``
    updates before it trained on items ``(env[i], episode[i], t[i])``."""

    version: int
    env: Ints
    episode: Ints
    t: Ints
    kind: Literal["trained"] = "trained"


@dataclass(frozen=True)
class Advantages:
    """Learner-side preprocessing of one episode: one entry per row ``t`` (the extra
    bootstrap row last), with the loss mask that excludes it."""

    env: int
    episode: int
    t: Ints
    advantage: Floats
    value_target: Floats
    normalized: Floats
    loss_mask: Ints
    kind: Literal["advantages"] = "advantages"


@dataclass(frozen=True)
class CallerEpisode:
    """An episode as the learner's caller holds it, read from the object handed to the
    learner: ``before`` and ``after`` the learner call, each ``(transitions, terminated,
    truncated)`` (clause ``learner.episode-unmodified``)."""

    env: int
    episode: int
    before: Ints
    after: Ints
    kind: Literal["caller_episode"] = "caller_episode"


@dataclass(frozen=True)
class NStep:
    """n-step targets of transitions starting at ``(env, episode, t)``; ``steps`` is the number
    of rewards summed (cut at the episode end or the newest stored step)."""

    env: Ints
    episode: Ints
    t: Ints
    target: Floats
    steps: Ints
    kind: Literal["nstep"] = "nstep"


@dataclass(frozen=True)
class UpdatePlan:
    """How many gradient updates the learner makes on the batch, and the rows of each."""

    num_updates: int
    minibatch_rows: tuple[Ints, ...]
    kind: Literal["update_plan"] = "update_plan"


@dataclass(frozen=True)
class Shard:
    """The episode pieces one learner receives: rows ``start..stop-1`` of each episode."""

    learner: int
    env: Ints
    episode: Ints
    start: Ints
    stop: Ints
    kind: Literal["shard"] = "shard"


@dataclass(frozen=True)
class Hook:
    """A call of an algorithm hook (``after_update`` or ``after_train_iter``)."""

    iteration: int
    name: Literal["after_update", "after_train_iter"]
    kind: Literal["hook"] = "hook"


@dataclass(frozen=True)
class IterationEnd:
    """Counters at the end of an iteration."""

    iteration: int
    counter: int
    env_steps: int
    stored_total: int
    pending: int
    kind: Literal["iteration_end"] = "iteration_end"


@dataclass(frozen=True)
class Resume:
    """The run was saved after iteration ``iteration`` ended and goes on in a trainer restored
    from what was saved (clauses ``resume.*``). ``saved``: the items the trainer's replay
    buffer held when it was saved, ``restored``: those the restored buffer holds, each read
    from the implementation's own storage, per env in env order, oldest first (so the next
    store evicts the first of its env when the ring is full)."""

    iteration: int
    saved: tuple[Item, ...]
    restored: tuple[Item, ...]
    kind: Literal["resume"] = "resume"


@dataclass(frozen=True)
class RunEnd:
    """The run ended; ``pending`` items were still held and met ``pending_policy``."""

    iterations: int
    env_steps: int
    pending_policy: str
    env: Ints
    episode: Ints
    t: Ints
    kind: Literal["run_end"] = "run_end"


Event = Union[
    IterationStart,
    EnvStep,
    Store,
    Exclude,
    Hold,
    TrainCall,
    Update,
    Sampled,
    Priorities,
    Prioritized,
    Relabel,
    TrainSequence,
    Stacked,
    Mixed,
    Arrived,
    Trained,
    Advantages,
    CallerEpisode,
    NStep,
    UpdatePlan,
    Shard,
    Hook,
    IterationEnd,
    Resume,
    RunEnd,
]
EVENT_KINDS = tuple(cls.kind for cls in get_args(Event))


@dataclass(frozen=True)
class Trace:
    """An ordered tuple of events plus a header (format, producer, scenario)."""

    events: tuple[Event, ...]
    header: dict[str, Any] = field(default_factory=dict)

    @overload
    def of_kind(self, kind: Literal["iteration"]) -> Iterator[IterationStart]: ...
    @overload
    def of_kind(self, kind: Literal["env_step"]) -> Iterator[EnvStep]: ...
    @overload
    def of_kind(self, kind: Literal["store"]) -> Iterator[Store]: ...
    @overload
    def of_kind(self, kind: Literal["exclude"]) -> Iterator[Exclude]: ...
    @overload
    def of_kind(self, kind: Literal["hold"]) -> Iterator[Hold]: ...
    @overload
    def of_kind(self, kind: Literal["train_call"]) -> Iterator[TrainCall]: ...
    @overload
    def of_kind(self, kind: Literal["update"]) -> Iterator[Update]: ...
    @overload
    def of_kind(self, kind: Literal["sampled"]) -> Iterator[Sampled]: ...
    @overload
    def of_kind(self, kind: Literal["priorities"]) -> Iterator[Priorities]: ...
    @overload
    def of_kind(self, kind: Literal["prioritized"]) -> Iterator[Prioritized]: ...
    @overload
    def of_kind(self, kind: Literal["relabel"]) -> Iterator[Relabel]: ...
    @overload
    def of_kind(self, kind: Literal["train_sequence"]) -> Iterator[TrainSequence]: ...
    @overload
    def of_kind(self, kind: Literal["stacked"]) -> Iterator[Stacked]: ...
    @overload
    def of_kind(self, kind: Literal["mixed"]) -> Iterator[Mixed]: ...
    @overload
    def of_kind(self, kind: Literal["arrived"]) -> Iterator[Arrived]: ...
    @overload
    def of_kind(self, kind: Literal["trained"]) -> Iterator[Trained]: ...
    @overload
    def of_kind(self, kind: Literal["advantages"]) -> Iterator[Advantages]: ...
    @overload
    def of_kind(self, kind: Literal["caller_episode"]) -> Iterator[CallerEpisode]: ...
    @overload
    def of_kind(self, kind: Literal["nstep"]) -> Iterator[NStep]: ...
    @overload
    def of_kind(self, kind: Literal["update_plan"]) -> Iterator[UpdatePlan]: ...
    @overload
    def of_kind(self, kind: Literal["shard"]) -> Iterator[Shard]: ...
    @overload
    def of_kind(self, kind: Literal["hook"]) -> Iterator[Hook]: ...
    @overload
    def of_kind(self, kind: Literal["iteration_end"]) -> Iterator[IterationEnd]: ...
    @overload
    def of_kind(self, kind: Literal["resume"]) -> Iterator[Resume]: ...
    @overload
    def of_kind(self, kind: Literal["run_end"]) -> Iterator[RunEnd]: ...
    @overload
    def of_kind(self, kind: str) -> Iterator[Event]: ...
    def of_kind(self, kind: str) -> Iterator[Event]:
        """The events of one kind, in order, typed by their class when ``kind`` is a literal."""
        return (e for e in self.events if e.kind == kind)

    def to_jsonl(self) -> str:
        """The JSON Lines text: header line, then one canonical line per event."""
        header = {"format": TRACE_FORMAT, **self.header}
        lines = [canonical_json(header)]
        lines.extend(canonical_json(e) for e in self.events)
        return "\n".join(lines) + "\n"

    @classmethod
    def from_jsonl(cls, text: str) -> Trace:
        """Parse JSON Lines; errors name the line number and what is wrong
        (:mod:`xpspec.protocol.event_reader`)."""
        from xpspec.protocol.event_reader import paused_gc, read_jsonl

        with paused_gc():
            header, events = read_jsonl(text.splitlines())
            return cls(tuple(events), header)

    def to_jsonable(self) -> list[Any]:
        return [to_jsonable(e) for e in self.events]
