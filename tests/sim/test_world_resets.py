"""Resets reuse the pymunk objects yet stay exact; the callback-free friction model."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kelab as ke
from kelab.sim.physics._compile import MOVING_TYPE, OTHER_STATIC_TYPE, make_layout
from kelab.sim.scene.assets import Asset

DT = 1 / 120
LAYOUTS = ("isolated", "packed")
G = 9.81
GRIP = ke.Material(static_friction=0.9, dynamic_friction=0.4, restitution=0.3)


def _scene() -> ke.Scene:
    """Joints (cartpole), polygon and circle contacts, static != dynamic friction."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(material=ke.Material(static_friction=0.7, dynamic_friction=0.5)), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    for k in range(3):
        box = ke.Prop(
            ke.Box(0.3, 0.2),
            material=GRIP,
            initial_pose=ke.Pose(-1.0 + 0.06 * k, 0.12 + 0.3 * k, 0.3 * k),
        )
        b.add(box, at=f"/World/Box{k}")
    ball = ke.Prop(ke.Circle(0.1), material=GRIP, initial_pose=ke.Pose(1.0, 0.5))
    b.add(ball, at="/World/Ball")
    return b.build()


def _history(w: ke.World, steps: int, phase: float) -> bool:
    """A long, busy history: efforts, external forces, a state write; True if a body slid."""
    n = w.num_envs
    slid = False
    for t in range(steps):
        w.set_joint_efforts(np.tile([40.0 * math.sin(t / 7.0 + phase), 0.0], (n, 1)))
        if t == steps // 3:
            f = np.zeros((n, len(w.body_names), 2))
            f[:, 3] = (30.0, 5.0)
            w.set_body_forces(f)
        if t == steps // 2:
            poses, vels = w.body_poses, w.body_velocities
            vels[:, 3:6, 0] += 2.0
            w.set_body_states(np.arange(n), poses, vels)
        w.step(DT)
        slid = slid or not w._contacts.stick.all()
    return slid


def _future(w: ke.World, steps: int) -> np.ndarray:
    n = w.num_envs
    out = []
    for t in range(steps):
        w.set_joint_efforts(np.tile([25.0 * math.cos(t / 5.0), 0.0], (n, 1)))
        w.step(DT)
        out.append(np.concatenate([w.body_poses, w.body_velocities], axis=2).reshape(n, -1))
    return np.array(out)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reset_after_a_long_history_is_bit_identical_to_a_fresh_copy(layout: str) -> None:
    old = ke.World(_scene(), num_envs=4, layout=layout)
    same = ke.World(_scene(), num_envs=4, layout=layout)  # the same history, no reset
    assert _history(old, 300, 0.0)  # some bodies slid: the friction model was in play
    _history(same, 300, 0.0)
    old.reset_envs([1, 2])
    fresh = ke.World(_scene(), num_envs=4, layout=layout)
    a, f, s = _future(old, 150), _future(fresh, 150), _future(same, 150)
    assert np.array_equal(a[:, [1, 2]], f[:, [1, 2]])  # reset == fresh, contacts included
    assert np.array_equal(a[:, [0, 3]], s[:, [0, 3]])  # the other copies never noticed
    assert np.abs(a[-1]).max() > 0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_set_body_states_after_a_history_equals_it_on_a_fresh_world(layout: str) -> None:
    old = ke.World(_scene(), num_envs=3, layout=layout)
    _history(old, 200, 1.0)
    fresh = ke.World(_scene(), num_envs=3, layout=layout)
    poses = fresh.body_poses[[0, 2]]
    poses[:, 3:6, 0] += 0.25
    vels = np.zeros_like(poses)
    vels[:, 6] = (1.5, 0.0, -15.0)
    for w in (old, fresh):
        w.set_body_states([0, 2], poses, vels)
    a, f = _future(old, 120), _future(fresh, 120)
    assert np.array_equal(a[:, [0, 2]], f[:, [0, 2]])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_snapshot_mid_slide_restores_the_friction_regimes(layout: str) -> None:
    w = ke.World(_scene(), num_envs=3, layout=layout)
    _history(w, 90, 2.0)
    snap = w.snapshot()
    regimes = w._contacts.stick.copy()
    future = _future(w, 90)
    w.restore(snap)
    assert np.array_equal(w._contacts.stick, regimes)  # derived again by the replay
    assert np.array_equal(_future(w, 90), future)
    other = ke.World(_scene(), num_envs=3, layout=layout)
    other.restore(ke.Snapshot.from_bytes(snap.to_bytes()))
    assert np.array_equal(_future(other, 90), future)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sliding_block_uses_dynamic_friction_then_sticks(layout: str) -> None:
    ground = ke.Material(static_friction=0.8, dynamic_friction=0.4)
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(material=ground), at="/")
    block = ke.Prop(ke.Box(0.2, 0.2), material=ground, initial_pose=ke.Pose(0.0, 0.1))
    b.add(block, at="/World/Block")
    w = ke.World(b.build(), layout=layout)
    poses = w.body_poses
    vels = np.zeros_like(poses)
    vels[0, 1] = (3.0, 0.0, 0.0)
    w.set_body_states([0], poses, vels)
    w.step(1 / 240)
    assert not w._contacts.stick[0, 1]  # sliding after its first step
    for _ in range(int(2.0 / (1 / 240))):
        w.step(1 / 240)
    travelled = w.body_poses[0, 1, 0]
    expected = 3.0**2 / (2 * 0.4 * G)  # the dynamic coefficient while it slides
    assert abs(travelled - expected) / expected < 0.03
    assert w._contacts.stick[0, 1] and abs(w.body_velocities[0, 1, 0]) < 1e-6  # stopped, sticking


