"""The packed layout: validation, shared ground, filtering, exact resets, threads, snapshots."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pymunk
import pytest
from _world_scenes import DT, drive, separate_reset_states

import kelab as ke
from kelab.sim.kinematics import joint_state as _joint_state
from kelab.sim.kinematics import point_state as _point
from kelab.sim.physics._compile import JointLayout
from kelab.sim.physics._packed import ShardWorkers
from kelab.sim.physics._shard import CAPACITY, _first_hit_near, packed_spacing
from kelab.sim.scene.assets import Asset


def _cartpole(ground: bool = False) -> ke.Scene:
    b = ke.SceneBuilder()
    if ground:
        b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    return b.build()


def _balls_on_segment() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain("ground", (ke.Segment((-6.0, 0.0), (6.0, 0.0), 0.0),)), at="/")
    ball = ke.Prop(
        ke.Circle(0.1), material=ke.Material(restitution=0.4), initial_pose=ke.Pose(0.3, 0.6)
    )
    b.add(ball, at="/World/Ball")
    b.add(ke.Prop(ke.Circle(0.4), initial_pose=ke.Pose(-0.2, 0.5)), at="/World/Big")
    b.rangefinder("side", ball, angle=0.0, max_range=3.0)
    return b.build()


def _stack() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    for k in range(3):
        box = ke.Prop(ke.Box(0.3, 0.2), initial_pose=ke.Pose(-1.0 + 0.05 * k, 0.1 + 0.25 * k, 0.2))
        b.add(box, at=f"/World/Box{k}")
    return b.build()


def _run(world: ke.World, steps: int, resets: bool = False) -> np.ndarray:
    n = world.num_envs
    out = []
    for t in range(steps):
        if resets and t % 7 == 3:
            world.reset_envs([(5 * t) % n, (11 * t + 1) % n])
        if world.joint_names:
            u = 30.0 * np.sin(t / 9.0)
            world.set_joint_efforts(np.tile([u] + [0.0] * (len(world.joint_names) - 1), (n, 1)))
        world.step(DT)
        out.append(
            np.concatenate(
                [
                    world.body_poses.reshape(n, -1),
                    world.body_velocities.reshape(n, -1),
                    world.contact_forces.reshape(n, -1),
                ],
                axis=1,
            )
        )
    return np.array(out)


def test_layout_and_spacing_validation() -> None:
    scene = _cartpole()
    with pytest.raises(ValueError, match="layout must be one of"):
        ke.World(scene, layout="shared")
    with pytest.raises(ValueError, match="env_spacing > 0"):
        ke.World(scene, layout="packed", env_spacing=0.0)
    long_ground = ke.SceneBuilder()
    long_ground.add(ke.Terrain("g", (ke.Segment((-50.0, 0.0), (50.0, 0.0), 0.0),)), at="/")
    with pytest.raises(ValueError, match="31 spacings"):
        ke.World(long_ground.build(), num_envs=2, env_spacing=2.0, layout="packed")
    with pytest.raises(ValueError, match="at most"):
        ke.World(scene, num_envs=int(CAPACITY // 4) + 1, layout="packed")
    w = ke.World(scene, num_envs=3, env_spacing=3.0, layout="packed")
    assert w.layout == "packed" and w.env_spacing == 4.0
    np.testing.assert_array_equal(w.env_origins, [[0.0, 0.0], [4.0, 0.0], [8.0, 0.0]])
    assert ke.World(scene).layout == "isolated"
    assert packed_spacing(0.3) == 0.5 and packed_spacing(8.0) == 8.0


def test_shared_ground_spans_every_copy_and_contacts_go_to_their_copy() -> None:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")  # half width 500 m, copies reach 1196 m
    b.add(ke.Prop(ke.Box(0.2, 0.2), mass=2.0, initial_pose=ke.Pose(0.0, 0.1)), at="/World/Box")
    w = ke.World(b.build(), num_envs=300, layout="packed")
    for _ in range(60):
        w.step(DT)
    poses = w.body_poses
    np.testing.assert_allclose(poses[:, 1, 1], 0.1, atol=2e-3)  # all resting, none fell
    np.testing.assert_array_equal(poses[:, 0], 0.0)  # the ground reads its scene pose
    f = w.contact_forces
    np.testing.assert_allclose(f[:, 1, 1], 2.0 * 9.81, rtol=1e-6)
    np.testing.assert_allclose(f[:, 0, 1], -2.0 * 9.81, rtol=1e-6)


def test_copies_that_overlap_in_space_never_interact() -> None:
    # 0.5 m apart, 0.8 m balls: the copies overlap, yet each equals a lone copy exactly
    scene = _balls_on_segment()
    lone = _run(ke.World(scene, layout="packed"), 200)[:, 0]
    w = ke.World(scene, num_envs=40, env_spacing=0.5, layout="packed")
    many = _run(w, 200)
    for i in range(40):
        assert np.array_equal(many[:, i], lone), i
    # the sideways ray sees its own big ball only, never the neighbour 0.5 m away
    assert np.all(w.read_sensor("side") == 3.0)


@pytest.mark.parametrize("scene", [_cartpole, _balls_on_segment], ids=["joints", "circles"])
def test_copy_i_matches_a_lone_copy_where_packed_is_exact(scene) -> None:
    s = scene()
    lone = _run(ke.World(s, layout="packed"), 150)[:, 0]
    many = _run(ke.World(s, num_envs=9, layout="packed", num_threads=2), 150)
    for i in range(9):
        assert np.array_equal(many[:, i], lone), i


def test_threads_are_bit_identical_with_stacks_and_partial_resets() -> None:
    # catches any dependence of a copy on its shard (hash ids, array order after resets)
    one = ke.World(_stack(), num_envs=12, layout="packed")
    two = ke.World(_stack(), num_envs=12, layout="packed", num_threads=2)
    a = _run(one, 150, resets=True)
    b = _run(two, 150, resets=True)
    two.close()
    assert np.abs(a[-1]).max() > 0 and np.array_equal(a, b)


def test_a_reset_copy_is_exactly_a_fresh_copy() -> None:
    a = ke.World(_stack(), num_envs=4, layout="packed")
    b = ke.World(_stack(), num_envs=4, layout="packed")
    _run(a, 40)
    for t in range(40):  # another history in b
        b.set_joint_efforts(np.tile([50.0 * np.cos(t), 0.0], (4, 1)))
        b.step(DT)
    a.reset_envs([1, 2])
    b.reset_envs([1, 2])
    ra = _run(a, 80)
    rb = _run(b, 80)
    assert np.array_equal(ra[:, [1, 2]], rb[:, [1, 2]])
    fresh = _run(ke.World(_stack(), num_envs=4, layout="packed"), 80)
    assert np.array_equal(ra[:, [1, 2]], fresh[:, [1, 2]])


def test_restore_after_staggered_resets_prunes_the_log_and_is_exact() -> None:
    w = ke.World(_stack(), num_envs=4, seed=3, layout="packed")
    _run(w, 30)
    for c in range(4):  # every copy reset, at different times: older history is dropped
        w.reset_envs([c])
        _run(w, 10)
    full = len(w._log)
    w.reset_envs([0])
    assert len(w._log) < full + 2
    _run(w, 5)
    snap = w.snapshot()
    future = _run(w, 60)
    w.restore(snap)
    assert np.array_equal(_run(w, 60), future)
    fresh = ke.World(_stack(), num_envs=4, seed=3, layout="packed", num_threads=2)
    fresh.restore(ke.Snapshot.from_bytes(snap.to_bytes()))
    assert np.array_equal(_run(fresh, 60), future)
    fresh.close()


@pytest.mark.parametrize(("threads", "resets"), [(1, 3), (2, 3), (2, 9), (3, 11)])
def test_state_resets_in_one_shard_job_are_the_separate_calls_bits(
    threads: int, resets: int, monkeypatch
) -> None:
    # set_body_states: each shard rebuilds, writes and reads its copies in one job (in its
    # thread from PARALLEL_REBUILD copies) == rebuild, write, then a read, one by one
    from kelab.sim.physics._guard import native_module
    from kelab.sim.physics._packed import PackedBackend

    if native_module() is None:
        pytest.skip("no C helper built here")

    def run(separate: bool) -> np.ndarray:
        with monkeypatch.context() as m:
            if separate:
                m.setattr(PackedBackend, "reset_states", separate_reset_states)
            w = ke.World(_stack(), num_envs=24, layout="packed", num_threads=threads)
            out = []
            rng = np.random.default_rng(4)
            for t in range(60):
                if t % 5 == 2:
                    ids = rng.choice(24, resets, replace=False)  # unsorted, across shards
                    if t % 10 == 2:
                        ids.sort()  # an env's resets come sorted
                    poses = (
                        w.body_poses[ids] + rng.normal(size=(resets, len(w.body_names), 3)) * 0.01
                    )
                    vels = rng.normal(size=poses.shape)
                    w.set_body_states(ids, poses, vels)
                    out.append(np.concatenate([w.body_poses.ravel(), w.joint_positions.ravel()]))
                w.set_joint_efforts(np.full((24, len(w.joint_names)), 20.0 * np.sin(t / 7.0)))
                w.step(DT)
                out.append(np.concatenate([w.body_poses.ravel(), w.body_velocities.ravel()]))
            snap = w.snapshot().to_bytes()
            w.close()
            return np.concatenate(out), snap

    fused, separate = run(False), run(True)
    assert np.array_equal(fused[0], separate[0]) and fused[1] == separate[1]


def test_set_body_states_in_packed_layout_reads_back_exactly() -> None:
    w = ke.World(_stack(), num_envs=3, layout="packed")
    drive(w, 20)
    poses = w.body_poses[[1]]
    poses[0, 3] = (0.5, 2.0, 0.25)
    vel = np.zeros_like(poses)
    vel[0, 3] = (1.0, -0.5, 2.0)
    w.set_body_states([1], poses, vel)
    np.testing.assert_allclose(w.body_poses[1, 3], (0.5, 2.0, 0.25), atol=1e-9)
    np.testing.assert_allclose(w.body_velocities[1, 3], (1.0, -0.5, 2.0), atol=1e-12)


def _reference(layout, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The plain per-joint formulas, one joint at a time (the previous implementation)."""
    m = raw.shape[0]
    nj = len(layout.joint_paths)
    pos = np.zeros((m, nj))
    vel = np.zeros((m, nj))
    cog = layout.cog
    for k, jl in enumerate(layout.joints):
        c = raw[:, jl.child]
        if jl.parent >= 0:
            p = raw[:, jl.parent]
        else:
            p = np.zeros((m, 6))
        if jl.kind in ("revolute", "fixed"):
            pos[:, k] = (c[:, 2] - p[:, 2]) - jl.rel_angle0
            vel[:, k] = c[:, 5] - p[:, 5]
            continue
        q, vq = _point(c, jl.anchor_child, cog[jl.child])
        if jl.parent >= 0:
            r, vr = _point(p, jl.anchor_parent, cog[jl.parent])
            u = q - r
            du = vq - vr
        else:  # the ground frame: a fixed point
            u = q - np.asarray(jl.anchor_parent)
            du = vq
        if jl.kind == "prismatic" and jl.parent < 0:
            ax, ay = jl.axis
            pos[:, k] = u[:, 0] * ax + u[:, 1] * ay
            vel[:, k] = du[:, 0] * ax + du[:, 1] * ay
        elif jl.kind == "prismatic":
            ca, sa = np.cos(p[:, 2]), np.sin(p[:, 2])
            # time derivative of R(-a) u: R(-a) (u' - w x u)
            wx = du[:, 0] + p[:, 5] * u[:, 1]
            wy = du[:, 1] - p[:, 5] * u[:, 0]
            ax, ay = jl.axis
            pos[:, k] = (ca * u[:, 0] + sa * u[:, 1]) * ax + (-sa * u[:, 0] + ca * u[:, 1]) * ay
            vel[:, k] = (ca * wx + sa * wy) * ax + (-sa * wx + ca * wy) * ay
        else:  # spring
            length = np.hypot(u[:, 0], u[:, 1])
            pos[:, k] = length - jl.rest_length
            safe = np.where(length > 0, length, 1.0)
            vel[:, k] = (u[:, 0] * du[:, 0] + u[:, 1] * du[:, 1]) / safe
    return pos, vel


