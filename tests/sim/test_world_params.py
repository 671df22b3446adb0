"""Per-copy physical parameters (issue #41): masses, materials, gravity, actuator strength,
pushes and sensor noise; exact through resets, snapshots, restores and threads."""

from __future__ import annotations

import numpy as np
import pytest

import kelab as ke
from kelab.sim._params import ParamRules
from kelab.sim.physics import _params
from kelab.sim.physics._guard import native_module

LAYOUTS = ("isolated", "packed")


def _scene(gravity: tuple[float, float] = (0.0, -9.81)) -> ke.Scene:
    """A cartpole, a bouncy ball and a sliding box on a plane (the friction model is on)."""
    b = ke.SceneBuilder(gravity=gravity)
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    ball = ke.Prop(
        ke.Circle(0.1),
        mass=0.5,
        material=ke.Material(restitution=0.6, rolling_friction=0.02),
        initial_pose=ke.Pose(1.0, 1.0),
    )
    b.add(ball, at="/World/Ball")
    box = ke.Prop(
        ke.Box(0.3, 0.2),
        mass=2.0,
        material=ke.Material(static_friction=0.8, dynamic_friction=0.4),
        initial_pose=ke.Pose(-1.0, 0.1),
    )
    b.add(box, at="/World/Box")
    b.imu("ball.imu", ball, ke.SensorConfig(noise=0.01))
    return b.build()


def _randomize(w: ke.World, seed: int, ids: np.ndarray) -> None:
    """Draw every kind of parameter for copies ``ids`` (as a task's randomization would)."""
    rng = np.random.default_rng(seed)
    k = ids.size
    masses = w.body_masses[ids] * rng.uniform(0.5, 2.0, (k, len(w.body_names)))
    w.set_body_masses(masses, ids)
    fr = w.body_friction[ids]
    moving = [i for i, n in enumerate(w.body_names) if n.startswith("/World/")]
    scale = rng.uniform(0.3, 1.5, (k, len(moving), 1))
    fr[:, moving] *= scale
    w.set_body_friction(fr, ids)
    e = w.body_restitution[ids]
    e[:, w.body_names.index("/World/Ball")] = rng.uniform(0.2, 0.9, k)
    w.set_body_restitution(e, ids)
    w.set_gravity(w.gravity[ids] + rng.uniform(-2.0, 2.0, (k, 2)), ids)
    strength = w.actuator_strength[ids]
    strength[:, 0] = rng.uniform(0.5, 1.5, k)
    w.set_actuator_strength(strength, ids)
    w.set_sensor_noise_scale(rng.uniform(0.0, 3.0, k), ids)


