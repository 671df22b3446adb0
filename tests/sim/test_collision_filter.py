"""Collision filtering: ``ke.CollisionFilter`` on props and robot bodies (#39).

A ball falls onto a static plate (the "fork"): it rests on it, or passes through to the
ground when the filters keep the two apart, in both layouts, with 1 and 2 threads, across
snapshots and resets. The users' filters compose with the World's own rules (a robot
without self-collision, packed copies that never touch).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import kelab as ke
from kelab.sim.physics._filters import MAX_CLASSES

F = ke.CollisionFilter
PLATE_Y = 0.5  # the plate's centre
BALL_Y = 1.05  # where the ball starts (the rays are also cast from y = 1.0, a packed
# space's spatial hash cell edge, where Chipmunk's own segment query walks its cells late)
ON_PLATE = PLATE_Y + 0.025 + 0.1  # half the plate's thickness plus the ball's radius
ON_GROUND = 0.1
LAYOUTS = [("isolated", 1), ("isolated", 2), ("packed", 1), ("packed", 2)]


def plate_scene(
    plate: ke.CollisionFilter, ball: ke.CollisionFilter, ball_y: float = BALL_Y
) -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(
        ke.Prop(ke.Box(1.0, 0.05), body_type="static", initial_pose=ke.Pose(0.0, PLATE_Y),
                collision=plate),
        at="/World/Plate",
    )  # fmt: skip
    b.add(
        ke.Prop(ke.Circle(0.1), mass=0.2, initial_pose=ke.Pose(0.0, ball_y), collision=ball),
        at="/World/Ball",
    )
    b.rangefinder("ball.down", "/World/Ball", angle=-math.pi / 2, max_range=5.0)
    return b.build()


def _fall(scene: ke.Scene, layout: str, threads: int, steps: int = 240) -> ke.World:
    world = ke.World(scene, num_envs=5, layout=layout, num_threads=threads)
    for _ in range(steps):
        world.step(1 / 120)
    return world


CASES = {
    "no filters: rests on the plate": (F(), F(), ON_PLATE),
    "same group: passes through": (F(group=7), F(group=7), ON_GROUND),
    "other groups: rests": (F(group=7), F(group=8), ON_PLATE),
    "plate's mask excludes the ball": (F(categories=1, mask=0xFFFFFFFF & ~2), F(categories=2),
                                       ON_GROUND),
    "ball's mask excludes the plate": (F(categories=1), F(categories=2, mask=2 | 4), ON_GROUND),
    "masks meet both ways: rests": (F(categories=1, mask=2), F(categories=2, mask=1), ON_PLATE),
}  # fmt: skip


@pytest.mark.parametrize(("layout", "threads"), LAYOUTS)
@pytest.mark.parametrize("case", list(CASES))
def test_a_ball_rests_on_the_plate_or_passes_through_it(case, layout, threads) -> None:
    plate, ball, height = CASES[case]
    world = _fall(plate_scene(plate, ball), layout, threads)
    y = world.body_poses[:, 2, 1]
    assert np.allclose(y, height, atol=0.01), (case, y)
    world.close()


@pytest.mark.parametrize("ball_y", [BALL_Y, 1.0], ids=["inside a cell", "on a cell edge"])
@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_a_ray_sees_only_the_shapes_its_body_collides_with(layout, ball_y) -> None:
    # the ball's ray, cast from its centre, hits the plate, or (filtered) the ground
    for plate, expect in ((F(), ball_y - (PLATE_Y + 0.025)), (F(group=3), ball_y)):
        world = ke.World(plate_scene(plate, F(group=3) if plate.group else F(), ball_y),
                         num_envs=3, layout=layout)  # fmt: skip
        np.testing.assert_allclose(world.read_sensor("ball.down")[:, 0], expect, atol=1e-9)
        world.close()


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_threads_change_no_bit_with_filters(layout) -> None:
    scene = plate_scene(F(group=7), F(group=7))
    one, two = _fall(scene, layout, 1, 120), _fall(scene, layout, 2, 120)
    assert np.array_equal(one.body_poses, two.body_poses)
    one.close()
    two.close()


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_snapshot_restore_and_resets_keep_the_filters(layout) -> None:
    scene = plate_scene(F(categories=1, mask=0xFFFFFFFF & ~2), F(categories=2))
    world = ke.World(scene, num_envs=4, layout=layout)
    for _ in range(30):
        world.step(1 / 120)
    snap = world.snapshot()
    for _ in range(150):
        world.step(1 / 120)
    after = world.body_poses
    assert np.allclose(after[:, 2, 1], ON_GROUND, atol=0.01)  # through the plate
    world.restore(snap)
    for _ in range(150):
        world.step(1 / 120)
    assert np.array_equal(world.body_poses, after)  # same bits
    # a reset copy is rebuilt with its filters: it falls through the plate again, exactly
    # as a fresh World's copy does
    world.reset_envs([1])
    fresh = ke.World(scene, num_envs=4, layout=layout)
    for _ in range(180):
        world.step(1 / 120)
        fresh.step(1 / 120)
    assert np.array_equal(world.body_poses[1], fresh.body_poses[1])
    assert np.allclose(world.body_poses[:, 2, 1], ON_GROUND, atol=0.01)
    world.close()
    fresh.close()


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_a_robot_body_ignores_a_marker_its_other_bodies_hit(layout) -> None:
    """The users' group composes with the robot's own (no self-collision): only the foot
    passes through the marker, the body beside it lands on it."""
    marker_filter = F(group=5)
    desc = ke.RobotDescription(
        name="pair",
        bodies=(
            ke.BodySpec("foot", ke.Circle(0.1), mass=1.0, initial_pose=ke.Pose(-0.3, 1.0),
                        collision=marker_filter),
            ke.BodySpec("hand", ke.Circle(0.1), mass=1.0, initial_pose=ke.Pose(0.3, 1.0)),
        ),
    )  # fmt: skip
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(desc), at="/World/Robot")
    b.add(
        ke.Prop(ke.Box(1.2, 0.05), body_type="static", initial_pose=ke.Pose(0.0, PLATE_Y),
                collision=marker_filter),
        at="/World/Marker",
    )  # fmt: skip
    world = ke.World(b.build(), num_envs=3, layout=layout)
    for _ in range(240):
        world.step(1 / 120)
    names = world.body_names
    foot = world.body_poses[:, names.index("/World/Robot/foot"), 1]
    hand = world.body_poses[:, names.index("/World/Robot/hand"), 1]
    assert np.allclose(foot, ON_GROUND, atol=0.01) and np.allclose(hand, ON_PLATE, atol=0.01)
    world.close()


def test_packed_copies_never_touch_with_filters() -> None:
    """Copies drawn on top of one another (a spacing smaller than the balls) stay apart:
    every copy falls as copy 0 does, also where its slot's bits repeat."""
    b = ke.SceneBuilder(gravity=(0.0, -9.81))
    b.add(ke.Terrain.plane(), at="/")
    for i, f in enumerate((F(group=1), F(categories=2), F(categories=4, mask=4 | 1))):
        b.add(ke.Prop(ke.Circle(0.3), mass=1.0, initial_pose=ke.Pose(0.0, 1.0 + i),
                      collision=f), at=f"/World/Ball{i}")  # fmt: skip
    world = ke.World(b.build(), num_envs=40, layout="packed", env_spacing=0.25)
    for _ in range(120):
        world.step(1 / 120)
    y = world.body_poses[:, 1:, 1]
    np.testing.assert_allclose(y, np.broadcast_to(y[0], y.shape), atol=1e-6)
    world.close()