def _jl(kind: str, parent: int, child: int, **kw) -> JointLayout:
    base = dict(
        anchor_parent=(0.3, -0.2),
        anchor_child=(-0.1, 0.25),
        axis=(0.6, 0.8),
        rel_angle0=0.4,
        rest_length=0.7,
        actuator="effort",
        limit=1.0,
        kp=0.0,
        kd=0.0,
        limits=None,
        stiffness=0.0,
        damping=0.0,
    )
    base.update(kw)
    return JointLayout(kind=kind, parent=parent, child=child, **base)


def _joint_case(kinds, angle0: float, seed: int, rows: int) -> tuple[SimpleNamespace, np.ndarray]:
    """A layout of ``kinds`` joints (angles ``angle0 + 0.1 i``) and ``rows`` random body
    states, with rows of zeros and of negative zeros among them."""
    joints = [_jl(k, p, c, rel_angle0=0.1 * i + angle0) for i, (k, p, c) in enumerate(kinds)]
    rng = np.random.default_rng(seed)
    layout = SimpleNamespace(
        joints=joints,
        joint_paths=tuple(f"/j{i}" for i in range(len(joints))),
        cog=rng.normal(size=(4, 2)) * 0.1,
    )
    raw = rng.normal(size=(rows, 4, 6)) * 3.0
    raw[::5] = 0.0
    raw[1::5] *= -0.0
    return layout, raw


