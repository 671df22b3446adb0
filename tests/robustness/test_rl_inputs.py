"""RL boundary inputs: actions, env ids, termination names, and failed steps.

A step whose task hook raised leaves the env failed: the next ``step()`` says to call
``reset()`` (docs/rl.md). Refused actions change nothing.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kelab as ke
from kelab.rl.terminations import check_condition_name


class BallTask(ke.Task):
    """A ball per copy; ``fail_on`` names a hook that raises a TaskError on a given step."""

    observation_dim = 2
    action_dim = 2
    episode_length_s = 1.0

    def __init__(self, fail_on: str | None = None, fail_step: int = 3) -> None:
        self.fail_on = fail_on
        self.fail_step = fail_step

    def build(self, scene):
        scene.add(ke.Terrain.plane(), at="/", per_environment=False)
        scene.add(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(0.0, 1.0)), at="/World/Ball")

    def on_start(self, env):
        self.steps = 0
        self.draws = None

    def _maybe_fail(self, hook: str) -> None:
        if self.fail_on == hook and self.steps == self.fail_step:
            self.fail_on = None  # once
            raise ke.TaskError(f"{hook} broke on purpose")

    def apply_actions(self, actions):
        self.steps += 1
        self._maybe_fail("apply_actions")

    def get_dones(self):
        self._maybe_fail("get_dones")
        return {"fell": np.zeros(self.num_envs, bool)}, np.zeros(self.num_envs, bool)

    def get_rewards(self):
        self._maybe_fail("get_rewards")
        return np.ones(self.num_envs, np.float32)

    def get_observations(self):
        self._maybe_fail("get_observations")
        return np.zeros((self.num_envs, 2), np.float32)

    def reset_idx(self, env_ids):
        self.draws = self.uniform(env_ids, -1.0, 1.0)


@pytest.fixture(scope="module")
def env():
    e = ke.LearningEnv(BallTask(), num_envs=3)
    e.reset(seed=0)
    yield e
    e.close()


@pytest.fixture(scope="module")
def direct():
    e = ke.DirectRLEnv(BallTask())
    e.reset(seed=0)
    yield e
    e.close()


# ---------------------------------------------------------------- failed steps
@pytest.mark.parametrize("hook", ["apply_actions", "get_dones", "get_rewards", "get_observations"])
def test_a_task_error_in_a_step_marks_the_env_failed_until_reset(hook):
    env = ke.LearningEnv(BallTask(fail_on=hook, fail_step=3), num_envs=2)
    try:
        env.reset(seed=0)
        for _ in range(2):
            env.step(np.zeros((2, 2), np.float32))
        with pytest.raises(ke.TaskError, match="broke on purpose"):
            env.step(np.zeros((2, 2), np.float32))
        buf = env.episode_length_buf.copy()
        steps = env.world.step_count
        for _ in range(2):  # refused every time, and nothing moves
            with pytest.raises(RuntimeError, match=r"last step\(\) raised TaskError.*reset\(\)"):
                env.step(np.zeros((2, 2), np.float32))
        assert env.world.step_count == steps and np.array_equal(env.episode_length_buf, buf)
        env.reset()
        obs, *_ = env.step(np.zeros((2, 2), np.float32))
        assert obs.shape == (2, 2) and (env.episode_length_buf == 1).all()
    finally:
        env.close()


def test_direct_env_failed_step_then_reset():
    env = ke.DirectRLEnv(BallTask(fail_on="get_rewards", fail_step=1))
    try:
        env.reset(seed=0)
        with pytest.raises(ke.TaskError):
            env.step(np.zeros(2, np.float32))
        with pytest.raises(RuntimeError, match=r"call reset\(\)"):
            env.step(np.zeros(2, np.float32))
        env.reset()
        env.step(np.zeros(2, np.float32))
    finally:
        env.close()


def test_restore_clears_a_failure():
    env = ke.LearningEnv(BallTask(fail_on="get_rewards", fail_step=2), num_envs=2)
    try:
        env.reset(seed=0)
        env.step(np.zeros((2, 2), np.float32))
        snap = env.snapshot()
        with pytest.raises(ke.TaskError):
            env.step(np.zeros((2, 2), np.float32))
        env.restore(snap)
        env.step(np.zeros((2, 2), np.float32))
        assert (env.episode_length_buf == 2).all()
    finally:
        env.close()


# ---------------------------------------------------------------- actions
@pytest.mark.parametrize(
    "bad",
    [
        "0.5",
        b"1",
        [["0.1", "0.2"]] * 3,
        np.zeros((3, 2), np.complex64),
        [[1 + 2j, 0.0]] * 3,
        np.zeros((3, 2), object),
        np.array([["a", "b"]] * 3),
        None,
    ],
)
def test_non_real_actions_are_refused(env, bad):
    steps = env.world.step_count
    with pytest.raises(ValueError, match="actions must be real numbers"):
        env.step(bad)
    assert env.world.step_count == steps
    env.step(np.zeros((3, 2), np.float32))  # not failed: a refused action changes nothing


@pytest.mark.parametrize("bad", ["1", 1 + 0j, [0.1, "x"], [1j, 0.0]])
def test_direct_env_refuses_non_real_actions(direct, bad):
    with pytest.raises(ValueError, match="action must be real numbers"):
        direct.step(bad)
    direct.step(np.zeros(2, np.float32))


def test_finite_action_beyond_float32_is_out_of_range_not_nan(env, direct):
    a = np.zeros((3, 2))
    a[1, 0] = 1e39
    with pytest.raises(ValueError, match=r"out of float32 range for copies \[1\].*1e\+39") as e:
        env.step(a)
    assert "NaN" not in str(e.value)
    with pytest.raises(ValueError, match="action out of float32 range"):
        direct.step([0.0, -1e39])
    a[1, 0] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinite values for copies \[1\]"):
        env.step(a)
    with pytest.raises(ValueError, match="action contains NaN or infinite"):
        direct.step([np.inf, 0.0])


@given(
    hnp.arrays(
        np.float64,
        (3, 2),
        elements=st.floats(allow_nan=True, allow_infinity=True, width=64),
    )
)
@settings(max_examples=80, deadline=None)
def test_any_float64_actions_are_clipped_or_clearly_refused(env, a):
    try:
        env.step(a)
    except ValueError as exc:
        msg = str(exc)
        if not np.isfinite(a).all():
            assert "NaN or infinite" in msg
        else:
            assert "out of float32 range" in msg
            assert (np.abs(a) > np.finfo(np.float32).max).any()
    else:
        assert np.isfinite(a).all() and (np.abs(a) <= np.finfo(np.float32).max).all()


def test_int_and_bool_actions_still_work(env):
    env.step(np.ones((3, 2), np.int64))
    env.step([[True, False]] * 3)


# ---------------------------------------------------------------- env ids
@pytest.mark.parametrize(
    "bad, match",
    [
        ([0.7], "floats, strings and bools"),
        ("1", "copy indices"),
        (["1"], "floats, strings and bools"),
        ([True], "floats, strings and bools"),
        ([[0], [1]], "1-D"),
        ([0, 0], "must not repeat a copy, got \\[0\\]"),
        ([3], r"in \[0, 3\)"),
        ([-1], r"in \[0, 3\)"),
    ],
)
def test_task_env_ids_are_strict(env, bad, match):
    with pytest.raises(ValueError, match=match):
        env.task.uniform(bad)
    with pytest.raises(ValueError, match=match):
        env.task.normal(bad)


@given(st.lists(st.integers(0, 2), unique=True))
@settings(max_examples=40, deadline=None)
def test_task_env_ids_valid_lists_draw_one_row_each(env, ids):
    out = env.task.uniform(np.array(ids, dtype=np.int32) if ids else ids, size=2)
    assert out.shape == (len(ids), 2)


@given(
    st.one_of(
        st.lists(st.floats(allow_nan=True), min_size=1),
        st.lists(st.text(max_size=3), min_size=1),
        st.lists(st.integers(0, 2), min_size=2).filter(lambda v: len(set(v)) < len(v)),
        st.lists(st.integers().filter(lambda v: not 0 <= v < 3), min_size=1),
    )
)
@settings(max_examples=80, deadline=None)
def test_task_env_ids_invalid_are_value_errors(env, ids):
    with pytest.raises(ValueError, match="task.uniform: env_ids"):
        env.task.uniform(ids)


# ---------------------------------------------------------------- termination names
@pytest.mark.parametrize(
    "name", ["pole\u00a0fell", "pole\nfell", "pole\tfell", "pole fell\u2028", "ball\x00gone"]
)
def test_termination_names_with_odd_whitespace_are_refused(name):
    with pytest.raises(ke.TaskError, match="printable text with plain spaces"):
        check_condition_name(name)


@pytest.mark.parametrize("name", ["pole fell", "torso < 0.8 m", "Ball gone (x>5)", "tombé"])
def test_ordinary_termination_names_pass(name):
    assert check_condition_name(name) == name


def test_a_get_dones_with_a_newline_name_fails_the_step():
    class NewlineTask(BallTask):
        def get_dones(self):
            return {"fell\n": np.zeros(self.num_envs, bool)}, np.zeros(self.num_envs, bool)

    env = ke.LearningEnv(NewlineTask(), num_envs=1)
    try:
        env.reset(seed=0)
        with pytest.raises(ke.TaskError, match=r"'\\n'"):
            env.step(np.zeros((1, 2), np.float32))
    finally:
        env.close()


# ---------------------------------------------------------------- partial resets (options)
@pytest.mark.parametrize(
    "options, match",
    [
        ({"env_ids": [0.7]}, "floats, strings and bools"),
        ({"env_ids": "1"}, "copy indices"),
        ({"env_ids": [1, 1]}, "must not repeat"),
        ({"env_ids": [5]}, r"in \[0, 3\)"),
        ({"env_ids": []}, "names no copy"),
        ({"reset_mask": [True, False, True]}, "numpy bool array of shape"),
        ({"reset_mask": np.zeros(3, bool)}, "names no copy"),
        ({"reset_mask": np.ones(2, bool)}, "numpy bool array of shape"),
        ({"env_ids": [0], "reset_mask": np.ones(3, bool)}, "not both"),
        ("env_ids", "must be None or a dict"),
    ],
)
def test_reset_options_env_ids_are_strict(env, options, match):
    steps, buf = env.world.step_count, env.episode_length_buf.copy()
    with pytest.raises(ValueError, match=match):
        env.reset(options=options)
    assert env.world.step_count == steps and np.array_equal(env.episode_length_buf, buf)


def test_partial_reset_matches_a_full_reset_copy_by_copy():
    from kelab.tasks.cartpole import CartPoleTask

    ref = ke.LearningEnv(CartPoleTask(), num_envs=3)
    env = ke.LearningEnv(CartPoleTask(), num_envs=3)
    try:
        want, _ = ref.reset(seed=5)
        obs, _ = env.reset(seed=1)
        for _ in range(4):
            obs, *_ = env.step(np.full((3, 1), 0.3, np.float32))
        before = obs.copy()
        got, _ = env.reset(seed=5, options={"env_ids": np.array([2, 0])})
        assert np.array_equal(got[[0, 2]], want[[0, 2]])  # as a full reset with seed 5
        assert np.array_equal(got[1], before[1])  # copy 1 untouched
        assert env.episode_length_buf.tolist() == [0, 4, 0]
        got, _ = env.reset(options={"reset_mask": np.array([False, True, False])})
        assert env.episode_length_buf.tolist() == [0, 0, 0]
        for _ in range(3):  # the reset copies go on exactly like the reference
            a = np.full((3, 1), -0.2, np.float32)
            o1, *_ = ref.step(a)
            o2, *_ = env.step(a)
            assert np.array_equal(o1[[0, 2]], o2[[0, 2]])
    finally:
        ref.close()
        env.close()


def test_partial_reset_after_a_failed_step_is_refused():
    env = ke.LearningEnv(BallTask(fail_on="get_rewards", fail_step=1), num_envs=2)
    try:
        env.reset(seed=0)
        with pytest.raises(ke.TaskError):
            env.step(np.zeros((2, 2), np.float32))
        with pytest.raises(RuntimeError, match="reset\\(\\) without options"):
            env.reset(options={"env_ids": [0]})
        env.reset()
        env.reset(options={"env_ids": [0]})
    finally:
        env.close()


@pytest.mark.parametrize(
    "attr, value",
    [
        ("observation_dim", 10**12),
        ("action_dim", 10**7),
        ("action_dim", 2.0),
        ("episode_length_s", 1e300),
        ("episode_length_s", float("nan")),
    ],
)
def test_task_class_attributes_out_of_range_are_refused(attr, value):
    task_cls = type("Huge", (BallTask,), {attr: value})
    with pytest.raises(ke.TaskError, match=f"Huge.{attr} must be"):
        ke.LearningEnv(task_cls())


@pytest.mark.parametrize(
    "seed, match",
    [
        ("7", r"reset\(seed=\.\.\.\) must be None, an int >= 0, or a list of 3 ints"),
        (np.array(7), r"reset\(seed=\.\.\.\) must be None"),
        ([1, 2], r"one seed per copy: 3, got 2"),
        ([1, -2, 3], r"reset\(seed=\[\.\.\.\]\)\[1\] must be an int >= 0, got -2"),
        ([1, 2.5, 3], r"reset\(seed=\[\.\.\.\]\)\[1\] must be an int >= 0, got 2.5"),
    ],
)
def test_bad_reset_seeds_are_refused_before_anything_changes(env, seed, match):
    """A refused seed leaves the env in step: it steps on as if the reset was never asked."""
    env.reset(seed=0)
    env.step(np.zeros((3, 2), np.float32))
    steps, buf = env.world.step_count, env.episode_length_buf.copy()
    for options in (None, {"env_ids": [1]}):
        with pytest.raises(ValueError, match=match):
            env.reset(seed=seed, options=options)
    assert env.world.step_count == steps and np.array_equal(env.episode_length_buf, buf)
    env.step(np.zeros((3, 2), np.float32))  # still in step
    assert (env.episode_length_buf == buf + 1).all()


# ---------------------------------------------------------------- restore: all or nothing
def _full_state(env) -> tuple:
    """Everything a restore could touch: the World (its snapshot bytes hold its state, log and
    Generators), the counters, the task's attributes (arrays by value, others by identity)
    and every Generator's state."""
    import hashlib

    snap_hash = hashlib.sha256(env.snapshot().to_bytes()).hexdigest()
    task = {
        k: (v.dtype.str, v.shape, v.tobytes()) if isinstance(v, np.ndarray) else (id(v), repr(v))
        for k, v in vars(env.task).items()
    }
    rngs = [ke.rng_state(g) for g in (*env.task.rngs, *env.world.rngs)]
    return snap_hash, task, rngs, env.episode_length_buf.tobytes(), env.world.step_count