def test_the_filter_is_scene_data() -> None:
    plain = plate_scene(F(), F())
    filtered = plate_scene(F(group=7), F(group=7))
    # the default is left out of the JSON: a scene without filters keeps its fingerprint
    assert "collision" not in plain.to_dict()["bodies"][1]["spec"]
    assert plain.fingerprint != filtered.fingerprint
    again = ke.Scene.from_dict(json.loads(json.dumps(filtered.to_dict())))
    assert again == filtered and again.fingerprint == filtered.fingerprint
    assert again.bodies[2].spec.collision == F(group=7)
    assert ke.Prop(ke.Circle(0.1)).collision == F()
    assert ke.BodySpec("b", ke.Circle(0.1)).collision == F()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"group": -1}, "group"),
        ({"categories": 1.0}, "categories"),
        ({"mask": 2**32}, "mask"),
        ({"mask": True}, "mask"),
        ({"group": "1"}, "group"),
        ({"categories": None}, "categories"),
    ],
)
def test_bad_filters_are_refused_in_one_line(kwargs, field) -> None:
    with pytest.raises(ValueError, match=rf"^CollisionFilter\.{field} must be an int in "
                                         r"\[0, 2\*\*32 - 1\]") as err:  # fmt: skip
        F(**kwargs)
    assert "\n" not in str(err.value) and "got" in str(err.value)
    assert F(categories=np.uint32(3)).categories == 3 and type(F(mask=np.int64(1)).mask) is int


def test_bad_filter_fields_and_data_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="^BodySpec.collision must be a CollisionFilter") as e:
        ke.Prop(ke.Circle(0.1), collision=3)
    assert "\n" not in str(e.value)
    data = plate_scene(F(group=7), F(group=7)).to_dict()
    data["bodies"][2]["spec"]["collision"]["mask"] = -5
    with pytest.raises(ValueError, match=r"bodies\[2\]\.spec\.collision: CollisionFilter\.mask"):
        ke.Scene.from_dict(data)


def test_too_many_kinds_of_filters_are_refused_per_layout() -> None:
    def groups(n: int) -> ke.Scene:
        b = ke.SceneBuilder()
        for i in range(n):
            b.add(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(0.0, 1.0 + i),
                          collision=F(group=i + 1)), at=f"/Ball{i}")  # fmt: skip
        return b.build()

    ke.World(groups(MAX_CLASSES), layout="isolated").close()
    with pytest.raises(ValueError, match="at most 32 kinds of shapes") as err:
        ke.World(groups(MAX_CLASSES + 1), layout="isolated")
    assert "\n" not in str(err.value)
    ke.World(groups(16), layout="packed").close()  # 16 kinds: 2 copy slots
    with pytest.raises(ValueError, match="layout='packed' needs at most 16 kinds") as err:
        ke.World(groups(17), layout="packed")
    assert "\n" not in str(err.value) and "layout='isolated'" in str(err.value)


def test_filters_that_all_collide_are_the_filters_of_old() -> None:
    # every body given the same filter that collides with itself: the same bits as none
    same = plate_scene(F(categories=1, mask=1), F(categories=1, mask=1))
    plain = plate_scene(F(), F())
    for layout in ("isolated", "packed"):
        a, b = _fall(same, layout, 1, 60), _fall(plain, layout, 1, 60)
        assert np.array_equal(a.body_poses, b.body_poses)
        a.close()
        b.close()