@pytest.mark.parametrize(
    "kinds",
    [
        [("prismatic", -1, 0), ("revolute", 0, 1)],  # the cartpole: per-joint columns
        [("revolute", -1, 0), ("revolute", 0, 1), ("fixed", 1, 2), ("revolute", 0, 3)],
        [("spring", 0, 1), ("prismatic", 1, 2), ("spring", -1, 3), ("revolute", 2, 3)],
    ],
)
def test_joint_state_is_bit_identical_to_the_plain_formulas(kinds) -> None:
    # grouped/fused joint state (read after every batch read) == per-joint formulas
    layout, raw = _joint_case(kinds, angle0=0.0, seed=3, rows=3000)
    got = _joint_state(layout, raw)
    want = _reference(layout, raw)
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w) and np.array_equal(np.signbit(g), np.signbit(w))


@pytest.mark.parametrize(
    "kinds",
    [
        [("revolute", -1, 0)],  # one joint: per-joint columns in numpy
        [("revolute", 0, 1), ("fixed", -1, 2)],
        [("revolute", -1, 0), ("revolute", 0, 1), ("fixed", 1, 2), ("revolute", 0, 3)],
        [("spring", 0, 1), ("revolute", 2, 3), ("prismatic", 1, 2), ("revolute", -1, 1)],
    ],
)
def test_joint_state_in_c_is_the_numpy_bits(kinds, monkeypatch) -> None:
    # the C helper's joint_revs (revolute and fixed joints) == the numpy formulas, bit
    # for bit, signed zeros, infinities and NaN included (#40: ~1 us against ~20 us)
    from kelab.sim import kinematics

    if kinematics.native_module() is None:
        pytest.skip("no C helper built here")
    layout, raw = _joint_case(kinds, angle0=-0.2, seed=7, rows=500)
    raw[2::11, :, 2] = np.inf
    raw[3::13, 1, 5] = np.nan
    with np.errstate(invalid="ignore"):  # inf - inf: numpy warns, C does not
        got = _joint_state(layout, raw)
        out = (np.empty((293, len(kinds))), np.empty((293, len(kinds))))
        rows = _joint_state(layout, raw[7:300], out)  # into rows of other arrays
        monkeypatch.setattr(kinematics, "native_module", lambda: None)
        want = _joint_state(layout, raw)
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w, equal_nan=True)
        assert np.array_equal(np.signbit(g), np.signbit(w))
    assert np.array_equal(rows[1], want[1][7:300], equal_nan=True)


