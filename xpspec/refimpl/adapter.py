"""The reference adapter: refimpl speaking the adapter protocol (:mod:`xpspec.protocol.adapter`).

It is the conformance suite's oracle (the reference trace of a scenario without a committed
vector, and refimpl run as a declared variant's model), it passes every clause by construction
of the spec, and it is the model for adapters of real frameworks. It is registered as the
adapter ``refimpl``.

The learner and relabel operations feed refimpl's learner-side and relabeling functions with
toy-env data; their conventions (which data, row numbering, random draws) are stated on
:meth:`RefimplAdapter.run_learner` and :meth:`RefimplAdapter.run_relabel`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from xpspec.protocol.adapter import PROTOCOL_VERSION, AdapterInfo
from xpspec.protocol.sampling import SamplingSpec
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
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import (
    Advantages,
    CallerEpisode,
    Event,
    NStep,
    Relabel,
    Sampled,
    Shard,
    Trace,
    UpdatePlan,
)
from xpspec.refimpl import EnvSpec, TrainerConfig
from xpspec.refimpl import learner as lrn
from xpspec.refimpl.asynchronous import Actors, run_async
from xpspec.refimpl.checkpoint import run_checkpointed
from xpspec.refimpl.offline import Mixer, run_offline
from xpspec.refimpl.priority import PriorityModel, run_prioritized
from xpspec.refimpl.recorder import Recorder, windows_of
from xpspec.refimpl.recurrent import CountingLearner, run_recurrent
from xpspec.refimpl.relabel import Relabeled, SampledTransitions, StoredEpisode, relabel
from xpspec.refimpl.replay import NoValidWindow, ReplayBuffer
from xpspec.refimpl.stack import Stacker, run_stack
from xpspec.refimpl.toy_envs.batched import TimeStep, ToyBatchEnv
from xpspec.refimpl.trainer import train

__all__ = ["RefimplAdapter"]

_FIELDS = {
    "observation": ((3,), torch.float32),
    "step_type": ((), torch.int64),
    "reward": ((), torch.float32),
    "discount": ((), torch.float32),
}


_LAST = int(StepType.LAST)
_PAIRS = SamplingSpec(window_length=2, boundary="forbid")
"""Relabeling samples transitions as windows (t, t + 1) that never cross an episode end."""


def _ints(values: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(v) for v in values.tolist())


def _floats(values: torch.Tensor) -> tuple[float, ...]:
    return tuple(float(v) for v in values.tolist())


@dataclass(frozen=True)
class _Step:
    """One observed time step of one env: its ``(env, episode, t)`` and stored fields."""

    item: tuple[int, int, int]
    step_type: int
    reward: float
    discount: float


@dataclass(frozen=True)
class _Piece:
    """Time steps ``0..L`` of one episode of one env: a complete episode (ending at LAST) or
    the env's trailing, in-progress chunk."""

    env: int
    episode: int
    steps: tuple[_Step, ...]

    @property
    def length(self) -> int:
        return len(self.steps) - 1


def _observe(scenario: LearnerScenario) -> list[list[_Step]]:
    """The first ``scenario.steps`` time steps of every env, the reset's FIRST included."""
    env = ToyBatchEnv(scenario.env, scenario.seed)
    ts = env.reset()
    action = torch.zeros(env.num_envs, dtype=torch.int64)
    streams: list[list[_Step]] = [[] for _ in range(env.num_envs)]
    for n in range(scenario.steps):
        if n:
            ts = env.step(action)
        columns = zip(
            ts.observation.to(torch.int64).tolist(),
            ts.step_type.tolist(),
            ts.reward.tolist(),
            ts.discount.tolist(),
        )
        for stream, (obs, step_type, reward, discount) in zip(streams, columns):
            stream.append(_Step((obs[0], obs[1], obs[2]), step_type, reward, discount))
    return streams


def _pieces(streams: Sequence[Sequence[_Step]]) -> list[_Piece]:
    """Each env's time steps cut at LAST, env-major; a trailing chunk with no transition (only
    its FIRST observed) is left out."""
    pieces = []
    for stream in streams:
        start = 0
        for j, step in enumerate(stream):
            if step.step_type == _LAST or j == len(stream) - 1:
                if j > start:
                    item = stream[start].item
                    pieces.append(_Piece(item[0], item[1], tuple(stream[start : j + 1])))
                start = j + 1
    return pieces


