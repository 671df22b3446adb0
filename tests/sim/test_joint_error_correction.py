"""``error_correction`` on joints: validated, saved only when set, and it holds joints together."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import kelab as ke
from kelab.sim.assets import Asset

DT = 1 / 120
LAYOUTS = ("isolated", "packed")


def _biped(correction: float | None) -> ke.RobotDescription:
    """The built-in biped with every joint's ``error_correction`` set to ``correction``."""
    desc = Asset.from_registry("kelab/robot/biped:v1").description
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


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, math.nan, math.inf, "0.3", True])
def test_error_correction_must_be_in_zero_one(bad: object) -> None:
    for make in (
        lambda: ke.RevoluteJoint("j", "a", "b", error_correction=bad),
        lambda: ke.PrismaticJoint("j", "a", "b", error_correction=bad),
        lambda: ke.FixedJoint("j", "a", "b", error_correction=bad),
    ):
        with pytest.raises(
            ValueError, match=r"error_correction must be None or a number in \(0, 1\]"
        ):
            make()


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
