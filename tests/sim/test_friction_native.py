"""The friction model in C (kelab/sim/physics/_friction.py, _native.c's ``Friction``).

The pair rule (two moving shapes, or a moving shape and a static one of another
material) and the regime rule (bodies on the main static material stick or slide) run in
the C helper, with no Python per contact, to the bits of the Python rules: each scene
here is stepped by two Worlds in one process, one with the rules in C and one with the
Python rules (``_friction.USE_C`` off; the helper still does the reads and resets), and
by a process without the helper at all (``KELAB_NO_NATIVE=1``).
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest

import kelab as ke
from kelab.sim.physics import _compile, _friction
from kelab.sim.physics import _guard as guard
from kelab.sim.scene.assets import Asset

ROOT = Path(__file__).resolve().parents[2]
NATIVE = guard.native_module()
needs_c = pytest.mark.skipif(
    NATIVE is None, reason="the C helper is not built here (no compiler at install time)"
)
DT = 1 / 120


def stack(kinematic: bool = False) -> ke.Scene:
    """A floor, 5 stacked boxes and a ball, all of the default material (0.6 / 0.5).

    ``kinematic``: and a kinematic paddle sunk into the floor (an ignored pair that
    Chipmunk caches without threading it: the regime rule's other path).
    """
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    for i in range(5):
        box = ke.Prop(ke.Box(0.4, 0.3), mass=1.0, initial_pose=ke.Pose(0.02 * i, 0.15 + 0.301 * i))
        b.add(box, at=f"/World/Box{i}")
    b.add(ke.Prop(ke.Circle(0.15), mass=0.5, initial_pose=ke.Pose(0.3, 2.0)), at="/World/Ball")
    if kinematic:
        paddle = ke.Prop(
            ke.Box(0.3, 0.1),
            material=ke.Material(static_friction=0.9, dynamic_friction=0.2),
            initial_pose=ke.Pose(-1.0, 0.03),
            body_type="kinematic",
        )
        b.add(paddle, at="/World/Paddle")
    return b.build()


def sliding_box() -> ke.Scene:
    """A box launched along a floor whose static and dynamic friction differ."""
    ground = ke.Material(static_friction=0.8, dynamic_friction=0.4)
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(material=ground), at="/")
    b.add(ke.Prop(ke.Box(0.3, 0.2), mass=1.0, initial_pose=ke.Pose(0.0, 0.1)), at="/World/Box")
    return b.build()


def bouncing_balls() -> ke.Scene:
    """Balls of other restitutions dropped onto a floor and onto each other."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    bouncy = ke.Material(restitution=0.7)
    b.add(ke.Prop(ke.Circle(0.1), material=bouncy, initial_pose=ke.Pose(0.0, 1.0)), at="/World/A")
    dull = ke.Material(static_friction=0.9, dynamic_friction=0.3, restitution=0.2)
    b.add(ke.Prop(ke.Circle(0.12), material=dull, initial_pose=ke.Pose(0.05, 1.6)), at="/World/B")
    return b.build()


def ramp() -> ke.Scene:
    """A box sliding down a static ramp of another material onto the floor."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    ice = ke.Material(static_friction=0.2, dynamic_friction=0.05, restitution=0.1)
    slope = ke.Prop(ke.Box(2.0, 0.1), material=ice, initial_pose=ke.Pose(0.0, 0.5, -0.3),
                    body_type="static")  # fmt: skip
    b.add(slope, at="/World/Ramp")
    box = ke.Prop(ke.Box(0.2, 0.2), mass=1.0, initial_pose=ke.Pose(-0.6, 1.0, -0.3))
    b.add(box, at="/World/Box")
    return b.build()


def pi_robot() -> ke.Scene:
    """Pi's shins have their centre of gravity off their origin (the rule's other branch)."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/pi:v1")), at="/World/Robot")
    return b.build()


SCENES = {
    "stack": stack,
    "stack+kinematic": lambda: stack(kinematic=True),
    "sliding box": sliding_box,
    "bouncing balls": bouncing_balls,
    "ramp": ramp,
    "pi": pi_robot,
}