def _drive(w: ke.World, steps: int, seed: int, params: bool = True) -> list[np.ndarray]:
    """Efforts, resets, pushes and parameter changes on a schedule; the states after each step."""
    rng = np.random.default_rng(seed)
    out = []
    n = w.num_envs
    for t in range(steps):
        w.set_joint_efforts(rng.uniform(-30, 30, (n, len(w.joint_names))))
        if t % 7 == 3:
            ids = np.sort(rng.choice(n, 2, replace=False))
            w.reset_envs(ids)
            if params:
                _randomize(w, seed + t, ids)
        if params and t % 11 == 5:
            ids = np.array([int(rng.integers(n))])
            v = w.body_velocities[ids]
            v[:, :, 0] += 0.5
            w.set_body_velocities(v, ids)
        w.step(1 / 120)
        out.append(np.concatenate([w.body_poses.ravel(), w.body_velocities.ravel(),
                                   w.read_sensor("ball.imu").ravel()]))  # fmt: skip
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
def test_snapshot_restore_same_bits_and_threads(layout: str) -> None:
    """Snapshot -> restore -> the same bits; 2 threads give 1 thread's bits (both layouts)."""
    runs = {}
    for threads in (1, 2):
        w = ke.World(_scene(), num_envs=6, seed=3, layout=layout, num_threads=threads)
        _randomize(w, 1, np.arange(6))
        _drive(w, 40, seed=5)
        snap = w.snapshot()
        names = ("body_masses", "body_moments", "body_friction", "body_restitution",
                 "gravity", "actuator_strength", "sensor_noise_scale")  # fmt: skip
        held = {name: getattr(w, name) for name in names}
        tail = _drive(w, 40, seed=6)
        w.restore(snap)
        again = _drive(w, 40, seed=6)
        assert all(np.array_equal(a, b) for a, b in zip(tail, again, strict=True))
        # into a fresh World that never randomized anything: the log carries the values
        fresh = ke.World(_scene(), num_envs=6, seed=3, layout=layout, num_threads=threads)
        fresh.restore(snap)
        for name in names:
            assert np.array_equal(getattr(fresh, name), held[name]), name
        other = _drive(fresh, 40, seed=6)
        assert all(np.array_equal(a, b) for a, b in zip(tail, other, strict=True))
        runs[threads] = tail
        w.close()
        fresh.close()
    assert all(np.array_equal(a, b) for a, b in zip(runs[1], runs[2], strict=True))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_c_helpers_batched_writer_gives_the_per_shape_calls_bits(
    layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Masses (bodies of one and of several shapes), friction, restitution and pushes written
    by the C helper in batches, or shape by shape from Python: the same body bytes, and
    the same masses and moments held, for 1 and 2 threads (kelab/sim/physics/_params.py)."""
    if _params.writer_module() is None:
        pytest.skip("the C helper is not built here (tests/sim/test_without_native.py)")
    runs = {}
    for use_c in (True, False):
        monkeypatch.setattr(_params, "USE_C", use_c)
        for threads in (1, 2):
            w = ke.World(_scene(), num_envs=6, seed=3, layout=layout, num_threads=threads)
            assert (w._backend._param_writer is not None) == use_c
            _randomize(w, 1, np.arange(6))
            states = _drive(w, 60, seed=5)
            held = (w.body_masses, w.body_moments, w.body_friction, w.body_restitution)
            runs[use_c, threads] = (np.concatenate(states).tobytes(), held)
            w.close()
    ref_bytes, ref_held = runs[False, 1]
    for key, (got, held) in runs.items():
        assert got == ref_bytes, key
        assert all(np.array_equal(a, b) for a, b in zip(held, ref_held, strict=True)), key


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_mass_write_rereads_exactly_the_copies_it_moved(layout: str) -> None:
    """A new mass realigns a body on its centre of gravity, which can move its position by
    a rounding: the states the World reads after are Chipmunk's bits, and with the C helper
    only the copies that moved are read again."""
    b = ke.SceneBuilder(gravity=(0.0, 0.0))
    off = ke.Prop((ke.Box(0.4, 0.2), ke.Circle(0.1, offset=ke.Pose(0.3, 0.05))), mass=1.0)
    b.add(off, at="/World/Off")
    w = ke.World(b.build(), num_envs=64, layout=layout)
    rng = np.random.default_rng(2)
    poses = rng.uniform(-2.0, 2.0, (64, 1, 3))
    w.set_body_states(None, poses, np.zeros((64, 1, 3)))
    assert w.body_poses.shape == (64, 1, 3)  # every copy read: valid
    w.set_body_masses(rng.uniform(0.5, 2.0, (64, 1)))
    stale = ~w._states.valid
    read = w.body_poses
    w._states.valid[:] = False  # read every copy again from Chipmunk
    assert read.tobytes() == w.body_poses.tobytes()
    if w._backend._param_writer is not None:
        assert 0 < stale.sum() < 64  # some copies moved by a rounding, not all


@pytest.mark.parametrize("layout", LAYOUTS)
def test_parameters_outlive_resets_and_a_pruned_log(layout: str) -> None:
    """Set once, then every copy reset many times: the log is pruned, the values stay."""
    w = ke.World(_scene(), num_envs=4, layout=layout)
    _randomize(w, 2, np.arange(4))
    before = (w.body_masses, w.body_friction, w.gravity, w.actuator_strength)
    for k in range(6):
        w.reset_envs([k % 4, (k + 1) % 4])
        w.step(1 / 120)
    w.reset_envs()
    w.step(1 / 120)
    kinds = [e.kind for e in w._log]  # pruned: one entry per kind folded into the head
    assert sum(k.parameter for k in kinds) == 4
    assert not any(k.parameter for k in kinds[kinds.index(ke.sim.replay_log.Kind.BUILD) :])
    after = (w.body_masses, w.body_friction, w.gravity, w.actuator_strength)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    snap = w.snapshot()
    tail = _drive(w, 20, seed=9, params=False)
    fresh = ke.World(_scene(), num_envs=4, layout=layout)
    fresh.restore(snap)
    assert np.array_equal(fresh.body_masses, before[0])
    again = _drive(fresh, 20, seed=9, params=False)
    assert all(np.array_equal(a, b) for a, b in zip(tail, again, strict=True))


def test_a_copy_with_its_own_gravity_is_a_lone_world_with_that_gravity() -> None:
    """Isolated: the copy's space gets the gravity, bit for bit a scene with it."""
    g = (0.7, -3.5)
    w = ke.World(_scene(), num_envs=3, seed=1)
    w.set_gravity([g], env_ids=[1])
    lone = ke.World(_scene(gravity=g), num_envs=3, seed=1)
    for _ in range(60):
        w.step(1 / 120)
        lone.step(1 / 120)
    assert np.array_equal(w.body_poses[1], lone.body_poses[1])
    assert np.array_equal(w.read_sensor("ball.imu")[1], lone.read_sensor("ball.imu")[1])
    assert not np.array_equal(w.body_poses[0], lone.body_poses[0])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gravity_per_copy_falls_at_its_rate(layout: str) -> None:
    """Free fall per copy; packed: the space's gravity plus m (g - g_scene) as a force."""
    b = ke.SceneBuilder()
    b.add(ke.Prop(ke.Circle(0.1), mass=3.0, initial_pose=ke.Pose(0.0, 50.0)), at="/World/Ball")
    w = ke.World(b.build(), num_envs=3, layout=layout)
    w.set_body_masses([[0.25]], env_ids=[2])
    w.set_gravity([[1.0, -1.62], [0.0, -24.8]], env_ids=[1, 2])
    for _ in range(100):
        w.step(0.01)
    v = w.body_velocities[:, 0, :2]
    assert np.allclose(v, [[0.0, -9.81], [1.0, -1.62], [0.0, -24.8]], rtol=1e-12, atol=1e-12)
    assert np.array_equal(w.gravity, [[0.0, -9.81], [1.0, -1.62], [0.0, -24.8]])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_masses_scale_the_moment_and_the_response(layout: str) -> None:
    w = ke.World(_scene(), num_envs=2, layout=layout)
    names = w.body_names
    box = names.index("/World/Box")
    masses = w.body_masses
    masses[1, box] = 8.0
    w.set_body_masses(masses[1:], env_ids=[1])
    assert w.body_masses[1, box] == 8.0 and w.body_masses[0, box] == 2.0
    assert w.body_moments[1, box] == pytest.approx(4.0 * w.body_moments[0, box], rel=1e-15)
    cart = names.index("/World/Robot/cart")  # several shapes: read back from pymunk
    masses[1, cart] *= 3.0
    w.set_body_masses(masses[1:], env_ids=[1])
    assert w.body_masses[1, cart] == pytest.approx(masses[1, cart], rel=1e-15)
    assert w.body_moments[1, cart] == pytest.approx(3.0 * w.body_moments[0, cart], rel=1e-12)
    w.set_body_states([0, 1], np.tile(w.initial_body_poses, (2, 1, 1)) + [0, 5.0, 0])
    f = np.zeros((2, len(names), 2))
    f[:, box] = (16.0, 2.0 * 9.81)  # copy 0 floats and accelerates at 8 m/s^2
    w.set_body_forces(f)
    w.step(0.01)
    ax = w.body_velocities[:, box, 0] / 0.01
    assert ax == pytest.approx([8.0, 2.0])
    w.reset_envs()  # held through resets
    assert w.body_masses[1, box] == 8.0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_friction_per_copy_stops_a_sliding_box_where_it_should(layout: str) -> None:
    """d = v^2 / (2 mu g), mu the Box2D combination with the ground's."""
    w = ke.World(_scene(), num_envs=2, layout=layout)
    box = w.body_names.index("/World/Box")
    fr = w.body_friction
    fr[1, box] = (0.2, 0.1, 0.0)
    w.set_body_friction(fr[1:], env_ids=[1])
    poses = np.tile(w.initial_body_poses, (2, 1, 1))
    vels = np.zeros_like(poses)
    vels[:, box, 0] = -2.0  # away from the cart
    w.set_body_states([0, 1], poses, vels)
    for _ in range(600):
        w.step(1 / 240)
    ground = ke.Material()  # the plane's
    d = poses[:, box, 0] - w.body_poses[:, box, 0]
    for copy, mu_box in ((0, 0.4), (1, 0.1)):
        mu = np.sqrt(mu_box * ground.dynamic_friction)
        assert d[copy] == pytest.approx(4.0 / (2 * mu * 9.81), rel=0.03)
    assert w.body_velocities[1, box, 0] == 0.0 or abs(w.body_velocities[1, box, 0]) < 1e-6


@pytest.mark.parametrize("layout", LAYOUTS)
def test_restitution_per_copy_bounces_to_e_squared_h(layout: str) -> None:
    w = ke.World(_scene(), num_envs=2, layout=layout)
    ball = w.body_names.index("/World/Ball")
    e = w.body_restitution
    e[1, ball] = 0.9
    w.set_body_restitution(e[1:], env_ids=[1])
    tops = np.zeros(2)
    seen_floor = np.zeros(2, dtype=bool)
    for _ in range(600):
        w.step(1 / 240)
        y, vy = w.body_poses[:, ball, 1], w.body_velocities[:, ball, 1]
        seen_floor |= vy > 0
        tops = np.where(seen_floor, np.maximum(tops, y), tops)
    h0 = 1.0 - 0.1
    assert (tops - 0.1) / h0 == pytest.approx([0.36, 0.81], abs=0.05)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_actuator_strength_scales_the_exerted_effort(layout: str) -> None:
    w = ke.World(_scene(), num_envs=2, layout=layout)
    s = w.actuator_strength
    s[1, 0] = 0.5
    w.set_actuator_strength(s[1:], env_ids=[1])
    w.set_joint_efforts(np.tile([20.0, 0.0], (2, 1)))
    assert np.array_equal(w.joint_efforts[:, 0], [20.0, 20.0])  # the commands are kept
    for _ in range(30):
        w.step(1 / 120)
    x = w.joint_positions[:, 0]
    assert x[1] == pytest.approx(0.5 * x[0], rel=0.05)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_push_keeps_contacts_and_controls(layout: str) -> None:
    w = ke.World(_scene(), num_envs=2, layout=layout)
    w.set_joint_efforts(np.tile([5.0, 0.0], (2, 1)))
    for _ in range(30):
        w.step(1 / 120)
    cart = w.body_names.index("/World/Robot/cart")
    v = w.body_velocities
    before = v.copy()
    v[1, :, 0] += 1.0
    w.set_body_velocities(v[1:], env_ids=[1])
    assert np.array_equal(w.body_velocities[1, 1:, 0], before[1, 1:, 0] + 1.0)
    assert np.array_equal(w.joint_efforts[1], [5.0, 0.0])  # not a reset
    w.step(1 / 120)
    assert w.body_velocities[1, cart, 0] > w.body_velocities[0, cart, 0] + 0.9


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sensor_noise_scale(layout: str) -> None:
    w = ke.World(_scene(), num_envs=3, layout=layout)
    w.set_sensor_noise_scale([0.0, 5.0], env_ids=[0, 2])
    ideal = []
    reads = []
    for _ in range(200):
        w.step(1 / 120)
        reads.append(w.read_sensor("ball.imu"))
        ideal.append(w.body_velocities[:, w.body_names.index("/World/Ball"), 2])
    omega = np.array(reads)[:, :, 0] - np.array(ideal)
    assert np.array_equal(omega[:, 0], np.zeros(200))  # scale 0: the ideal value
    assert np.std(omega[:, 1]) == pytest.approx(0.01, rel=0.25)
    assert np.std(omega[:, 2]) == pytest.approx(0.05, rel=0.25)
    w.reset_envs()
    assert np.array_equal(w.sensor_noise_scale, [0.0, 1.0, 5.0])


def test_the_imu_reads_the_copys_gravity() -> None:
    w = ke.World(_scene(), num_envs=2, layout="packed")
    w.set_sensor_noise_scale([0.0, 0.0])
    w.set_gravity([[0.0, -3.0]], env_ids=[1])
    w.reset_envs()  # primed at rest: the IMU reads -gravity in its frame
    w.step(1 / 240)  # the pipelines need a dt
    w.reset_envs()
    assert w.read_sensor("ball.imu")[:, 2] == pytest.approx([9.81, 3.0])


@pytest.mark.parametrize(
    ("call", "args", "words"),
    [
        ("set_body_masses", lambda w: np.ones((2, 2)), "must have shape (2, 5)"),
        ("set_body_masses", lambda w: _row(w.body_masses, "/World/Box", np.nan), "finite"),
        ("set_body_masses", lambda w: _row(w.body_masses, "/World/Box", 0.0), "[1e-06, 1e+06]"),
        ("set_body_masses", lambda w: _row(w.body_masses, "/", 1.0), "must stay 0"),
        ("set_body_friction", lambda w: np.zeros((2, 5)), "must have shape (2, 5, 3)"),
        ("set_body_friction", lambda w: _fric(w, "/World/Box", (0.2, 0.3, 0.0)), "<= its static"),
        ("set_body_friction", lambda w: _fric(w, "/World/Box", (-1, 0, 0)), "[0, 100]"),
        ("set_body_friction", lambda w: _fric(w, "/", (0.1, 0.1, 0.0)), "must stay the scene"),
        ("set_body_friction", lambda w: _fric(w, "/World/Box", (0.5, 0.4, 1.0)), "does not roll"),
        ("set_body_restitution", lambda w: _row(w.body_restitution, "/World/Ball", 2), "[0, 1]"),
        ("set_gravity", lambda w: [[0.0, 2e4]] * 2, "±10000"),
        ("set_gravity", lambda w: [[0.0, -9.81]], "must have shape (2, 2)"),
        ("set_actuator_strength", lambda w: [[1.0, 2.0]] * 2, "no actuator"),
        ("set_actuator_strength", lambda w: [[-1.0, 1.0]] * 2, "[0, 100]"),
        ("set_body_velocities", lambda w: np.full((2, 5, 3), 1e8), "±1e+07"),
        ("set_body_velocities", lambda w: np.full((2, 5, 3), np.nan), "finite"),
        ("set_sensor_noise_scale", lambda w: [1.0, -1.0], "[0, 1000]"),
    ],
)
@pytest.mark.parametrize("check", ["c", "numpy"])
def test_bad_values_are_refused_in_one_line_and_change_nothing(
    call, args, words, check, monkeypatch
) -> None:
    """Refused alike whether the C helper's one-pass bounds check or numpy's looks first."""
    if check == "numpy":
        monkeypatch.setattr(ParamRules, "_within", property(lambda self: None))
    elif native_module() is None:
        pytest.skip("the C helper is not built here (no compiler at install)")
    w = ke.World(_scene(), num_envs=2)
    assert (w._rules._within is None) == (check == "numpy")
    snap = w.snapshot().to_bytes()
    with pytest.raises(ke.UserError) as err:
        getattr(w, call)(args(w))
    assert words in str(err.value) and "\n" not in str(err.value)
    assert w.snapshot().to_bytes() == snap


def _row(table: np.ndarray, path: str, value: float) -> np.ndarray:
    names = [b.path for b in _scene().bodies]
    out = table.copy()
    out[:, [i for i, n in enumerate(names) if n == path or (path == "/" and "World" not in n)]] = (
        value
    )
    return out


def _fric(w: ke.World, path: str, row: tuple[float, float, float]) -> np.ndarray:
    out = w.body_friction
    idx = [i for i, n in enumerate(w.body_names) if n == path or (path == "/" and "World" not in n)]
    out[:, idx] = row
    return out


def test_a_scene_without_the_friction_model_keeps_its_rules() -> None:
    """Equal coefficients and one restitution everywhere: static == dynamic, one e."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(material=ke.Material(0.5, 0.5)), at="/")
    b.add(ke.Prop(ke.Box(0.2, 0.2), material=ke.Material(0.5, 0.5)), at="/World/Box")
    w = ke.World(b.build(), num_envs=2)
    w.set_body_friction([[[0.5, 0.5, 0.0], [0.9, 0.9, 0.0]]], env_ids=[1])  # allowed
    with pytest.raises(ke.UserError, match="must equal its dynamic_friction"):
        w.set_body_friction([[[0.5, 0.5, 0.0], [0.9, 0.8, 0.0]]], env_ids=[1])
    with pytest.raises(ke.UserError, match="must stay the scene's 0"):
        w.set_body_restitution([[0.0, 0.5]], env_ids=[1])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_doctored_parameter_entries_are_refused_by_restore(layout: str) -> None:
    w = ke.World(_scene(), num_envs=2, layout=layout)
    w.set_body_masses(w.body_masses * 2.0)
    w.step(1 / 120)
    snap = w.snapshot()
    before = snap.to_bytes()
    vals = snap.arrays["log/vals"]
    kinds = snap.arrays["log/kind"]
    e = int(np.flatnonzero(kinds == int(ke.sim.replay_log.Kind.MASSES))[0])
    off = snap.arrays["log/val_off"]
    bad = vals.copy()
    bad[off[e] : off[e + 1]] = 0.0  # the static bodies are 0; the others may not be
    doctored = ke.Snapshot(snap.fingerprint, snap.step_count, snap.sim_time,
                           {**snap.arrays, "log/vals": bad}, snap.meta)  # fmt: skip
    with pytest.raises(ValueError, match=r"masses.*\[1e-06, 1e\+06\] kg"):
        w.restore(doctored)
    assert w.snapshot().to_bytes() == before
    scale = {**snap.arrays, "sensors/noise_scale": np.full(2, -1.0)}
    with pytest.raises(ValueError, match="noise_scale"):
        w.restore(ke.Snapshot(snap.fingerprint, snap.step_count, snap.sim_time, scale, snap.meta))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_world_that_randomizes_nothing_writes_the_snapshot_it_wrote_before(layout: str) -> None:
    """No parameter set: no entry, no array: the bytes a World wrote before per-copy parameters."""
    w = ke.World(_scene(), num_envs=3, layout=layout)
    _drive(w, 20, seed=1, params=False)
    snap = w.snapshot()
    assert "sensors/noise_scale" not in snap.arrays
    assert int(ke.sim.replay_log.Kind.MASSES) not in snap.arrays["log/kind"].tolist()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_friction_per_copy_reaches_contacts_between_moving_bodies(layout: str) -> None:
    """The pair rule (a box sliding on another moving box) reads the copy's coefficients."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(material=ke.Material(1.0, 0.9)), at="/")
    base = ke.Prop(ke.Box(4.0, 0.2), mass=50.0, material=ke.Material(0.8, 0.6),
                   initial_pose=ke.Pose(0.0, 0.1))  # fmt: skip
    b.add(base, at="/World/Base")
    top = ke.Prop(ke.Box(0.2, 0.2), mass=1.0, material=ke.Material(0.5, 0.4),
                  initial_pose=ke.Pose(-1.0, 0.3))  # fmt: skip
    b.add(top, at="/World/Top")
    w = ke.World(b.build(), num_envs=2, layout=layout)
    t = w.body_names.index("/World/Top")
    fr = w.body_friction
    fr[1, t] = (0.1, 0.1, 0.0)
    w.set_body_friction(fr[1:], env_ids=[1])
    poses = np.tile(w.initial_body_poses, (2, 1, 1))
    vels = np.zeros_like(poses)
    vels[:, t, 0] = 1.5
    w.set_body_states([0, 1], poses, vels)
    for _ in range(480):
        w.step(1 / 240)
    d = w.body_poses[:, t, 0] - poses[:, t, 0]
    for copy, mu_top in ((0, 0.4), (1, 0.1)):
        mu = np.sqrt(mu_top * 0.6)  # the Box2D combination of the two dynamic coefficients
        assert d[copy] == pytest.approx(1.5**2 / (2 * mu * 9.81), rel=0.05)


def _numpy_within(v: np.ndarray, low: np.ndarray, high: np.ndarray, above=None) -> bool:
    """What the C helper's ``within`` stands for, in numpy's comparisons."""
    rows = v.reshape(-1, low.size)
    ok = bool(((rows >= low) & (rows <= high)).all())
    if ok and above is not None:
        has = above >= 0
        ok = bool((rows[:, has] <= rows[:, above[has]]).all())
    return ok


def test_the_c_bounds_check_answers_as_numpys_comparisons() -> None:
    """``within`` (the parameter checks' first look) on rows at, inside and beyond their
    bounds, with NaN, infinities, -0.0 and columns that may not exceed another."""
    module = native_module()
    if module is None:
        pytest.skip("the C helper is not built here (no compiler at install)")
    rng = np.random.default_rng(7)
    low = np.array([0.0, 0.0, 1e-6, -1e7, 0.6, 0.0])
    high = np.array([100.0, 100.0, 1e6, 1e7, 0.6, 1.0])
    above = np.array([-1, 0, -1, -1, -1, 3])
    specials = np.array([0.0, -0.0, 100.0, 100.0000001, -1e-300, 1e-6, 0.6, np.nan, np.inf,
                         -np.inf, 1e7, -1e7, 1.0, 5.0])  # fmt: skip
    agree = []
    for k in range(400):
        rows = rng.uniform(-0.5, 1.5, (3, 6)) * (high - low) + low
        rows[:, 4] = 0.6
        hit = rng.random(rows.shape) < 0.1 * (k % 4)
        rows[hit] = rng.choice(specials, int(hit.sum()))
        for a in (None, above):
            args = (rows, low, high) if a is None else (rows, low, high, a)
            agree.append(module.within(*args) == _numpy_within(rows, low, high, a))
    assert all(agree)
    assert module.within(np.zeros(0), np.zeros(0), np.zeros(0)) is True
    assert module.within(np.zeros((0, 6)), low, high, above) is True
    for bad in [
        (np.zeros(5), low, high),  # not whole rows
        (np.zeros(6), low, high[:5]),  # bounds of two lengths
        (np.zeros(6), low, high, np.array([6, -1, -1, -1, -1, -1])),  # a column beyond
        (np.zeros(6), low, high, np.array([-1, 0])),  # above of another length
    ]:
        with pytest.raises(ValueError, match="within: values must be float64 rows"):
            module.within(*bad)


def test_the_c_table_writer_writes_the_rows_it_is_given_and_refuses_bad_tables() -> None:
    """``write_rows``: the rows picked by index, their columns in order, a 0 skipped; a
    table, a row index or a size that does not fit is refused before anything is written."""
    module = native_module()
    if module is None:
        pytest.skip("the C helper is not built here (no compiler at install)")
    import pymunk

    from kelab.sim.physics import _chipmunk as cp

    body = pymunk.Body(1.0, 1.0)
    shapes = [pymunk.Circle(body, 0.1 * (i + 1)) for i in range(4)]
    addr = [cp.address(cp.shape_ptr(s)) for s in shapes]
    grid = np.array([[addr[0], addr[1]], [addr[2], 0], [0, addr[3]]], dtype=np.uint64)
    rows = np.array([2, 0], dtype=np.int64)
    assert module.write_rows(1, grid, rows, np.array([[9.0, 0.25], [0.5, 0.75]])) == 0
    assert [s.friction for s in shapes] == [0.5, 0.75, 0.0, 0.25]
    for bad in [
        (3, grid, rows, np.zeros((2, 2))),  # no such field
        (1, grid, np.array([3, 0], dtype=np.int64), np.zeros((2, 2))),  # a row beyond
        (1, grid, np.array([-1, 0], dtype=np.int64), np.zeros((2, 2))),
        (1, grid, rows, np.zeros(3)),  # values not whole rows
        (1, grid[:, :1].copy(), rows, np.zeros((2, 2))),  # the table's rows of another width
        (0, grid, rows, np.ones((2, 2)), np.zeros(3, dtype=np.uint8)),  # moved of another size
    ]:
        with pytest.raises(ValueError, match="write_rows: what must be"):
            module.write_rows(*bad)
    assert [s.friction for s in shapes] == [0.5, 0.75, 0.0, 0.25]