def test_friction_model_values_and_callback_pairs() -> None:
    lay = make_layout(_scene())
    ground, cart, box = 0, 1, 3
    assert lay.needs_handler and lay.main_static[ground]
    assert lay.stick_value[ground] == lay.slide_value[ground] == lay.bounce_value[ground] == 1.0
    assert lay.stick_value[box] == math.sqrt(0.9 * 0.7)  # Box2D: geometric mean
    assert lay.slide_value[box] == math.sqrt(0.4 * 0.5)
    assert lay.bounce_value[box] == 0.3 and lay.bounce_value[cart] == 0.0  # max(e_a, e_b)
    # boxes touch each other: those pairs keep the per-contact callback
    assert lay.callback_pairs == ((MOVING_TYPE, MOVING_TYPE),)
    # a static shape of a second material: its contacts keep the callback too
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    wall = ke.Prop(ke.Box(0.1, 1.0), material=GRIP, body_type="static")
    b.add(wall, at="/World/Wall")
    b.add(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(0.5, 0.5)), at="/World/Ball")
    lay = make_layout(b.build())
    assert lay.callback_pairs == ((MOVING_TYPE, OTHER_STATIC_TYPE),)
    # equal coefficients everywhere: no model, no callback
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(material=ke.Material(0.5, 0.5)), at="/")
    b.add(ke.Prop(ke.Circle(0.1), material=ke.Material(0.5, 0.5)), at="/World/Ball")
    lay = make_layout(b.build())
    assert not lay.needs_handler and lay.callback_pairs == ()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_set_body_states_then_restore_replays_the_same_bits(layout: str) -> None:
    # a live set_body_states skips placing the rebuilt bodies (every state is written
    # next); the replay of a restore places them first: both must give the same future
    w = ke.World(_scene(), num_envs=3, layout=layout)
    _history(w, 60, 1.0)
    poses, vels = w.body_poses[[2, 0]], w.body_velocities[[2, 0]]
    vels[:, 6] = (0.5, 0.0, -9.0)
    w.set_body_states([0, 1], poses, vels)
    _history(w, 30, 2.0)
    snap = w.snapshot()
    future = _future(w, 90)
    w.restore(snap)
    assert np.array_equal(_future(w, 90), future)
    assert np.abs(future[-1]).max() > 0


def _tilted_block(theta: float, layout: str, static: float, dynamic: float) -> ke.World:
    """A block on the main ground under gravity tilted by ``theta`` (a slope along +x)."""
    b = ke.SceneBuilder(gravity=(G * math.sin(theta), -G * math.cos(theta)))
    mat = ke.Material(static_friction=static, dynamic_friction=dynamic)
    b.add(ke.Terrain.plane(material=mat), at="/")
    block = ke.Prop(ke.Box(0.2, 0.2), material=mat, initial_pose=ke.Pose(0.0, 0.099))
    b.add(block, at="/World/Block")
    return ke.World(b.build(), layout=layout)


