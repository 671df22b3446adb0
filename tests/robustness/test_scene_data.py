"""Scene data boundary: ``Scene.from_dict`` and the scene dataclasses refuse bad data.

The property under test: whatever the dict, ``Scene.from_dict`` returns a valid Scene or
raises ValueError; never another exception, and a Scene that exists never crashes the
interpreter in ``World``/``reset_envs``/garbage collection. Checks that could crash run in a
subprocess, so a regression fails the test instead of killing pytest (docs/scene.md,
"Validation").
"""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prestart import Prestart

import kelab as ke
from kelab.sim.scene import (
    BodyInstance,
    JointInstance,
    RobotInstance,
    Scene,
    SensorSpec,
    SiteInstance,
)
from kelab.sim.scene.shapes import LENGTH_MAX, LENGTH_MIN, MASS_MAX, MASS_MIN

ROOT = Path(__file__).resolve().parents[2]
BUILTINS = (
    "kelab/robot/cartpole:v1", "kelab/robot/biped:v1", "kelab/robot/biped:v2", "kelab/robot/pi:v1",
)  # fmt: skip


def reference_scene() -> Scene:
    """Every built-in robot, every shape and sensor kind, a site and a camera."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    for k, name in enumerate(BUILTINS):
        robot = ke.Robot(ke.Asset.from_registry(name), initial_pose=ke.Pose(4.0 * k, 0.0))
        b.add(robot, at=f"/World/R{k}")
    ball = ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(-2.0, 0.5))
    b.add(ball, at="/World/Ball")
    b.add(ke.Prop(ke.Box(0.3, 0.2), mass=2.0, initial_pose=ke.Pose(-3.0, 0.5)), at="/World/Box")
    tri = ke.Polygon(((0.0, 0.0), (0.4, 0.0), (0.2, 0.3)))
    b.add(ke.Prop(tri, initial_pose=ke.Pose(-4.0, 0.5)), at="/World/Tri")
    rod = ke.Segment((0.0, 0.0), (0.5, 0.0), radius=0.02)
    b.add(ke.Prop(rod, initial_pose=ke.Pose(-5.0, 0.5)), at="/World/Rod")
    b.imu("ball.imu", ball, ke.SensorConfig(noise=0.01))
    b.contact_sensor("box.touch", "/World/Box")
    b.rangefinder("floor", "/World/R0/cart", angle=-math.pi / 2, max_range=3.0)
    b.joint_sensor("pole", "/World/R0/cart_to_pole")
    b.pose_sensor("ball.pose", ball)
    b.site("marker", "/World/Box", ke.Pose(0.1, 0.0))
    b.camera("main", center=(0.0, 1.0), zoom=50.0)
    return b.build()


REFERENCE = reference_scene()
BASE = REFERENCE.to_dict()


def fresh() -> dict[str, Any]:
    return copy.deepcopy(BASE)


def index_of(data: dict[str, Any], kind: str, path: str) -> int:
    return next(i for i, item in enumerate(data[kind]) if item["path"] == path)


def run_child(code: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (a segfault there fails the test, not pytest)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def test_reference_scene_round_trips_through_json() -> None:
    back = Scene.from_dict(json.loads(json.dumps(BASE)))
    assert back == REFERENCE and back.fingerprint == REFERENCE.fingerprint


# ----------------------------------------------------------------- the crash
SELF_JOINT_CHILD = """
import copy, gc, sys
import kelab as ke
sys.path[:0] = ["tests/robustness", "tests"]  # this module, and what it imports
from test_scene_data import BASE
data = copy.deepcopy(BASE)
joint = next(j for j in data["joints"] if j["path"] == "/World/R0/cart_to_pole")
joint["parent_path"] = joint["child_path"]       # a joint whose child is its own parent
for layout in ("isolated", "packed"):
    for then in ("reset", "drop"):
        try:
            scene = ke.Scene.from_dict(data)
        except ValueError as err:
            print("REFUSED", err)
            continue
        world = ke.World(scene, num_envs=2, layout=layout)
        if then == "reset":
            world.reset_envs()
        del world
        gc.collect()
        print("ACCEPTED")
