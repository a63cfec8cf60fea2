"""The ALF adapter's recurrent row (:mod:`xpspec.adapters.alf_recurrent`): what it records of
ALF's own recurrent training (snapshot 23aca492, run from a checkout). The suite's way (a
worker forking a child per operation) for the recorded trace, and in this process, with the
counting algorithm subclassed, to show that the recorded values move when ALF's side moves.
Skipped when ALF is not on the path (it is not on PyPI; see the conformance(alf) nox session).

The env: two envs whose episodes are t = 0 .. 4 (FIRST, three MIDs, LAST), so nine vector
steps store episode 0 and t = 0 .. 3 of episode 1 in each env."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import torch

alf_adapter = pytest.importorskip("xpspec.adapters.alf")  # ModuleNotFoundError without ALF

from xpspec.adapters import alf_recurrent  # noqa: E402
from xpspec.conformance.harness import connect  # noqa: E402
from xpspec.protocol.adapter import Unsupported  # noqa: E402
from xpspec.protocol.env_spec import EnvSpec  # noqa: E402
from xpspec.protocol.scenario import RecurrentScenario  # noqa: E402
from xpspec.protocol.trace import EnvStep, Trace, TrainSequence  # noqa: E402

F, M, L = 0, 1, 2
ENV = EnvSpec(num_envs=2)  # fixed episodes of t = 0 .. 4
SCENARIO = RecurrentScenario(ENV, steps=9, sequence_length=4, batch_size=3, draws=2)


@pytest.fixture(scope="module")
def adapter() -> Iterator[Any]:
    a = connect("alf")
    yield a
    a.close()


def _sequences(trace: Trace) -> list[TrainSequence]:
    return [e for e in trace.events if isinstance(e, TrainSequence)]


def _rollout_states(trace: Trace) -> dict[tuple[int, int, int], int]:
    out: dict[tuple[int, int, int], int] = {}
    for e in trace.events:
        if isinstance(e, EnvStep):
            out.update(zip(zip(e.env, e.episode, e.t), e.policy_state))
    return out


def _in_process(sc: RecurrentScenario, cls: Any = None) -> Trace:
    with tempfile.TemporaryDirectory(prefix="xpspec-alf-test-") as root:
        return alf_recurrent.run_recurrent(sc, alf_adapter._learner_env, root, cls)


def test_alf_trains_windows_from_the_stored_state_resetting_at_first(adapter: Any) -> None:
    trace = adapter.run_recurrent(SCENARIO)
    steps = [e for e in trace.events if isinstance(e, EnvStep)]
    assert len(steps) == 9 and all(e.env == (0, 1) for e in steps)
    states = _rollout_states(trace)
    assert all(state == t for (_, _, t), state in states.items())  # ALF's rollout resets
    sequences = _sequences(trace)
    assert [(s.draw, s.index) for s in sequences] == [(d, i) for d in (0, 1) for i in (0, 1, 2)]
    for s in sequences:
        items = [i for i in s.items if i is not None]
        assert len(items) == 4 and len({i[0] for i in items}) == 1
        assert s.state_in[0] == states[items[0]]  # the stored state of the first step
        for p in range(1, 4):
            expected = 0 if items[p][2] == 0 else s.state_in[p - 1] + 1
            assert s.state_in[p] == expected, s
        # the gradient of ALF's loss reaches every position but a LAST (mask_out_loss_for_last_step)
        assert s.loss_mask == tuple(0 if i[2] == 4 else 1 for i in items), s
    assert any(s.items[0] is not None and s.items[0][2] > 0 for s in sequences)
    assert any(0 in s.loss_mask for s in sequences)


def test_without_rollout_state_alf_starts_every_window_from_zero(adapter: Any) -> None:
    sequences = _sequences(adapter.run_recurrent(replace(SCENARIO, initial_state="zeros")))
    assert all(s.state_in[0] == 0 for s in sequences)
    assert any(s.items[0] is not None and s.items[0][2] > 0 for s in sequences)


def test_one_step_windows_take_each_stored_state(adapter: Any) -> None:
    sc = replace(SCENARIO, sequence_length=1, batch_size=5)
    trace = adapter.run_recurrent(sc)
    states = _rollout_states(trace)
    sequences = _sequences(trace)
    assert len(sequences) == 10
    for s in sequences:
        (item,) = s.items
        assert item is not None and s.state_in == (states[item],)
        assert s.loss_mask == ((0,) if item[2] == 4 else (1,))


def test_runs_are_deterministic_and_the_seed_moves_alfs_draws(adapter: Any) -> None:
    first, again = adapter.run_recurrent(SCENARIO), adapter.run_recurrent(SCENARIO)
    assert first.events == again.events
    other = adapter.run_recurrent(replace(SCENARIO, seed=1))
    assert [s.items for s in _sequences(other)] != [s.items for s in _sequences(first)]


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"burn_in": 1}, "no burn-in"),
        ({"boundary": "pad"}, "no option to stop or pad"),
        ({"initial_state": "zeros", "sequence_length": 1}, "logging.fatal"),
    ],
)
def test_what_alf_cannot_express_is_unsupported(
    adapter: Any, changes: dict[str, Any], words: str
) -> None:
    with pytest.raises(Unsupported, match=words):
        adapter.run_recurrent(replace(SCENARIO, **changes))


# -- the recorded values are ALF's: perturb ALF's side, the record follows --------------------
def test_a_different_initial_train_state_shows_at_every_reset() -> None:
    base = alf_recurrent.counting_algorithm()

    class SevenAtReset(base):  # type: ignore[misc, valid-type]
        def get_initial_train_state(self, batch_size: int) -> Any:
            return torch.full((batch_size,), 7, dtype=torch.int64)

    plain = _sequences(_in_process(SCENARIO))
    seven = _sequences(_in_process(SCENARIO, SevenAtReset))
    assert [s.items for s in seven] == [s.items for s in plain]  # same windows (same seed)
    later_first = [
        (s, p) for s in seven for p in range(1, 4) if s.items[p] is not None and s.items[p][2] == 0
    ]
    assert later_first and all(s.state_in[p] == 7 for s, p in later_first)
    assert all(s.state_in[p] != 7 for s in plain for p in range(4))


def test_a_different_initial_rollout_state_is_stored_and_replayed() -> None:
    base = alf_recurrent.counting_algorithm()

    class FiveAtReset(base):  # type: ignore[misc, valid-type]
        def get_initial_rollout_state(self, batch_size: int) -> Any:
            return torch.full((batch_size,), 5, dtype=torch.int64)

    trace = _in_process(SCENARIO, FiveAtReset)
    states = _rollout_states(trace)
    assert all(state == t + 5 for (_, _, t), state in states.items())
    for s in _sequences(trace):
        first = s.items[0]
        assert first is not None
        # a window starting at a FIRST is reset to ALF's train state 0, else starts stored
        assert s.state_in[0] == (0 if first[2] == 0 else first[2] + 5)


def test_a_loss_that_drops_a_position_shows_in_the_mask() -> None:
    base = alf_recurrent.counting_algorithm()

    class NoLossAtTwo(base):  # type: ignore[misc, valid-type]
        def calc_loss(self, info: torch.Tensor) -> Any:
            keep = torch.ones_like(info)
            keep[2] = 0
            return super().calc_loss(info * keep)

    for s in _sequences(_in_process(SCENARIO, NoLossAtTwo)):
        assert s.loss_mask[2] == 0
        assert s.loss_mask[1] == (0 if s.items[1] is not None and s.items[1][2] == 4 else 1)