def _forged(snap, arrays=None, meta=None, drop=()):
    a = {k: v for k, v in snap.arrays.items() if k not in drop}
    m = {k: v for k, v in snap.meta.items() if k not in drop}
    a.update(arrays or {})
    m.update(meta or {})
    return ke.Snapshot(snap.fingerprint, snap.step_count, snap.sim_time, a, m)


def test_a_refused_restore_leaves_the_env_exactly_as_it_was():
    """Each corrupted snapshot raises ValueError naming the entry, before anything changes:
    the env's full state is identical after, and it steps on exactly like a twin env that
    never saw the restores."""
    import numpy as np

    env = ke.LearningEnv(BallTask(), num_envs=3, seed=4)
    twin = ke.LearningEnv(BallTask(), num_envs=3, seed=4)
    try:
        rng = np.random.default_rng(0)
        for e in (env, twin):
            e.reset(seed=1)
        for _ in range(3):
            a = rng.uniform(-1, 1, (3, 2)).astype(np.float32)
            env.step(a)
            twin.step(a)
        good = env.snapshot()
        assert "task/draws" in good.arrays
        a = rng.uniform(-1, 1, (3, 2)).astype(np.float32)
        env.step(a)  # the env has moved on from the snapshot
        twin.step(a)
        limit = env.max_episode_length
        mt = ke.rng_state(np.random.Generator(np.random.MT19937(0)))
        rngs = list(good.meta["task_rngs"])
        cases = [
            (_forged(good, drop=("task_rngs",)), r"meta \['task_rngs'\] must be present"),
            (_forged(good, {"task/world": np.zeros(3)}), r"'task/world' must name the task's"),
            (_forged(good, {"task/uniform": np.zeros(3)}), r"'task/uniform' must name"),
            (_forged(good, {"task/episode_length_buf": np.zeros(3, np.int64)}), "unknown key"),
            (_forged(good, {"junk/x": np.zeros(1)}), r"got unknown keys \['junk/x'\]"),
            (_forged(good, meta={"extra": 1}), r"unknown keys \['meta extra'\]"),
            (_forged(good, {"env/episode_length_buf": np.array([1.0, np.nan, 1.0])}), "ints"),
            (_forged(good, {"env/episode_length_buf": np.array([1, -1, 1])}), "got -1 for copy 1"),
            (_forged(good, {"env/episode_length_buf": np.full(3, limit)}), f"in \\[0, {limit}\\)"),
            (_forged(good, {"env/episode_length_buf": np.zeros(2, np.int64)}), r"shape \(3,\)"),
            (_forged(good, {"env/returns": np.array([0.0, np.inf, 0.0])}), "finite floats"),
            (_forged(good, meta={"started": "no"}), "'started' must be True or False, got 'no'"),
            (_forged(good, meta={"task_rngs": rngs[:2]}), "a list of 3 Generator states"),
            (_forged(good, meta={"task_rngs": [{"bit_generator": "Nope"}] + rngs[1:]}), r"\[0\]"),
            (  # another bit generator's state is a Generator state, but not this one
                _forged(good, meta={"task_rngs": rngs[:2] + [{**mt, "state": "x"}]}),
                r"'task_rngs'\[2\] must be a Generator state",
            ),
            (_forged(good, meta={"condition_names": 5}), "'condition_names' must be None or"),
            (_forged(good, meta={"world": "x"}), "'world' must be the World's meta"),
            (_forged(good, drop=("world/log/vals",)), "'log/vals' is missing"),  # the World's
            (_forged(good, {"task/draws": np.zeros(2)}), r"'task/draws' must be .*shape \(3,\)"),
            (_forged(good, {"task/draws": np.zeros(3, complex)}), "float64-compatible"),
        ]
        assert "world/log/vals" in good.arrays
        for bad, match in cases:
            before = _full_state(env)
            with pytest.raises(ValueError, match=match):
                env.restore(bad)
            assert _full_state(env) == before, match
        for _ in range(30):  # and it steps on exactly as the twin
            a = rng.uniform(-1, 1, (3, 2)).astype(np.float32)
            for x, y in zip(env.step(a)[:4], twin.step(a)[:4], strict=True):
                assert np.asarray(x).tobytes() == np.asarray(y).tobytes()
        env.restore(good)  # the good snapshot still restores
        twin.restore(good)
        assert _full_state(env)[0] == _full_state(twin)[0]
        # a copy's Generator of another bit generator (a user's) restores as that one
        env.restore(_forged(good, meta={"task_rngs": rngs[:2] + [mt]}))
        assert type(env._core.task_rngs[2].bit_generator) is np.random.MT19937
    finally:
        env.close()
        twin.close()


