"""``error_correction`` on joints: validated, saved only when set, set exactly on every
constraint of the joint (built, reset, restored, both layouts), and it holds joints together."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import kelab as ke
from kelab.sim.physics import _chipmunk as cp
from kelab.sim.scene.assets import Asset

DT = 1 / 120
LAYOUTS = ("isolated", "packed")


def _biped(correction: float | None) -> ke.RobotDescription:
    """The built-in biped with every joint's ``error_correction`` set to ``correction``."""
    desc = Asset.from_registry("kelab/robot/biped:v2").description
    joints = tuple(dataclasses.replace(j, error_correction=correction) for j in desc.joints)
    return dataclasses.replace(desc, joints=joints)


def _scene(correction: float | None) -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    b.add(ke.Robot(_biped(correction)), at="/World/Robot")
    return b.build()


def _drift(world: ke.World, steps: int = 240) -> np.ndarray:
    """Largest anchor separation of each joint (m) under full, fast-switching torques."""
    limits = np.array([150.0, 150.0, 40.0, 150.0, 150.0, 40.0])
    n = world.num_envs
    worst = np.zeros(len(world.joint_names))
    for t in range(steps):
        sign = 1.0 if (t // 6) % 2 == 0 else -1.0  # bang-bang, a flip every 6 steps
        world.set_joint_efforts(np.tile(sign * limits * np.array([1, -1, 1, -1, 1, -1]), (n, 1)))
        world.step(DT)
        poses = world.body_poses
        for j, jl in enumerate(world.joint_layouts):
            ends = []
            for body, (ax, ay) in ((jl.parent, jl.anchor_parent), (jl.child, jl.anchor_child)):
                x, y, a = poses[:, body, 0], poses[:, body, 1], poses[:, body, 2]
                c, s = np.cos(a), np.sin(a)
                ends.append(np.stack([x + c * ax - s * ay, y + s * ax + c * ay], axis=1))
            worst[j] = max(worst[j], float(np.linalg.norm(ends[0] - ends[1], axis=1).max()))
    return worst


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (0.0, r"in \[1e-06, 1\]"),
        (1e-9, r"in \[1e-06, 1\]"),  # (1 - c) ** 60 would round to 1: no correction at all
        (-0.1, r"in \[1e-06, 1\]"),
        (1.5, r"in \[1e-06, 1\]"),
        (math.nan, "a finite number"),
        (math.inf, "a finite number"),
        (10**400, "beyond the range of a float"),
        ("0.3", "a finite number"),
        (True, "a finite number"),
    ],
)
def test_error_correction_must_be_a_number_in_range(bad: object, why: str) -> None:
    for make in (
        lambda: ke.RevoluteJoint("j", "a", "b", error_correction=bad),
        lambda: ke.PrismaticJoint("j", "a", "b", error_correction=bad),
        lambda: ke.FixedJoint("j", "a", "b", error_correction=bad),
    ):
        with pytest.raises(ValueError, match=r"'j': \w+Joint.error_correction must be .*" + why):
            make()


def test_error_correction_takes_numpy_and_exact_numbers() -> None:
    for value in (np.float64(0.25), np.int64(1), 1, 0.5):
        joint = ke.RevoluteJoint("j", "a", "b", error_correction=value)
        assert type(joint.error_correction) is float and joint.error_correction == float(value)


C = 0.4


def _kinds_scene() -> ke.Scene:
    """One joint of each kind with ``error_correction=C`` (limited), and one left at None."""

    def box(name: str, y: float) -> ke.BodySpec:
        return ke.BodySpec(name, shapes=(ke.Box(0.2, 0.2),), mass=1.0, initial_pose=ke.Pose(0, y))

    effort = ke.EffortActuator(100.0)
    robot = ke.RobotDescription(
        name="kinds",
        bodies=(box("base", 1.0), box("a", 1.5), box("b", 2.0), box("c", 2.5)),
        joints=(
            ke.PrismaticJoint(
                "slide", "world", "base", anchor=(0.0, 1.0), limits=(-1.0, 1.0),
                actuator=effort, error_correction=C,
            ),
            ke.RevoluteJoint(
                "pin", "base", "a", anchor=(0.0, 0.25), limits=(-0.5, 0.5), actuator=effort,
                error_correction=C,
            ),
            ke.FixedJoint("weld", "a", "b", error_correction=C),
            ke.RevoluteJoint("plain", "b", "c", anchor=(0.0, 0.25)),
        ),
    )  # fmt: skip
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    b.add(ke.Robot(robot), at="/World/Robot")
    return b.build()


