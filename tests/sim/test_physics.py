"""Physics sanity checks of ke.World against closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kelab as ke

DT = 1 / 240
LAYOUTS = ("isolated", "packed")
G = 9.81


def _world(
    *props, ground: ke.Material | None = None, gravity=(0.0, -G), layout: str = "isolated"
) -> ke.World:
    b = ke.SceneBuilder(gravity=gravity)
    if ground is not None:
        b.add(ke.Terrain.plane(material=ground), at="/")
    for k, p in enumerate(props):
        b.add(p, at=f"/World/P{k}")
    return ke.World(b.build(), layout=layout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_free_fall_matches_semi_implicit_euler_and_closed_form(layout: str) -> None:
    w = _world(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(0.0, 100.0)), layout=layout)
    n = 240
    for _ in range(n):
        w.step(DT)
    y = w.body_poses[0, 0, 1]
    drop = 100.0 - y
    # pymunk moves positions with the previous step's velocity, then adds gravity to the
    # velocity: after n steps the drop is g*dt^2*n(n-1)/2 (and the speed g*dt*n)
    assert abs(drop - G * DT**2 * n * (n - 1) / 2) < 1e-9
    assert abs(-w.body_velocities[0, 0, 1] - G * DT * n) < 1e-9
    t = n * DT
    assert abs(drop - G * t * t / 2) / (G * t * t / 2) < 0.01
    assert w.sim_time == 1.0 and w.step_count == n


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sliding_block_stops_after_v2_over_2_mu_g(layout: str) -> None:
    mu = 0.4
    mat = ke.Material(static_friction=mu, dynamic_friction=mu, density=100.0)
    w = _world(
        ke.Prop(ke.Box(0.2, 0.2), material=mat, initial_pose=ke.Pose(0.0, 0.1)),
        ground=mat,
        layout=layout,
    )
    v0 = 3.0
    poses = w.body_poses
    vels = np.zeros_like(poses)
    vels[0, 1] = (v0, 0.0, 0.0)
    w.set_body_states([0], poses, vels)
    for _ in range(int(2.0 / DT)):
        w.step(DT)
    travelled = w.body_poses[0, 1, 0]
    expected = v0**2 / (2 * mu * G)
    assert abs(travelled - expected) / expected < 0.03
    assert abs(w.body_velocities[0, 1, 0]) < 1e-3


def _slope_world(theta: float, mat: ke.Material, layout: str) -> ke.World:
    slope = ke.Prop(
        ke.Box(20.0, 1.0),
        material=mat,
        body_type="static",
        initial_pose=ke.Pose(0.0, 0.0, theta),
    )
    c, s = math.cos(theta), math.sin(theta)
    block = ke.Prop(
        ke.Box(0.2, 0.2),
        material=mat,
        initial_pose=ke.Pose(-0.598 * s, 0.598 * c, theta),  # resting: 2 mm overlap
    )
    return _world(slope, block, layout=layout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_block_on_slope_between_friction_angles_stays_put(layout: str) -> None:
    mat = ke.Material(static_friction=0.6, dynamic_friction=0.3)
    theta = math.radians(25.0)  # atan(0.3)=16.7 deg < 25 < atan(0.6)=31 deg
    w = _slope_world(theta, mat, layout)
    for _ in range(int(0.5 / DT)):
        w.step(DT)
    start = w.body_poses[0, 1, :2].copy()
    for _ in range(int(1.0 / DT)):
        w.step(DT)
    assert np.linalg.norm(w.body_poses[0, 1, :2] - start) < 2e-3
    # the same slope with static == dynamic friction slides: static friction is real
    slide = _slope_world(theta, ke.Material(static_friction=0.3, dynamic_friction=0.3), layout)
    for _ in range(int(1.5 / DT)):
        slide.step(DT)
    initial = np.array([slide.scene.bodies[1].pose.x, slide.scene.bodies[1].pose.y])
    assert np.linalg.norm(slide.body_poses[0, 1, :2] - initial) > 0.3


@pytest.mark.parametrize("e", [0.5, 0.8])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_ball_bounces_to_restitution_squared(e: float, layout: str) -> None:
    h = 1.0
    r = 0.05
    ball = ke.Prop(
        ke.Circle(r), material=ke.Material(restitution=e), initial_pose=ke.Pose(0, h + r)
    )
    w = _world(ball, ground=ke.Material(restitution=0.0), layout=layout)
    dt = 1 / 1000
    ys = []
    for _ in range(int(1.6 / dt)):
        w.step(dt)
        ys.append(w.body_poses[0, 1, 1] - r)
    ys = np.array(ys)
    bounce = int(np.argmin(ys[:700])) if e < 0.7 else int(np.argmin(ys[:600]))
    apex = ys[bounce : bounce + 700].max()
    assert abs(apex - e * e * h) / (e * e * h) < 0.05


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rolling_friction_stops_a_rolling_ball(layout: str) -> None:
    def roll(mu_r: float) -> float:
        ball = ke.Prop(
            ke.Circle(0.1),
            material=ke.Material(rolling_friction=mu_r, static_friction=0.8, dynamic_friction=0.8),
            initial_pose=ke.Pose(0.0, 0.1),
        )
        w = _world(
            ball, ground=ke.Material(static_friction=0.8, dynamic_friction=0.8), layout=layout
        )
        poses = w.body_poses
        vels = np.zeros_like(poses)
        vels[0, 1] = (1.0, 0.0, -10.0)  # rolling without slipping
        w.set_body_states([0], poses, vels)
        for _ in range(int(4.5 / DT)):
            w.step(DT)
        return float(abs(w.body_velocities[0, 1, 0]))

    assert roll(0.05) < 1e-3
    assert roll(0.0) > 0.9


@pytest.mark.parametrize("layout", LAYOUTS)
def test_contact_force_of_resting_box_is_its_weight(layout: str) -> None:
    box = ke.Prop(ke.Box(0.2, 0.2), mass=2.0, initial_pose=ke.Pose(0, 0.1))
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(box, at="/World/Box")
    b.contact_sensor("feel", box)
    w = ke.World(b.build(), layout=layout)
    for _ in range(120):
        w.step(DT)
    np.testing.assert_allclose(w.contact_forces[0, 1], [0.0, 2.0 * G], atol=1e-6)
    np.testing.assert_allclose(w.read_sensor("feel")[0], [0.0, 2.0 * G], atol=1e-6)