def test_a_stepped_snapshot_restores_into_a_just_reset_env():
    # CartPole first sets its private _q/_qd in a step: a just-reset env's task lacks them,
    # and the all-or-nothing check must still take them as the task's own state
    from kelab.tasks.cartpole import CartPoleTask

    env = ke.LearningEnv(CartPoleTask(), num_envs=2, seed=4)
    env.reset()
    for _ in range(5):
        env.step(np.full((2, 1), 0.3, np.float32))
    snap = ke.Snapshot.from_bytes(env.snapshot().to_bytes())
    assert "task/_q" in snap.arrays
    fresh = ke.LearningEnv(CartPoleTask(), num_envs=2, seed=4)
    fresh.reset()
    fresh.restore(snap)
    a = np.full((2, 1), -0.2, np.float32)
    assert np.array_equal(env.step(a)[0], fresh.step(a)[0])
    env.close()
    fresh.close()


def test_task_state_of_the_wrong_shape_or_dtype_is_refused_before_anything_changes():
    # _cart_ids (the cart joint, shape (1,) ints) is made by on_start; a snapshot may not
    # resize it or turn it into floats, and the env steps on as if never asked
    from kelab.tasks.cartpole import CartPoleTask

    env = ke.LearningEnv(CartPoleTask(), num_envs=2, seed=4)
    try:
        env.reset()
        env.step(np.full((2, 1), 0.3, np.float32))
        good = env.snapshot()
        for bad, match in (
            (np.array([99, 98]), r"'task/_cart_ids' must be .*shape \(1,\) .*got .*shape \(2,\)"),
            (np.array([0.5]), r"'task/_cart_ids' must be .*int64-compatible.*got dtype float64"),
            (np.zeros((2, 3, 1)), r"'task/_ended_early' must be"),
        ):
            key = "task/_ended_early" if bad.ndim == 3 else "task/_cart_ids"
            before = _full_state(env)
            with pytest.raises(ValueError, match=match):
                env.restore(_forged(good, {key: bad}))
            assert _full_state(env) == before
        env.step(np.full((2, 1), 0.3, np.float32))  # still steps
        env.restore(good)
    finally:
        env.close()


class _LoadFailsTask(BallTask):
    """Its load_state_dict takes the state, then raises when the snapshot holds ``late``."""

    def load_state_dict(self, state):
        super().load_state_dict(state)
        if "late" in state:
            raise RuntimeError("broken on purpose")


def test_a_failed_load_state_dict_leaves_no_new_attribute_behind():
    env = ke.LearningEnv(_LoadFailsTask(), num_envs=3, seed=4)
    try:
        env.reset(seed=1)
        env.step(np.zeros((3, 2), np.float32))
        good = env.snapshot()
        env.step(np.zeros((3, 2), np.float32))
        before = _full_state(env)
        assert not hasattr(env.task, "late")
        with pytest.raises(ValueError, match="load_state_dict.* raised RuntimeError"):
            env.restore(_forged(good, {"task/late": np.zeros(3)}))  # a key not made yet
        assert not hasattr(env.task, "late")
        assert _full_state(env) == before
    finally:
        env.close()
