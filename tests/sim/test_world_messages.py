"""The World's refusals name the setter, the copies and bodies, and the fix (a trial's findings).

A new user's trial (a crane scene, 2026-12-06) met errors that named neither the setter
nor the copy: ``joint commands must be finite numbers`` from either joint setter,
``poses and velocities positions must be within ±1e+07 m, got 2e+07`` from
``set_body_states`` (no body, no copy), and ``World.step(2.0)``'s "take several steps"
without the call that does it. Each message is checked whole or by its parts here.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import kelab as ke
from kelab.sim.replay_log import Kind
from kelab.sim.scene.assets import Asset

LAYOUTS = ("isolated", "packed")


def _world(layout: str, n: int = 6) -> ke.World:
    """A cartpole (effort actuators), a ball and a box: bodies 1-4 move."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    b.add(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(1.0, 1.0)), at="/World/Ball")
    b.add(ke.Prop(ke.Box(0.3, 0.2), initial_pose=ke.Pose(-1.0, 0.5)), at="/World/Box")
    return ke.World(b.build(), num_envs=n, layout=layout, num_threads=2)


def _poses(w: ke.World, n: int) -> np.ndarray:
    return np.tile(w.initial_body_poses, (n, 1, 1))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_non_finite_joint_commands_name_the_setter_and_the_copies(layout: str) -> None:
    w = _world(layout)
    nj = len(w.joint_names)
    before = w.snapshot().to_bytes()
    efforts = np.zeros((6, nj))
    efforts[[4, 1], 0] = np.inf
    efforts[5, nj - 1] = np.nan
    fix = (
        "; pass finite values (find where they came from, e.g. a policy that diverged; "
        "np.nan_to_num replaces them)"
    )
    with pytest.raises(ValueError) as err:
        w.set_joint_efforts(efforts)
    assert str(err.value) == (
        "set_joint_efforts: efforts must be finite numbers, got NaN or inf for copies "
        "[1, 4, 5]" + fix
    )
    # the rows go to env_ids in their order; more than five copies are counted
    with pytest.raises(ValueError) as err:
        w.set_joint_position_targets(np.full((3, nj), np.nan), env_ids=[5, 0, 3])
    assert str(err.value) == (
        "set_joint_position_targets: targets must be finite numbers, got NaN or inf for "
        "copies [5, 0, 3]" + fix
    )
    with pytest.raises(ValueError, match=re.escape("copies [0, 1, 2, 3, 4] and 1 more;")):
        w.set_joint_efforts(np.full((6, nj), -np.inf))
    # the shape and type refusals name the setter too
    with pytest.raises(ValueError, match=r"^set_joint_efforts: efforts must have shape \(6, "):
        w.set_joint_efforts(np.zeros((4, nj)))
    with pytest.raises(ValueError, match="^set_joint_position_targets: targets must be real"):
        w.set_joint_position_targets("up")
    assert w.snapshot().to_bytes() == before  # nothing held
    w.close()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_set_body_states_names_the_value_the_body_and_the_copy(layout: str) -> None:
    w = _world(layout)
    names = w.body_names
    cart, ball, box = (names.index(f"/World/{p}") for p in ("Robot/cart", "Ball", "Box"))
    before = w.snapshot().to_bytes()
    fix = '; give a state the simulation can step from (docs/world.md, "Limits")'

    poses = _poses(w, 2)
    poses[1, cart, 0] = 2e7
    with pytest.raises(ValueError) as err:
        w.set_body_states([5, 3], poses)  # row 1 goes to copy 3
    assert str(err.value) == (
        "set_body_states: positions must be within ±1e+07 m, got x = 2e+07 for body "
        "'/World/Robot/cart' of copy 3" + fix
    )

    poses = _poses(w, 2)
    poses[0, ball, 1] = -3e7
    poses[1, box, 0] = 5e7
    mask = np.zeros(6, bool)
    mask[[4, 2]] = True  # a mask's rows go to its copies in ascending order: 2, 4
    with pytest.raises(ValueError) as err:
        w.set_body_states(mask, poses)
    assert str(err.value) == (
        "set_body_states: positions must be within ±1e+07 m, got y = -3e+07 for body "
        "'/World/Ball' of copy 2 (and 1 more value)" + fix
    )

    vels = np.zeros((2, len(names), 3))
    vels[1, box, 2] = 4e7
    with pytest.raises(ValueError) as err:
        w.set_body_states([0, 1], _poses(w, 2), vels)
    assert str(err.value) == (
        "set_body_states: velocities must be within ±1e+07 (m/s, rad/s), got w = 4e+07 "
        "for body '/World/Box' of copy 1" + fix
    )

    vels[0, cart, 1] = np.nan  # NaN first, whatever else is out
    with pytest.raises(ValueError) as err:
        w.set_body_states([0, 1], _poses(w, 2), vels)
    assert str(err.value) == (
        "set_body_states: velocities must be finite numbers, got vy = nan for body "
        "'/World/Robot/cart' of copy 0" + fix
    )
    poses = _poses(w, 1)
    poses[0, ball, 2] = -np.inf
    with pytest.raises(ValueError, match="poses must be finite numbers, got angle = -inf for"):
        w.set_body_states(4, poses)
    assert w.snapshot().to_bytes() == before  # nothing written
    w.close()