def _travel_after_kick(w: ke.World, v0: float, dt: float = 1 / 1000) -> float:
    """Settle, give the block speed ``v0`` along the slope, return how far it went in 1 s."""
    for _ in range(int(0.1 / dt)):
        w.step(dt)
    assert w._contacts.stick[0, 1]  # resting: static friction
    poses = w.body_poses
    vels = np.zeros_like(poses)
    vels[0, 1] = (v0, 0.0, 0.0)
    x0 = poses[0, 1, 0]
    w.set_body_states([0], poses, vels)
    for _ in range(int(1.0 / dt)):
        w.step(dt)
    return float(w.body_poses[0, 1, 0] - x0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_resting_block_starts_sliding_just_above_the_slide_threshold(layout: str) -> None:
    # slope between the friction angles: atan(0.3) < 25 deg < atan(0.6). A resting block
    # kicked downhill keeps static friction (and stops) while its contact speed stays at
    # or below SLIDE_SPEED_THRESHOLD (0.02 m/s); above it, dynamic friction takes over and
    # gravity wins: it slides away. After one 1 ms step the kick of 0.012 m/s is ~0.011
    # m/s, the kick of 0.03 m/s ~0.029 m/s: the threshold is pinned between the two.
    theta = math.radians(25.0)
    stays = _travel_after_kick(_tilted_block(theta, layout, 0.6, 0.3), 0.012)
    slides = _travel_after_kick(_tilted_block(theta, layout, 0.6, 0.3), 0.03)
    assert 0.0 < stays < 1e-3
    expected = 0.03 + 0.5 * G * (math.sin(theta) - 0.3 * math.cos(theta))  # 1 s, dynamic
    assert abs(slides - expected) / expected < 0.05


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_sliding_block_that_slows_down_sticks_again(layout: str) -> None:
    # kicked uphill it slides (dynamic friction 0.1) and slows down; once its contact speed
    # falls below STATIC_SPEED_THRESHOLD it sticks, and static friction 0.6 holds it on a
    # 20 deg slope that dynamic friction alone could not (without the switch back it
    # would slide down ~0.8 m in the last half second)
    w = _tilted_block(math.radians(20.0), layout, 0.6, 0.1)
    _travel_after_kick(w, -0.4)
    x = w.body_poses[0, 1, 0]
    for _ in range(500):
        w.step(1 / 1000)
    assert w._contacts.stick[0, 1] and abs(w.body_poses[0, 1, 0] - x) < 1e-6


def _offset_cog_scene() -> ke.Scene:
    """A body whose centre of gravity is off its origin (its box is offset), and a ball."""
    b = ke.SceneBuilder(gravity=(0.0, 0.0))
    arm = ke.Prop(ke.Box(0.6, 0.05, offset=ke.Pose(0.3, 0.0)), mass=0.5)
    b.add(arm, at="/World/Arm")
    b.add(ke.Prop(ke.Circle(0.1), mass=1.0), at="/World/Ball")
    return b.build()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_set_body_states_reads_back_as_docs_world_md_says(layout: str) -> None:
    """Row k goes to env_ids[k] (a mask: ascending); angles and velocities read back as
    written, positions to rounding (the packed x grid, an offset centre of gravity)."""
    w = ke.World(_offset_cog_scene(), num_envs=8, layout=layout)
    rng = np.random.default_rng(3)
    before = w.body_poses
    mask = np.zeros(8, bool)
    mask[[6, 1, 4]] = True
    for ids, rows in (([5, 0, 3], [5, 0, 3]), (mask, [1, 4, 6])):
        poses = np.tile(w.initial_body_poses, (3, 1, 1))
        poses[..., :2] += rng.uniform(-2.0, 2.0, (3, 2, 2))
        poses[..., 2] = rng.uniform(-3.0, 3.0, (3, 2))
        vels = rng.uniform(-1.0, 1.0, (3, 2, 3))
        w.set_body_states(ids, poses, vels)
        got = w.body_poses[rows]
        assert np.array_equal(got[..., 2], poses[..., 2])
        assert np.array_equal(w.body_velocities[rows], vels)
        assert np.allclose(got[..., :2], poses[..., :2], rtol=0, atol=1e-9)
    assert np.array_equal(w.body_poses[[2, 7]], before[[2, 7]])  # the other copies
    w.set_body_states([2], w.initial_body_poses[None])  # velocities None: zero
    assert not w.body_velocities[2].any()
    poses, vels = w.body_poses, w.body_velocities
    for nothing in ([], np.zeros(8, bool)):  # resets nothing
        w.set_body_states(nothing, np.zeros((0, 2, 3)))
        w.reset_envs(nothing)
    assert np.array_equal(w.body_poses, poses) and np.array_equal(w.body_velocities, vels)
    w.close()


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_empty_resets_change_nothing_not_even_the_log(layout: str) -> None:
    # an empty id list or an all-False mask resets nothing: the snapshot's bytes are the
    # same as without the call (a bad shape is still refused)
    w = ke.World(_scene(), num_envs=3, layout=layout)
    for _ in range(5):
        w.step(1 / 60)
    before = w.snapshot().to_bytes()
    w.reset_envs([])
    w.reset_envs(np.zeros(3, dtype=bool))
    w.set_body_states([], np.zeros((0, len(w.body_names), 3)))
    w.set_body_states(np.zeros(3, dtype=bool), np.zeros((0, len(w.body_names), 3)))
    assert w.snapshot().to_bytes() == before
    with pytest.raises(ValueError, match="poses must have shape"):
        w.set_body_states([], np.zeros((1, len(w.body_names), 3)))


def _resets(w: ke.World) -> list[tuple]:
    """A busy run of resets and rebases; the bookkeeping a reset writes after each."""
    n, h = w.num_envs, w._history
    w.max_log_steps = 7  # rebases (rebuilds at the present state) and log prunes too
    seen = []
    for t in range(40):
        w.set_joint_efforts(np.tile([30.0 * math.sin(t / 3.0), 0.0], (n, 1)))
        if t % 5 == 1:
            f = np.zeros((n, len(w.body_names), 2))
            f[:, 3] = (20.0, 3.0)
            w.set_body_forces(f)
        if t % 4 == 2:
            w.reset_envs([t % n, (t + 2) % n, t % n])  # a repeat: reset once
        if t % 6 == 3:
            mask = np.arange(n) % 2 == t % 2
            w.set_body_states(mask, w.body_poses[mask], w.body_velocities[mask])
        w.step(DT)
        c, ctl = w._contacts, w._ctl
        rows = (h.epoch, h.epoch_step, h.touched, w._states.valid, c.normals, c.stick)
        rows += (*ctl.rows(), ctl.external_any, ctl.dirty, h.rebase_at, len(h.log))
        seen.append(tuple(np.copy(r) for r in rows))
    return seen


def test_a_resets_rows_in_one_c_call_are_the_numpy_ones(monkeypatch) -> None:
    # History._rebuilt writes the reset copies' rows (forget's, normals, epochs) and the
    # epochs' minima in one call of the C helper's reset_rows: the same values, log and
    # snapshot as the numpy writes it stands for (the helper off)
    from kelab.sim import _history

    if _history.native_module() is None:
        pytest.skip("the C helper is not built (tests/sim/test_without_native.py)")
    fast = ke.World(_scene(), num_envs=5, layout="packed")
    with monkeypatch.context() as m:
        m.setattr(_history, "native_module", lambda: None)
        slow = ke.World(_scene(), num_envs=5, layout="packed")
    assert fast._history._native is not None and slow._history._native is None
    calls = []

    class Counted:  # the helper, its reset_rows calls counted
        def __getattr__(self, name: str) -> object:
            calls.append(name)
            return getattr(_history.native_module(), name)

    fast._history._native = Counted()
    a, b = _resets(fast), _resets(slow)
    assert calls.count("reset_rows") >= 20  # resets, state writes and rebases
    for x, y in zip(a, b, strict=True):
        assert all(np.array_equal(p, q) for p, q in zip(x, y, strict=True))
    assert fast.snapshot().to_bytes() == slow.snapshot().to_bytes()


def test_reset_rows_refuses_ids_out_of_range_writing_nothing() -> None:
    from kelab.sim.physics._guard import native_module

    native = native_module()
    if native is None:
        pytest.skip("the C helper is not built (tests/sim/test_without_native.py)")
    zero, one = np.ones((4, 3)), np.zeros(4, dtype=bool)
    epoch, steps = np.arange(4, dtype=np.int64), np.arange(4, dtype=np.int64)
    with pytest.raises(ValueError, match="ids must be int64 in"):
        native.reset_rows(np.array([1, 4]), (zero,), (one,), epoch, 9, steps, 9)
    assert zero.all() and not one.any() and epoch.tolist() == [0, 1, 2, 3]
    # an array of another row count is named, with its size
    with pytest.raises(ValueError, match=r"n=4 rows, got array 1 of the 2 .* of 5 bytes"):
        native.reset_rows(np.array([1]), (zero,), (np.zeros(5, bool),), epoch, 9, steps, 9)
    assert zero.all() and epoch.tolist() == [0, 1, 2, 3]
    got = native.reset_rows(np.array([2, 0]), (zero,), (one,), epoch, 9, steps, 5)
    assert got == (1, 1) and zero[[0, 2]].sum() == 0 and zero[[1, 3]].all()
    assert one.tolist() == [True, False, True, False]
    assert epoch.tolist() == [9, 1, 9, 3] and steps.tolist() == [5, 1, 5, 3]
