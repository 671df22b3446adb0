"""Time travel replays per-copy parameter changes (docs/app.md; issue #41).

A World's per-copy parameters (masses, friction, restitution, gravity, actuator strength,
sensor noise, pushes: docs/world.md "Per-copy parameters") set in `fixed_update` are
re-run by a seek, and the World's log keeps those set before a keyframe; a set made in
code between two steps is a change like a moved body: it gets its keyframe, a redo that
reaches it makes it again, and after a seek it starts a branch.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import kelab as ke


def _scene() -> ke.Scene:
    """A cartpole, a bouncing ball and a sliding box on a plane (the friction model is on)."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    ball = ke.Prop(ke.Circle(0.1), mass=0.5, material=ke.Material(restitution=0.6),
                   initial_pose=ke.Pose(1.0, 1.0))  # fmt: skip
    b.add(ball, at="/World/Ball")
    box = ke.Prop(ke.Box(0.3, 0.2), mass=2.0,
                  material=ke.Material(static_friction=0.8, dynamic_friction=0.4),
                  initial_pose=ke.Pose(-1.0, 0.1))  # fmt: skip
    b.add(box, at="/World/Box")
    b.imu("ball.imu", ball, ke.SensorConfig(noise=0.01))
    return b.build()


def _randomize(w: ke.World, rng: np.random.Generator, what: int) -> None:
    """One kind of per-copy parameter for every copy, drawn from ``rng``."""
    n, nb = w.num_envs, len(w.body_names)
    moving = [i for i, name in enumerate(w.body_names) if name.startswith("/World/")]
    if what == 0:
        w.set_body_masses(w.body_masses * rng.uniform(0.5, 2.0, (n, nb)))
    elif what == 1:
        fr = w.body_friction
        fr[:, moving] *= rng.uniform(0.3, 1.5, (n, len(moving), 1))
        w.set_body_friction(fr)
    elif what == 2:
        e = w.body_restitution
        e[:, w.body_names.index("/World/Ball")] = rng.uniform(0.2, 0.9, n)
        w.set_body_restitution(e)
    elif what == 3:
        w.set_gravity(w.gravity + rng.uniform(-2.0, 2.0, (n, 2)))
    elif what == 4:
        strength = w.actuator_strength
        strength[:, 0] = rng.uniform(0.5, 1.5, n)
        w.set_actuator_strength(strength)
    elif what == 5:
        w.set_sensor_noise_scale(rng.uniform(0.0, 3.0, n))
    else:  # a push
        v = w.body_velocities
        v[:, moving, 0] += rng.uniform(-1.0, 1.0, (n, 1))
        w.set_body_velocities(v)


class Randomizing(ke.App):
    """Efforts every step and one kind of parameter every few steps, from its own rng."""

    def setup(self) -> None:
        self.n = 0
        self.rng = np.random.default_rng(3)

    def fixed_update(self, ts: float) -> None:
        self.n += 1
        w = self.world
        w.set_joint_efforts(self.rng.uniform(-20.0, 20.0, (w.num_envs, len(w.joint_names))))
        if self.n % 4 == 1:
            _randomize(w, self.rng, (self.n // 4) % 7)
        if self.n % 29 == 7:
            w.reset_envs([self.n % w.num_envs])  # the parameters outlive a reset

    def state_dict(self) -> dict:
        return {"n": self.n, "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.n = state["n"]
        self.rng.bit_generator.state = state["rng"]


class Steady(Randomizing):
    """Efforts only: the parameters change in code, between steps (the test sets them)."""

    def fixed_update(self, ts: float) -> None:
        self.n += 1
        w = self.world
        w.set_joint_efforts(self.rng.uniform(-20.0, 20.0, (w.num_envs, len(w.joint_names))))


def _app(cls: type, max_log_steps: int = 7200) -> ke.App:
    world = ke.World(_scene(), num_envs=2, seed=4, max_log_steps=max_log_steps)
    return cls(headless=True, world=world, size=(160, 120), render_hz=None,
               time_mode=ke.TimeMode.SIM_HIGH_PERF)  # fmt: skip


def _hash(app: ke.App) -> str:
    """The World's bytes: bodies, controls, sensor readings and every per-copy parameter."""
    w = app.world
    parts = [w.body_poses, w.body_velocities, w.external_forces, w.joint_efforts,
             w.body_masses, w.body_moments, w.body_friction, w.body_restitution, w.gravity,
             w.actuator_strength, w.sensor_noise_scale, w.read_sensor("ball.imu")]  # fmt: skip
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in parts)).hexdigest()


def _run(app: ke.App, frames: int) -> dict[int, tuple]:
    seen = {}
    for _ in range(frames):
        app.renderFrameOnce()
        seen[app.fixed_step] = (_hash(app), app.n)
    return seen


@pytest.mark.parametrize("max_log_steps", [7200, 23])  # 23: seeks across World rebases
def test_parameters_set_in_fixed_update_replay_exactly_on_seek(max_log_steps: int) -> None:
    app = _app(Randomizing, max_log_steps)
    seen = _run(app, 120)
    assert app.n == 120
    for k in (119, 37, 1, 76, 100, 58, 13):
        app.seek(k)
        assert (_hash(app), app.n) == seen[k], k
    app.seek(10)
    again = _run(app, 110)  # the redo: the same parameters at the same steps
    assert again == {k: seen[k] for k in range(11, 121)}
    assert app.time_travel.branch == 0
    app.close()


@pytest.mark.parametrize("what", range(7))
def test_a_parameter_set_in_code_between_steps_is_kept_and_redone(what: int) -> None:
    """Set between two frames (not in a step): a seek across it lands exactly on either
    side, and a redo that reaches it sets it again (its keyframe)."""
    app = _app(Steady)
    seen = _run(app, 40)
    before = seen[40]
    _randomize(app.world, np.random.default_rng(what), what)
    seen[40] = (_hash(app), app.n)  # seek(40): the state step 41 starts from
    assert seen[40] != before
    seen.update(_run(app, 30))
    for k in (55, 25, 40, 70, 41, 39):
        app.seek(k)
        assert (_hash(app), app.n) == seen[k], k
    app.seek(20)
    again = _run(app, 50)  # a redo across the change: step 40 ran, then the change
    assert again == {k: seen[k] for k in range(21, 71)} | {40: before}
    assert (_hash(app), app.n) == seen[70] and app.time_travel.branch == 0
    app.close()


@pytest.mark.parametrize("what", range(7))
def test_a_parameter_set_in_code_after_a_seek_branches(what: int) -> None:
    app = _app(Steady)
    _run(app, 50)
    app.seek(30)
    _randomize(app.world, np.random.default_rng(10 + what), what)
    app.renderFrameOnce()
    assert app.time_travel.branch == 1 and app.history.stop == 32
    app.close()