def digest(
    make: object, layout: str, threads: int, use_c: bool, steps: int = 360, prepare: object = None
) -> tuple:
    """Body states, regimes and contact forces over a busy run: pushes, resets, launches."""
    saved = _friction.USE_C
    _friction.USE_C = use_c
    try:
        w = ke.World(make(), num_envs=6, layout=layout, num_threads=threads, seed=2)
    finally:
        _friction.USE_C = saved
    if prepare is not None:
        prepare(w)
    n, nb = w.num_envs, len(w.body_names)
    moving = [i for i, p in enumerate(w.body_names) if "Ramp" not in p and p != "/ground"]
    rng = np.random.default_rng(5)
    h = hashlib.sha256()
    slid = 0
    for t in range(steps):
        if t % 60 == 5:  # a push of every moving body
            f = np.zeros((n, nb, 2))
            f[:, moving] = rng.uniform(-30.0, 30.0, (n, len(moving), 2))
            w.set_body_forces(f)
        if t % 60 == 15:
            w.set_body_forces(np.zeros((n, nb, 2)))
        if t % 90 == 40:  # launch copy 2's bodies sideways
            poses, vels = w.body_poses, w.body_velocities
            vels[2, moving, 0] += 1.5
            w.set_body_states([2], poses[[2]], vels[[2]])
        if t % 120 == 70:
            w.reset_envs([1, 4])
        w.step(DT)
        slid += int((~w._contacts.stick).sum())
        for a in (w.body_poses, w.body_velocities, w._contacts.stick, w.contact_forces):
            h.update(np.ascontiguousarray(a).tobytes())
    w.close()
    return h.hexdigest(), slid


@needs_c
@pytest.mark.parametrize("name", list(SCENES))
@pytest.mark.parametrize(("layout", "threads"), [("packed", 1), ("packed", 2), ("isolated", 1)])
def test_the_rules_in_c_give_the_python_rules_bits(name: str, layout: str, threads: int) -> None:
    c = digest(SCENES[name], layout, threads, use_c=True)
    python = digest(SCENES[name], layout, threads, use_c=False)
    assert c == python
    if name != "pi":  # the scenes slide somewhere: the regime rule is exercised
        assert c[1] > 0


def per_copy(w: ke.World) -> None:
    """Each copy's props their own friction and restitution (#41's per-copy materials)."""
    n, nb = w.num_envs, len(w.body_names)
    rng = np.random.default_rng(11)
    dynamic = rng.uniform(0.05, 0.9, (n, nb))
    f = np.stack([dynamic * rng.uniform(1.0, 1.8, (n, nb)), dynamic, np.zeros((n, nb))], -1)
    f[:, 0] = w.body_friction[:, 0]  # the floor keeps the scene's
    w.set_body_friction(f)
    e = rng.uniform(0.0, 0.8, (n, nb))
    e[:, 0] = w.body_restitution[:, 0]
    w.set_body_restitution(e)


@needs_c
@pytest.mark.parametrize("layout", ["packed", "isolated"])
def test_per_copy_materials_reach_the_rules_in_c(layout: str) -> None:
    """Materials set per copy are rows of the table the rules in C read: the same bits as
    the Python rules (which read the copies' values too), and not the scene's bits."""
    c = digest(stack, layout, 1, use_c=True, prepare=per_copy)
    assert c == digest(stack, layout, 1, use_c=False, prepare=per_copy)
    assert c != digest(stack, layout, 1, use_c=True)


@needs_c
def test_isolated_threads_give_the_same_bits() -> None:
    assert digest(stack, "isolated", 2, use_c=True) == digest(stack, "isolated", 1, use_c=False)


