"""Scenarios: frozen, JSON-serialisable inputs of the conformance suite.

A scenario says, in the spec's vocabulary, what to run: the toy env, the trainer knobs, the
preprocessing, the sampling and the seed. Each family of operations has its own scenario type,
told apart in JSON by ``kind``. Construction validates every field; an invalid scenario
raises :class:`~xpspec.protocol.errors.ConfigError` naming the field, the value and what is allowed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Final, Literal, Union

from xpspec.protocol.asynchronous import AsyncScenario
from xpspec.protocol.budget import check_budget
from xpspec.protocol.checkpoint import CheckpointSpec
from xpspec.protocol.codec import canonical_json, from_jsonable, parse_fraction
from xpspec.protocol.config import TrainerConfig
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.errors import ConfigError
from xpspec.protocol.preprocessors import Identity, PreprocessorSpec, require_compatible
from xpspec.protocol.priority import PrioritySpec
from xpspec.protocol.sampling import SamplingSpec

__all__ = [
    "MAX_SEED",
    "AsyncScenario",
    "EnvScenario",
    "LearnerScenario",
    "OfflineScenario",
    "RecurrentScenario",
    "RelabelScenario",
    "ReplayScenario",
    "Scenario",
    "StackScenario",
    "TrainerScenario",
    "reference_form",
    "scenario_from_json",
    "scenario_to_json",
]


MAX_SEED: Final = 2**32 - 1
"""The largest seed: every consumer of a scenario's seed takes it. torch's generators take
seeds below 2**64 and the toy env hashes the seed's low 64 bits, but numpy's global seeding
(``np.random.seed``, which the SB3, Tianshou and RLlib adapters use) takes only seeds below
2**32."""


def _check_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(name, value, f"an integer >= {minimum}")


def _check_seed(value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_SEED:
        raise ConfigError(
            "seed",
            value,
            f"an integer in [0, {MAX_SEED}] (2**32 - 1, the largest seed numpy takes)",
        )


def _require_next_step(env: EnvSpec) -> None:
    """Learner, relabel and recurrent scenarios cut episodes at LAST: their data is defined with the
    spec's next-step auto-reset (the framework's own reset convention is an env matter)."""
    if env.autoreset != "next-step":
        raise ConfigError("env.autoreset", env.autoreset, "'next-step' for this kind of scenario")


@dataclass(frozen=True)
class TrainerScenario:
    """A full train run: unroll, preprocess, store, train (capability ``trainer``).

    With ``checkpoint`` the run is saved after an iteration and resumed in a fresh trainer
    (capability ``checkpoint``, clauses ``resume.*``)."""

    env: EnvSpec
    trainer: TrainerConfig
    preprocess: PreprocessorSpec = field(default_factory=Identity)
    sampling: SamplingSpec = field(default_factory=SamplingSpec)
    seed: int = 0
    # -- checkpoint and resume (clauses resume.*) --
    checkpoint: CheckpointSpec | None = None
    kind: Literal["trainer"] = "trainer"

    def __post_init__(self) -> None:
        _check_seed(self.seed)
        require_compatible(self.preprocess, self.env.autoreset)
        _check_checkpoint(self)
        if self.sampling.window_length != self.trainer.mini_batch_length:
            object.__setattr__(
                self, "sampling", _with_length(self.sampling, self.trainer.mini_batch_length)
            )
        check_budget(self)


def _check_checkpoint(scenario: TrainerScenario) -> None:
    """A checkpoint needs a run counted in iterations that goes on after it (``resume.*``)."""
    spec, cfg = scenario.checkpoint, scenario.trainer
    if spec is None:
        return
    if not cfg.num_iterations or cfg.num_env_steps or cfg.drain is not None:
        raise ConfigError(
            "checkpoint",
            f"num_iterations={cfg.num_iterations}, num_env_steps={cfg.num_env_steps}",
            "a run of num_iterations alone (no env-step budget, no drain mode)",
        )
    if spec.after_iteration >= cfg.num_iterations:
        raise ConfigError(
            "checkpoint.after_iteration",
            spec.after_iteration,
            f"below trainer.num_iterations ({cfg.num_iterations}): the run must go on",
        )


def _with_length(sampling: SamplingSpec, length: int) -> SamplingSpec:
    return replace(sampling, window_length=length)


@dataclass(frozen=True)
class ReplayScenario:
    """Fill a replay buffer with ``fill_steps`` vector steps of the toy env (every item
    stored), then draw ``draws`` batches of ``batch_size`` windows (capability ``replay``).

    With ``priority`` the draws are prioritized (capability ``priorities``, clauses
    ``priority.*``): after each draw the sampled windows' priorities are updated by the
    spec's rule and ``priority.add_steps`` more vector steps are stored. It needs period 1,
    boundary policy ``cross`` or ``forbid`` and the ``uniform-windows`` distribution (the
    priorities replace the distribution)."""

    env: EnvSpec
    capacity: int
    fill_steps: int
    sampling: SamplingSpec = field(default_factory=SamplingSpec)
    batch_size: int = 16
    draws: int = 1
    seed: int = 0
    priority: PrioritySpec | None = None
    kind: Literal["replay"] = "replay"

    def __post_init__(self) -> None:
        _check_int("capacity", self.capacity, 1)
        _check_int("fill_steps", self.fill_steps, 0)
        _check_int("batch_size", self.batch_size, 1)
        _check_int("draws", self.draws, 1)
        _check_seed(self.seed)
        if self.sampling.window_length > self.capacity:
            raise ConfigError(
                "sampling.window_length",
                self.sampling.window_length,
                f"at most capacity ({self.capacity})",
            )
        if self.priority is not None:
            s = self.sampling
            if s.period != 1 or s.boundary == "pad" or s.distribution != "uniform-windows":
                raise ConfigError(
                    "sampling",
                    f"period={s.period}, boundary={s.boundary!r}, distribution={s.distribution!r}",
                    "period 1, boundary 'cross' or 'forbid' and distribution 'uniform-windows' "
                    "with a priority spec",
                )
        check_budget(self)


@dataclass(frozen=True)
class EnvScenario:
    """Step the toy env ``steps`` vector steps through the framework's own env handling
    (capability ``env``)."""

    env: EnvSpec
    steps: int
    seed: int = 0
    kind: Literal["env"] = "env"

    def __post_init__(self) -> None:
        _check_int("steps", self.steps, 1)
        _check_seed(self.seed)
        check_budget(self)


@dataclass(frozen=True)
class LearnerScenario:
    """Learner-side preprocessing of the episodes the toy env produces in ``steps`` vector
    steps (each env's trailing episode is in progress), with ``V(s) = value_scale * t(s)``
    (capability ``learner``): GAE and value targets, advantage normalisation, n-step
    targets, the update plan for ``num_epochs`` x minibatches of ``minibatch_size`` rows,
    and sharding over ``num_learners``.

    The variant fields select a spec variant of one clause each (``"spec"`` is the clause
    itself); refimpl runs them and the checks verify them (:mod:`xpspec.conformance.variants`):
    ``advantage_variant`` and ``normalization`` (``learner.stats-exclude-bootstrap``: RLlib
    2.60's normalisation over every row, bootstrap rows included; the Bessel-corrected
    ``"sample"`` std), ``nstep_variant`` (``learner.nstep-episode-end``), ``update_variant``
    (``learner.update-count``), ``shard_variant`` (``learner.shard-episodes``) and
    ``episode_handling`` (``learner.episode-unmodified``: RLlib 2.60's in-place growth of the
    caller's episodes).

    ``layout`` chooses how refimpl computes GAE and n-step targets, per episode or on the rows
    layout; clause ``learner.gae`` says both give the same numbers, so the layout is no part
    of what a trace must be (:func:`reference_form`). It needs the ``"spec"`` advantage and
    n-step variants; other implementations compute on their own layout and ignore it."""

    env: EnvSpec
    steps: int
    gamma: Fraction = Fraction(9, 10)
    lam: Fraction = Fraction(3, 4)
    value_scale: Fraction = Fraction(1, 2)
    nstep: int = 3
    num_epochs: int = 2
    minibatch_size: int = 4
    num_learners: int = 2
    seed: int = 0
    advantage_variant: Literal["spec", "rllib-2.60"] = "spec"
    normalization: Literal["population", "sample"] = "population"
    nstep_variant: Literal["spec", "rllib-2.60"] = "spec"
    update_variant: Literal["spec", "rllib-2.60", "alf"] = "spec"
    shard_variant: Literal["spec", "rllib-2.60"] = "spec"
    episode_handling: Literal["spec", "rllib-2.60"] = "spec"
    layout: Literal["episodes", "rows"] = "episodes"
    kind: Literal["learner"] = "learner"

    def __post_init__(self) -> None:
        _require_next_step(self.env)
        for name, allowed in (
            ("advantage_variant", ("spec", "rllib-2.60")),
            ("normalization", ("population", "sample")),
            ("nstep_variant", ("spec", "rllib-2.60")),
            ("update_variant", ("spec", "rllib-2.60", "alf")),
            ("shard_variant", ("spec", "rllib-2.60")),
            ("episode_handling", ("spec", "rllib-2.60")),
            ("layout", ("episodes", "rows")),
        ):
            if getattr(self, name) not in allowed:
                raise ConfigError(name, getattr(self, name), " or ".join(map(repr, allowed)))
        if self.layout == "rows" and "rllib-2.60" in (self.advantage_variant, self.nstep_variant):
            raise ConfigError(
                "layout", self.layout, "'episodes' with an advantage or n-step variant"
            )
        for name, minimum in (
            ("steps", 1),
            ("nstep", 1),
            ("num_epochs", 1),
            ("minibatch_size", 1),
            ("num_learners", 1),
        ):
            _check_int(name, getattr(self, name), minimum)
        _check_seed(self.seed)
        for name in ("gamma", "lam"):
            value = parse_fraction(name, getattr(self, name))
            if not 0 <= value <= 1:
                raise ConfigError(name, str(value), "a rational in [0, 1]")
            object.__setattr__(self, name, value)
        object.__setattr__(self, "value_scale", parse_fraction("value_scale", self.value_scale))
        check_budget(self)


@dataclass(frozen=True)
class RelabelScenario:
    """Fill a buffer with ``fill_steps`` vector steps of a goal env, then draw ``draws``
    batches of ``batch_size`` transitions and relabel them with ``strategy`` at ``ratio``
    (capability ``relabel``)."""

    env: EnvSpec
    fill_steps: int
    capacity: int = 64
    strategy: Literal["future", "final", "episode"] = "future"
    ratio: Fraction = Fraction(1, 2)
    batch_size: int = 32
    draws: int = 4
    seed: int = 0
    # relabel.ratio: "exact" relabels floor(ratio * B) rows of each batch; "bernoulli" each
    # row independently with probability ratio, in batches of at most B transitions (variant
    # alf-bernoulli; modelled for strategy future only).
    selection: Literal["exact", "bernoulli"] = "exact"
    kind: Literal["relabel"] = "relabel"

    def __post_init__(self) -> None:
        _require_next_step(self.env)
        if not self.env.goals:
            raise ConfigError("env.goals", self.env.goals, "true for relabeling")
        for name, minimum in (
            ("fill_steps", 2),
            ("capacity", 2),
            ("batch_size", 1),
            ("draws", 1),
        ):
            _check_int(name, getattr(self, name), minimum)
        _check_seed(self.seed)
        if self.strategy not in ("future", "final", "episode"):
            raise ConfigError("strategy", self.strategy, "'future', 'final' or 'episode'")
        if self.selection not in ("exact", "bernoulli"):
            raise ConfigError("selection", self.selection, "'exact' or 'bernoulli'")
        if self.selection == "bernoulli" and self.strategy != "future":
            raise ConfigError(
                "strategy", self.strategy, "'future' with selection 'bernoulli' (variant alf)"
            )
        ratio = parse_fraction("ratio", self.ratio)
        if not 0 <= ratio <= 1:
            raise ConfigError("ratio", str(ratio), "a rational in [0, 1]")
        object.__setattr__(self, "ratio", ratio)
        check_budget(self)


@dataclass(frozen=True)
class RecurrentScenario:
    """Recurrent state in training (capability ``recurrent``, clauses ``recurrent.*``).

    The toy env runs ``steps`` vector steps under a counting recurrent policy: the state it
    returns is the state it received plus one, and the initial state is 0 (so under
    ``timestep.state-reset`` the state received at item (e, j, t) is t). The implementation
    stores that experience with each step's policy state and trains a recurrent learner (the
    same counting network) on sequences of ``sequence_length`` positions taken from it by its
    own rule (replay windows drawn ``draws`` times ``batch_size`` at a time, or rollout
    chunks), the first ``burn_in`` positions of each only warming the state. ``boundary``:
    ``"cross"`` sequences run on across an episode end (the state is reset at the FIRST
    inside), ``"pad"`` a sequence stops at its episode's LAST and is padded to
    ``sequence_length``. ``initial_state`` selects ``recurrent.initial-state``'s variant:
    ``"stored"`` (the clause) or ``"zeros"`` (variant zero-start).

    With boundary ``"cross"`` a sequence holds ``sequence_length`` consecutive stored steps
    of one env, so ``steps`` must be at least ``sequence_length``."""

    env: EnvSpec
    steps: int
    sequence_length: int
    burn_in: int = 0
    boundary: Literal["cross", "pad"] = "cross"
    batch_size: int = 4
    draws: int = 2
    seed: int = 0
    initial_state: Literal["stored", "zeros"] = "stored"
    kind: Literal["recurrent"] = "recurrent"

    def __post_init__(self) -> None:
        _require_next_step(self.env)
        for name, minimum in (
            ("steps", 1),
            ("sequence_length", 1),
            ("burn_in", 0),
            ("batch_size", 1),
            ("draws", 1),
        ):
            _check_int(name, getattr(self, name), minimum)
        _check_seed(self.seed)
        if self.burn_in >= self.sequence_length:
            raise ConfigError(
                "burn_in", self.burn_in, f"less than sequence_length ({self.sequence_length})"
            )
        if self.boundary not in ("cross", "pad"):
            raise ConfigError("boundary", self.boundary, "'cross' or 'pad'")
        if self.initial_state not in ("stored", "zeros"):
            raise ConfigError("initial_state", self.initial_state, "'stored' or 'zeros'")
        if self.boundary == "cross" and self.steps < self.sequence_length:
            raise ConfigError(
                "steps",
                self.steps,
                f"at least sequence_length ({self.sequence_length}) with boundary 'cross'",
            )
        check_budget(self)


# -- frame stacking (clauses stack.*) ----------------------------------------------------------
@dataclass(frozen=True)
class StackScenario:
    """Frame stacking (capability ``stack``, clauses ``stack.*``).

    The toy env runs ``steps`` vector steps; the observation the policy receives at each env
    is the stack of the last ``num_frames`` frames of that env's stream, oldest first
    (``stack.frames``), the positions before its episode's FIRST filled by ``padding``
    (``stack.episode-start``: ``"repeat-first"``, the clause, or ``"zeros"``, variant
    zero-fill) and never by a frame of an earlier episode (``stack.no-cross``). Every item is
    stored in a ring of ``capacity`` items per env; after the rollout ``draws`` batches of
    ``batch_size`` items are sampled, each with the stack the implementation gives it
    (stored whole, or rebuilt from the stored frames): the rollout's own stack
    (``stack.sample-equals-rollout``), also for an item whose earlier frames the ring has
    evicted (``stack.earliest-ignored``: such an item is not sampled unless its stack is
    whole)."""

    env: EnvSpec
    steps: int
    num_frames: int = 3
    padding: Literal["repeat-first", "zeros"] = "repeat-first"
    capacity: int = 8
    batch_size: int = 4
    draws: int = 2
    seed: int = 0
    kind: Literal["stack"] = "stack"

    def __post_init__(self) -> None:
        for name, minimum in (
            ("steps", 1),
            ("num_frames", 1),
            ("capacity", 1),
            ("batch_size", 1),
            ("draws", 1),
        ):
            _check_int(name, getattr(self, name), minimum)
        _check_seed(self.seed)
        if self.padding not in ("repeat-first", "zeros"):
            raise ConfigError("padding", self.padding, "'repeat-first' or 'zeros'")
        if self.capacity < self.num_frames:
            raise ConfigError(
                "capacity",
                self.capacity,
                f"at least num_frames ({self.num_frames}): the newest item's stack must fit",
            )
        check_budget(self)


# -- offline and hybrid replay (clauses offline.*) ---------------------------------------------
@dataclass(frozen=True)
class OfflineScenario:
    """Offline and hybrid replay (capability ``offline``, clauses ``offline.*``).

    ``offline`` is the offline dataset: distinct items, each of an env index at least
    ``env.num_envs`` so that no online item is ever one of them, stored in an offline buffer
    before the first update. Before each of ``updates`` updates the toy env runs
    ``steps_per_update`` more vector steps, every item written to the online buffer (a ring of
    ``capacity`` items per env). Update ``u`` draws one batch: the online part takes part when
    ``n >= online_after`` and ``n % online_every == 0`` with ``n = u + first_update``
    (``offline.online-schedule``: ``first_update`` 0; 1 is variant ``counted-from-one``); the
    batch of ``batch_size`` items then holds each source's share by the weights
    ``offline_weight : online_weight`` (``offline.mix-ratio``), and without the online part
    only the offline share. Offline items come back as stored, and online writes never touch
    them (``offline.items-unchanged``); every update, offline-only ones included, is one
    training iteration (``offline.iteration-accounting``)."""

    env: EnvSpec
    offline: tuple[tuple[int, int, int], ...]
    updates: int
    steps_per_update: int = 1
    batch_size: int = 4
    offline_weight: int = 1
    online_weight: int = 1
    online_after: int = 0
    online_every: int = 1
    first_update: Literal[0, 1] = 0
    capacity: int = 8
    seed: int = 0
    kind: Literal["offline"] = "offline"

    def __post_init__(self) -> None:
        for name, minimum in (
            ("updates", 1),
            ("steps_per_update", 1),
            ("batch_size", 1),
            ("offline_weight", 0),
            ("online_weight", 0),
            ("online_after", 0),
            ("online_every", 1),
            ("capacity", 1),
        ):
            _check_int(name, getattr(self, name), minimum)
        _check_seed(self.seed)
        if self.first_update not in (0, 1):
            raise ConfigError("first_update", self.first_update, "0 or 1")
        if self.offline_weight + self.online_weight == 0:
            raise ConfigError(
                "offline_weight + online_weight", 0, "at least 1 (some source must be drawn)"
            )
        if not self.offline:
            raise ConfigError("offline", self.offline, "at least one item (the offline dataset)")
        for item in self.offline:
            if len(item) != 3 or not all(type(v) is int and v >= 0 for v in item):
                raise ConfigError("offline", item, "an item (env, episode, t) of ints >= 0")
            if item[0] < self.env.num_envs:
                raise ConfigError(
                    "offline",
                    item,
                    f"an env index >= env.num_envs ({self.env.num_envs}): offline items must "
                    "differ from every online item",
                )
        if len(set(self.offline)) != len(self.offline):
            raise ConfigError("offline", self.offline, "distinct items")
        check_budget(self)


Scenario = Union[
    TrainerScenario,
    ReplayScenario,
    EnvScenario,
    LearnerScenario,
    RelabelScenario,
    RecurrentScenario,
    StackScenario,
    OfflineScenario,
    AsyncScenario,
]


def reference_form(scenario: Scenario) -> Scenario:
    """The scenario whose trace ``scenario``'s must equal: the same, except that a learner
    scenario's ``layout`` is set to ``"episodes"`` (it picks refimpl's computation, not
    what is computed: clause ``learner.gae``)."""
    if isinstance(scenario, LearnerScenario) and scenario.layout != "episodes":
        return replace(scenario, layout="episodes")
    return scenario


def scenario_to_json(scenario: Scenario) -> str:
    """The canonical JSON text of a scenario (sorted keys, no spaces)."""
    return canonical_json(scenario)


def scenario_from_json(text: str | dict) -> Scenario:
    """Parse a scenario from JSON text or a decoded object; errors name the field."""
    if isinstance(text, str):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            line = text.splitlines()[exc.lineno - 1] if text.strip() else ""
            raise ConfigError(
                "scenario",
                line[max(0, exc.colno - 30) : exc.colno + 30],
                f"JSON text ({exc.msg} at line {exc.lineno}, column {exc.colno})",
            ) from None
        except ValueError as exc:  # e.g. an integer past Python's digit limit
            raise ConfigError("scenario", text[:60], f"JSON text ({exc})") from None
    else:
        data = text
    result: Scenario = from_jsonable(Scenario, data, "scenario")
    return result
