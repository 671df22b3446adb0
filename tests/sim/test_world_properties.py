"""World's mass properties, per-joint control columns, env_indices and body_state."""

from __future__ import annotations

import numpy as np
import pytest

import kelab as ke


def _scene() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    disc = ke.Prop(ke.Circle(0.5), mass=2.0, initial_pose=ke.Pose(3.0, 1.0))
    b.add(disc, at="/World/Disc")
    box = ke.Prop(ke.Box(0.4, 0.2), mass=3.0, initial_pose=ke.Pose(-3.0, 1.0))
    b.add(box, at="/World/Box")
    return b.build()


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_mass_properties(layout: str) -> None:
    w = ke.World(_scene(), num_envs=2, layout=layout)
    names = w.body_names
    disc, box = names.index("/World/Disc"), names.index("/World/Box")
    masses, cogs, moments = w.body_masses, w.body_centers_of_gravity, w.body_moments
    # per copy (docs/world.md, "Per-copy parameters"): every copy has the scene's
    assert masses.shape == moments.shape == (2, len(names)) and cogs.shape == (len(names), 2)
    assert (masses == masses[0]).all() and (moments == moments[0]).all()
    masses, moments = masses[0], moments[0]
    assert masses[disc] == 2.0 and moments[disc] == pytest.approx(0.5 * 2.0 * 0.5**2)
    assert masses[box] == 3.0
    assert moments[box] == pytest.approx(3.0 * (0.4**2 + 0.2**2) / 12)
    assert np.allclose(cogs[[disc, box]], 0.0)
    ground = [i for i in range(len(names)) if i not in (disc, box) and "Robot" not in names[i]]
    assert all(masses[i] == 0.0 and moments[i] == 0.0 for i in ground)
    # the same numbers pymunk gives the live bodies: a pushed body accelerates by F/m
    f = np.zeros((2, len(names), 2))
    f[:, disc] = (masses[disc] * 4.0, 0.0)
    w.set_body_forces(f)
    w.step(0.01)
    assert w.body_velocities[0, disc, 0] == pytest.approx(0.04)
    # copies: changing them changes nothing
    masses[:] = 0.0
    assert (w.body_masses[:, disc] == 2.0).all()
    w.close()


def test_initial_poses_and_joint_layouts() -> None:
    w = ke.World(_scene())
    disc = w.body_names.index("/World/Disc")
    assert tuple(w.initial_body_poses[disc]) == (3.0, 1.0, 0.0)
    kinds = [j.kind for j in w.joint_layouts]
    assert len(kinds) == len(w.joint_names) and set(kinds) <= {
        "revolute",
        "prismatic",
        "fixed",
        "spring",
    }


def test_joint_ids_columns() -> None:
    w = ke.World(_scene(), num_envs=3)
    nj = len(w.joint_names)
    w.set_joint_efforts(np.full((3, nj), 0.1))
    before = w.joint_efforts
    w.set_joint_efforts([[0.5], [0.6]], env_ids=[0, 2], joint_ids=[0])
    e = w.joint_efforts
    assert e[0, 0] == 0.5 and e[2, 0] == 0.6 and e[1, 0] == before[1, 0] == 0.1
    assert np.array_equal(e[:, 1:], before[:, 1:])
    # the pole has no actuator: a target only to it would do nothing, and is refused
    with pytest.raises(ValueError, match="cart_to_pole' has no actuator"):
        w.set_joint_position_targets([[0.3]], env_ids=[1], joint_ids=[nj - 1])
    assert not w.joint_position_targets.any()
    for bad in ([nj], [-1], [0, 0], [0.5], True, "0"):
        with pytest.raises(ValueError, match="joint_ids"):
            w.set_joint_efforts([[1.0]], joint_ids=bad)


def test_joint_columns_checked_once_still_refuse_and_reorder() -> None:
    # the columns' checks are remembered per command kind and columns: a refused list is
    # refused every time, and a list of every joint in another order is put in joint
    # order every time, for each kind on its own
    w = ke.World(_scene(), num_envs=2)
    nj = len(w.joint_names)
    for _ in range(3):
        with pytest.raises(ValueError, match="has no actuator"):
            w.set_joint_position_targets([[0.3]], joint_ids=[nj - 1])
    order = list(range(nj))[::-1]
    for k in range(3):
        values = np.arange(nj, dtype=float)[None, :] * 0.01 + k * 0.1
        w.set_joint_efforts(np.repeat(values, 2, axis=0), joint_ids=order)
        want = np.where(w.joint_efforts[0] != 0, values[0][order], 0.0)
        assert np.array_equal(w.joint_efforts[0], want)
    with pytest.raises(ValueError, match="position targets to it would do nothing"):
        w.set_joint_position_targets(np.zeros((2, nj)), joint_ids=order)  # its own verdict


def test_env_indices_and_body_state() -> None:
    w = ke.World(_scene(), num_envs=4)
    assert w.env_indices(None).tolist() == [0, 1, 2, 3]
    assert w.env_indices([2, 2, 0], repeats=True).tolist() == [2, 0]
    assert w.env_indices(np.array([True, False, True, False])).tolist() == [0, 2]
    with pytest.raises(ValueError, match="unique"):
        w.env_indices([1, 1])
    w.step(0.01)
    disc = w.body_names.index("/World/Disc")
    state = w.body_state(disc)
    assert state.shape == (4, 6)
    assert np.array_equal(state[:, 0:3], w.body_poses[:, disc])
    assert np.array_equal(state[:, 3:6], w.body_velocities[:, disc])
    with pytest.raises(ValueError, match="body_index"):
        w.body_state(len(w.body_names))
    for bad in (True, -1, float(disc), str(disc)):  # the plain-int fast path refuses these
        with pytest.raises(ValueError, match=r"body_index must be an int in \[0, "):
            w.body_state(bad)
    assert np.array_equal(w.body_state(np.int64(disc)), state)