@pytest.mark.parametrize(
    "kinds",
    [
        [("revolute", 0, 1), ("fixed", -1, 2)],
        [("revolute", -1, 0), ("revolute", 0, 1), ("fixed", 1, 2), ("revolute", 0, 3)],
        [("spring", 0, 1), ("revolute", 2, 3)],  # not every joint revolute: declined
    ],
)
def test_joint_rows_in_place_are_joint_states_bits_and_touch_nothing_else(kinds) -> None:
    # a reset's rows (unsorted, repeated) computed in place == joint_state of the gathered
    # rows; the other rows keep what they held; a bool mask or a spring: declined
    from kelab.sim import kinematics

    if kinematics.native_module() is None:
        pytest.skip("no C helper built here")
    layout, raw = _joint_case(kinds, angle0=0.3, seed=11, rows=40)
    rows = np.array([17, 3, 39, 3, 0], dtype=np.int64)
    pos, vel = np.full((40, len(kinds)), 7.0), np.full((40, len(kinds)), -7.0)
    done = kinematics._joint_rows(layout, raw, rows, pos, vel)
    every = all(k in ("revolute", "fixed") for k, _, _ in kinds)
    assert done == every
    if done:
        want = _joint_state(layout, raw[rows])
        assert np.array_equal(pos[rows], want[0]) and np.array_equal(vel[rows], want[1])
        assert np.array_equal(np.signbit(pos[rows]), np.signbit(want[0]))
    others = np.setdiff1d(np.arange(40), rows)
    assert (pos[others] == 7.0).all() and (vel[others] == -7.0).all()
    mask = np.zeros(40, dtype=bool)
    assert not kinematics._joint_rows(layout, raw, mask, pos, vel)
    if done:  # a row past the arrays is refused before anything is written
        table = kinematics._joint_plan(layout).rev_table
        with pytest.raises(ValueError, match="rows"):
            kinematics.native_module().joint_revs(
                raw, 4, pos, vel, len(kinds), *table, np.array([0, 40])
            )
        assert (pos[others] == 7.0).all()


