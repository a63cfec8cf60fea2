"""ALF's recurrent training on the toy env (capability ``recurrent`` of
:mod:`xpspec.adapters.alf`), snapshot ``23aca492``. Nothing of ALF is re-implemented: the
adapter gives ALF a counting recurrent network through its model API and records what ALF
feeds it; sources are cited as files of the ``alf`` package.

**The network.** ``CountingNetwork`` is an ``alf.networks.Network`` with
``state_spec=TensorSpec((), int64)`` whose ``forward(observation, state)`` returns
``(output, state + 1)``; the output is one trainable weight per row, so the loss ALF builds
from it reaches it only where ALF lets it. The algorithm (an off-policy ``RLAlgorithm`` with
that spec as its rollout and train state) calls it in ``rollout_step`` and ``train_step`` and
acts ``state % num_actions``; its loss is the per-position output (``LossInfo.loss`` of shape
``[T, B]``). ALF supplies every state the network receives: the initial state
(``Algorithm.get_initial_rollout_state`` / ``get_initial_train_state``, zeros of the spec),
the reset at FIRST (``common.reset_state_if_necessary``, in ``RLAlgorithm._sync_unroll`` and
``Algorithm._collect_train_info_sequentially``) and the carry of ``AlgStep.state``.

**The run.** ``TrainerConfig(unroll_length=steps, replay_buffer_length=steps,
mini_batch_length=sequence_length, mini_batch_size=batch_size,
num_updates_per_train_iter=draws, use_rollout_state=initial_state == "stored",
whole_replay_buffer_training=False, clear_replay_buffer=False, initial_collect_steps=0)`` and
one ``train_iter``: ALF unrolls ``steps`` vector steps, storing each step's experience with its
input state (``make_experience(time_step, policy_step, policy_state)`` in
``RLAlgorithm._process_unroll_step``; ``Algorithm.observe_for_replay`` keeps the state only with
``use_rollout_state``), then ``Algorithm.train_from_replay_buffer`` draws ``batch_size * draws``
windows of ``sequence_length`` steps in one ``ReplayBuffer.get_batch`` (windows run on across
episode ends) and ``Algorithm._train_experience`` shuffles them into ``draws`` mini-batches of
``batch_size``; each mini-batch is one ``Algorithm._update``: ``train_step`` runs position by
position from the stored state of the window's first step (``use_rollout_state``) or ALF's
initial state, resetting at every FIRST, and ``update_with_gradient`` multiplies the loss by
ALF's ``valid_masks`` (``mask_out_loss_for_last_step``: LAST steps masked) before the backward
pass. A window of one step goes through ``_collect_train_info_parallelly`` (one call, each
position with its stored state), as ALF does.

**Recorded.** One ``EnvStep`` per unrolled vector step (at ``_process_unroll_step``: the
time step and action ALF processed, with the state the network received in that step's
``rollout_step``), then one ``TrainSequence`` per window of each mini-batch (``draw`` = the
mini-batch, ``index`` = its row): the items decoded from the observations the network received
in the training forward passes, the states it received there, and the loss mask observed from
ALF's loss: 1 where the gradient of the loss ALF backpropagated reaches that position's output
(a tensor hook on the output), else 0.

Unsupported: ``burn_in > 0`` (ALF has no burn-in: every position of a window is trained and only
LAST steps are masked; ``Algorithm._prepare_experience_data`` leaves a warm-up to the user's
loss), boundary ``"pad"`` (``ReplayBuffer.get_batch`` has no padding: windows cross episode
ends), initial state ``"zeros"`` with one-step windows (``_prepare_experience_data`` aborts with
``logging.fatal``). A scenario stores at least one window per env (``RecurrentScenario``
requires ``steps >= sequence_length`` with boundary ``"cross"``), which ``ReplayBuffer.get_batch``
asserts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from xpspec.kit.arrays import floats, ints
from xpspec.kit.events import env_step
from xpspec.kit.items import decode_items
from xpspec.kit.steps import steps_from_columns
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import RecurrentScenario
from xpspec.protocol.trace import Event, Item, Trace, TrainSequence

__all__ = ["counting_algorithm", "recurrent_problem", "run_recurrent"]

_BLOB = "https://github.com/HorizonRobotics/alf/blob/23aca492/alf"
_ALGORITHM = f"{_BLOB}/algorithms/algorithm.py"
_REPLAY = f"{_BLOB}/experience_replayers/replay_buffer.py"


def recurrent_problem(sc: RecurrentScenario) -> Unsupported | None:
    """Why ALF cannot express ``sc`` (None if it can; ``RecurrentScenario`` itself requires
    next-step auto-reset, which is ALF's). Padding is named before burn-in, so a padded
    scenario's reason is the one the padding clause needs."""
    if sc.boundary != "cross":
        return Unsupported(
            f"boundary {sc.boundary!r}: ALF's ReplayBuffer.get_batch windows run on across "
            "episode ends (the train state is reset at the FIRST inside) and ALF has no option "
            "to stop or pad them (alf/experience_replayers/replay_buffer.py, snapshot 23aca492)",
            _REPLAY,
        )
    if sc.burn_in > 0:
        return Unsupported(
            f"burn_in {sc.burn_in}: ALF (snapshot 23aca492) has no burn-in. "
            "Algorithm._collect_train_info_sequentially trains every position of a "
            "mini_batch_length window and Algorithm._update masks only LAST steps "
            "(mask_out_loss_for_last_step); the state warm-up Algorithm._prepare_experience_data "
            "recommends in a comment is left to the user's own loss (alf/algorithms/algorithm.py)",
            _ALGORITHM,
        )
    if sc.initial_state == "zeros" and sc.sequence_length == 1:
        return Unsupported(
            "initial state 'zeros' with windows of one step: Algorithm._prepare_experience_data "
            "aborts with logging.fatal('Should use TrainerConfig.use_rollout_state=True for "
            "training from a replay buffer when minibatch_length==1') "
            "(alf/algorithms/algorithm.py, snapshot 23aca492)",
            _ALGORITHM,
        )
    return None


@dataclass
class _Journal:
    """What the counting network received, in call order: ``(phase, observation, state,
    output)``; ``grads`` maps a call to the gradient its output received."""

    calls: list[tuple[str, torch.Tensor, torch.Tensor]] = field(default_factory=list)
    grads: dict[int, torch.Tensor] = field(default_factory=dict)
    phase: str = "rollout"

    def record(self, observation: torch.Tensor, state: torch.Tensor, output: torch.Tensor) -> None:
        index = len(self.calls)
        self.calls.append((self.phase, observation.detach().clone(), state.detach().clone()))
        if output.requires_grad:

            def hook(grad: torch.Tensor) -> None:
                self.grads[index] = grad.detach().clone()

            output.register_hook(hook)


_CLASSES: dict[str, Any] = {}


def counting_algorithm() -> Any:
    """The counting algorithm class (an ALF ``RLAlgorithm``; built once ALF is imported).
    Tests subclass it to perturb what ALF supplies."""
    if _CLASSES:
        return _CLASSES["algorithm"]
    import alf
    from alf.algorithms.rl_algorithm import RLAlgorithm
    from alf.data_structures import AlgStep, LossInfo
    from alf.networks import Network

    class CountingNetwork(Network):
        """A recurrent network whose state counts its steps: ``(output, state + 1)``; the
        output, one trainable weight per row, is what the loss is made of."""

        def __init__(self, input_tensor_spec: Any, journal: _Journal) -> None:
            super().__init__(
                input_tensor_spec,
                state_spec=alf.TensorSpec((), torch.int64),
                name="CountingNetwork",
            )
            self._weight = torch.nn.Parameter(torch.ones(()))
            self._journal = [journal]  # a list: not a submodule

        def forward(self, observation: torch.Tensor, state: torch.Tensor) -> Any:
            output = self._weight * torch.ones(observation.shape[0])
            self._journal[0].record(observation, state, output)
            return output, state + 1

    class CountingRecurrentAlgorithm(RLAlgorithm):
        """Off-policy, with the counting network's state as its rollout and train state;
        acts ``state % num_actions``; the loss is the network's output at every position."""

        def __init__(
            self,
            observation_spec: Any,
            action_spec: Any,
            journal: _Journal,
            env: Any = None,
            config: Any = None,
        ) -> None:
            network = CountingNetwork(observation_spec, journal)
            super().__init__(
                observation_spec=observation_spec,
                action_spec=action_spec,
                reward_spec=alf.TensorSpec(()),
                train_state_spec=network.state_spec,
                rollout_state_spec=network.state_spec,
                predict_state_spec=network.state_spec,
                is_on_policy=False,
                env=env,
                config=config,
                optimizer=alf.optimizers.SGD(lr=1e-3),
                name="CountingRecurrentAlgorithm",
            )
            self._network = network
            self._journal = [journal]
            self._num_actions = int(action_spec.maximum) + 1

        def _step(self, phase: str, time_step: Any, state: Any) -> tuple[Any, Any]:
            self._journal[0].phase = phase
            return self._network(time_step.observation, state)

        def predict_step(self, time_step: Any, state: Any) -> Any:
            _, new_state = self._step("predict", time_step, state)
            return AlgStep(output=state % self._num_actions, state=new_state, info=())

        def rollout_step(self, time_step: Any, state: Any) -> Any:
            _, new_state = self._step("rollout", time_step, state)
            return AlgStep(output=state % self._num_actions, state=new_state, info=())

        def train_step(self, time_step: Any, state: Any, rollout_info: Any) -> Any:
            output, new_state = self._step("train", time_step, state)
            return AlgStep(output=(), state=new_state, info=output)

        def calc_loss(self, info: torch.Tensor) -> Any:
            return LossInfo(loss=info)

    _CLASSES.update(algorithm=CountingRecurrentAlgorithm)
    return CountingRecurrentAlgorithm


def run_recurrent(
    sc: RecurrentScenario,
    env_cls: Callable[..., Any],
    root_dir: str,
    algorithm_cls: Any = None,
) -> Trace:
    """One ``train_iter`` of the counting algorithm on ``sc`` (see the module docstring);
    ``env_cls(spec, seed)`` is the toy env as an ALF environment, ``algorithm_cls`` a subclass
    of :func:`counting_algorithm` (the default)."""
    return _RecurrentRun(sc, env_cls, root_dir, algorithm_cls or counting_algorithm()).run()


class _RecurrentRun:
    def __init__(
        self, sc: RecurrentScenario, env_cls: Callable[..., Any], root_dir: str, cls: Any
    ) -> None:
        self.sc = sc
        self.env_cls = env_cls
        self.root_dir = root_dir
        self.cls = cls
        self.journal = _Journal()
        self.events: list[Event] = []
        self.draw = 0
        self._first_call = 0  # the journal index where the current mini-batch began
        self._shape: tuple[int, int] = (0, 0)  # the current mini-batch's [T, B]

    def _algorithm(self) -> Any:
        from alf.algorithms.config import TrainerConfig

        sc = self.sc
        config = TrainerConfig(
            root_dir=self.root_dir,
            unroll_length=sc.steps,
            replay_buffer_length=sc.steps,
            mini_batch_length=sc.sequence_length,
            mini_batch_size=sc.batch_size,
            num_updates_per_train_iter=sc.draws,
            use_rollout_state=sc.initial_state == "stored",
            whole_replay_buffer_training=False,
            clear_replay_buffer=False,
            initial_collect_steps=0,
        )
        env = self.env_cls(sc.env, sc.seed)
        return self.cls(
            env.observation_spec(), env.action_spec(), self.journal, env=env, config=config
        )

    def run(self) -> Trace:
        torch.manual_seed(self.sc.seed)
        alg = self._algorithm()
        self._record(alg)
        alg.train_iter()
        if self.draw != self.sc.draws:
            raise RuntimeError(
                f"mini-batches ALF trained on: expected {self.sc.draws} "
                f"(num_updates_per_train_iter), got {self.draw}"
            )
        return Trace(tuple(self.events), {"producer": "alf", "seed": self.sc.seed})

    # -- recording at ALF's seams ---------------------------------------------------------
    def _record(self, alg: Any) -> None:
        process = alg._process_unroll_step

        def _process_unroll_step(
            policy_step: Any, action: Any, time_step: Any, *rest: Any, **kw: Any
        ) -> Any:
            self._env_step(time_step, action)
            return process(policy_step, action, time_step, *rest, **kw)

        update = alg._update

        def _update(experience: Any, batch_info: Any, weight: Any) -> Any:
            self._first_call = len(self.journal.calls)
            length, size = experience.step_type.shape[:2]
            self._shape = (int(length), int(size))
            out = update(experience, batch_info, weight)
            self._sequences()
            return out

        alg._process_unroll_step = _process_unroll_step
        alg._update = _update

    def _env_step(self, time_step: Any, action: Any) -> None:
        """The vector step ALF just processed, with the state the network received in its
        ``rollout_step`` (the journal's newest call)."""
        phase, observation, state = self.journal.calls[-1]
        if phase != "rollout" or not torch.equal(observation, time_step.observation):
            raise RuntimeError(
                "the network's newest call: expected the rollout step of the time step ALF "
                f"processes, got a {phase} call on other observations"
            )
        rows = steps_from_columns(
            decode_items(time_step.observation),
            ints(time_step.step_type),
            floats(time_step.reward),
            floats(time_step.discount),
            policy_states=ints(state),
            actions=ints(action),
        )
        self.events.append(env_step(0, rows))

    def _sequences(self) -> None:
        """One ``TrainSequence`` per window of the mini-batch ALF just trained on, from the
        network's training calls since ``_update`` began (time-major rows: ``T`` calls of
        ``B`` rows, or one call of ``T * B`` rows for one-step windows)."""
        length, size = self._shape
        indices = range(self._first_call, len(self.journal.calls))
        calls = [self.journal.calls[i] for i in indices]
        if any(phase != "train" for phase, _, _ in calls):
            raise RuntimeError("the network ran outside train_step during ALF's update")
        missing = [i for i in indices if i not in self.journal.grads]
        if missing:
            raise RuntimeError(
                f"network outputs of the update without a gradient: calls {missing}; expected "
                "ALF's backward pass to reach every output it put in the loss"
            )
        observation = torch.cat([o.reshape(-1, o.shape[-1]) for _, o, _ in calls])
        state = torch.cat([s.reshape(-1) for _, _, s in calls])
        grad = torch.cat([self.journal.grads[i].reshape(-1) for i in indices])
        if observation.shape[0] != length * size:
            raise RuntimeError(
                f"rows the network trained on: expected {length} x {size}, got "
                f"{observation.shape[0]}"
            )
        items = decode_items(observation)
        for b in range(size):
            rows = [t * size + b for t in range(length)]
            window: tuple[Item | None, ...] = tuple(items[r] for r in rows)
            self.events.append(
                TrainSequence(
                    self.draw,
                    b,
                    window,
                    tuple(int(state[r]) for r in rows),
                    tuple(int(grad[r] != 0) for r in rows),
                )
            )
        self.draw += 1
