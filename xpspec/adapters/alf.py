"""Adapter over ALF (HorizonRobotics/alf), run from a checkout: its ``RLTrainer`` driving an
off-policy ``RLAlgorithm.train_iter`` with its ``ReplayBuffer``, its ``TrainerConfig`` and its
``HindsightExperienceTransformer``, on the toy env, recorded by wrapping ALF's own methods.
Nothing of ALF is re-implemented; sources are cited as ``file:function`` of the ``alf``
package (snapshot ``23aca492``, the newest one the suite was written against).

**Processes.** ALF keeps process-wide state: ``alf.config`` values lock once read, the global
counter (``alf.summary``), the environment (``alf.get_env``) and the trainer's progress are
module globals. So every operation needs a fresh process: the adapter declares
``fresh_process_per_operation``, and the worker that serves it (``xpspec.conformance.harness.host``)
imports ALF once (``prepare``, which configures nothing) and forks one child per operation.
A trainer run's ALF root directory is a temporary directory of that child. Inline isolation
refuses the adapter, and a process that has run one operation refuses a second. Without ALF
on the path, importing this module raises ``ModuleNotFoundError``.

**Trainer** (``run_trainer``). ``RLTrainer(TrainerConfig(...)).train()`` with ALF's in-process
batched environment path (``create_environment`` with a ``batched`` loader) over
:class:`xpspec.refimpl.toy_envs.batched.ToyBatchEnv`, and a tiny algorithm whose rollout state counts
the steps since FIRST (ALF resets it itself, ``common.reset_state_if_necessary``) and acts
``state % num_actions``. Knobs: ``unroll_length`` (an int, or the float of a fraction),
``num_iterations``, ``num_env_steps``, ``num_updates_per_train_iter``, ``mini_batch_size``,
``mini_batch_length``, ``initial_collect_steps``, ``counter_mode`` ->
``update_counter_every_mini_batch``, ``capacity`` -> ``replay_buffer_length`` (per env),
``whole_buffer`` -> ``whole_replay_buffer_training``, ``clear`` ``all``/``keep-one-step`` ->
``clear_replay_buffer`` (ALF documents it as wiping the buffer after each update; it keeps one
step, see the expectations), ``mask_last`` -> ``mask_out_loss_for_last_step``, ``seed`` ->
``random_seed``. The scenario's variant knobs (``unroll_carry``, ``env_step_count``,
``train_accounting``, ``warmup_gate``, ``replay_creation``, ``mini_batch_resize``,
``short_chunks``) have no ALF counterpart: ALF runs as it is, and its expectations name the
variants it follows.

Recorded at ALF's seams: ``train_iter`` (iteration start and end; the counter is read at the
iteration's first unroll or train call, after ALF's own increment), ``unroll(n)`` (the planned
steps), ``_process_unroll_step`` (one ``EnvStep``: the pre-step time step, the policy state
passed to ``rollout_step`` and the action), ``ReplayBuffer.add_batch`` (the items it wrote,
read back from the buffer with ``get_current_position`` and ``get_field``: a ``Store`` per call
of ``observe_for_replay``, per episode release and for the end-of-run flush),
``train_from_replay_buffer`` (``TrainCall``: ``trained`` when it sampled the buffer, else
``warmup``, ALF's ``initial_collect_steps`` return; ALF has no ``no-data`` call: before its
buffer exists it makes no call at all, and with too few items it raises), ``_update`` and
``update_with_gradient`` (``Update``: the mini-batch's observations and the loss mask ALF
passes), ``after_update`` and ``after_train_iter`` (hooks; with the global counter, declared as
the ``counter`` and ``hooks`` capabilities). An exception raised inside ALF's own code during
training, or as the user's end-of-run flush stores, ends the run as it ends a real one: the trace keeps the iterations that completed and
its header's ``stopped`` names the exception and the ALF source line, so the checks see the
missing iterations (the expectations declare the known ones as findings). An exception from
the adapter itself, or while ALF builds the trainer, is raised as :class:`ALFRaised` and
reported as an error.

**Preprocessing** (:mod:`xpspec.adapters.alf_preprocess`). ALF's store seam is
``Algorithm.observe_for_replay`` (``alf/algorithms/algorithm.py``), called by
``RLAlgorithm._process_unroll_step`` (``alf/algorithms/rl_algorithm.py``) with each unrolled
vector step; the toy algorithm is subclassed to override it as a user would, calling ALF's own
method (which creates the buffer at the first store and writes with
``ReplayBuffer.add_batch(exp, exp.env_id)``) for what is stored: reward transforms and step-type
overwrites change the time step first; exclusions write the kept rows only (the env ids of a
subset); episode-delayed mode holds each env's steps and, at that env's LAST, writes its episode
step by step with its annotation (the experience's ``rollout_info``) or excludes it by outcome;
the end-of-run flush is the user's call after ``RLTrainer.train``. The hook records what it
excluded (with the reason) and held; what was stored, when, and the train calls are ALF's. ALF
keeps making one train call per iteration (its ``train_accounting`` is ``plain``), and its
uniform sampler raises while some env's ring is shorter than ``mini_batch_length``, which ends
the run (see the expectations). The task id is the env's ``env_info["task_id"]``.

Unsupported: on-policy mode (ALF trains on the unroll itself, with no buffer, mini-batches or
epochs), drain mode (``async_unroll``'s unroller steps in another process on its own timing),
sampled windows that must not cross episode boundaries or lie on a period grid, per-episode
sampling, same-step auto-reset, configurations ``RLTrainer`` itself refuses, and whole-buffer
training once the preprocessing has stored unequally per env (``ReplayBuffer.gather_all``
documents its ``AssertionError`` for envs of different sizes: a precondition, not a finding).

**Replay** (``run_replay``): ``ReplayBuffer`` (per-env rings of ``capacity``) filled with the
toy env's ALF time steps by ``add_batch``, sampled by ``get_batch(batch_size, T)`` (envs
assigned round-robin, starts stratified within each env; windows cross episodes). A draw
``get_batch`` refuses (``AssertionError: Not all environments have enough data``, also from an
empty buffer) is recorded as an empty draw (``replay.no-window``).

**Prioritized replay** (``run_replay`` with a priority spec, :mod:`xpspec.adapters.alf_priority`):
``ReplayBuffer(prioritized_sampling=True)``; the masses are read from its sum tree, ALF's
``Algorithm._update_priority`` stores the sampled windows' new priorities and
``Algorithm._aggregate_loss`` gives the loss weights (capabilities ``priorities`` and
``importance-weights``).

**Checkpoint and resume** (``run_trainer`` with a checkpoint spec,
:mod:`xpspec.adapters.alf_checkpoint`): ``RLTrainer`` saves through ALF's ``Checkpointer``
(the replay buffer with ``ReplayBuffer.enable_checkpoint``) after iteration ``k``, and a new
``RLTrainer`` on the same root directory restores and runs the rest.

**Learner** (``run_learner``, :mod:`xpspec.adapters.alf_learner`): one ``train_iter`` of ALF's
``PPOAlgorithm`` with ``PPOLoss`` on its whole replay buffer, holding every env's first
``steps`` time steps; advantages and returns are what ``preprocess_experience`` computed, the
normalised advantages what ``PPOLoss`` trained on, the loss mask ALF's ``valid_masks`` and
the update plan the mini-batches ``Algorithm._train_experience`` made; n-step targets are
``TDLoss(td_lambda=1).compute_td_target`` on windows of the same buffer. ALF's row ``L`` is an
ordinary buffer row (``bootstrap`` is declared); several learners are not applicable.

**Recurrent** (``run_recurrent``, :mod:`xpspec.adapters.alf_recurrent`): one ``train_iter``
of an off-policy algorithm whose counting ``alf.networks.Network`` keeps its count in ALF's
rollout and train state; ALF stores each step's input state (``use_rollout_state`` for
initial state ``stored``), draws ``mini_batch_length`` windows across episode ends and trains
them position by position with its resets at FIRST. Recorded: the state the network received
in every rollout and training step and, per position, whether the gradient of ALF's loss
reached its output. ALF has no burn-in and no padding (those scenarios are unsupported).

**Stack** (``run_stack``, :mod:`xpspec.adapters.alf_stack`): one ``train_iter`` of the
counting algorithm with ALF's ``FrameStacker`` as its data transformer: the stacks its
``rollout_step`` receives and those of the mini-batches ``_update`` trains on, rebuilt by
``transform_experience`` from ALF's replay buffer (whose earliest ``num_frames - 1`` positions
per env ALF never samples); padding ``zeros`` is unsupported (ALF repeats the first frame).

**Offline** (``run_offline``, :mod:`xpspec.adapters.alf_offline`): an ``RLTrainer`` in ALF's
hybrid training mode, its offline buffer loaded (``TrainerConfig.offline_buffer_dir``) from the
dataset saved as a replay-buffer checkpoint by ALF's ``Checkpointer``; recorded per iteration:
the online items stored, the items of the online and offline mini-batches ``_hybrid_update``
received, the offline buffer's items and the global counter.

**Env** (``run_env``, :mod:`xpspec.adapters.alf_env`): each toy env (its Gymnasium face in the
gym 0.15 API ALF calls) wrapped by ``suite_gym.wrap_env`` (``AlfGymWrapper``), batched in
process by ``BatchEnvironmentWrapper`` under ``TensorWrapper``, stepped as
``RLAlgorithm._sync_unroll`` steps its env; recorded: every ``TimeStep`` ALF returned.

**Async** (``run_async``, :mod:`xpspec.adapters.alf_async`): ``RLTrainer`` with
``async_unroll``, its ``AsyncUnroller`` stepping the batched toy env in a worker process it
spawns from a Python conf file the adapter writes; each iteration gathers one fragment per
env, acted with the weights the trainer sent at the start of an iteration; recorded: the
fragments as ALF's queue delivered them, the toy versioned policy's weight they were acted
with, the updates and ALF's ``EnvironmentSteps``. Unsupported: a lag bound.

**Relabel** (``run_relabel``): a ``ReplayBuffer(keep_episodic_info=True)`` of ``Experience``
with dict observations (``observation``, ``achieved_goal``, ``desired_goal``), drawn by
``get_batch(batch_size, 2)`` (ALF asserts windows of 2) and relabeled by
``HindsightExperienceTransformer(her_proportion=ratio)`` (strategy ``future`` only). A drawn
pair whose first step is a LAST is no transition (``get_batch`` crosses episodes): it is left
out of the ``Relabel`` event, which is then shorter than the batch. The relabeled rows are
those whose episode end ALF looked up (``steps_to_episode_end``) and whose future achieved goal
it read (``get_field``), in its row order; the goal source ``(e, k, t)`` is decoded from that goal.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable
from functools import partial
from importlib import metadata
from typing import Any, Literal, TypeVar

if importlib.util.find_spec("alf") is None:  # pragma: no cover - exercised without ALF only
    raise ModuleNotFoundError(
        "xpspec.adapters.alf needs ALF (HorizonRobotics/alf), which is not on PyPI: put a checkout on "
        "the path, e.g. ALF_SOURCE=/path/to/alf nox -s 'conformance(alf)' (docs/adapters.md)",
        name="alf",
    )

import torch

from xpspec.adapters.alf_learner import learner_problem, run_learner
from xpspec.adapters.alf_preprocess import preprocessing_algorithm
from xpspec.adapters.alf_priority import priority_problem, run_prioritized
from xpspec.adapters.alf_recurrent import recurrent_problem, run_recurrent
from xpspec.adapters.alf_stack import run_stack, stack_problem
from xpspec.kit.arrays import floats, ints
from xpspec.kit.events import env_step, run_end, store
from xpspec.kit.events import exclude as exclude_event
from xpspec.kit.events import hold as hold_event
from xpspec.kit.items import decode_items, decode_windows, item_columns
from xpspec.kit.steps import steps_from_columns
from xpspec.protocol.adapter import PROTOCOL_VERSION, AdapterInfo, Unsupported
from xpspec.protocol.asynchronous import AsyncScenario
from xpspec.protocol.env_spec import EnvSpec
from xpspec.protocol.scenario import (
    EnvScenario,
    LearnerScenario,
    OfflineScenario,
    RecurrentScenario,
    RelabelScenario,
    ReplayScenario,
    StackScenario,
    TrainerScenario,
    scenario_from_json,
    scenario_to_json,
)
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import (
    EnvStep,
    Event,
    Hook,
    IterationEnd,
    IterationStart,
    Relabel,
    Sampled,
    Trace,
    TrainCall,
    Update,
)
from xpspec.refimpl.toy_envs.batched import ToyBatchEnv

__all__ = ["QUIET_TRAINER", "ALFAdapter", "ALFRaised", "quiet_summaries"]

_LINK = "https://github.com/HorizonRobotics/alf/tree/pytorch/alf"
_LAST = int(StepType.LAST)


_NOT_ENOUGH = "Not all environments have enough data"
"""The ``AssertionError`` of ALF's ``ReplayBuffer.get_batch`` when an env holds fewer items than
the window (``alf/experience_replayers/replay_buffer.py``, ``_uniform_sample``)."""


class ALFRaised(RuntimeError):
    """ALF itself raised while running a scenario (the message names the ALF source line)."""


# -- what can be expressed ----------------------------------------------------------------
def _sampling_problem(boundary: str, period: int, distribution: str) -> str | None:
    if boundary != "cross":
        return (
            f"boundary policy {boundary!r}: ALF's ReplayBuffer.get_batch windows cross episode "
            "boundaries and it has no option to forbid or pad them"
        )
    if period != 1:
        return f"period {period}: ALF's get_batch draws every start, with no period grid"
    if distribution == "uniform-episodes":
        return "distribution 'uniform-episodes': ALF's get_batch draws envs, then starts"
    return None


def trainer_problem(sc: TrainerScenario) -> str | None:
    """Why ALF cannot express ``sc`` (None if it can)."""
    cfg = sc.trainer
    if getattr(sc.env, "autoreset", "next-step") != "next-step":
        return "same-step auto-reset: ALF's environments return FIRST on the step after LAST"
    if cfg.mode == "on-policy":
        return (
            "on-policy mode: ALF's _train_iter_on_policy trains once per iteration on the "
            "unroll itself (train_from_unroll), with no replay buffer, mini-batches or epochs"
        )
    if cfg.drain is not None:
        return (
            "drain mode: ALF's unroll_length 0 needs async_unroll, whose AsyncUnroller "
            "(alf/algorithms/async_unroller.py) steps the env in a spawned process built from "
            "a conf file, on its own timing; stated arrivals cannot be imposed"
        )
    if not cfg.whole_buffer:
        s = sc.sampling
        return _sampling_problem(s.boundary, s.period, s.distribution)
    return None


def replay_problem(sc: ReplayScenario) -> str | None:
    s = sc.sampling
    return _sampling_problem(s.boundary, s.period, s.distribution)


def relabel_problem(sc: RelabelScenario) -> str | None:
    if sc.strategy != "future":
        return (
            f"strategy {sc.strategy!r}: ALF's HindsightExperienceTransformer relabels with "
            "future goals only"
        )
    return None


def _alf_root() -> str:
    spec = importlib.util.find_spec("alf")
    assert spec is not None and spec.origin is not None
    return os.path.dirname(os.path.dirname(spec.origin))


def _commit(root: str) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", root, "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip()[:8] or "unknown"


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


class ALFAdapter:
    """Adapter over ALF (see the module docstring): capabilities trainer (with its global
    counter and its ``after_update``/``after_train_iter`` hooks, and checkpoint), replay (with
    priorities and importance weights), learner (PPO), relabel, recurrent, stack, offline
    (hybrid training), env (ALF's Gym wrapping) and async (``async_unroll``)."""

    fresh_process_per_operation = True
    """ALF's configuration, global counter, env and trainer progress are process-wide."""

    def __init__(self) -> None:
        self._version = _commit(_alf_root())

    def info(self) -> AdapterInfo:
        return AdapterInfo(
            name="alf",
            framework="ALF (HorizonRobotics/alf)",
            framework_version=self._version,
            protocol_version=PROTOCOL_VERSION,
            capabilities=(
                "trainer",
                "replay",
                "learner",
                "relabel",
                "counter",
                "update-counter",
                "hooks",
                "state",
                "loss-mask",  # the valid_masks ALF passes to update_with_gradient
                "bootstrap",  # PPO's row L: the LAST (or newest) row ALF values and masks
                "nstep",  # TDLoss(td_lambda=1).compute_td_target over windows of n + 1 rows
                "recurrent",  # a counting Network trained by ALF from its replayed windows
                "stack",  # FrameStacker in the rollout and on replayed experience
                "priorities",  # ReplayBuffer(prioritized_sampling=True): its sum tree's leaves
                "importance-weights",  # the loss weights Algorithm._aggregate_loss applies
                "checkpoint",  # RLTrainer's Checkpointer, the replay buffer's included
                "offline",  # hybrid training on a replay-buffer checkpoint (offline_buffer_dir)
                "env",  # the toy gym env through suite_gym.wrap_env / AlfGymWrapper
                "async",  # async_unroll: the AsyncUnroller's worker process, weights per iteration
            ),
            issue_tracker="https://github.com/HorizonRobotics/alf/issues",
            notes=(
                "run from a checkout (not on PyPI); framework_version is its git commit. Pull "
                "request 1768 is not merged there: its train accounting is the spec variant "
                "train.synced-schedule/alf-pr1768-floor, which refimpl reproduces, not a "
                "behaviour of this row"
            ),
            extra_versions={
                "torch": torch.__version__,
                **{n: _dist_version(n) for n in ("gin-config", "gym", "cnest", "numpy")},
            },
        )

    def prepare(self) -> None:
        """Import ALF and warm its caches once, in the process that forks the operations;
        one torch thread per operation, and warnings off unless asked for (-W or
        PYTHONWARNINGS)."""
        torch.set_num_threads(1)
        if not sys.warnoptions:
            warnings.simplefilter("ignore")
        for name in _PRELOAD:
            importlib.import_module(name)
        from alf.utils.pretty_print import pformat_pycolor

        pformat_pycolor({"warm": "up"})  # compiles pygments' lexer once, before the forks

    def smoke(self) -> None:
        _operation(_smoke)

    def run_env(self, scenario: EnvScenario) -> Trace:
        """The toy gym envs through ALF's ``suite_gym.wrap_env`` and in-process batching
        (:mod:`xpspec.adapters.alf_env`)."""
        from xpspec.adapters.alf_env import env_problem, run_env

        problem = env_problem(scenario)
        if problem is not None:
            raise problem
        return _operation(partial(run_env, scenario))

    def run_trainer(self, scenario: TrainerScenario) -> Trace:
        problem = trainer_problem(scenario)
        if problem:
            raise Unsupported(problem, _LINK)
        # ALF's root directory (summaries, checkpoints), removed even if a file is still open.
        with tempfile.TemporaryDirectory(
            prefix="xpspec-alf-", ignore_cleanup_errors=True
        ) as workdir:
            if scenario.checkpoint is not None:  # saved and resumed: alf_checkpoint
                from xpspec.adapters.alf_checkpoint import run_checkpointed

                return _operation(partial(run_checkpointed, scenario, workdir))
            return _operation(_TrainerRun(scenario, workdir).run)

    def run_replay(self, scenario: ReplayScenario) -> Trace:
        """A scenario with a priority spec runs ALF's prioritized buffer
        (:mod:`xpspec.adapters.alf_priority`)."""
        if scenario.priority is not None:
            unsupported = priority_problem(scenario)
            if unsupported is not None:
                raise unsupported
            return _in_workdir(run_prioritized, scenario)
        problem = replay_problem(scenario)
        if problem:
            raise Unsupported(problem, _LINK)
        return _operation(partial(_run_replay, scenario))

    def run_learner(self, scenario: LearnerScenario) -> Trace:
        problem = learner_problem(scenario)
        if problem is not None:
            raise problem
        return _in_workdir(run_learner, scenario)

    def run_relabel(self, scenario: RelabelScenario) -> Trace:
        problem = relabel_problem(scenario)
        if problem:
            raise Unsupported(problem, _LINK)
        return _operation(partial(_run_relabel, scenario))

    def run_recurrent(self, scenario: RecurrentScenario) -> Trace:
        problem = recurrent_problem(scenario)
        if problem is not None:
            raise problem
        return _in_workdir(run_recurrent, scenario)

    def run_stack(self, scenario: StackScenario) -> Trace:
        problem = stack_problem(scenario)
        if problem is not None:
            raise problem
        return _in_workdir(run_stack, scenario)

    def run_async(self, scenario: AsyncScenario) -> Trace:
        """``RLTrainer`` under ``async_unroll``, its ``AsyncUnroller`` stepping the toy env in
        a spawned worker built from a conf file (:mod:`xpspec.adapters.alf_async`)."""
        from xpspec.adapters.alf_async import async_problem, run_async

        problem = async_problem(scenario)
        if problem is not None:
            raise problem
        return _operation(partial(run_async, scenario))

    def run_offline(self, scenario: OfflineScenario) -> Trace:
        """Hybrid training on the dataset saved as a replay-buffer checkpoint
        (:mod:`xpspec.adapters.alf_offline`)."""
        from xpspec.adapters.alf_offline import offline_problem, run_offline

        problem = offline_problem(scenario)
        if problem is not None:
            raise problem
        return _in_workdir(run_offline, scenario)


def _in_workdir(run: Callable[..., Trace], scenario: Any) -> Trace:
    """``run(scenario, env_cls, workdir)`` as one ALF operation, in a temporary root dir that
    is removed afterwards (the root dir ALF's trainer writes into)."""
    with tempfile.TemporaryDirectory(prefix="xpspec-alf-", ignore_cleanup_errors=True) as workdir:
        return _operation(partial(run, scenario, _learner_env, workdir))


_PRELOAD = (
    # torch.use_deterministic_algorithms (called by ALF's set_random_seed) imports it lazily:
    # 1.6 s in every child unless the worker has it already.
    "torch._inductor",
    "alf",
    "alf.algorithms.data_transformer",
    "alf.algorithms.ppo_algorithm",
    "alf.algorithms.rl_algorithm",
    "alf.experience_replayers.replay_buffer",
    "alf.trainers.policy_trainer",
)

_claimed = False
"""Whether this process has begun an ALF operation."""

_T = TypeVar("_T")


def _operation(run: Callable[[], _T]) -> _T:
    """``run()`` as this process's one ALF operation. An exception other than
    :class:`Unsupported` or :class:`ALFRaised` is raised as :class:`ALFRaised` naming the
    source line it came from, ALF's or the adapter's (:func:`_describe`)."""
    global _claimed
    if _claimed:
        raise RuntimeError(
            "ALF needs a fresh process per operation (its configuration locks once read, its "
            "global counter, env and trainer progress are process-wide): expected a process "
            "that has run no ALF operation, got one that has; serve the adapter with process "
            "isolation (the default), which forks a child per operation"
        )
    _claimed = True
    try:
        return run()
    except (Unsupported, ALFRaised):
        raise
    except Exception as exc:
        raise ALFRaised(_describe(exc)) from exc


def _origin(exc: BaseException) -> tuple[traceback.FrameSummary | None, bool]:
    """The innermost frame of ``exc`` in ALF's or the adapter's code, and whether it is ALF's
    (library frames below it, e.g. torch's, do not count; None if there is no such frame)."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        path = frame.filename.replace(os.sep, "/")
        if "/adapters/" in path:
            return frame, False
        if "/alf/" in path:
            return frame, True
    return None, False


_GATHER_PRECONDITION = (
    "whole-buffer training when the envs hold different numbers of items: "
    "ReplayBuffer.gather_all documents that it raises AssertionError unless every env has the "
    "same size (and ending position), and the scenario's preprocessing stored unequally per env "
    "by the time ALF trained on the whole buffer"
)
_GATHER_LINK = (
    "https://github.com/HorizonRobotics/alf/blob/23aca492/alf/experience_replayers/replay_buffer.py"
)


def _unequal_gather(exc: BaseException) -> bool:
    """Whether ``exc`` is the AssertionError ``ReplayBuffer.gather_all`` documents ("Raises:
    AssertionError: if the current_size is not same for all the environments"): a documented
    precondition of whole-buffer training the scenario does not meet, so not a finding."""
    frame, is_alf = _origin(exc)
    return (
        isinstance(exc, AssertionError)
        and is_alf
        and frame is not None
        and frame.name == "gather_all"
        and "Not all environments have the same" in str(exc)
    )


def _describe(exc: BaseException, context: str = "") -> str:
    """``exc`` with the source line it came from: ALF's (``alf/...``) when ALF raised it,
    else the adapter's (or the innermost frame when neither appears)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    frame, in_alf = _origin(exc)
    if frame is not None and in_alf:
        path = frame.filename.replace(os.sep, "/")
        where = f"alf/{path.rsplit('/alf/', 1)[1]}:{frame.lineno} ({frame.name})"
        return f"ALF raised {type(exc).__name__}{context} at {where}: {first}"
    if frame is None:
        frames = traceback.extract_tb(exc.__traceback__)
        frame = frames[-1] if frames else None
    where = f"{frame.filename}:{frame.lineno}" if frame is not None else "?"
    return f"the adapter raised {type(exc).__name__}{context} at {where}: {first}"


# -- ALF objects ---------------------------------------------------------------------------
_CLASSES: dict[str, Any] = {}


def _classes() -> dict[str, Any]:
    """The toy env and toy algorithm as ALF classes (built once ALF is imported)."""
    if _CLASSES:
        return _CLASSES
    import alf
    from alf.algorithms.rl_algorithm import RLAlgorithm
    from alf.data_structures import AlgStep, LossInfo, TimeStep
    from alf.environments.alf_environment import AlfEnvironment

    class ToyAlfEnv(AlfEnvironment):
        """The toy env as a batched, tensor-based ALF environment (next-step auto-reset is
        the toy env's own); with ``goals`` the observation is a dict of the three goals."""

        def __init__(self, spec: EnvSpec, seed: int, goals: bool = False) -> None:
            super().__init__()
            self._env = ToyBatchEnv(spec, seed)
            self._spec = spec
            self._goals = goals
            self._zeros = torch.zeros(spec.num_envs, dtype=torch.int64)

        @property
        def is_tensor_based(self) -> bool:
            return True

        @property
        def batched(self) -> bool:
            return True

        @property
        def batch_size(self) -> int:
            return int(self._spec.num_envs)

        def env_info_spec(self) -> dict[str, Any]:
            return {"task_id": alf.TensorSpec((), torch.int64)}

        def observation_spec(self) -> Any:
            vector = alf.TensorSpec((3,), torch.float32)
            if self._goals:
                return {"observation": vector, "achieved_goal": vector, "desired_goal": vector}
            return vector

        def action_spec(self) -> Any:
            return alf.BoundedTensorSpec(
                (), torch.int64, minimum=0, maximum=self._spec.num_actions - 1
            )

        def _time_step(self, ts: Any, prev_action: torch.Tensor) -> Any:
            obs: Any = ts.observation
            if self._goals:
                obs = {
                    "observation": ts.observation,
                    "achieved_goal": ts.achieved_goal,
                    "desired_goal": ts.desired_goal,
                }
            return TimeStep(
                step_type=ts.step_type.to(torch.int32),
                reward=ts.reward,
                discount=ts.discount,
                observation=obs,
                prev_action=prev_action,
                env_id=ts.env_id.to(torch.int32),
                env_info={"task_id": ts.task_id.to(torch.int64)},
            )

        def _reset(self) -> Any:
            return self._time_step(self._env.reset(), self._zeros)

        def _step(self, action: torch.Tensor) -> Any:
            return self._time_step(self._env.step(action), action.to(torch.int64))

        def seed(self, seed: int) -> None:
            pass  # the toy env's episodes are fixed by the scenario's seed

    class CountingAlgorithm(RLAlgorithm):
        """Off-policy: the rollout state counts steps since FIRST and the action is
        ``state % num_actions`` (the reference policy); one scalar weight trains on a loss
        of shape [T, B] so that ALF's LAST masking applies. The rollout info is the stored
        experience's annotation (0.0; an episode-delayed hook overwrites it on release)."""

        def __init__(
            self,
            observation_spec: Any,
            action_spec: Any,
            reward_spec: Any = None,
            env: Any = None,
            config: Any = None,
            debug_summaries: bool = False,
        ) -> None:
            super().__init__(
                observation_spec=observation_spec,
                action_spec=action_spec,
                reward_spec=alf.TensorSpec(()) if reward_spec is None else reward_spec,
                train_state_spec=(),
                rollout_state_spec=alf.TensorSpec((), torch.int64),
                predict_state_spec=alf.TensorSpec((), torch.int64),
                is_on_policy=False,
                env=env,
                config=config,
                optimizer=alf.optimizers.SGD(lr=1e-3),
                debug_summaries=debug_summaries,
                name="CountingAlgorithm",
            )
            self._num_actions = int(action_spec.maximum) + 1
            self._weight = torch.nn.Parameter(torch.zeros(()))

        def predict_step(self, time_step: Any, state: torch.Tensor) -> Any:
            return AlgStep(output=state % self._num_actions, state=state + 1, info=())

        def rollout_step(self, time_step: Any, state: torch.Tensor) -> Any:
            annotation = torch.zeros(state.shape, dtype=torch.float32)
            return AlgStep(output=state % self._num_actions, state=state + 1, info=annotation)

        def train_step(self, time_step: Any, state: Any, rollout_info: Any) -> Any:
            return AlgStep(output=(), state=(), info=self._weight * time_step.reward)

        def calc_loss(self, info: torch.Tensor) -> Any:
            return LossInfo(loss=(info - 1.0) ** 2)

    _CLASSES.update(env=ToyAlfEnv, algorithm=CountingAlgorithm)
    return _CLASSES


def _load_toy_env(env_name: str, spec_json: str, seed: int, batch_size: int = 1) -> Any:
    """An ALF ``env_load_fn`` marked batched: ``create_environment`` calls it once with the
    batch size and keeps the env in this process."""
    scenario = scenario_from_json(spec_json)
    assert isinstance(scenario, TrainerScenario) and batch_size == scenario.env.num_envs
    return _classes()["env"](scenario.env, seed)


_load_toy_env.batched = True  # type: ignore[attr-defined]


def _learner_env(spec: EnvSpec, seed: int) -> Any:
    """The toy env as an ALF environment, for :mod:`xpspec.adapters.alf_learner`."""
    return _classes()["env"](spec, seed)


def _wrap(owner: Any, name: str, before: Callable[..., Any]) -> None:
    """Replace ``owner.name`` by a function that calls ``before(*args)`` first."""
    original = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        before(*args, **kwargs)
        return original(*args, **kwargs)

    setattr(owner, name, wrapped)


def _wrap_after(owner: Any, name: str, after: Callable[..., Any]) -> None:
    """Replace ``owner.name`` by a function that calls ``after(*args)`` once it returned."""
    original = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        after(*args, **kwargs)
        return result

    setattr(owner, name, wrapped)


_STORED_FIELDS = (
    "time_step.observation",
    "time_step.step_type",
    "time_step.reward",
    "time_step.discount",
    "rollout_info",
)
"""What a ``Store`` reports of each stored item, read back from ALF's replay buffer."""


# -- trainer ---------------------------------------------------------------------------------
QUIET_TRAINER: dict[str, Any] = {
    "confirm_checkpoint_upon_crash": False,
    "num_checkpoints": 1,
    "summary_interval": 1_000_000_000,
    "summarize_first_interval": False,
    "evaluate": False,
}
"""``TrainerConfig`` settings of every row: no prompt on a crash, no summaries, no evaluation
(none of them touches experience)."""


def quiet_summaries(trainer_class: Any) -> None:
    """Stop ``RLTrainer`` writing its configuration as a TensorBoard text once training starts:
    it walks every attribute of the algorithm (0.25 s a run) for a summary, no experience."""
    trainer_class._summarize_training_setting = lambda trainer: None


class _TrainerRun:
    """One ``RLTrainer`` run of a trainer scenario, recorded at ALF's seams."""

    def __init__(self, scenario: TrainerScenario, workdir: str) -> None:
        self.sc = scenario
        self.workdir = workdir
        self.events: list[Event | None] = []
        self.iteration = 0
        self.stored = 0
        self.calls = 0
        self.alg: Any = None
        self._start = 0  # index of the current iteration's placeholder
        self._inside = False  # whether an iteration is under way
        self._counter: int | None = None
        self._unroll = 0
        self._call: tuple[int, int, int] | None = None  # (event index, call, counter)
        self._sampled = False
        self._updates = 0
        self._batch: torch.Tensor | None = None
        self._staged: list[tuple[torch.Tensor, ...]] = []  # items written, not yet reported

    # -- configuration ----------------------------------------------------------------
    def _configure_training(self, **extra: Any) -> None:
        """ALF's ``TrainerConfig`` for the scenario's trainer knobs (and ``extra``), and the
        hooks on ALF's ``ReplayBuffer`` that record what it stores and samples."""
        import alf
        from alf.experience_replayers.replay_buffer import ReplayBuffer
        from alf.trainers.policy_trainer import RLTrainer

        sc, cfg = self.sc, self.sc.trainer
        u = cfg.unroll_length
        alf.config(
            "TrainerConfig",
            algorithm_ctor=self._algorithm,
            random_seed=sc.seed,
            unroll_length=int(u) if u.denominator == 1 else float(u),
            num_updates_per_train_iter=cfg.num_updates_per_train_iter,
            mini_batch_size=cfg.mini_batch_size,
            mini_batch_length=cfg.mini_batch_length,
            initial_collect_steps=cfg.initial_collect_steps,
            update_counter_every_mini_batch=cfg.counter_mode == "per-mini-batch",
            whole_replay_buffer_training=cfg.whole_buffer,
            clear_replay_buffer=cfg.clear != "none",
            replay_buffer_length=cfg.capacity,
            mask_out_loss_for_last_step=cfg.mask_last,
            **QUIET_TRAINER,
            **extra,
        )
        quiet_summaries(RLTrainer)
        _wrap_after(ReplayBuffer, "add_batch", self._on_store)
        _wrap(ReplayBuffer, "get_batch", self._on_sample)
        _wrap(ReplayBuffer, "gather_all", self._on_sample)

    def run(self) -> Trace:
        import alf
        from alf.algorithms.config import TrainerConfig
        from alf.trainers.policy_trainer import RLTrainer

        sc, cfg = self.sc, self.sc.trainer
        alf.config(
            "create_environment",
            env_name="xpspec-toy",
            env_load_fn=partial(_load_toy_env, spec_json=scenario_to_json(sc), seed=sc.seed),
            num_parallel_environments=sc.env.num_envs,
        )
        self._configure_training(num_iterations=cfg.num_iterations, num_env_steps=cfg.num_env_steps)
        try:
            trainer = RLTrainer(TrainerConfig(root_dir=self.workdir))
        except AssertionError as exc:
            raise Unsupported(f"ALF's RLTrainer refuses the configuration: {exc}", _LINK) from exc
        try:
            trainer.train()
        except Exception as exc:
            if _unequal_gather(exc):
                raise Unsupported(_GATHER_PRECONDITION, _GATHER_LINK) from exc
            where = "in" if self._inside else "after"
            described = _describe(exc, f" {where} iteration {self.iteration}")
            if not _origin(exc)[1]:
                raise ALFRaised(described) from exc
            return self._stopped(described)
        env_steps = self._env_steps()
        if cfg.pending_at_end == "flush" and hasattr(self.alg, "flush_pending"):
            try:  # the user's script, once RLTrainer.train has returned
                self.alg.flush_pending()
            except Exception as exc:
                # ALF raising as the flush stores (e.g. creating its buffer) ends the script
                described = _describe(exc, " in the end-of-run flush")
                if not _origin(exc)[1]:
                    raise ALFRaised(described) from exc
                return self._stopped(described)
        held = decode_items(self._pending()) if cfg.pending_at_end == "report" else []
        self.events.append(run_end(self.iteration, env_steps, cfg.pending_at_end, held))
        events = tuple(e for e in self.events if e is not None)
        return Trace(events, {"producer": "alf", "seed": sc.seed})

    def _stopped(self, described: str) -> Trace:
        """The trace of a run ALF ended by raising: the iterations that completed (an
        iteration under way when ALF raised is left out), the items the user's hook still
        holds that those iterations unrolled (no flush ran), and the exception in the
        header."""
        done = self.iteration - 1 if self._inside else self.iteration
        kept = self.events[: self._start] if self._inside else self.events
        events = [e for e in kept if e is not None]
        ends = [e for e in events if isinstance(e, IterationEnd)]
        env_steps = ends[-1].env_steps if ends else 0
        unrolled = {
            item for e in events if isinstance(e, EnvStep) for item in zip(e.env, e.episode, e.t)
        }
        held = [item for item in decode_items(self._pending()) if item in unrolled]
        events.append(run_end(done, env_steps, self.sc.trainer.pending_at_end, held))
        header = {
            "producer": "alf",
            "seed": self.sc.seed,
            "stopped": f"{described} (the trace ends with iteration {done})",
        }
        return Trace(tuple(events), header)

    def _algorithm(self, **kwargs: Any) -> Any:
        cls = preprocessing_algorithm(_classes()["algorithm"], self.sc.preprocess)
        alg = self.alg = cls(**kwargs)
        if hasattr(alg, "journal"):
            alg.journal = self
        # A Store is what one call of the store seam wrote (a vector step's rows), or one
        # release of an episode, or the end-of-run flush.
        for name in ("observe_for_replay", "release", "flush_pending"):
            if hasattr(alg, name):
                _wrap_after(alg, name, lambda *a, **k: self._report_stored())
        for name in ("train_iter", "unroll", "train_from_replay_buffer"):
            setattr(alg, name, getattr(self, f"_recorded_{name}")(getattr(alg, name)))
        _wrap(alg, "_process_unroll_step", self._on_env_step)
        _wrap(alg, "_update", self._on_update_batch)
        _wrap(alg, "update_with_gradient", self._on_gradient)
        _wrap(alg, "after_update", lambda *a, **k: self._hook("after_update"))
        _wrap(alg, "after_train_iter", lambda *a, **k: self._hook("after_train_iter"))
        return alg

    # -- iteration --------------------------------------------------------------------
    def _counter_now(self) -> int:
        import alf

        return int(alf.summary.get_global_counter())

    def _note_counter(self) -> None:
        if self._counter is None:
            self._counter = self._counter_now()

    def _env_steps(self) -> int:
        return int(self.alg.get_step_metrics()[1].result()) if self.alg is not None else 0

    def _recorded_train_iter(self, original: Callable[[], Any]) -> Callable[[], Any]:
        def train_iter() -> Any:
            self.iteration += 1
            self._start, self._counter, self._unroll = len(self.events), None, 0
            self.events.append(None)
            self._inside = True
            result = original()
            self._inside = False
            self._note_counter()
            assert self._counter is not None
            self.events[self._start] = IterationStart(self.iteration, self._counter, self._unroll)
            self.events.append(
                IterationEnd(
                    self.iteration,
                    self._counter_now(),
                    self._env_steps(),
                    self.stored,
                    int(self._pending().shape[0]),
                )
            )
            return result

        return train_iter

    def _recorded_unroll(self, original: Callable[[int], Any]) -> Callable[[int], Any]:
        def unroll(unroll_length: int) -> Any:
            self._note_counter()
            self._unroll = int(unroll_length)
            return original(unroll_length)

        return unroll

    def _on_env_step(self, policy_step: Any, action: Any, time_step: Any, *rest: Any) -> None:
        rows = steps_from_columns(
            decode_items(time_step.observation),
            ints(time_step.step_type),
            floats(time_step.reward),
            floats(time_step.discount),
            policy_states=ints(rest[1]),
            actions=ints(action),
        )
        self.events.append(env_step(self.iteration, rows))

    def _pending(self) -> torch.Tensor:
        """The observations the user's hook still holds (``[N, 3]``)."""
        held = getattr(self.alg, "pending_observations", None)
        return held() if held is not None else torch.zeros(0, 3)

    def _on_store(
        self, buffer: Any, batch: Any, env_ids: Any = None, *args: Any, **kwargs: Any
    ) -> None:
        """After ``add_batch``: read the items just written back from ALF's buffer."""
        ids = buffer.check_convert_env_ids(env_ids)
        positions = buffer.get_current_position()[ids] - 1
        stored = buffer.get_field(_STORED_FIELDS, ids, positions)
        self._staged.append(tuple(stored))
        self.stored += int(ids.shape[0])

    def _report_stored(self) -> None:
        """One ``Store`` event of the items written since the last one (if any)."""
        if not self._staged:
            return
        observation, step_type, reward, discount, annotation = (
            torch.cat([item[i].reshape(item[i].shape[0], -1) for item in self._staged])
            for i in range(len(_STORED_FIELDS))
        )
        self._staged = []
        rows = steps_from_columns(
            decode_items(observation),
            ints(step_type),
            floats(reward),
            floats(discount),
            annotations=floats(annotation),
        )
        self.events.append(store(self.iteration, rows))

    # -- the user's hook tells what it decided (xpspec.adapters.alf_preprocess.Journal) ------
    def exclude(self, observation: torch.Tensor, reason: str) -> None:
        self.events.append(exclude_event(self.iteration, decode_items(observation), reason))

    def hold(self, observation: torch.Tensor) -> None:
        self.events.append(hold_event(self.iteration, decode_items(observation)))

    # -- training ---------------------------------------------------------------------
    def _recorded_train_from_replay_buffer(
        self, original: Callable[..., Any]
    ) -> Callable[..., Any]:
        def train_from_replay_buffer(*args: Any, **kwargs: Any) -> Any:
            self._note_counter()
            self._call = (len(self.events), self.calls, self._counter_now())
            self.calls += 1
            self._sampled, self._updates = False, 0
            self.events.append(None)
            result = original(*args, **kwargs)
            index, call, counter = self._call
            status: Literal["trained", "warmup"] = "trained" if self._sampled else "warmup"
            self.events[index] = TrainCall(self.iteration, call, counter, status, self.stored)
            return result

        return train_from_replay_buffer

    def _on_sample(self, *args: Any, **kwargs: Any) -> None:
        self._sampled = True

    def _on_update_batch(self, experience: Any, *args: Any, **kwargs: Any) -> None:
        self._batch = experience.time_step.observation  # time-major [T, M, 3]

    def _on_gradient(self, loss_info: Any, valid_masks: Any = None, *args: Any, **kw: Any) -> None:
        assert self._batch is not None and self._call is not None
        observation = self._batch.transpose(0, 1)
        if valid_masks is None:
            mask = torch.ones(observation.shape[:2], dtype=torch.int64)
        else:
            mask = valid_masks.transpose(0, 1).to(torch.int64)
        self.events.append(
            Update(
                self.iteration,
                self._call[1],
                self._updates,
                self._counter_now(),
                decode_windows(observation),
                tuple(tuple(int(v) for v in row) for row in mask.tolist()),
            )
        )
        self._updates += 1

    def _hook(self, name: str) -> None:
        self.events.append(Hook(self.iteration, name))  # type: ignore[arg-type]


# -- replay and relabel ----------------------------------------------------------------------
def _fill(
    env_spec: EnvSpec, seed: int, steps: int, goals: bool, add: Callable[[Any], None]
) -> list[Event]:
    """Store ``steps`` vector steps of the toy env (the reset's FIRST first) with ``add``;
    one ``Store`` event per vector step."""
    env = _classes()["env"](env_spec, seed, goals=goals)
    action = torch.zeros(env_spec.num_envs, dtype=torch.int64)
    events: list[Event] = []
    ts = env.reset()
    for n in range(steps):
        if n:
            ts = env.step(action)
        add(ts)
        items = decode_items(ts.observation)  # a goal env's dict: its "observation"
        rows = steps_from_columns(items, ints(ts.step_type), floats(ts.reward), floats(ts.discount))
        events.append(store(0, rows))
    return events


def _run_replay(sc: ReplayScenario) -> Trace:
    from alf.experience_replayers.replay_buffer import ReplayBuffer
    from alf.utils import dist_utils

    torch.manual_seed(sc.seed)
    holder: list[Any] = []

    def add(ts: Any) -> None:
        if not holder:
            spec = dist_utils.extract_spec(ts, from_dim=1)
            holder.append(ReplayBuffer(spec, sc.env.num_envs, max_length=sc.capacity))
        holder[0].add_batch(ts)

    events = _fill(sc.env, sc.seed, sc.fill_steps, False, add)
    if not holder:  # nothing stored: the buffer's spec comes from a time step it never holds
        first = _classes()["env"](sc.env, sc.seed).reset()
        spec = dist_utils.extract_spec(first, from_dim=1)
        holder.append(ReplayBuffer(spec, sc.env.num_envs, max_length=sc.capacity))
    for draw in range(sc.draws):
        try:
            batch, _ = holder[0].get_batch(sc.batch_size, sc.sampling.window_length)
        except AssertionError as exc:  # ALF's answer to "no valid window"
            if _NOT_ENOUGH not in str(exc):
                raise
            events.append(Sampled(draw, ()))
            continue
        events.append(Sampled(draw, decode_windows(batch.observation)))
    return Trace(tuple(events), {"producer": "alf", "seed": sc.seed})


def _run_relabel(sc: RelabelScenario) -> Trace:
    from alf.algorithms.data_transformer import HindsightExperienceTransformer
    from alf.data_structures import Experience, add_batch_info
    from alf.experience_replayers.replay_buffer import ReplayBuffer
    from alf.utils import dist_utils

    torch.manual_seed(sc.seed)
    holder: list[Any] = []

    def add(ts: Any) -> None:
        exp = Experience(time_step=ts)
        if not holder:
            spec = dist_utils.extract_spec(exp, from_dim=1)
            holder.append(
                ReplayBuffer(spec, sc.env.num_envs, max_length=sc.capacity, keep_episodic_info=True)
            )
        holder[0].add_batch(exp)

    events = _fill(sc.env, sc.seed, sc.fill_steps, True, add)
    buffer = holder[0]
    her = HindsightExperienceTransformer(
        _classes()["env"](sc.env, sc.seed, goals=True).observation_spec(),
        her_proportion=float(sc.ratio),
    )
    lookups: list[tuple[list[int], list[int]]] = []
    futures: list[torch.Tensor] = []
    _wrap(
        buffer,
        "steps_to_episode_end",
        lambda pos, ids: lookups.append((ids.tolist(), pos.tolist())),
    )
    get_field = buffer.get_field

    def recorded_get_field(*args: Any, **kwargs: Any) -> Any:
        value = get_field(*args, **kwargs)
        futures.append(value)
        return value

    buffer.get_field = recorded_get_field
    for draw in range(sc.draws):
        lookups.clear()
        futures.clear()
        batch, info = buffer.get_batch(sc.batch_size, 2)
        out = her.transform_experience(add_batch_info(batch, info, buffer))
        events.append(_relabel_event(draw, batch, info, out, lookups, futures))
    return Trace(tuple(events), {"producer": "alf", "seed": sc.seed})


def _relabel_event(
    draw: int,
    batch: Any,
    info: Any,
    out: Any,
    lookups: list[tuple[list[int], list[int]]],
    futures: list[torch.Tensor],
) -> Relabel:
    """The pairs of one draw that are transitions, with their goal source ((-1, -1, -1) unless
    ALF relabeled the row), their goal as ALF's transformed batch holds it, and their reward
    after relabeling.

    ALF relabels rows ``her_indices`` (ascending): it looks up the episode end of each at
    ``(env_id, position + 1)`` and reads one future achieved goal for each. The relabeled rows
    are the leftmost subsequence of rows with those keys carrying those goals (rows that could
    be swapped are identical: same window, same goal)."""
    first = batch.time_step.observation["observation"][:, 0]
    goal = out.time_step.observation["desired_goal"][:, 0]
    step_type = batch.time_step.step_type[:, 0]
    reward = out.time_step.reward[:, 1]
    keys = list(zip(info.env_ids.tolist(), (info.positions + 1).tolist()))
    wanted = list(zip(*lookups[0])) if lookups else []
    future = futures[0].reshape(-1, 3) if futures else torch.zeros(0, 3)
    relabeled = [False] * len(keys)
    j = 0
    for i, key in enumerate(keys):
        if j < len(wanted) and key == wanted[j] and torch.equal(goal[i], future[j]):
            relabeled[i] = True
            j += 1
    if j != len(wanted):
        raise ValueError(f"matched {j} of ALF's {len(wanted)} relabeled rows")
    rows = [i for i in range(len(keys)) if int(step_type[i]) != _LAST]
    env, episode, t = item_columns(decode_items(first[rows]) if rows else [])
    goal_env, goal_episode, goal_t = (
        tuple(int(goal[i][c]) if relabeled[i] else -1 for i in rows) for c in range(3)
    )
    values = tuple(tuple(float(v) for v in goal[i].tolist()) for i in rows)
    rewards = tuple(float(reward[i]) for i in rows)
    return Relabel(draw, env, episode, t, goal_env, goal_episode, goal_t, values, rewards)


def _smoke() -> None:
    from alf.experience_replayers.replay_buffer import ReplayBuffer
    from alf.utils import dist_utils

    ts = _classes()["env"](EnvSpec(), 0).reset()
    buffer = ReplayBuffer(dist_utils.extract_spec(ts, from_dim=1), 1, max_length=2)
    buffer.add_batch(ts)
    batch, _ = buffer.get_batch(1, 1)
    assert decode_windows(batch.observation) == (((0, 0, 0),),)