"""


def test_self_joint_is_refused_and_never_segfaults() -> None:
    # issue 9: reset_envs segfaulted in both layouts, and a World dropped without a reset
    # segfaulted during garbage collection; the child runs all four, so a regression that
    # lets the scene through crashes it (a failure here, not a dead pytest)
    out = run_child(SELF_JOINT_CHILD)
    assert out.returncode == 0, f"child died with {out.returncode}: {out.stderr[-2000:]}"
    assert out.stdout.count("REFUSED") == 4, out.stdout
    assert "child_path must differ from parent_path" in out.stdout


def test_self_joint_refused_in_process_with_the_fix() -> None:
    data = fresh()
    j = index_of(data, "joints", "/World/R0/cart_to_pole")
    data["joints"][j]["parent_path"] = data["joints"][j]["child_path"]
    with pytest.raises(ValueError, match=r"joints\[\d+\].*a joint connects two different"):
        Scene.from_dict(data)


# --------------------------------------------------------------- the joint graph
def _extra_joint(parent: str | None, child: str, kind: str = "rev") -> JointInstance:
    pname = "world" if parent is None else parent.rsplit("/", 1)[1]
    cname = child.rsplit("/", 1)[1]
    spec: Any
    if kind == "rev":
        spec = ke.RevoluteJoint("extra", pname, cname)
    elif kind == "fixed":
        spec = ke.FixedJoint("extra", pname, cname)
    else:
        spec = ke.SpringJoint("extra", pname, cname, rest_length=0.5, stiffness=10.0)
    return JointInstance("/Extra/extra", spec, parent, child)


def _with_joint(joint: JointInstance, scene: Scene = REFERENCE) -> Scene:
    return Scene(
        scene.gravity,
        scene.bodies,
        scene.joints + (joint,),
        scene.sensors,
        scene.sites,
        scene.cameras,
        scene.robots,
    )


@pytest.mark.parametrize(
    "parent, child, message",
    [
        ("/ground", "/World/Ball", None),  # allowed: a ball pinned to the ground
        (None, "/ground", "child_path must be a dynamic or kinematic body"),
        ("/World/Ball", "/ground", "child_path must be a dynamic or kinematic body"),
        ("/World/Ball", "/World/Nope", "unknown body '/World/Nope'"),
        ("/World/Nope", "/World/Ball", "unknown body '/World/Nope'"),
    ],
)
def test_joint_graph_is_checked_at_construction(
    parent: str | None, child: str, message: str | None
) -> None:
    joint = _extra_joint(parent, child)
    if message is None:
        _with_joint(joint)
    else:
        with pytest.raises(ValueError, match=message):
            _with_joint(joint)


def test_two_immovable_bodies_cannot_be_joined() -> None:
    b = ke.SceneBuilder()
    b.add(ke.Prop(ke.Box(1.0, 0.1), body_type="kinematic"), at="/Belt")
    scene = b.build()
    with pytest.raises(ValueError, match="at least one of its bodies must be dynamic"):
        _with_joint(_extra_joint(None, "/Belt"), scene)


def test_self_joint_duplicate_and_malformed_instances_are_refused() -> None:
    spec = ke.RevoluteJoint("j", "a", "b")
    with pytest.raises(ValueError, match="child_path must differ from parent_path"):
        JointInstance("/R/j", ke.RevoluteJoint("j", "b", "b2"), "/R/b", "/R/b")
    with pytest.raises(ValueError, match="parent_path must be None exactly when"):
        JointInstance("/R/j", spec, None, "/R/b")
    with pytest.raises(ValueError, match="spec must be a RevoluteJoint"):
        JointInstance("/R/j", "revolute", "/R/a", "/R/b")  # type: ignore[arg-type]
    data = fresh()
    data["joints"].append(copy.deepcopy(data["joints"][0]))
    with pytest.raises(ValueError, match="is used twice"):
        Scene.from_dict(data)
    data = fresh()
    data["sensors"].append(copy.deepcopy(data["sensors"][0]))
    with pytest.raises(ValueError, match="sensor name 'ball.imu' is used twice"):
        Scene.from_dict(data)


def test_robots_may_only_list_their_own_existing_parts() -> None:
    data = fresh()
    data["robots"][0]["body_paths"].append("/World/R0/ghost")
    with pytest.raises(ValueError, match="'/World/R0/ghost', which is not a body"):
        Scene.from_dict(data)
    data = fresh()
    data["robots"][0]["body_paths"].append("/World/Ball")
    with pytest.raises(ValueError, match="directly under the robot path"):
        Scene.from_dict(data)
    data = fresh()
    data["robots"][0]["joint_paths"] = data["robots"][0]["joint_paths"] * 2
    with pytest.raises(ValueError, match="twice"):
        Scene.from_dict(data)


CLOSED_CHAIN = """
import gc
import numpy as np
import kelab as ke
from kelab.sim.scene import JointInstance, Scene
b = ke.SceneBuilder()
b.add(ke.Terrain.plane(), at="/", per_environment=False)
b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/R")
s = b.build()
loops = (
    JointInstance("/L/a", ke.FixedJoint("a", "pole", "cart"), "/R/pole", "/R/cart"),
    JointInstance(
        "/L/b",
        ke.SpringJoint("b", "world", "pole", rest_length=1.0, stiffness=5.0),
        None,
        "/R/pole",
    ),
)
scene = Scene(s.gravity, s.bodies, s.joints + loops, s.sensors, s.sites, s.cameras, s.robots)
for layout in ("isolated", "packed"):
    world = ke.World(scene, num_envs=3, layout=layout)
    world.reset_envs()
    for _ in range(120):
        world.step(1 / 120)
    assert np.isfinite(world.body_poses).all(), layout
    world.reset_envs([1])
    del world
    gc.collect()