def _held(episode: lrn.Episode) -> tuple[int, int, int]:
    """``(transitions, terminated, truncated)`` of an episode object, read from it."""
    return (int(episode.actions.shape[0]), int(episode.terminated), int(episode.truncated))


class RefimplAdapter:
    """Adapter over :mod:`xpspec.refimpl`.

    The learner and relabel operations call refimpl through small methods
    (``_learner_episode``, ``_advantage_rows``, ``_nstep_returns``, ``_update_plan``,
    ``_shard``, ``_relabel_batch``); a subclass replaces one of them to run a variant, or
    ``replay_buffer``, the buffer class :meth:`run_replay` fills and samples,
    ``priority_model``, the priorities a prioritized replay scenario samples by,
    ``recurrent_learner``, the counting network a recurrent scenario trains,
    ``stacker``, the frame stacker of a stack scenario, ``mixer``, the hybrid sampler of an
    offline scenario, or ``checkpoint_forgets``, the parts of a saved trainer its restore leaves out.
    ``stacker``, the frame stacker of a stack scenario, ``actors``, the actors and learner of
    an async scenario, or ``checkpoint_forgets``, the parts of a saved trainer its restore leaves out.
    """

    replay_buffer: type[ReplayBuffer] = ReplayBuffer
    priority_model: type[PriorityModel] = PriorityModel
    recurrent_learner: type[CountingLearner] = CountingLearner
    stacker: type[Stacker] = Stacker
    mixer: type[Mixer] = Mixer
    actors: type[Actors] = Actors
    checkpoint_forgets: tuple[str, ...] = ()
    """Parts of a saved trainer a restore leaves out (:data:`xpspec.refimpl.checkpoint.PARTS`;
    none: the spec's restore)."""

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name="refimpl",
            framework="xpspec refimpl",
            framework_version="0.1.0",
            protocol_version=PROTOCOL_VERSION,
            capabilities=(
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
                "checkpoint",
                "stack",
                "offline",
                "async",
            ),
            extra_versions={"torch": torch.__version__},
        )

    def smoke(self) -> None:
        train(EnvSpec(), TrainerConfig(num_iterations=1), record=False)

    def run_env(self, scenario: EnvScenario) -> Trace:
        env = ToyBatchEnv(scenario.env, scenario.seed)
        recorder = Recorder()
        ts = env.reset()
        zeros = torch.zeros(env.num_envs, dtype=torch.int64)
        for _ in range(scenario.steps):
            rows = {
                "observation": ts.observation,
                "step_type": ts.step_type,
                "reward": ts.reward,
                "discount": ts.discount,
                "policy_state": ts.observation[:, 2],
                "action": zeros,
            }
            recorder.env_step(0, rows)
            ts = env.step(zeros)
        return recorder.trace({"producer": "refimpl"})

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        """One train run; a scenario with a checkpoint spec is saved and resumed by
        :func:`xpspec.refimpl.checkpoint.run_checkpointed` (clauses ``resume.*``)."""
        if scenario.checkpoint is not None:
            return run_checkpointed(scenario, self.checkpoint_forgets)
        result = train(
            scenario.env, scenario.trainer, scenario.preprocess, scenario.sampling, scenario.seed
        )
        return result.trace

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        """Replay sampling on its own (clauses ``replay.*``): ``fill_steps`` vector steps of
        the toy env, every item stored (one :class:`Store` event per vector step), then
        ``draws`` calls of :meth:`xpspec.refimpl.replay.ReplayBuffer.sample` with one seeded
        generator, one :class:`Sampled` event each. A draw from a buffer holding no valid
        window is an empty :class:`Sampled` event (``replay.no-window``). A scenario with a
        priority spec is run by :func:`xpspec.refimpl.priority.run_prioritized`."""
        if scenario.priority is not None:
            return run_prioritized(scenario, self.priority_model)
        env = ToyBatchEnv(scenario.env, scenario.seed)
        buffer = self.replay_buffer(env.num_envs, scenario.capacity, _FIELDS)
        recorder = Recorder()
        _fill(env, scenario.fill_steps, buffer, recorder)
        events = list(recorder.trace().events)
        generator = torch.Generator().manual_seed(scenario.seed)
        for draw in range(scenario.draws):
            try:
                s = buffer.sample(scenario.batch_size, scenario.sampling, generator)
            except NoValidWindow:  # replay.no-window: an empty draw, never made-up windows
                events.append(Sampled(draw, ()))
                continue
            events.append(Sampled(draw, windows_of(s.data["observation"], s.mask)))
        return Trace(tuple(events), {"producer": "refimpl"})

    # -- learner ------------------------------------------------------------------------------
    def run_learner(self, scenario: LearnerScenario) -> Trace:
        """Learner-side preprocessing of toy-env episodes (clauses ``learner.*``).

        Data: the first ``steps`` time steps of every env (the reset's FIRST included, as in
        :meth:`run_env`), cut at each LAST into episodes; each env's trailing chunk is in
        progress (a chunk holding only its FIRST has no transition and is left out). The
        episodes are taken env-major, oldest first (the *canonical order*); ``V(s) =
        value_scale * t(s)`` and the rewards are the env's.

        Events, in this order:

        - one :class:`Advantages` per episode, rows ``t = 0..L`` (the bootstrap row last),
          from :func:`xpspec.refimpl.learner.episode_advantages` (variant ``advantage_variant``; the
          sample std iff ``normalization`` is ``"sample"``) over all episodes together, so
          normalisation uses the rows of the whole batch;
        - one :class:`CallerEpisode` per episode: the episode object handed to the learner,
          read before and after the call (variant ``episode_handling``);
        - one :class:`NStep` with the targets of every transition start (every non-LAST step
          that has an observed successor), canonical order, from
          :func:`xpspec.refimpl.learner.nstep_returns` (variant ``nstep_variant``) with ``n = nstep``
          on the window of the env's next ``n`` observed steps (steps past the newest observed
          one unstored);
        - one :class:`UpdatePlan`: :func:`xpspec.refimpl.learner.minibatch_plan` (variant
          ``update_variant``) over the ``N`` training rows (bootstrap rows excluded),
          numbered ``0..N-1`` in canonical order (episode by episode, ``t`` ascending),
          shuffled with ``torch.Generator().manual_seed(seed)``; with ``update_variant``
          ``"rllib-2.60"`` over the ``N' = N + #episodes`` rows, bootstrap rows included and
          numbered in the same order (each episode's bootstrap row after its ``L`` rows); no
          rows, no updates;
        - one :class:`Shard` per learner (possibly empty), from
          :func:`xpspec.refimpl.learner.shard_episodes` (variant ``shard_variant``) over the
          episodes' transition counts; a piece ``start..stop`` names training rows.
        """
        streams = _observe(scenario)
        pieces = _pieces(streams)
        events: list[Event] = []
        handed: list[CallerEpisode] = []
        if pieces:
            episodes = [self._learner_episode(p, scenario) for p in pieces]
            before = [_held(episode) for episode in episodes]
            rows = self._advantage_rows(episodes, scenario)
            after = [self._after_learner(episode, scenario) for episode in episodes]
            handed = [
                CallerEpisode(p.env, p.episode, b, a) for p, b, a in zip(pieces, before, after)
            ]
            for i, piece in enumerate(pieces):
                at = rows.episode == i
                events.append(
                    Advantages(
                        piece.env,
                        piece.episode,
                        _ints(rows.row[at]),
                        _floats(rows.advantages[at]),
                        _floats(rows.value_targets[at]),
                        _floats(rows.normalized_advantages[at]),
                        _ints(rows.loss_mask[at]),
                    )
                )
        events.extend(handed)
        events.append(self._nstep_event(streams, scenario))
        num_rows = sum(p.length for p in pieces)
        if scenario.update_variant == "rllib-2.60":  # bootstrap rows are rows
            num_rows += len(pieces)
        events.append(self._update_plan(num_rows, scenario))
        slices = self._shard([p.length for p in pieces], scenario)
        for learner, group in enumerate(slices):
            events.append(
                Shard(
                    learner,
                    tuple(pieces[s.episode].env for s in group),
                    tuple(pieces[s.episode].episode for s in group),
                    tuple(s.start for s in group),
                    tuple(s.stop for s in group),
                )
            )
        return Trace(tuple(events), {"producer": "refimpl"})

    def _learner_episode(self, piece: _Piece, scenario: LearnerScenario) -> lrn.Episode:
        """The episode's tensors: observations ``[e, k, t]``, rewards into ``t = 1..L``, how it
        ended (from the LAST's discount), and ``V = value_scale * t``."""
        last = piece.steps[-1]
        ended = last.step_type == _LAST
        values = [float(scenario.value_scale * s.item[2]) for s in piece.steps]
        return lrn.Episode(
            observations=torch.tensor([s.item for s in piece.steps], dtype=torch.float64),
            actions=torch.zeros(piece.length, dtype=torch.int64),
            rewards=torch.tensor([s.reward for s in piece.steps[1:]], dtype=torch.float64),
            terminated=ended and last.discount == 0.0,
            truncated=ended and last.discount != 0.0,
            values=torch.tensor(values, dtype=torch.float64),
        )

    def _after_learner(self, episode: lrn.Episode, scenario: LearnerScenario) -> tuple[int, ...]:
        """What the caller's episode object holds once the learner is done with it: refimpl
        computes into new tensors, so what it held before. Variant ``rllib-2.60`` of
        ``episode_handling`` models RLlib 2.60.0's AddOneTsToEpisodesAndTruncate, which grows
        the episode by the bootstrap step and flags a not-done episode truncated, in place."""
        held = _held(episode)
        if scenario.episode_handling == "rllib-2.60":
            length, terminated, truncated = held
            return (length + 1, terminated, int(truncated or not terminated))
        return held

    def _advantage_rows(
        self, episodes: Sequence[lrn.Episode], scenario: LearnerScenario
    ) -> lrn.AdvantageRows:
        return lrn.episode_advantages(
            episodes,
            float(scenario.gamma),
            float(scenario.lam),
            variant=scenario.advantage_variant,
            correction=1 if scenario.normalization == "sample" else 0,
            layout=scenario.layout,
        )

    def _nstep_event(self, streams: Sequence[Sequence[_Step]], scenario: LearnerScenario) -> NStep:
        if scenario.layout == "rows":
            return self._nstep_rows_event(streams, scenario)
        n, scale = scenario.nstep, scenario.value_scale
        starts: list[tuple[int, int, int]] = []
        windows: list[list[tuple[float, float, int, float, bool]]] = []
        for stream in streams:
            for j, step in enumerate(stream[:-1]):
                if step.step_type == _LAST:
                    continue
                row = [
                    (s.reward, float(scale * s.item[2]), s.step_type, s.discount, True)
                    for s in stream[j : j + n + 1]
                ]
                row += [(0.0, 0.0, int(StepType.MID), 1.0, False)] * (n + 1 - len(row))
                starts.append(step.item)
                windows.append(row)
        if not starts:
            return NStep((), (), (), (), ())
        reward, value, step_type, discount, mask = (
            torch.tensor([[w[i] for w in row] for row in windows], dtype=dtype)
            for i, dtype in enumerate(
                (torch.float64, torch.float64, torch.int64, torch.float64, torch.bool)
            )
        )
        res = self._nstep_returns(reward, value, step_type, discount, mask, scenario)
        env, episode, t = zip(*starts)
        return NStep(env, episode, t, _floats(res.target), _ints(res.steps))

    def _nstep_rows_event(
        self, streams: Sequence[Sequence[_Step]], scenario: LearnerScenario
    ) -> NStep:
        """The same targets from :func:`xpspec.refimpl.learner.batch_nstep_returns` on the rows
        layout: one column per env holding its observed steps (every env has ``steps``)."""

        def column(field: str, dtype: torch.dtype) -> torch.Tensor:
            return torch.tensor([[getattr(s, field) for s in st] for st in streams], dtype=dtype).T

        t = torch.tensor([[s.item[2] for s in st] for st in streams], dtype=torch.float64).T
        batch = lrn.TimeMajorBatch(
            step_type=column("step_type", torch.int64),
            reward=column("reward", torch.float64),
            discount=column("discount", torch.float64),
            observation=t[..., None],
            action=torch.zeros(t.shape, dtype=torch.int64),
            value=float(scenario.value_scale) * t,
        )
        res = lrn.batch_nstep_returns(batch, float(scenario.gamma), scenario.nstep)
        starts = [
            (e, j)
            for e, stream in enumerate(streams)
            for j, step in enumerate(stream[:-1])
            if step.step_type != _LAST
        ]
        if not starts:
            return NStep((), (), (), (), ())
        env, episode, t_ = zip(*(streams[e][j].item for e, j in starts))
        return NStep(
            env,
            episode,
            t_,
            _floats(torch.stack([res.target[j, e] for e, j in starts])),
            _ints(torch.stack([res.steps[j, e] for e, j in starts])),
        )

    def _nstep_returns(
        self,
        reward: torch.Tensor,
        value: torch.Tensor,
        step_type: torch.Tensor,
        discount: torch.Tensor,
        mask: torch.Tensor,
        scenario: LearnerScenario,
    ) -> lrn.NStepReturns:
        return lrn.nstep_returns(
            reward,
            value,
            step_type,
            discount,
            mask,
            gamma=float(scenario.gamma),
            n=scenario.nstep,
            variant=scenario.nstep_variant,
        )

    def _update_plan(self, num_rows: int, scenario: LearnerScenario) -> UpdatePlan:
        if num_rows == 0:  # the spec makes no update; RLlib and ALF have no empty batch
            return UpdatePlan(0, ())
        generator = torch.Generator().manual_seed(scenario.seed)
        variant = scenario.update_variant
        count = lrn.num_gradient_updates(
            num_rows, scenario.num_epochs, scenario.minibatch_size, variant=variant
        )
        plan = lrn.minibatch_plan(
            num_rows,
            scenario.num_epochs,
            scenario.minibatch_size,
            generator=generator,
            variant=variant,
        )
        return UpdatePlan(count, tuple(mb.rows for mb in plan))

    def _shard(
        self, lengths: Sequence[int], scenario: LearnerScenario
    ) -> tuple[tuple[lrn.EpisodeSlice, ...], ...]:
        return lrn.shard_episodes(lengths, scenario.num_learners, variant=scenario.shard_variant)

    # -- relabel ------------------------------------------------------------------------------
    def run_recurrent(self, scenario: RecurrentScenario) -> Trace:
        """Recurrent state in training (clauses ``recurrent.*``), run by
        :func:`xpspec.refimpl.recurrent.run_recurrent` with :attr:`recurrent_learner`."""
        return run_recurrent(scenario, self.recurrent_learner)

    def run_stack(self, scenario: StackScenario) -> Trace:
        """Frame stacking (clauses ``stack.*``), run by
        :func:`xpspec.refimpl.stack.run_stack` with :attr:`stacker`."""
        return run_stack(scenario, self.stacker)

    def run_offline(self, scenario: OfflineScenario) -> Trace:
        """Offline and hybrid replay (clauses ``offline.*``), run by
        :func:`xpspec.refimpl.offline.run_offline` with :attr:`mixer`."""
        return run_offline(scenario, self.mixer)

    def run_async(self, scenario: AsyncScenario) -> Trace:
        """Asynchronous actors and policy lag (clauses ``async.*``), run by
        :func:`xpspec.refimpl.asynchronous.run_async` with :attr:`actors`."""
        return run_async(scenario, self.actors)

    def run_relabel(self, scenario: RelabelScenario) -> Trace:
        """Hindsight relabeling at sample time (clauses ``relabel.*``).

        Fill: ``fill_steps`` time steps of every env are stored, each in its env's ring of
        ``capacity`` items (one :class:`Store` event per vector step, as in
        :meth:`run_replay`). The buffer then holds, per env, its newest ``capacity`` items;
        each episode present is a :class:`xpspec.refimpl.relabel.StoredEpisode` of its stored steps
        ``t_start..t_end`` with achieved goals ``[e, k, t]``, complete iff ``t_end`` is its
        LAST.

        Draws: one ``torch.Generator().manual_seed(seed)`` serves sampling and relabeling.
        Each draw samples ``batch_size`` windows of length 2 uniformly among those inside one
        episode (``SamplingSpec(window_length=2, boundary="forbid")``), so row ``i`` is the
        transition from ``(e, k, t)`` to its stored successor ``t + 1`` with the stored
        desired goal of ``t`` and the stored reward of ``t + 1``; then
        :func:`xpspec.refimpl.relabel.relabel` (variant ``spec``, or ``alf`` under selection
        ``bernoulli``; the scenario's strategy and ratio) relabels it, and one :class:`Relabel`
        event records each row's goal source ``(env, episode, t)`` (``(-1, -1, -1)`` if kept),
        its goal as the relabeled batch holds it, and its reward.
        """
        env = ToyBatchEnv(scenario.env, scenario.seed)
        fields = {**_FIELDS, "desired_goal": ((3,), torch.float32)}
        buffer = ReplayBuffer(env.num_envs, scenario.capacity, fields)
        recorder = Recorder()
        written: list[list[tuple[tuple[int, int, int], int]]] = [[] for _ in range(env.num_envs)]
        for ts in _fill(env, scenario.fill_steps, buffer, recorder):
            for e, (obs, step_type) in enumerate(
                zip(ts.observation.to(torch.int64).tolist(), ts.step_type.tolist())
            ):
                written[e].append(((obs[0], obs[1], obs[2]), step_type))
        store = _stored_episodes([w[-scenario.capacity :] for w in written])
        index = {(ep.env, ep.episode): i for i, ep in enumerate(store)}
        events = list(recorder.trace().events)
        generator = torch.Generator().manual_seed(scenario.seed)
        for draw in range(scenario.draws):
            s = buffer.sample(scenario.batch_size, _PAIRS, generator)
            first = s.data["observation"][:, 0].to(torch.int64)
            sample = SampledTransitions(
                episode_index=torch.tensor([index[(e, k)] for e, k, _ in first.tolist()]),
                t=first[:, 2].clone(),
                desired_goal=s.data["desired_goal"][:, 0],
                reward=s.data["reward"][:, 1],
            )
            out = self._relabel_batch(store, sample, scenario, generator)
            sources = [source or (-1, -1, -1) for source in out.sources]
            events.append(
                Relabel(
                    draw,
                    _ints(first[:, 0]),
                    _ints(first[:, 1]),
                    _ints(first[:, 2]),
                    tuple(int(source[0]) for source in sources),
                    tuple(int(source[1]) for source in sources),
                    _ints(out.source_t),
                    tuple(_floats(goal) for goal in out.desired_goal),
                    _floats(out.reward),
                )
            )
        return Trace(tuple(events), {"producer": "refimpl"})

    def _relabel_batch(
        self,
        store: Sequence[StoredEpisode],
        sample: SampledTransitions,
        scenario: RelabelScenario,
        generator: torch.Generator,
    ) -> Relabeled:
        return relabel(
            store,
            sample,
            strategy=scenario.strategy,
            ratio=scenario.ratio,
            variant="alf" if scenario.selection == "bernoulli" else "spec",
            generator=generator,
        )


