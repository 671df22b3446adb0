"""The built-in tasks' frames show what matters: the robot whole, the ground, the table."""

from __future__ import annotations

import numpy as np
import pytest
from render_helpers import BACKENDS

from kelab.rl.direct import DirectRLEnv
from kelab.sim.scene.shapes import Box, Circle
from kelab.tasks.ball_to_goal import TABLE_RADIUS, BallToGoalTask
from kelab.tasks.pi_locomotion import PiLocomotionTask


def _robot_screen_points(env: DirectRLEnv, prefix: str) -> np.ndarray:
    """Every shape corner (boxes) and extreme point (circles) of the robot, in pixels."""
    world, cam = env.world, env._presenter.renderer.camera
    pts = []
    for inst in world.scene.bodies:
        if not inst.path.startswith(prefix) or not inst.spec.render.visible:
            continue
        x, y, a = world.body_poses[0, world.body_names.index(inst.path)]
        c, s = np.cos(a), np.sin(a)
        for shape in inst.spec.shapes:
            off = shape.offset
            if isinstance(shape, Box):
                local = np.asarray(shape.vertices())
            elif isinstance(shape, Circle):
                r = shape.radius
                local = np.array([[r, 0], [-r, 0], [0, r], [0, -r]])
            else:
                continue
            oc, os_ = np.cos(off.angle), np.sin(off.angle)
            body = local @ np.array([[oc, os_], [-os_, oc]]) + (off.x, off.y)
            wpts = body @ np.array([[c, s], [-s, c]]) + (x, y)
            pts.append(cam.world_to_screen_batch(wpts))
    return np.concatenate(pts)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pi_locomotion_robot_whole_and_ground_visible(backend):
    env = DirectRLEnv(PiLocomotionTask(), render_mode="rgb_array", seed=0)
    env._presenter.backend = backend
    rng = np.random.default_rng(0)
    try:
        env.reset(seed=0)
        for step in range(60):
            env.step(rng.uniform(-0.5, 0.5, env.action_space.shape).astype(np.float32))
            if step % 20:
                continue
            frame = env.render()
            h, w = frame.shape[:2]
            pts = _robot_screen_points(env, "/World/Robot")
            assert (pts[:, 0] > 0).all() and (pts[:, 0] < w).all()
            assert (pts[:, 1] > 0).all() and (pts[:, 1] < h).all(), pts[:, 1].max()
            # the robot is a real part of the picture, not a speck at an edge
            height = pts[:, 1].max() - pts[:, 1].min()
            assert 0.15 * h < height < 0.6 * h
            # the ground (y = 0) is on screen with ground-coloured pixels below it
            cam = env._presenter.renderer.camera
            ground_px = cam.world_to_screen((0.0, 0.0))[1]
            assert 0.6 * h < ground_px < 0.95 * h
            below = frame[int(ground_px) + 8 : h, 5:60].reshape(-1, 3).astype(int)
            assert (np.abs(below - (90, 110, 90)).max(axis=1) <= 3).mean() > 0.8
    finally:
        env.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_ball_to_goal_table_edge_drawn_and_ball_inside(backend):
    env = DirectRLEnv(BallToGoalTask(), render_mode="rgb_array", seed=0)
    env._presenter.backend = backend
    try:
        env.reset(seed=0)
        frame = env.render().astype(int)
        h, w = frame.shape[:2]
        cam = env._presenter.renderer.camera
        # the whole table plus a ball's radius beyond its edge fits in the frame
        edge = TABLE_RADIUS + 0.1
        for p in ((edge, 0.0), (-edge, 0.0), (0.0, edge), (0.0, -edge)):
            sx, sy = cam.world_to_screen(p)
            assert 0 <= sx < w and 0 <= sy < h
        # the rim is drawn: at 16 angles the pixel on the circle is the rim colour
        hits = 0
        for ang in np.linspace(0, 2 * np.pi, 16, endpoint=False):
            p = (TABLE_RADIUS - 0.015) * np.array([np.cos(ang), np.sin(ang)])
            sx, sy = (int(round(v)) for v in cam.world_to_screen(p))
            patch = frame[sy - 1 : sy + 2, sx - 1 : sx + 2].reshape(-1, 3)
            hits += bool((np.abs(patch - (120, 128, 140)).max(axis=1) <= 12).any())
        assert hits >= 14
    finally:
        env.close()