@pytest.mark.parametrize(
    "asset", ["kelab/robot/biped:v2", "kelab/robot/cartpole:v1", "kelab/robot/pi:v1"]
)
def test_actuator_forces_in_c_are_the_numpy_bits(asset, monkeypatch) -> None:
    # the C helper's term_forces == the numpy layers (a slot's terms added in the same
    # order, each product rounded first), signed zeros and huge efforts included, for
    # every copy and for a subset (#40: ~30 -> ~4 us a Humanoid x256 step)
    from kelab.sim import _controls

    if _controls.native_module() is None:
        pytest.skip("no C helper built here")
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry(asset)), at="/World/Robot")
    world = ke.World(b.build(), num_envs=64, layout="packed")
    ctl = world._ctl
    rng = np.random.default_rng(11)
    efforts = rng.normal(size=ctl.efforts.shape) * 10.0 ** rng.integers(-3, 30, ctl.efforts.shape)
    efforts[::5] = -0.0
    ctl.efforts[:] = efforts
    raw, normals = world._backend.raw, np.zeros((64, ctl.nb))
    for ids in (np.arange(64), np.array([3, 17, 40])):
        got = ctl.forces(ids, raw, normals, DT)
        with monkeypatch.context() as m:
            m.setattr(_controls, "native_module", lambda: None)
            want = ctl.forces(ids, raw, normals, DT)
        assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))
    world.close()


@pytest.mark.parametrize(
    ("anchor_child", "axis", "anchor_parent", "cog"),
    [
        ((0.0, 0.0), (1.0, 0.0), (0.0, 0.15), (0.0, -0.016)),  # the cartpole's slider
        ((0.0, 0.0), (1.0, 0.0), (0.0, 0.0), (0.0, 0.0)),  # no cos, no sin at all
        ((0.2, 0.0), (0.0, 1.0), (0.3, 0.0), (0.2, 0.1)),
        ((0.0, -0.1), (0.6, 0.8), (0.0, 0.0), (-0.05, 0.0)),
    ],
)
def test_ground_slider_leaves_out_zero_terms_without_changing_values(
    anchor_child, axis, anchor_parent, cog
) -> None:
    # terms with a zero constant are left out: the values equal the full formula's
    # (np.array_equal: only the sign of an exact zero may differ)
    jl = _jl("prismatic", -1, 0, anchor_child=anchor_child, axis=axis, anchor_parent=anchor_parent)
    layout = SimpleNamespace(joints=[jl], joint_paths=("/j",), cog=np.array([cog]))
    raw = np.random.default_rng(5).normal(size=(2000, 1, 6)) * 3.0
    raw[::7] = 0.0
    got, want = _joint_state(layout, raw), _reference(layout, raw)
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w)


