"""ALF's PPO learner on the toy env (capability ``learner`` of :mod:`xpspec.adapters.alf`),
snapshot ``23aca492``: one ``RLAlgorithm.train_iter`` of a ``PPOAlgorithm``
(``alf/algorithms/ppo_algorithm.py``) with ``PPOLoss`` (``alf/algorithms/ppo_loss.py``),
trained on its whole replay buffer as ALF's PPO configurations do
(``alf/examples/ppo_conf.py``: ``whole_replay_buffer_training``). Nothing of ALF is
re-implemented; what is recorded is read from ALF's own objects.

**Configuration.** ``TrainerConfig(unroll_length=steps, replay_buffer_length=steps,
whole_replay_buffer_training=True, clear_replay_buffer=False, mini_batch_length=1,
mini_batch_size=minibatch_size, num_updates_per_train_iter=num_epochs)`` with ALF's defaults
otherwise (``mask_out_loss_for_last_step=True``); ``PPOLoss(gamma, td_lambda=lam,
normalize_advantages=True)`` (its default). ``clear_replay_buffer`` is off: with one
``train_iter`` there is nothing to clear, and with it ALF would size the ring
``unroll_length + 1`` and wait for it to fill (the trainer's deviation ``replay.clear``
``alf-fixed-length``). One ``train_iter`` unrolls ``steps`` time steps
of every env into the buffer (``RLAlgorithm.unroll`` stores each time step before stepping,
so the buffer holds exactly every env's first ``steps`` time steps, as rows: FIRST, MID, ...,
LAST, FIRST, ...), then ``Algorithm.train_from_replay_buffer`` gathers it
(``ReplayBuffer.gather_all``), ``PPOAlgorithm.preprocess_experience`` computes advantages
(``value_ops.generalized_advantage_estimation`` with ``discounts = gamma * discount``, zero at
LAST rows and, by ``tensor_extend_zero``, at each env's newest row) and returns
``value + advantage``, and ``Algorithm._train_experience`` makes ``num_epochs`` passes over
the rows (every row an item of ``mini_batch_length`` 1) in shuffled mini-batches of the
(resized) ``mini_batch_size``. The value network is the toy value ``V(o) = value_scale * t(o)``
(an ALF ``Network`` around :func:`~xpspec.kit.value.toy_value`); the actor is ALF's
``ActorDistributionNetwork``. The toy env's episodes do not depend on the actions.

**Rows.** ALF keeps the spec's row layout: an episode of ``L`` transitions is ``L + 1``
buffer rows, the last one (row ``L``: the LAST, or an in-progress chunk's newest row) carrying
``o_L``, whose value bootstraps the others. Every row is recorded with ALF's advantage and
return, the normalised advantage ``PPOLoss`` trained the first epoch on (the ``advantages``
``ActorCriticLoss.forward`` hands ``PPOLoss._pg_loss``), and the loss mask ALF applied (the
``valid_masks`` ``Algorithm._update`` passes ``update_with_gradient``), so ``bootstrap`` is
declared. A trailing chunk holding only its FIRST has no transition and gets no event. The
update plan names the mini-batches ``Algorithm._update`` trained on by their observations:
training rows ``0 .. N - 1`` (the transitions, env-major in time order), then the rows ``L``
and lone FIRSTs, which ALF also trains on, from ``N`` on.

**n-step targets.** ALF's critics train on multi-step returns over the windows of
``mini_batch_length`` rows they sample (``TDLoss``, ``alf/algorithms/td_loss.py``; with
``td_lambda=1`` its ``compute_td_target`` is ``value_ops.discounted_return``): each
transition's ``n``-step target is what ``compute_td_target`` gives its row of a window of
``n + 1`` buffer rows (see :meth:`_LearnerRun._nstep`), with ALF's rollout values.

Not applicable: several learners (ALF's multi-GPU training, ``Algorithm.activate_ddp``, runs
one process per device, each on its own environments and replay buffer: nothing splits one
batch's episodes among learners), fewer than two time steps (``value_ops`` asserts a sequence
of at least 2). Not declared: ``caller-episodes`` (ALF's learner is handed no episode objects,
only its replay buffer) and ``shards``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import torch

from xpspec.kit.episodes import episode_rows
from xpspec.kit.items import decode_items
from xpspec.kit.value import toy_value
from xpspec.protocol.adapter import Unsupported
from xpspec.protocol.scenario import LearnerScenario
from xpspec.protocol.step_type import StepType
from xpspec.protocol.trace import Advantages, Event, Item, NStep, Trace, UpdatePlan

__all__ = ["learner_problem", "run_learner"]

_BLOB = "https://github.com/HorizonRobotics/alf/blob/23aca492/alf"
_LAST = int(StepType.LAST)
_FIRST = int(StepType.FIRST)


def learner_problem(sc: LearnerScenario) -> Unsupported | None:
    """Why ALF cannot express ``sc`` (None if it can)."""
    if sc.num_learners != 1:
        return Unsupported(
            f"{sc.num_learners} learners: ALF's multi-GPU training (Algorithm.activate_ddp, "
            "alf/algorithms/algorithm.py, snapshot 23aca492) runs one process per device, each "
            "unrolling its own environments into its own replay buffer; no code of ALF splits "
            "one batch's episodes among learners",
            f"{_BLOB}/algorithms/algorithm.py",
        )
    if sc.steps < 2:
        return Unsupported(
            f"{sc.steps} time step: value_ops.generalized_advantage_estimation asserts a "
            "sequence of at least 2 (alf/utils/value_ops.py, snapshot 23aca492)",
            f"{_BLOB}/utils/value_ops.py",
        )
    return None


def run_learner(sc: LearnerScenario, env_cls: Callable[..., Any], root_dir: str) -> Trace:
    """One ``train_iter`` of ALF's PPO on ``sc`` (see the module docstring); ``env_cls`` is
    the toy env as an ALF environment (``env_cls(spec, seed)``)."""
    return _LearnerRun(sc, env_cls, root_dir).run()


def _value_network(scale: float) -> Callable[..., Any]:
    from alf.networks import Network

    class ToyValueNetwork(Network):
        """``V(o) = value_scale * t(o)`` as an ALF value network (output ``[B]``)."""

        def __init__(self, input_tensor_spec: Any) -> None:
            super().__init__(input_tensor_spec, name="ToyValueNetwork")

        def forward(self, observation: torch.Tensor, state: Any = ()) -> Any:
            return toy_value(observation, scale)[..., 0], state

    return ToyValueNetwork


class _Rows(NamedTuple):
    """The buffer's rows as ``preprocess_experience`` received them, ``[B, T]`` each: step
    types, rewards, discounts and the values ALF's rollout computed."""

    step_type: torch.Tensor
    reward: torch.Tensor
    discount: torch.Tensor
    value: torch.Tensor


