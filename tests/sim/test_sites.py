"""Reading sites (a fingertip, a sensor mount) in every copy's frame (#39)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kelab as ke

ARM = ke.RobotDescription(
    name="arm",
    bodies=(ke.BodySpec("link", ke.Box(1.0, 0.05, offset=ke.Pose(0.5, 0.0)), mass=1.0),),
    joints=(
        ke.RevoluteJoint("shoulder", "world", "link", actuator=ke.EffortActuator(10.0)),
    ),
    sites=(ke.Site("tip", "link", ke.Pose(1.0, 0.0)),
           ke.Site("mount", "link", ke.Pose(0.5, 0.1, 0.3))),
)  # fmt: skip


def _world(layout: str = "isolated") -> ke.World:
    b = ke.SceneBuilder(gravity=(0.0, 0.0))
    b.add(ke.Robot(ARM, initial_pose=ke.Pose(0.0, 1.0)), at="/World/Arm")
    ball = ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(2.0, 1.0))
    b.add(ball, at="/World/Ball")
    b.site("ball.top", ball, ke.Pose(0.0, 0.1))
    return ke.World(b.build(), num_envs=3, layout=layout)


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_site_poses_match_a_hand_computation(layout) -> None:
    world = _world(layout)
    assert world.site_names == ("/World/Arm/tip", "/World/Arm/mount", "ball.top")
    poses = world.body_poses
    # copy k: the link at (k, 1 + k) turned by k * 90 degrees, the ball turned by 180
    for k in range(3):
        poses[k, 0] = (k, 1.0 + k, k * math.pi / 2)
        poses[k, 1] = (2.0, 1.0, math.pi)
    world.set_body_states(None, poses)
    got = world.site_poses(["/World/Arm/tip", "/World/Arm/mount", "ball.top"])
    assert got.shape == (3, 3, 3)
    # by hand: the offset (dx, dy) turned by the body's angle, added to its origin
    tip = [(1.0, 1.0), (1.0, 3.0), (1.0, 3.0)]  # (1, 0) at 0, 90 and 180 degrees
    mount = [(0.5, 1.1), (1 - 0.1, 2 + 0.5), (2 - 0.5, 3 - 0.1)]  # (0.5, 0.1) turned
    for k in range(3):
        np.testing.assert_allclose(got[k, 0, :2], tip[k], atol=1e-12)
        np.testing.assert_allclose(got[k, 1, :2], mount[k], atol=1e-12)
        np.testing.assert_allclose(got[k, 1, 2], k * math.pi / 2 + 0.3, atol=1e-12)
        np.testing.assert_allclose(got[k, 2], (2.0, 0.9, math.pi), atol=1e-12)
    positions = world.site_positions(["ball.top", "/World/Arm/tip"])
    assert positions.shape == (3, 2, 2)
    assert np.array_equal(positions[:, 0], got[:, 2, :2])
    assert world.site_positions("ball.top").shape == (3, 1, 2)
    world.close()


def test_a_robot_reads_its_own_sites_by_their_short_names() -> None:
    world = _world()
    world.set_joint_efforts(np.array([[1.0], [2.0], [-1.0]]))
    for _ in range(30):
        world.step(1 / 60)
    view = world.robot("/World/Arm")
    assert view.site_names == ("tip", "mount")
    tip = view.site_positions(["tip"])[:, 0]
    link = world.body_poses[:, 0]
    # the fingertip is 1 m along the link from its origin, whatever the link's angle
    np.testing.assert_allclose(tip - link[:, :2], np.stack(
        [np.cos(link[:, 2]), np.sin(link[:, 2])], axis=1), atol=1e-12)  # fmt: skip
    assert np.array_equal(view.site_poses("mount"), world.site_poses("/World/Arm/mount"))
    with pytest.raises(ValueError, match=r"names must be its site names, got 'ball.top'"):
        view.site_positions(["ball.top"])
    world.close()


def test_bad_site_names_are_refused() -> None:
    world = _world()
    with pytest.raises(KeyError, match="no site 'nose'; sites:"):
        world.site_positions(["nose"])
    with pytest.raises(ValueError, match="names must be a site name or a list of site names"):
        world.site_positions([3])
    world.close()


def test_body_poses_are_the_body_origin_and_velocities_the_centre_of_mass() -> None:
    """What docs/world.md states: a body whose centre of mass is 0.5 m from its origin,
    spinning in place about that centre: its pose x, y circle, its velocity stays 0."""
    b = ke.SceneBuilder(gravity=(0.0, 0.0))
    b.add(ke.Prop(ke.Circle(0.1, offset=ke.Pose(0.5, 0.0)), mass=1.0,
                  initial_pose=ke.Pose(1.0, 2.0)), at="/World/Disc")  # fmt: skip
    world = ke.World(b.build())
    assert world.body_poses[0, 0].tolist() == [1.0, 2.0, 0.0]  # the origin, not (1.5, 2)
    assert world.body_centers_of_gravity[0].tolist() == [0.5, 0.0]
    world.set_body_states(None, world.body_poses, np.array([[[0.0, 0.0, 2 * math.pi]]]))
    for _ in range(60):  # half a turn about the centre of mass at (1.5, 2)
        world.step(1 / 120)
    np.testing.assert_allclose(world.body_poses[0, 0, :2], (2.0, 2.0), atol=1e-9)
    np.testing.assert_allclose(world.body_velocities[0, 0, :2], (0.0, 0.0), atol=1e-12)
    world.close()


def test_the_site_api_is_the_world_s_own_no_mixin() -> None:
    """#38: site reading is a collaborator World holds (kelab.sim.sites.Sites), built from
    the scene, not a mixin World inherits to keep world.py short."""
    for name in ("site_names", "site_poses", "site_positions"):
        assert name in vars(ke.World), name
    assert ke.World.__mro__[1:] == (object,)
    from kelab.sim.sites import Sites

    world = _world()
    sites = Sites(world.scene, world.body_names)
    assert sites.names == world.site_names
    names = ["ball.top", "/World/Arm/tip"]
    assert np.array_equal(sites.poses(world.body_poses, names), world.site_poses(names))
    world.close()
