"""Scenery: backdrop gradient, ground marks, joint pivots and contact-force arrows."""

from __future__ import annotations

import numpy as np
import pytest
from render_helpers import BACKENDS

import kelab as ke
from kelab.render.scenery import (
    PALETTE,
    Ground,
    draw_backdrop,
    draw_below_ground,
    draw_contact_forces,
    draw_ground_marks,
    draw_joints,
    find_ground,
    find_ground_top,
    joint_anchors,
)


def _pi_world(num_envs: int = 1) -> ke.World:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(height=0.1), at="/", per_environment=False)
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/pi:v1")), at="/World/Robot")
    return ke.World(b.build(), num_envs=num_envs, env_spacing=2.0)


def test_ground_top_and_joint_pivots_follow_their_parent():
    world = _pi_world(2)
    assert find_ground_top(world.scene) == pytest.approx(0.1)
    pivots = joint_anchors(world)
    assert pivots.shape == (2, 8, 2)
    np.testing.assert_allclose(pivots[1] - pivots[0], [[2.0, 0.0]] * 8)  # copy origins
    torso = world.body_names.index("/World/Robot/torso")
    poses = world.body_poses.copy()
    poses[:, torso, 2] += 0.3  # turn the torso: the hips turn with it, the knees do not
    moved = joint_anchors(world, poses)
    hips, knees = moved[0, 0::2], moved[0, 1::2]
    assert not np.allclose(hips, pivots[0, 0::2])
    np.testing.assert_allclose(knees, pivots[0, 1::2])
    world.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_backdrop_marks_joints_and_contacts_draw(backend):
    world = _pi_world()
    for _ in range(200):
        world.step(1 / 1000)
    with ke.create_renderer(backend, size=(320, 240), headless=True) as r:
        r.camera.center, r.camera.zoom = (0.0, 0.4), 300.0
        r.begin_frame()
        draw_backdrop(r.canvas)
        r.canvas.draw_world(world)
        draw_ground_marks(r.canvas, 0.1)
        draw_contact_forces(r.canvas, world)
        draw_joints(r.canvas, world)
        r.end_frame()
        img = r.read_rgb_pixels().astype(int)
        top, mid = img[0, 5], img[100, 5]
        assert tuple(top) == pytest.approx(PALETTE["sky_top"], abs=2)
        assert not np.array_equal(top, mid)  # a gradient, not a flat colour
        x0, gy = (int(v) for v in r.camera.world_to_screen((0.0, 0.1)))
        tick = img[gy + 2 : gy + 6, x0 - 1 : x0 + 2].reshape(-1, 3)
        assert (np.abs(tick - PALETTE["ground_mark"]).max(axis=1) < 40).any()
        hx, hy = (int(round(v)) for v in r.camera.world_to_screen(joint_anchors(world)[0, 0]))
        ring = img[hy - 3 : hy + 4, hx - 3 : hx + 4].reshape(-1, 3)
        assert (np.abs(ring - PALETTE["joint"]).max(axis=1) < 40).any()
        red = np.abs(img - PALETTE["contact"]).max(axis=2) < 30
        assert red.sum() > 20  # the feet push on the ground
    world.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_frame_under_a_thin_ground_is_ground_not_sky(backend):
    """A 0.3 m deep, 40 m wide ground seen zoomed in ends in no strip of sky; beyond its
    end (zoomed out) nothing is drawn under it."""
    b = ke.SceneBuilder()
    b.add(
        ke.Terrain.plane(height=0.0, thickness=0.3, half_width=20.0), at="/", per_environment=False
    )
    world = ke.World(b.build(), num_envs=1)
    ground = find_ground(world.scene)
    assert ground is not None and ground[:4] == pytest.approx((0.0, -0.3, -20.0, 20.0))
    assert isinstance(ground, Ground) and find_ground_top(world.scene) == 0.0
    with ke.create_renderer(backend, size=(320, 240), headless=True) as r:
        r.canvas.outlines = True  # the box's bottom edge gets a dark outline, covered too
        for center, zoom in (((0.0, 0.0), 100.0), ((19.0, 0.0), 20.0)):
            r.camera.center, r.camera.zoom = center, zoom
            r.begin_frame()
            draw_backdrop(r.canvas)
            r.canvas.draw_world(world)
            draw_below_ground(r.canvas, ground)
            r.end_frame()
            img = r.read_rgb_pixels().astype(int)
            x_end = int(r.camera.world_to_screen((20.0, 0.0))[0])
            _, gy = (int(v) for v in r.camera.world_to_screen((0.0, 0.0)))
            below = img[gy + 2 :, : min(x_end - 3, 320)].reshape(-1, 3)  # (its end: outlined)
            assert (np.abs(below - ground.color).max(axis=1) <= 1).all(), (backend, zoom)
            if x_end < 318:  # zoomed out: the sky beyond the ground's end stays sky
                assert tuple(img[-1, -1]) == pytest.approx(PALETTE["sky_bottom"], abs=2)
    world.close()