print("LOOPS OK")
"""


def test_closed_chains_are_supported_in_both_layouts() -> None:
    # cycles are not refused: the solver handles loops (documented in docs/scene.md)
    out = run_child(CLOSED_CHAIN)
    assert out.returncode == 0 and "LOOPS OK" in out.stdout, out.stderr[-2000:]


# ------------------------------------------------------ instance-level fields (issue 9)
@pytest.mark.parametrize(
    "where, key, value, message",
    [
        ("bodies", "spec", 5, r"spec must be a BodySpec, got 5"),
        ("bodies", "pose", [1, 2, 3], r"pose must be a Pose, got \(1, 2, 3\)"),
        ("bodies", "per_environment", "no", r"per_environment must be True or False, got 'no'"),
        ("robots", "initial_pose", "x", r"initial_pose must be a Pose, got 'x'"),
        ("robots", "self_collide", 1, r"self_collide must be True or False, got 1"),
        ("joints", "per_environment", None, r"per_environment must be True or False"),
        ("joints", "child_path", 7, r"child_path must be an absolute path"),
        ("sites", "offset", [0, 0, 0], r"offset must be a Pose"),
        ("sensors", "target", "World/Ball", r"target must be an absolute path"),
        ("sensors", "params", [["angle", 1.0]], r"params must have the keys \[\]"),
    ],
)
def test_instance_fields_are_validated(where: str, key: str, value: Any, message: str) -> None:
    data = fresh()
    data[where][-1 if where == "bodies" else 0][key] = value
    with pytest.raises(ValueError, match=message):
        Scene.from_dict(data)


def test_instance_constructors_validate_directly() -> None:
    spec = REFERENCE.bodies[1].spec
    with pytest.raises(ValueError, match="spec must be a BodySpec"):
        BodyInstance("/B", 5, ke.Pose())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pose must be a Pose"):
        BodyInstance("/B", spec, [1, 2, 3])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="per_environment must be True or False"):
        BodyInstance("/B", spec, ke.Pose(), "no")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="initial_pose must be a Pose"):
        RobotInstance("/R", "r", "x", ("/R/a",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="body_paths is empty"):
        RobotInstance("/R", "r", ke.Pose())
    with pytest.raises(ValueError, match="offset must be a Pose"):
        SiteInstance("s", "/B", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Prop.initial_pose must be a Pose"):
        ke.Prop(ke.Circle(0.1), initial_pose="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Terrain.pose must be a Pose"):
        ke.Terrain("g", (ke.Box(1.0, 1.0),), pose=(0, 0, 0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="params must be a tuple"):
        SensorSpec("s", "imu", "/B", params=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"max_range must be in \[0.0001, 10000\]"):
        SensorSpec(
            "s",
            "rangefinder",
            "/B",
            params=(("angle", 0.0), ("max_range", 1e9), ("offset", ke.Pose())),
        )


# ----------------------------------------------------------- keys, version, nesting
@pytest.mark.parametrize(
    "drop",
    [
        ("sensors",),
        ("bodies", 1, "pose"),
        ("bodies", 1, "spec", "mass"),
        ("joints", 0, "spec", "axis"),
        ("robots", 0, "joint_paths"),
        ("cameras", 0, "zoom"),
    ],
)
def test_missing_keys_are_value_errors_naming_the_key(drop: tuple[Any, ...]) -> None:
    data = fresh()
    node: Any = data
    for step in drop[:-1]:
        node = node[step]
    del node[drop[-1]]
    with pytest.raises(ValueError, match=f"must have the key '{drop[-1]}'"):
        Scene.from_dict(data)


def test_extra_keys_and_odd_versions_are_refused() -> None:
    data = fresh()
    data["bodies"][1]["spec"]["colour"] = "red"
    with pytest.raises(ValueError, match="unknown key 'colour'"):
        Scene.from_dict(data)
    data = fresh()
    data["extra"] = 1
    with pytest.raises(ValueError, match="unknown key 'extra'"):
        Scene.from_dict(data)
    for version in (True, 1.0, "1", None, 2):
        data = fresh()
        data["version"] = version
        with pytest.raises(ValueError, match="version must be the int 1"):
            Scene.from_dict(data)
    for bad in ([], "scene", None, {"format": "other", "version": 1}):
        with pytest.raises(ValueError, match="Scene.from_dict"):
            Scene.from_dict(bad)  # type: ignore[arg-type]


def test_deep_nesting_is_a_value_error_not_recursion_error() -> None:
    deep: Any = 0.0
    for _ in range(100_000):
        deep = [deep]
    data = fresh()
    data["bodies"][1]["pose"]["x"] = deep
    with pytest.raises(ValueError, match="nested at most 16 levels"):
        Scene.from_dict(data)
    deep_dict: Any = {}
    for _ in range(100_000):
        deep_dict = {"type": "Pose", "x": deep_dict, "y": 0.0, "angle": 0.0}
    data = fresh()
    data["bodies"][1]["pose"] = deep_dict
    with pytest.raises(ValueError, match="nested at most 16 levels"):
        Scene.from_dict(data)


# ------------------------------------------------------------------ numbers and ranges
def _ball_spec(data: dict[str, Any]) -> dict[str, Any]:
    return data["bodies"][index_of(data, "bodies", "/World/Ball")]["spec"]


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("mass", 10**400, "must be an int within"),
        ("mass", 1e308, r"mass must be in \[1e-06, 1e\+06\] kg"),
        ("mass", 5e-324, r"mass must be in \[1e-06, 1e\+06\] kg"),
        ("mass", 1e-300, r"mass must be in \[1e-06, 1e\+06\] kg"),
        ("mass", True, "mass must be a finite number, got True"),
        ("mass", "1", "mass must be a finite number"),
        ("radius", 1e308, r"radius must be in \[0.0001, 10000\] m"),
        ("radius", 5e-324, r"radius must be in \[0.0001, 10000\] m"),
        ("radius", 1e-300, r"radius must be in \[0.0001, 10000\] m"),
        ("density", 1e308, r"density must be in \(0, 1e\+06\]"),
        ("density", 5e-324, r"computed mass must be in"),
    ],
)
def test_extreme_numbers_are_refused(key: str, value: Any, message: str) -> None:
    data = fresh()
    spec = _ball_spec(data)
    if key == "radius":
        spec["shapes"][0]["radius"] = value
    elif key == "density":
        spec["material"]["density"] = value
    else:
        spec["mass"] = value
    with pytest.raises(ValueError, match=message):
        Scene.from_dict(data)


def test_extreme_numbers_in_constructors() -> None:
    with pytest.raises(ValueError, match="beyond the range of a float"):
        ke.BodySpec("b", (ke.Circle(0.1),), mass=10**400)
    with pytest.raises(ValueError, match="within ±100000"):
        ke.Pose(1e300, 0.0)
    with pytest.raises(ValueError, match="within ±10000"):
        ke.SceneBuilder(gravity=(0.0, -1e300))
    with pytest.raises(ValueError, match=r"limit must be in \(0, 1e\+09\]"):
        ke.EffortActuator(1e300)
    with pytest.raises(ValueError, match="Segment length must be in"):
        ke.Segment((0.0, 0.0), (1e-9, 0.0))
    with pytest.raises(ValueError, match="Polygon area must be at least"):
        ke.Polygon(((0.0, 0.0), (1.0, 0.0), (0.5, 1e-12)))
    with pytest.raises(ValueError, match="layer must be an int within"):
        ke.RenderHint(layer=10**400)
    with pytest.raises(ValueError, match="non-empty printable string"):
        ke.BodySpec("a\nb", (ke.Circle(0.1),))


CORNERS = """
import itertools, json
import numpy as np
import kelab as ke
from kelab.sim.scene.shapes import LENGTH_MIN, LENGTH_MAX, MASS_MIN, MASS_MAX
bad = []
for kind, size, mass in itertools.product(
    ("circle", "box"), (LENGTH_MIN, 1.0, LENGTH_MAX), (MASS_MIN, MASS_MAX)
):
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(half_width=LENGTH_MAX / 2), at="/")
    shape = ke.Circle(size) if kind == "circle" else ke.Box(size, size)
    lift = size if kind == "circle" else size / 2
    b.add(ke.Prop(shape, mass=mass, initial_pose=ke.Pose(0.0, lift)), at="/P")
    b.add(ke.Prop(ke.Box(0.2, 0.2), mass=MASS_MAX if mass == MASS_MIN else MASS_MIN,
                  initial_pose=ke.Pose(LENGTH_MAX / 4, 0.1)), at="/Q")
    world = ke.World(b.build(), num_envs=2)
    world.reset_envs()
    for _ in range(120):
        world.step(1 / 120)
    poses = world.body_poses
    # finite, and resting on the ground: not tunnelled through the 1 m ground box
    if not np.isfinite(poses).all() or poses[:, 1:, 1].min() < -1.0:
        bad.append((kind, size, mass, poses[0].tolist()))