@needs_c
def test_no_python_runs_per_contact_or_per_step_for_friction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default material's props touching each other: no pre_solve call in Python,
    and no regime choice in numpy (the step chooses it in C, off the GIL)."""
    calls = []
    original = _compile.pre_solve

    def counted(*args: object) -> None:
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(_compile, "pre_solve", counted)
    for layout in ("packed", "isolated"):
        w = ke.World(stack(), num_envs=4, layout=layout)
        backend = w._backend

        def refused(*args: object) -> None:
            raise AssertionError("the regimes were chosen in numpy")

        monkeypatch.setattr(backend, "friction_arbiters", refused)
        for _ in range(120):
            w.step(DT)
        assert backend.friction_in_step and w._contacts.friction
        w.close()
    assert calls == []
    # the same scene with the Python rules calls it for every contact between props
    monkeypatch.setattr(_friction, "USE_C", False)
    w = ke.World(stack(), num_envs=4, layout="packed")
    for _ in range(30):
        w.step(DT)
    assert len(calls) > 100 and not w._backend.friction_in_step
    w.close()


@needs_c
def test_humanoid_steps_the_same_with_the_rules_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """Humanoid-v0 (its feet and legs on the ground: the regime rule), packed, random
    actions with resets: observations, rewards and dones the same bytes."""

    def run(use_c: bool, threads: int) -> str:
        monkeypatch.setattr(_friction, "USE_C", use_c)
        env = gymnasium.make_vec(
            "kelab/Humanoid-v0", num_envs=16, layout="packed",
            vectorization_mode="vector_entry_point", num_threads=threads,
        )  # fmt: skip
        obs, _ = env.reset(seed=3)
        rng = np.random.default_rng(3)
        h = hashlib.sha256(obs.tobytes())
        for _ in range(150):
            out = env.step(rng.uniform(-1, 1, (16, 6)).astype(np.float32))
            for a in out[:4]:
                h.update(np.ascontiguousarray(a).tobytes())
        assert env.unwrapped.world._backend.friction_in_step == use_c
        env.close()
        return h.hexdigest()

    assert run(True, 1) == run(False, 1) == run(True, 2)


def test_a_resting_stack_rests_and_a_sliding_box_stops() -> None:
    """What the model is for (either path): the default material's stack stays put for
    5 s; a box launched at 2 m/s on mu_d = sqrt(0.5 * 0.4) stops after v^2 / (2 mu_d g)."""
    w = ke.World(stack(), num_envs=2, layout="packed")
    for _ in range(120):  # the ball lands on the stack
        w.step(DT)
    before = w.body_poses[:, 1:6].copy()
    for _ in range(600):
        w.step(DT)
    assert np.abs(w.body_poses[:, 1:6] - before).max() < 2e-3
    w.close()
    w = ke.World(sliding_box(), num_envs=1, layout="packed")
    w.step(DT)
    poses, vels = w.body_poses, w.body_velocities
    vels[0, 1, 0] = 2.0
    w.set_body_states([0], poses, vels)
    x0 = w.body_poses[0, 1, 0]
    for _ in range(240):
        w.step(DT)
    mu_d = math.sqrt(0.5 * 0.4)
    assert abs(w.body_velocities[0, 1, 0]) < 1e-6 and w._contacts.stick[0, 1]
    assert w.body_poses[0, 1, 0] - x0 == pytest.approx(2.0**2 / (2 * mu_d * 9.81), rel=0.03)
    w.close()


_CHILD = """
import sys
sys.path.insert(0, {tests!r})
from test_friction_native import SCENES, digest
for name in ("stack", "ramp", "bouncing balls"):
    print(name, digest(SCENES[name], "packed", 1, use_c=True)[0])
"""


@needs_c
def test_the_same_bits_without_the_c_helper() -> None:
    """A process without the helper (pymunk.batch, Python rules) gives the same bytes."""
    here = str(Path(__file__).resolve().parent)
    out = []
    for off in ("1", ""):
        run = subprocess.run(
            [sys.executable, "-c", _CHILD.format(tests=here)],
            cwd=ROOT, env={**os.environ, "KELAB_NO_NATIVE": off},
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
        out.append(run.stdout)
    assert out[0] == out[1] and out[0].count("\n") == 3


@needs_c
def test_bad_tables_are_refused_with_an_error_not_a_crash() -> None:
    table = _friction.FrictionTable(_compile.make_layout(stack()), 2)
    nb = table.nb
    keys = np.array([16, 32], dtype=np.uint64)
    rows = np.array([0, 1], dtype=np.int64)
    starts = np.zeros(2 * nb + 1, dtype=np.int64)
    good = (keys, rows, table.coef, table.codes, np.zeros(2 * nb), np.zeros(2), table.stick,
            starts, np.zeros(0, np.uint64), 0.01, 0.02, 1e-4, False)  # fmt: skip
    NATIVE.Friction(*good)  # accepted
    bad = [
        (0, keys[::-1].copy()),  # keys not ascending
        (1, np.array([0, 10**6], dtype=np.int64)),  # a row past the table
        (2, table.coef[:-1]),  # coefficients of too few rows
        (6, table.stick[:-1]),  # regimes of too few rows
        (7, starts[:-1]),  # shape starts of too few rows
        (7, np.r_[starts[:-1], 3]),  # shape starts past the shapes
    ]
    for index, value in bad:
        args = list(good)
        args[index] = value
        with pytest.raises(ValueError, match="Friction: the tables' sizes disagree"):
            NATIVE.Friction(*args)
    with pytest.raises(TypeError):  # the regimes are written: a read-only array is refused
        args = list(good)
        args[6] = np.frombuffer(table.stick.tobytes(), dtype=bool)
        NATIVE.Friction(*args)
    model = NATIVE.Friction(*good)
    with pytest.raises(ValueError, match="Friction.update"):
        model.update(np.zeros(1, np.uint64), np.array([2], np.int64))  # copy 2 of 2
    with pytest.raises(TypeError):
        NATIVE.Friction(*good, extra=1)
