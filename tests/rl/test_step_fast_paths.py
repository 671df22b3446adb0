"""The step's cheaper paths (#40 item 2) give what the general ones gave, refusals included."""

from __future__ import annotations

import numpy as np
import pytest
from _rl_tasks import RecordingTask

import kelab as ke
from kelab.rl.terminations import TerminationValidator

BIG = 3e38  # finite in float32; a few of them overflow a float32 sum


class BigValues(RecordingTask):
    """Rewards and observations that are finite but sum to more than float32 holds."""

    def get_rewards(self):
        return np.full(self.num_envs, BIG, dtype=np.float32)

    def get_observations(self):
        return np.full((self.num_envs, 3), -BIG)


def test_finite_values_whose_sum_overflows_are_accepted():
    env = ke.LearningEnv(BigValues(), num_envs=4)
    obs, _ = env.reset()
    assert (obs == np.float32(-BIG)).all()
    actions = np.full((4, 1), BIG, dtype=np.float32)  # finite: accepted, then clipped
    obs, rewards, *_ = env.step(actions)
    assert (rewards == np.float32(BIG)).all() and (obs == np.float32(-BIG)).all()
    assert env.task.last_actions.tolist() == [[2.0]] * 4  # clipped to 1, doubled by the task


def test_non_finite_values_are_still_refused_naming_the_copies():
    env = ke.LearningEnv(RecordingTask(), num_envs=3)
    env.reset()
    bad = np.zeros((3, 1), dtype=np.float32)
    bad[1] = np.inf
    with pytest.raises(ValueError, match=r"NaN or infinite values for copies \[1\]"):
        env.step(bad)
    env.step(np.zeros((3, 1), np.float32))  # a refused action changed nothing
    env.task.reward = np.nan
    with pytest.raises(ke.TaskError, match=r"get_rewards\(\) returned NaN .* copies \[0, 1, 2\]"):
        env.step(np.zeros((3, 1), np.float32))


def test_actions_of_any_layout_become_a_c_ordered_clipped_copy():
    env = ke.LearningEnv(RecordingTask(), num_envs=3)
    env.reset()
    actions = np.asfortranarray(np.array([[0.5], [-4.0], [2.0]], dtype=np.float32))
    env.step(actions)
    got = env.task.last_actions
    assert got.flags.c_contiguous and got.tolist() == [[1.0], [-2.0], [2.0]]
    assert actions.tolist() == [[0.5], [-4.0], [2.0]]