def _fill(env: ToyBatchEnv, steps: int, buffer: ReplayBuffer, recorder: Recorder) -> list[TimeStep]:
    """Store every item of ``steps`` vector steps of ``env`` (the reset's time step first) in
    ``buffer``, with one :class:`Store` event per vector step; the stored time steps, oldest
    first. A goal env's desired goals are stored where the buffer has that column."""
    action = torch.zeros(env.num_envs, dtype=torch.int64)
    stored: list[TimeStep] = []
    ts = env.reset()
    for n in range(steps):
        if n:
            ts = env.step(action)
        rows = {
            "observation": ts.observation,
            "step_type": ts.step_type,
            "reward": ts.reward,
            "discount": ts.discount,
            "annotation": torch.zeros(env.num_envs),
        }
        if "desired_goal" in buffer.fields:
            assert ts.desired_goal is not None
            rows["desired_goal"] = ts.desired_goal
        buffer.add_row({k: rows[k] for k in buffer.fields})
        recorder.store(0, rows)
        stored.append(ts)
    return stored


def _stored_episodes(
    live: Sequence[Sequence[tuple[tuple[int, int, int], int]]],
) -> list[StoredEpisode]:
    """The episodes each env's stored items belong to, env-major, oldest first; the achieved
    goal of ``(e, k, t)`` is ``[e, k, t]``."""
    store = []
    for items in live:
        groups: dict[int, list[tuple[tuple[int, int, int], int]]] = {}
        for item, step_type in items:
            groups.setdefault(item[1], []).append((item, step_type))
        for k, group in groups.items():
            goals = torch.tensor([item for item, _ in group], dtype=torch.float32)
            complete = group[-1][1] == _LAST
            store.append(StoredEpisode(group[0][0][0], k, goals, complete, group[0][0][2]))
    return store