def test_a_snapshots_body_states_name_the_value_the_body_and_the_copy() -> None:
    w = _world("packed")
    poses = _poses(w, 2)
    w.set_body_states([3, 1], poses)
    w.step(1 / 120)
    snap = w.snapshot()
    arrays = {k: np.array(v) for k, v in snap.arrays.items()}
    entry = int(np.flatnonzero(arrays["log/kind"] == Kind.STATES)[-1])
    nb = len(w.body_names)
    # row 1 (copy 1), body 2, y: the entry's poses come first, (copies, bodies, 3)
    arrays["log/vals"][arrays["log/val_off"][entry] + (nb + 2) * 3 + 1] = 1e300
    bad = ke.Snapshot(snap.fingerprint, snap.step_count, snap.sim_time, arrays, snap.meta)
    with pytest.raises(ValueError) as err:
        w.restore(bad)
    assert re.search(
        r"log entry \d+ \(\w+ at step 0\): body states: positions must be within ±1e\+07 m, "
        r"got y = 1e\+300 for body 2 of copy 1",
        str(err.value),
    ), str(err.value)
    w.close()


def test_a_step_too_long_points_to_several_steps_in_one_call() -> None:
    w = _world("packed")
    with pytest.raises(ValueError) as err:
        w.step(2.0)
    assert str(err.value) == (
        "World.step: dt must be a finite number of seconds in (0, 1], got 2.0; a longer "
        "physics step is not simulated; take several steps of a smaller dt in one call: "
        "step(dt, steps=k)"
    )
    assert w.step_count == 0
    w.close()


def test_body_state_checks_give_the_same_answer_with_and_without_the_c_helper(
    monkeypatch,
) -> None:
    # the fast path (the C helper's one-pass ``within`` per array, else four numpy
    # reductions) only says "all fine"; anything else takes the checks that name the value
    from kelab.sim import _values
    from kelab.sim.physics._limits import STATE_BOUND

    if _values._WITHIN is None:
        pytest.skip("no C helper built here")
    rng = np.random.default_rng(2)
    cases = []
    for special in (None, np.nan, np.inf, -np.inf, 2e7, -2e7, 5e9, STATE_BOUND, -0.0):
        for field in range(6):
            poses, vels = rng.normal(size=(4, 5, 3)), rng.normal(size=(4, 5, 3))
            if special is not None:
                (poses if field < 3 else vels)[2, 3, field % 3] = special
            cases.append((poses, vels))
    cases.append((np.asfortranarray(cases[3][0]), cases[3][1]))  # not C-ordered: numpy's
    cases.append((np.zeros((0, 5, 3)), np.zeros((0, 5, 3))))
    with_c = [_values.body_states_error(p, v) for p, v in cases]
    monkeypatch.setattr(_values, "_WITHIN", None)
    assert with_c == [_values.body_states_error(p, v) for p, v in cases]
    assert with_c[0] is None and with_c[6] is not None  # a NaN is named