def test_uniform_with_float_bounds_is_the_generators_and_refuses_alike():
    env = ke.LearningEnv(RecordingTask(), num_envs=4, seed=5)
    task = env.task
    clones = [np.random.default_rng(0) for _ in range(4)]
    for clone, rng in zip(clones, task.rngs, strict=True):
        clone.bit_generator.state = rng.bit_generator.state
    ids = np.array([2, 0, 3])
    got = task.uniform(ids, -0.1, 0.1, size=2)
    for row, i in zip(got, ids.tolist(), strict=True):
        assert row.tobytes() == clones[i].uniform(-0.1, 0.1, 2).tobytes()
    errors = []
    for low, high in ((-1e308, 1e308), (np.float64(-1e308), np.float64(1e308))):
        with np.errstate(over="ignore"), pytest.raises(ValueError, match="must be finite") as err:
            task.uniform([0], low, high)
        errors.append(str(err.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize(
    "ids, match",
    [([0, 4], r"must be in \[0, 4\), got \[4\]"), ([1, 1], r"must not repeat a copy, got \[1\]")],
)
def test_an_envs_int64_ids_are_refused_as_lists_are(ids, match):
    task = ke.LearningEnv(RecordingTask(), num_envs=4).task
    for given in (ids, np.array(ids, dtype=np.int64)):
        with pytest.raises(ValueError, match=match):
            task.uniform(given, size=2)


def test_info_final_info_holds_copies_in_the_infos_order():
    env = ke.LearningEnv(RecordingTask(end_at=[1, 0]), num_envs=2)
    env.reset()
    *_, info = env.step(np.zeros((2, 1), np.float32))
    final = info["final_info"]
    assert list(info) == ["final_obs", "_final_obs", "final_info", "_final_info", *final]
    assert list(final) == [
        "episode", "_episode", "ended_by", "_ended_by", "episode_return", "_episode_return",
        "episode_length", "_episode_length",
    ]  # fmt: skip
    for key, value in final.items():
        if isinstance(value, np.ndarray):
            assert value is not info[key] and not np.shares_memory(value, info[key])
            assert value.tolist() == info[key].tolist()
    assert final["episode"] is not info["episode"] and final["episode"] == info["episode"]
    info["episode_return"][0] = 99.0
    assert final["episode_return"][0] == 1.0


class SharedTruncated(RecordingTask):
    """Returns the same truncation buffer every step."""

    def on_start(self, env):
        super().on_start(env)
        self.buffer = np.zeros(self.num_envs, bool)

    def get_dones(self):
        terminated, truncated = super().get_dones()
        self.buffer[:] = truncated
        return terminated, self.buffer


def test_the_returned_truncated_is_not_the_tasks_buffer():
    validator = TerminationValidator(2)
    flags = np.zeros(2, bool)
    assert validator(({}, flags))[2] is flags  # the env copies it (ORs in the time limit)
    env = ke.LearningEnv(SharedTruncated(cut_at=[1, 0]), num_envs=2)
    env.reset()
    _, _, _, truncated, _ = env.step(np.zeros((2, 1), np.float32))
    assert truncated.tolist() == [True, False]
    env.task.buffer[:] = False
    assert truncated.tolist() == [True, False]


def _edge_values(dtype):
    tiny = np.finfo(np.float32).smallest_subnormal
    big = np.finfo(np.float32).max
    rng = np.random.default_rng(7)
    if np.dtype(dtype).kind == "i":
        return rng.integers(-3, 4, (50, 2)).astype(dtype)
    above = np.nextafter(np.float32(1), np.float32(2))
    edges = [0.0, -0.0, 1.0, -1.0, above, -above, tiny, -tiny, big, -big]
    values = [edges, rng.uniform(-3, 3, 300), rng.normal(0, 1e-30, 40)]
    return np.concatenate(values, axis=None).astype(dtype).reshape(-1, 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_clipped_actions_are_np_clips_bits(dtype):
    """ndarray.clip gives np.maximum then np.minimum's bits: -0.0, the bounds, subnormals."""
    from kelab.rl._contract import check_actions

    actions = _edge_values(dtype)
    got = check_actions(actions, actions.shape[0], 2)
    want = np.minimum(np.maximum(actions.astype(np.float32), -1.0), 1.0)
    assert got.dtype == np.float32 and got.flags.c_contiguous
    assert got.tobytes() == want.tobytes()
    one = check_actions(actions[3], 1, 2, single=True)  # DirectRLEnv's (action_dim,)
    assert one.shape == (1, 2) and one.tobytes() == want[3:4].tobytes()


class MappingDones(RecordingTask):
    """get_dones returns a read-only Mapping (not a dict) of its conditions."""

    def get_dones(self):
        import types

        terminated, truncated = super().get_dones()
        return types.MappingProxyType(terminated), truncated


def test_dones_in_any_mapping_are_accepted_and_others_refused_alike():
    env = ke.LearningEnv(MappingDones(end_at=[1, 0]), num_envs=2)
    env.reset()
    *_, info = env.step(np.zeros((2, 1), np.float32))
    assert info["ended_by"].tolist() == ["ball dropped", None]
    validator = TerminationValidator(2)
    with pytest.raises(ke.TaskError, match=r"terminated must be a dict .* got a list"):
        validator(([("ball dropped", np.zeros(2, bool))], np.zeros(2, bool)))


class Endings(RecordingTask):
    """On an episode's 5th step copy 0 meets every condition, copy 1 the second only and
    copy 2 is cut short; copy 3 runs out of time on the 6th."""

    conditions = ("first", "second")

    def get_dones(self):
        last = self.episode_length_buf + 1 == 5
        hits = {"first": [0], "second": [0, 1]}
        terminated = {}
        for name in self.conditions:
            flags = np.zeros(self.num_envs, bool)
            flags[hits[name]] = True
            terminated[name] = flags & last
        cut = np.zeros(self.num_envs, bool)
        cut[2] = True
        return terminated, (cut & last) | (self.episode_length_buf >= self.max_episode_length - 1)


@pytest.mark.parametrize("conditions", [(), ("first",), ("first", "second")])
def test_ended_by_names_the_first_condition_then_the_limit_kinds(conditions):
    task = Endings()
    task.conditions = conditions
    env = ke.LearningEnv(task, num_envs=5)
    env.reset()
    zeros = np.zeros((5, 1), np.float32)
    for step in range(4):
        assert not env.step(zeros)[4]
        if step == 1:  # copy 4 restarts: it is in its 3rd step when copy 3's time is up
            env.reset(options={"env_ids": [4]})
    info = env.step(zeros)[4]
    first = {(): None, ("first",): "first", ("first", "second"): "first"}[conditions]
    second = "second" if "second" in conditions else None
    cut = "cut short by the task"
    assert info["ended_by"].tolist() == [first, second, cut, None, None]
    ended = [label is not None for label in (first, second)]
    assert info["_ended_by"].tolist() == [*ended, True, False, False]
    assert info["final_info"]["ended_by"].tolist() == info["ended_by"].tolist()
    info = env.step(zeros)[4]
    late = ["time limit" if label is None else None for label in (first, second)]
    assert info["ended_by"].tolist() == [*late, None, "time limit", None]


def test_vector_info_counters_hold_the_ended_rows_and_zeros_elsewhere():
    """Rows of copies still running hold live counters in the record: the info shows 0."""
    from kelab.rl.episode_ends import EpisodeCounters, EpisodeEnds, vector_info

    rng = np.random.default_rng(3)
    mask = np.array([False, True, False, True, False])
    counters = EpisodeCounters(
        rng.normal(size=5) * 1e3, rng.integers(1, 600, 5), rng.uniform(0, 9, 5).round(6)
    )
    ends = EpisodeEnds(
        ids=np.flatnonzero(mask),
        mask=mask,
        final_obs=rng.normal(size=(5, 2)).astype(np.float32),
        ended_by=np.array([None, "time limit", None, "fell", None], dtype=object),
        counters=counters,
        names=("fell",),
    )
    info = vector_info(ends, 5)
    returns, lengths, wall = (np.where(mask, value, 0) for value in counters)
    assert info["episode_return"].dtype == np.float64 and info["episode_length"].dtype == np.int64
    assert info["episode_return"].tobytes() == returns.astype(np.float64).tobytes()
    assert info["episode_length"].tobytes() == lengths.astype(np.int64).tobytes()
    stats = info["episode"]
    assert stats["r"].tobytes() == returns.astype(np.float32).tobytes()
    assert stats["l"].tobytes() == lengths.astype(np.int32).tobytes()
    assert stats["t"].tobytes() == wall.astype(np.float32).tobytes()
    assert info["final_obs"][~mask].tobytes() == bytes(4 * 2 * 3)  # +0.0 where none ended