def test_irregular_controls_resets_and_reads_between_steps_match_one_thread() -> None:
    # efforts, reads, resets and state writes between steps, on 3 shard threads: the same
    # bits as one thread
    def run(threads: int) -> list[np.ndarray]:
        w = ke.World(_cartpole(), num_envs=10, layout="packed", num_threads=threads)
        out = []
        for t in range(90):
            if t % 3 == 0:
                w.set_joint_efforts(np.tile([20.0 * np.sin(t / 7.0), 0.0], (10, 1)))
            if t % 11 == 5:
                w.reset_envs([t % 10, (3 * t + 1) % 10])
            if t % 17 == 8:
                w.set_body_states([2], w.body_poses[[4]], w.body_velocities[[4]])
            w.step(DT)
            if t % 5 == 4:
                out.append(w.joint_positions)
        out.append(w.body_poses)
        w.close()
        return out

    one, three = run(1), run(3)
    assert np.abs(one[-1]).max() > 0
    assert all(np.array_equal(a, b) for a, b in zip(one, three, strict=True))


def test_shard_workers_report_errors_of_submitted_jobs() -> None:
    workers = ShardWorkers(2)
    seen = []

    def job(k: int) -> None:
        if k == 1:
            raise RuntimeError("boom")
        seen.append(k)

    workers.submit(job, 2)  # returns at once; the error waits for wait()
    assert workers.busy
    with pytest.raises(RuntimeError, match="boom"):
        workers.wait()
    assert not workers.busy and seen == [0]
    workers.run(lambda k: seen.append(k), 2)
    workers.close()
    assert sorted(seen[1:]) == [0, 1]


@pytest.mark.parametrize("threads", [1, 2])
def test_friction_choice_between_reads_matches_reading_every_step(threads: int) -> None:
    # between a reader's reads the friction model fetches only its contact rows
    # (body_rows, nothing stored); the physics must equal reading every step
    def run(every: int, threads: int) -> list[np.ndarray]:
        w = ke.World(_stack(), num_envs=7, layout="packed", num_threads=threads)
        assert w._fric
        out = []
        for t in range(120):
            if t % 13 == 6:
                w.reset_envs([(3 * t) % 7, (5 * t + 2) % 7])
            w.set_joint_efforts(np.tile([40.0 * np.sin(t / 5.0), 0.0], (7, 1)))
            w.step(DT)
            if t % every == every - 1:
                out.append(np.concatenate([w.body_poses, w.body_velocities], axis=2))
        w.close()
        return out

    dense = run(1, 1)[2::3]
    sparse = run(3, threads)
    assert len(dense) == len(sparse) and np.abs(dense[-1]).max() > 0
    assert all(np.array_equal(a, b) for a, b in zip(dense, sparse, strict=True))


def test_body_rows_equal_the_stored_rows_after_resets() -> None:
    w = ke.World(_stack(), num_envs=6, layout="packed", num_threads=2)
    _run(w, 20, resets=True)  # partial resets: shard blocks out of copy order
    w.step(DT)
    rows = np.array([0 * 6 + 1, 5 * 6 + 3, 2 * 6 + 5, 3 * 6 + 2])
    got = w._backend.body_rows(rows)
    want = np.concatenate([w.body_poses, w.body_velocities], axis=2).reshape(-1, 6)[rows]
    assert np.array_equal(got, want)
    w.close()


RAYS = {"down": -math.pi / 2, "down_left": -3 * math.pi / 4, "down_right": -math.pi / 4,
        "left": math.pi}  # fmt: skip