class _TDInfo(NamedTuple):
    """The fields ``TDLoss.compute_td_target`` reads of its ``info``, time-major ``[W, 1]``."""

    reward: torch.Tensor
    step_type: torch.Tensor
    discount: torch.Tensor


class _LearnerRun:
    def __init__(self, sc: LearnerScenario, env_cls: Callable[..., Any], root_dir: str) -> None:
        self.sc = sc
        self.env_cls = env_cls
        self.root_dir = root_dir
        self.preprocessed: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self.batches: list[list[Item]] = []  # the items of each mini-batch, in ALF's order
        self.masks: list[list[int]] = []  # the valid_masks of each mini-batch
        self.normalized: list[list[float]] = []  # the advantages _pg_loss received
        self.rows: _Rows | None = None

    def _algorithm(self) -> Any:
        import alf
        from alf.algorithms.config import TrainerConfig
        from alf.algorithms.ppo_algorithm import PPOAlgorithm
        from alf.algorithms.ppo_loss import PPOLoss
        from alf.networks import ActorDistributionNetwork

        sc = self.sc
        config = TrainerConfig(
            root_dir=self.root_dir,
            unroll_length=sc.steps,
            replay_buffer_length=sc.steps,
            whole_replay_buffer_training=True,
            clear_replay_buffer=False,
            mini_batch_length=1,
            mini_batch_size=sc.minibatch_size,
            num_updates_per_train_iter=sc.num_epochs,
            initial_collect_steps=0,
        )
        env = self.env_cls(sc.env, sc.seed)
        return PPOAlgorithm(
            observation_spec=env.observation_spec(),
            action_spec=env.action_spec(),
            actor_network_ctor=partial(ActorDistributionNetwork, fc_layer_params=()),
            value_network_ctor=_value_network(float(sc.value_scale)),
            env=env,
            config=config,
            loss=PPOLoss(gamma=float(sc.gamma), td_lambda=float(sc.lam), normalize_advantages=True),
            optimizer=alf.optimizers.Adam(lr=1e-3),
        )

    def run(self) -> Trace:
        torch.manual_seed(self.sc.seed)
        alg = self._algorithm()
        self._record(alg)
        alg.train_iter()
        if len(self.preprocessed) != 1:
            raise RuntimeError(
                f"PPOAlgorithm.preprocess_experience calls in one train_iter: expected 1, got "
                f"{len(self.preprocessed)}"
            )
        events: list[Event] = [*self._advantages(), self._nstep(), self._plan()]
        return Trace(tuple(events), {"producer": "alf", "seed": self.sc.seed})

    # -- recording at ALF's seams ---------------------------------------------------------
    def _record(self, alg: Any) -> None:
        preprocess = alg.preprocess_experience

        def preprocess_experience(root_inputs: Any, rollout_info: Any, batch_info: Any) -> Any:
            out = preprocess(root_inputs, rollout_info, batch_info)
            info = out[1]
            self.preprocessed.append(
                (
                    root_inputs.observation.detach().clone(),  # [B, T, 3]
                    info.advantages.detach().clone(),  # [B, T]
                    info.returns.detach().clone(),
                )
            )
            self.rows = _Rows(
                root_inputs.step_type.detach().clone(),
                root_inputs.reward.detach().clone(),
                root_inputs.discount.detach().clone(),
                rollout_info.value.detach().clone(),
            )
            return out

        update = alg._update

        def _update(experience: Any, batch_info: Any, weight: Any) -> Any:
            self.batches.append(decode_items(experience.time_step.observation.reshape(-1, 3)))
            return update(experience, batch_info, weight)

        update_with_gradient = alg.update_with_gradient

        def recorded_update_with_gradient(
            loss_info: Any, valid_masks: Any = None, *a: Any, **k: Any
        ) -> Any:
            n = len(self.batches[-1])
            mask = [1] * n if valid_masks is None else [int(v) for v in valid_masks.reshape(-1)]
            self.masks.append(mask)
            return update_with_gradient(loss_info, valid_masks, *a, **k)

        loss = alg._loss
        pg_loss = loss._pg_loss

        def recorded_pg_loss(info: Any, advantages: torch.Tensor) -> Any:
            self.normalized.append([float(v) for v in advantages.detach().reshape(-1)])
            return pg_loss(info, advantages)

        alg.preprocess_experience = preprocess_experience
        alg._update = _update
        alg.update_with_gradient = recorded_update_with_gradient
        loss._pg_loss = recorded_pg_loss

    # -- events ----------------------------------------------------------------------------
    def _first_epoch(self) -> tuple[dict[Item, float], dict[Item, int]]:
        """Each row's normalised advantage and loss mask in the first epoch."""
        per_epoch = len(self.batches) // self.sc.num_epochs
        normalized: dict[Item, float] = {}
        mask: dict[Item, int] = {}
        for items, values, masks in zip(
            self.batches[:per_epoch], self.normalized[:per_epoch], self.masks[:per_epoch]
        ):
            normalized.update(zip(items, values))
            mask.update(zip(items, masks))
        return normalized, mask

    def _advantages(self) -> list[Advantages]:
        observation, advantages, returns = self.preprocessed[0]
        normalized, mask = self._first_epoch()
        out = []
        for e in range(observation.shape[0]):
            items = decode_items(observation[e])
            adv = advantages[e].tolist()
            ret = returns[e].tolist()
            for (env, k), rows in episode_rows(items).items():
                if len(rows) < 2:  # a trailing FIRST alone: no transition
                    continue
                out.append(
                    Advantages(
                        env,
                        k,
                        tuple(int(items[i][2]) for i in rows),
                        tuple(float(adv[i]) for i in rows),
                        tuple(float(ret[i]) for i in rows),
                        tuple(normalized[items[i]] for i in rows),
                        tuple(mask[items[i]] for i in rows),
                    )
                )
        return out

    def _nstep(self) -> NStep:
        """n-step targets of every transition by ``TDLoss(gamma, td_lambda=1)``
        (``compute_td_target``: ``value_ops.discounted_return``), the multi-step return ALF's
        critics train on over a window of ``mini_batch_length`` rows: row ``i`` of a window
        gets the discounted rewards up to the window's last row or the first LAST, whichever
        comes first, and bootstraps from that row's value times its discount. Transition
        ``t`` is read from the window of ``n + 1`` rows starting at ``t``, or from the last
        such window of the buffer when fewer rows follow ``t`` (a window ``get_batch`` could
        draw; the whole buffer if shorter). The rewards summed, ``k``, are read off the same
        code on the window with rewards 0, discounts 1, ``gamma`` 1 and each row's index as
        its value: the target is then the index of the row ALF bootstrapped from."""
        from alf.algorithms.td_loss import TDLoss

        assert self.rows is not None
        rows = self.rows
        observation = self.preprocessed[0][0]
        target = TDLoss(gamma=float(self.sc.gamma), td_lambda=1.0)
        probe = TDLoss(gamma=1.0, td_lambda=1.0)
        n = self.sc.nstep
        starts: list[Item] = []
        targets: list[float] = []
        steps: list[int] = []
        length = observation.shape[1]
        for e in range(observation.shape[0]):
            items = decode_items(observation[e])
            for members in episode_rows(items).values():
                for t in members[:-1]:  # the transitions: every row but the row L
                    first = max(0, min(t, length - 1 - n))
                    window = slice(first, min(first + n, length - 1) + 1)
                    info = _TDInfo(
                        rows.reward[e, window, None],
                        rows.step_type[e, window, None],
                        rows.discount[e, window, None],
                    )
                    g = target.compute_td_target(info, rows.value[e, window, None])
                    index = torch.arange(window.start, window.stop, dtype=torch.float32)[:, None]
                    marker = probe.compute_td_target(
                        _TDInfo(
                            torch.zeros_like(info.reward),
                            info.step_type,
                            torch.ones_like(info.discount),
                        ),
                        index,
                    )
                    starts.append(items[t])
                    targets.append(float(g[t - first, 0]))
                    steps.append(round(float(marker[t - first, 0])) - t)
        env, episode, t_ = (tuple(int(item[c]) for item in starts) for c in range(3))
        return NStep(env, episode, t_, tuple(targets), tuple(steps))

    def _plan(self) -> UpdatePlan:
        """The mini-batches ALF trained on, rows named as the module docstring says."""
        observation = self.preprocessed[0][0]
        trained: list[Item] = []
        others: list[Item] = []
        for e in range(observation.shape[0]):
            items = decode_items(observation[e])
            for rows in episode_rows(items).values():
                trained.extend(items[i] for i in rows[:-1])
                others.append(items[rows[-1]])
        number = {item: i for i, item in enumerate([*trained, *others])}
        plan = tuple(tuple(number[item] for item in batch) for batch in self.batches)
        if len(self.batches) % self.sc.num_epochs:
            raise RuntimeError(
                f"mini-batches: expected a multiple of {self.sc.num_epochs} epochs, got "
                f"{len(self.batches)}"
            )
        return UpdatePlan(len(plan), plan)