print(json.dumps(bad))
"""


def test_range_corners_simulate_stably() -> None:
    # the documented ranges are sane: the smallest/largest sizes with the smallest/largest
    # masses rest on the ground for a second with finite poses (both layouts share the
    # physics; the isolated one is used here)
    out = run_child(CORNERS)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
    assert (LENGTH_MIN, LENGTH_MAX, MASS_MIN, MASS_MAX) == (1e-4, 1e4, 1e-6, 1e6)


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_assets_build_and_round_trip(name: str) -> None:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(ke.Asset.from_registry(name)), at="/R")
    scene = b.build()
    assert Scene.from_dict(json.loads(json.dumps(scene.to_dict()))) == scene


# ------------------------------------------------------------- property-based fuzzing
def _locations(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _locations(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _locations(value, path + (i,))
    return out


LOCATIONS = _locations(BASE)[1:]
PATHS = sorted(
    {b["path"] for b in BASE["bodies"]} | {j["path"] for j in BASE["joints"]} | {"/X", "/"}
)
NASTY = [
    None, True, False, 0, -1, 1, 2**53 + 1, 10**400, 0.5, -0.0, 1e308, -1e308, 5e-324, 1e-300,
    math.inf, math.nan, "", " ", "x", "world", "/World/Ball", "a\nb", "a\xa0b", [], [0.0],
    [1, 2, 3], [[1, 2], [3]], {}, {"type": "Pose"}, {"type": "Pose", "x": 0, "y": 0, "angle": 0},
    {"type": "Scene"}, {"type": 5}, {"type": "Circle", "radius": 0.1, "offset": None},
]  # fmt: skip


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        data = data[step]
    return data


mutation = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(LOCATIONS), st.sampled_from(NASTY + PATHS)),
    st.tuples(st.just("delete"), st.sampled_from(LOCATIONS), st.none()),
    st.tuples(st.just("add"), st.sampled_from(LOCATIONS), st.sampled_from(NASTY)),
    st.tuples(st.just("float"), st.sampled_from(LOCATIONS), st.floats()),
)


def _mutate(data: dict[str, Any], op: str, path: tuple[Any, ...], value: Any) -> None:
    parent = _get(data, path[:-1])
    key = path[-1]
    if op == "set" or op == "float":
        parent[key] = copy.deepcopy(value)
    elif op == "delete":
        del parent[key]
    else:  # add: an extra key to a dict, or an extra element to a list
        target = parent[key]
        if isinstance(target, dict):
            target["zz_extra"] = copy.deepcopy(value)
        elif isinstance(target, list):
            target.append(copy.deepcopy(value))
        else:
            parent[key] = [target, copy.deepcopy(value)]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations=st.lists(mutation, min_size=1, max_size=3))
def test_mutated_scene_dicts_give_a_scene_or_a_value_error(mutations: list[Any]) -> None:
    data = fresh()
    for op, path, value in mutations:
        try:
            _mutate(data, op, path, value)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed or replaced this location
    try:
        scene = Scene.from_dict(data)
    except ValueError as err:
        assert str(err).startswith("Scene.from_dict"), err
        return
    # accepted: it is a real scene, and it serialises back to itself
    assert Scene.from_dict(json.loads(json.dumps(scene.to_dict()))) == scene


FUZZ_WORLDS = """
import copy, gc, json, random, sys
import numpy as np
import kelab as ke
sys.path[:0] = ["tests/robustness", "tests"]  # this module, and what it imports
from test_scene_data import BASE
rng = random.Random(9)
bodies = [b["path"] for b in BASE["bodies"]]
accepted = refused = 0
for trial in range(40):
    data = copy.deepcopy(BASE)
    for _ in range(rng.randint(1, 3)):
        j = rng.choice(data["joints"])
        what = rng.randrange(5)
        if what == 0:
            j[rng.choice(["parent_path", "child_path"])] = rng.choice(bodies + [None])
        elif what == 1:
            data["joints"].append(dict(copy.deepcopy(j), path="/Extra/j%d" % trial))
        elif what == 2:
            b = rng.choice(data["bodies"])
            b["spec"]["body_type"] = rng.choice(["static", "kinematic", "dynamic"])
        elif what == 3:
            b = rng.choice(data["bodies"])
            b["per_environment"] = not b["per_environment"]
        else:
            j["per_environment"] = not j["per_environment"]
    try:
        scene = ke.Scene.from_dict(data)
    except ValueError:
        refused += 1
        continue
    accepted += 1
    for layout in ("isolated", "packed"):
        try:
            world = ke.World(scene, num_envs=2, layout=layout)
        except ValueError:
            continue
        world.reset_envs()
        for _ in range(3):
            world.step(1 / 60)
        world.reset_envs([0])
        del world
        gc.collect()