def _balls_over_a_plate(height: float) -> ke.Scene:
    # two balls (1 m hash cells: 4x their size), one on an x cell edge, over a plate with
    # a post to their left; every ray of both, down, diagonal and left
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    plate = ke.Prop(ke.Box(4.0, 0.05), body_type="static", initial_pose=ke.Pose(0.0, 0.5))
    b.add(plate, at="/World/Plate")
    post = ke.Prop(ke.Box(0.05, 3.0), body_type="static", initial_pose=ke.Pose(-1.5, 2.0))
    b.add(post, at="/World/Post")
    for k, x in enumerate((0.0, 0.3)):
        ball = ke.Prop(ke.Circle(0.1), mass=0.2, initial_pose=ke.Pose(x, height))
        b.add(ball, at=f"/World/Ball{k}")
        for name, angle in RAYS.items():
            b.rangefinder(f"b{k}.{name}", f"/World/Ball{k}", angle=angle, max_range=5.0)
    return b.build()


def _ranges(world: ke.World) -> np.ndarray:
    return np.stack([world.read_sensor(f"b{k}.{n}")[:, 0] for k in (0, 1) for n in RAYS], 1)


@pytest.mark.parametrize("threads", [1, 2])
def test_packed_rangefinders_read_the_isolated_distances_from_cell_edges(threads) -> None:
    # Chipmunk's hash walk of a ray that starts on a cell edge (here y = 1, 2, 3 and x = 0
    # of every copy) and runs down or left visits each cell late and stopped at the
    # ground before the plate or the post (it read 1.0 for 0.475 at y = 1)
    for height in np.arange(0.625, 3.01, 0.125).tolist():
        scene = _balls_over_a_plate(height)
        iso = ke.World(scene, num_envs=3, layout="isolated", num_threads=threads)
        packed = ke.World(scene, num_envs=3, layout="packed", num_threads=threads)
        assert packed._backend._plan.cell == 1.0  # the cell edges the heights meet
        want = _ranges(iso)
        np.testing.assert_allclose(_ranges(packed), want, rtol=0, atol=1e-9, err_msg=height)
        if height == 1.0:
            assert np.allclose(want[:, [0, 4]], 0.475)  # straight down onto the plate
        # a reset copy is rebuilt where it started: the same readings
        packed.reset_envs([1])
        np.testing.assert_allclose(_ranges(packed), want, rtol=0, atol=1e-9, err_msg=height)
        iso.close()
        packed.close()


def test_the_near_shapes_query_is_chipmunks_first_hit_bit_for_bit() -> None:
    # random rays, on and off cell edges, short and long (several pieces), in a hashed
    # space and in a tree-indexed one with the same shapes: the same alpha, bit for bit
    rng = np.random.default_rng(7)
    cell = 0.25
    places = rng.uniform([-6.0, 0.2], [6.0, 6.0], (60, 2)).tolist()
    sizes = rng.uniform(0.02, 0.8, (60, 2)).tolist()
    hashed, tree = pymunk.Space(), pymunk.Space()
    hashed.use_spatial_hash(cell, 1000)
    for space in (hashed, tree):
        ground = pymunk.Body(body_type=pymunk.Body.STATIC)
        space.add(ground, pymunk.Poly(ground, [(-1e5, -1.0), (1e5, -1.0), (1e5, 0.0), (-1e5, 0.0)]))
        for i, (place, size) in enumerate(zip(places, sizes, strict=True)):
            body = pymunk.Body(body_type=pymunk.Body.STATIC)
            body.position = place
            shape = (
                pymunk.Circle(body, size[0] / 2),
                pymunk.Poly.create_box(body, size),
                pymunk.Segment(body, (0.0, 0.0), (size[0], size[1] - 0.4), 0.0),
            )[i % 3]
            shape.sensor = i % 11 == 5  # seen by pymunk 7's first hit as by the near query
            shape.filter = pymunk.ShapeFilter(group=1 if i % 7 == 3 else 0)
            space.add(body, shape)
    filt = pymunk.ShapeFilter(group=1)  # skips the group's shapes
    for i in range(400):
        on_edge = i % 2 == 0
        start = rng.uniform(-5, 5, 2)
        if on_edge:
            start = np.round(start / cell) * cell
        length = float(rng.choice([0.3, 2.0, 9.0, 40.0]))
        angle = float(rng.uniform(-math.pi, math.pi))
        a = (float(start[0]), float(start[1]))
        b = (a[0] + length * math.cos(angle), a[1] + length * math.sin(angle))
        hit = tree.segment_query_first(a, b, 0.0, filt)
        got = _first_hit_near(hashed, a, b, filt, cell)
        if hit is None:
            assert math.isnan(got), (a, b, got)
        else:
            assert got == hit.alpha, (a, b, got, hit.alpha)


