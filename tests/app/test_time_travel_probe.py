"""Time travel probed as a new user would use it: changes made in code, the World's log bound.

Each test here reproduces a defect found by trying docs/app.md, "Time travel", with the
World's warm rebases underneath (docs/world.md, "Snapshots"): it failed before its fix.
"""

from __future__ import annotations

import hashlib

import numpy as np

import kelab as ke


def _scene() -> ke.Scene:
    """A cartpole, a bouncing ball and a box on a plane: joints and contacts that start and end."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    ball = ke.Prop(ke.Circle(0.1), material=ke.Material(restitution=0.7),
                   initial_pose=ke.Pose(1.0, 1.5))  # fmt: skip
    b.add(ball, at="/World/Ball")
    b.add(ke.Prop(ke.Box(0.3, 0.2), initial_pose=ke.Pose(-1.0, 0.6, 0.3)), at="/World/Box")
    return b.build()


class Driver(ke.App):
    """Noisy efforts on the cart from its own Generator and a step counter (both rewound)."""

    def setup(self) -> None:
        self.rng = np.random.default_rng(7)
        self.n = 0

    def fixed_update(self, ts: float) -> None:
        self.n += 1
        self.world.set_joint_efforts(np.array([[self.rng.normal(0.0, 15.0), 0.0]]))

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state, "n": self.n}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state, self.n = state["rng"], state["n"]


def _app() -> Driver:
    return Driver(headless=True, world=ke.World(_scene(), seed=2), size=(160, 120),
                  render_hz=None, time_mode=ke.TimeMode.SIM_HIGH_PERF)  # fmt: skip


def _state(app: Driver) -> tuple[str, int]:
    w = app.world
    parts = (w.body_poses, w.body_velocities, w.joint_efforts, w.external_forces)
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in parts))
    return digest.hexdigest(), app.n


def _run(app: Driver, frames: int, seen: dict[int, tuple[str, int]]) -> None:
    for _ in range(frames):
        app.renderFrameOnce()
        seen[app.fixed_step] = _state(app)


def test_a_branch_started_by_a_change_in_code_is_kept_by_a_seek_into_it() -> None:
    """A change in code after a seek branched, but a seek back into the branch lost it.

    The branch point got no keyframe, so ``seek`` restored the keyframe before it and
    re-ran the steps without the change (the counter and the moved box came back as
    they were on the abandoned timeline).
    """
    app = _app()
    _run(app, 50, {})
    app.seek(30)  # keyframes at 24 and 32: the branch point lies between them
    app.n += 1000
    w = app.world
    poses, vels = w.body_poses, w.body_velocities
    box = w.body_names.index("/World/Box")
    poses[0, box, 1] += 0.5  # lift the box: a change of the World in code
    w.set_body_states([0], poses, vels)
    seen: dict[int, tuple[str, int]] = {}
    _run(app, 6, seen)
    assert app.time_travel.branch == 1 and app.n == 1036
    for k in (31, 32, 33, 36, 31):
        app.seek(k)
        assert _state(app) == seen[k], k
    app.close()


def test_a_seek_back_past_a_change_of_the_worlds_log_bound_is_exact() -> None:
    """``app.world.max_log_steps`` set in code, then a seek back: refused, or not exact.

    The keyframes before the change hold World snapshots whose logs span up to 31 steps;
    a World whose bound is now 1 refused them (``ValueError`` from ``World.restore``),
    and re-runs stepped with the new bound (other rebases: another motion where contacts
    start). Seeks now return to the bound each step had.
    """
    app = _app()
    seen: dict[int, tuple[str, int]] = {}
    _run(app, 100, seen)
    assert app.world.max_log_steps == 32
    app.world.max_log_steps = 1  # rebase after every physics step from now on
    _run(app, 60, seen)
    assert app.time_travel.branch == 0
    for k in (150, 120, 101, 100, 99, 70, 40, 159, 3, 130):
        app.seek(k)
        assert _state(app) == seen[k], k
        assert app.world.max_log_steps == (32 if k < 100 else 1), k
    app.close()


def test_a_redo_across_a_change_made_in_code_on_the_recorded_timeline_is_exact() -> None:
    """docs/app.md: running on after a seek 'with nothing new redoes it exactly'."""
    app = _app()
    seen: dict[int, tuple[str, int]] = {}
    _run(app, 30, seen)
    app.n += 1000  # at the newest step: a keyframe, no branch
    _run(app, 20, seen)
    app.seek(20)
    again: dict[int, tuple[str, int]] = {}
    _run(app, 30, again)  # nothing new: the recorded future, change included
    assert app.time_travel.branch == 0
    assert again == {k: seen[k] for k in again}
    app.close()