def _biases(world: ke.World) -> np.ndarray:
    """Every copy's constraints' errorBias (white box: the backends' constraint lists)."""
    backend = world._backend
    if world.layout == "isolated":
        per_copy = [copy.constraints for copy in backend._copies]
    else:
        per_copy = [part[2] for shard in backend._shards for part in shard.parts]
    return np.array([[cp.constraint_get_error_bias(c) for c in cons] for cons in per_copy])


@pytest.mark.parametrize(("layout", "threads"), [("isolated", 1), ("packed", 1), ("packed", 2)])
def test_every_constraint_of_the_joint_gets_the_bias_and_keeps_it(
    layout: str, threads: int
) -> None:
    # slide: groove + gear; pin: pivot + rotary limit; weld: pivot + gear; plain: pivot
    want = np.array([(1.0 - C) ** 60] * 6 + [0.0])
    scene = _kinds_scene()
    world = ke.World(scene, num_envs=4, layout=layout, num_threads=threads)

    def check(w: ke.World) -> None:
        got = _biases(w)
        assert got.shape == (4, 7)
        np.testing.assert_array_equal(got[:, :6], np.broadcast_to(want[:6], (4, 6)))
        np.testing.assert_allclose(got[:, 6], 0.9**60, rtol=1e-5)  # Chipmunk's default

    check(world)
    rng = np.random.default_rng(0)
    for _ in range(30):
        world.set_joint_efforts(rng.uniform(-100.0, 100.0, (4, len(world.joint_names))))
        world.step(DT)
    snap = world.snapshot()
    world.reset_envs([1, 3])
    check(world)
    world.set_body_states(None, world.body_poses, world.body_velocities)
    check(world)
    world.restore(snap)
    check(world)
    fresh = ke.World(scene, num_envs=4, layout=layout, num_threads=threads)
    fresh.restore(snap)
    check(fresh)
    np.testing.assert_array_equal(fresh.body_poses, world.body_poses)


def test_error_correction_is_saved_only_when_set() -> None:
    plain = _scene(None)
    assert all("error_correction" not in j["spec"] for j in plain.to_dict()["joints"])
    set_ = _scene(0.3)
    assert all(j["spec"]["error_correction"] == 0.3 for j in set_.to_dict()["joints"])
    assert set_.fingerprint != plain.fingerprint
    for scene in (plain, set_):
        again = ke.Scene.from_dict(scene.to_dict())
        assert again == scene and again.fingerprint == scene.fingerprint
    data = plain.to_dict()  # an explicit null reads as unset
    data["joints"][0]["spec"]["error_correction"] = None
    assert ke.Scene.from_dict(data).fingerprint == plain.fingerprint
    data["joints"][0]["spec"]["error_correction"] = 2.0
    with pytest.raises(ValueError, match=r"joints\[0\].*error_correction"):
        ke.Scene.from_dict(data)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_error_correction_holds_the_joints_together(layout: str) -> None:
    loose = ke.World(_scene(None), num_envs=2, layout=layout)
    firm = ke.World(_scene(0.4), num_envs=2, layout=layout)
    d_loose, d_firm = _drift(loose), _drift(firm)
    assert d_loose.max() > 0.02  # the plain solver lets the light links drift centimetres
    assert d_firm.max() < 0.6 * d_loose.max()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_error_correction_is_kept_by_resets(layout: str) -> None:
    world = ke.World(_scene(0.3), num_envs=2, layout=layout)
    first = _drift(world, steps=90)
    poses = world.body_poses
    world.reset_envs()  # rebuilds the constraints in place: the bias must be set again
    np.testing.assert_array_equal(_drift(world, steps=90), first)
    np.testing.assert_array_equal(world.body_poses, poses)