print(json.dumps([accepted, refused]))
"""


FUZZ_CHILD = Prestart(  # ~1.5 s of worlds, started early, beside the suite (tests/prestart.py)
    [sys.executable, "-c", textwrap.dedent(FUZZ_WORLDS)], cwd=ROOT, timeout=300
)


@pytest.mark.prestart(FUZZ_CHILD)
def test_mutated_joint_graphs_never_crash_a_world() -> None:
    # seeded graph mutations (re-wired joints, extra joints, body types, per_environment);
    # every accepted scene builds, steps, resets and is collected in both layouts
    out = FUZZ_CHILD.result()
    assert out.returncode == 0, f"child died with {out.returncode}: {out.stderr[-3000:]}"
    accepted, refused = json.loads(out.stdout.strip().splitlines()[-1])
    assert accepted >= 5 and refused >= 5, (accepted, refused)


def test_numpy_inputs_still_work() -> None:
    # a pair may be a numpy array (e.g. computed geometry); the values are copied as floats
    seg = ke.Segment(np.array([0.0, 0.0]), np.array([1.0, 0.0]))
    assert seg.b == (1.0, 0.0) and type(seg.b[0]) is float


json_data = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from(["Pose", "BodyInstance", "Circle", "/World/Ball", "kelab.scene"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["type", "x", "y", "angle", "path", "spec"]), inner)
    ),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(sorted(BASE)), value=json_data)
def test_arbitrary_json_in_any_top_level_field(key: str, value: Any) -> None:
    data = fresh()
    data[key] = value
    try:
        scene = Scene.from_dict(data)
    except ValueError as err:  # anything else (TypeError, KeyError...) fails the test
        assert str(err).startswith("Scene.from_dict"), err
    else:  # e.g. an empty list of sensors: a real scene that round-trips
        assert Scene.from_dict(scene.to_dict()) == scene