def _biped_run(world: ke.World) -> list[np.ndarray]:
    """Joint reads after steps, a reset's state write and a stale read (every path)."""
    n = world.num_envs
    out = []
    for t in range(12):
        world.set_joint_efforts(np.full((n, 6), 30.0 * math.sin(t / 2.0)))
        world.step(DT, steps=1 + t % 3)
        out += [world.joint_positions, world.joint_velocities]
        if t % 4 == 1:  # a reset's rows (read back with the write), unsorted
            ids = np.array([3, 0]) if t % 8 == 1 else np.array([1, 2, 4])
            poses, vels = world.body_poses[ids], world.body_velocities[ids]
            vels[:, :, 2] += 0.5
            world.set_body_states(ids, poses, vels)
            out += [world.joint_positions, world.joint_velocities]
        if t % 5 == 2:  # a push: the rows read again when asked
            world.set_body_velocities(world.body_velocities[[2]] * 0.5, env_ids=[2])
            out.append(world.joint_velocities)
    return out


@pytest.mark.parametrize("threads", [1, 2])
def test_the_joint_caches_c_call_is_the_joint_state_bits(threads, monkeypatch) -> None:
    # every joint revolute: the joint cache calls joint_revs itself for the rows a read
    # stored (slices and a reset's rows), the same bits as joint_state / _joint_rows
    from kelab.sim import kinematics

    if kinematics.native_module() is None:
        pytest.skip("no C helper built here")
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/biped:v2")), at="/World/Robot")
    scene = b.build()
    fast = ke.World(scene, num_envs=5, layout="packed", num_threads=threads)
    with monkeypatch.context() as m:
        m.setattr(kinematics, "native_module", lambda: None)
        slow = ke.World(scene, num_envs=5, layout="packed", num_threads=threads)
    assert fast._states.joints._revs is not None and slow._states.joints._revs is None
    for a, b_ in zip(_biped_run(fast), _biped_run(slow), strict=True):
        assert np.array_equal(a, b_) and np.array_equal(np.signbit(a), np.signbit(b_))
    fast.close()
    slow.close()


@pytest.mark.parametrize("kept", [True, False])
def test_a_resets_c_call_zeroes_the_held_forces_and_computes_the_joint_state(kept) -> None:
    # a state write's reset (set_body_states) zeroes the reset copies' held forces and
    # computes their joint state from the rows it read in the shard's C call (or, where
    # the in-place reset declines, the same values right after the rebuild's write)
    from kelab.sim import kinematics

    if kinematics.native_module() is None:
        pytest.skip("no C helper built here")
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/biped:v2")), at="/World/Robot")
    world = ke.World(b.build(), num_envs=20, layout="packed", num_threads=2)
    backend = world._backend
    world.set_joint_efforts(np.full((20, 6), 40.0))
    world.step(DT, steps=3)
    world.joint_positions  # noqa: B018 (a reader: the joint state is wanted from now on)
    if not kept:
        for shard in backend._shards:
            shard.kept = None
    calls = []
    on_read = backend.on_read
    backend.on_read = lambda rows, *done: calls.append(done) or on_read(rows, *done)
    ids = np.array([1, 4, 5, 9, 12, 13, 17, 18, 19])  # both shards, in one job each
    poses, vels = world.body_poses[ids], world.body_velocities[ids]
    poses[:, :, 2] += 0.1
    world.set_body_states(ids, poses, vels)
    assert calls == [(True,)]
    others = np.setdiff1d(np.arange(20), ids)
    assert not backend._forces[ids].any() and backend._forces[others].any()
    want = _joint_state(world._layout, backend.raw[ids])
    got = world.joint_positions[ids], world.joint_velocities[ids]
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    world.close()
