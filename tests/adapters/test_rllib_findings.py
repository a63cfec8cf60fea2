"""RLlib 2.60.0 alone (no xpspec code), reproducing what the recurrent row's expectations cite:
each test builds the framework's own objects and asserts the behaviour the finding describes.
Skipped when RLlib is not installed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.examples.rl_modules.classes.lstm_containing_rlm import LSTMContainingRLModule

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_finding_ppo_masks_the_newest_observation_of_a_cut_chunk() -> None:
    # RLlib's own LSTM example module on CartPole, max_seq_len 4, one chunk of 6 transitions
    # (the episode goes on: truncate_episodes cut it). PPO's learner connector appends the
    # chunk's newest observation as a bootstrap step (AddOneTsToEpisodesAndTruncate), so the
    # 7 rows make sequences of 4 and 3; the second sequence's last real position (inside
    # SEQ_LENS) holds that observation and is out of the loss (LOSS_MASK False), though the
    # episode is not over: the policy acts on that observation in the next chunk.
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0, rollout_fragment_length=6)
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=LSTMContainingRLModule,
                model_config={"lstm_cell_size": 8, "dense_layers": [8], "max_seq_len": 4},
            )
        )
        .training(num_epochs=1, minibatch_size=None)
        .learners(num_learners=0)
        .debugging(seed=0)
    )
    runner = SingleAgentEnvRunner(config=config)
    try:
        (chunk,) = runner.sample(num_timesteps=6, force_reset=True)
    finally:
        runner.stop()
    assert (len(chunk), chunk.is_done) == (6, False)
    newest = np.asarray(chunk.get_observations(-1))
    learner: Any = config.build_learner(env=runner.env)
    module = next(iter(learner.module.values()))
    batch = learner._learner_connector(
        rl_module=learner.module, batch={}, episodes=[chunk], shared_data={}
    )
    columns = batch[next(iter(batch))]
    lengths = np.asarray(columns[Columns.SEQ_LENS]).tolist()
    mask = np.asarray(columns[Columns.LOSS_MASK]).astype(int).tolist()
    assert module.is_stateful() and lengths == [4, 3]
    assert mask == [[1, 1, 1, 1], [1, 1, 0, 0]]
    obs = np.asarray(columns[Columns.OBS])
    assert np.array_equal(obs[1, 2], newest)  # a real position: inside SEQ_LENS
