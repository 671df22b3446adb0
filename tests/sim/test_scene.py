from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import re
import subprocess
import sys

import pytest

import kelab as ke
from kelab.sim.scene import Scene

GOLDEN = "2de7ea1e5a5c9294df42955093ed5ee04bf9235a1c4e2b113f0f91315453e553"
DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "scene.md"


def _cartpole() -> ke.Asset:
    return ke.Asset.from_registry("kelab/robot/cartpole:v1")


def build_reference_scene(pose: ke.Pose | None = None) -> ke.Scene:
    scene = ke.SceneBuilder()
    scene.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    robot = ke.Robot(asset=_cartpole(), initial_pose=pose or ke.Pose.identity())
    scene.add(robot, at="/World/Robot")
    ball = ke.Prop(ke.Circle(0.1), mass=0.2, initial_pose=ke.Pose(1.0, 0.1))
    scene.add(ball, at="/World/Ball")
    scene.imu("pole.imu", "/World/Robot/pole", sensor=ke.SensorConfig(cutoff_hz=20, noise=0.01))
    scene.pose_sensor("ball.pose", ball)
    scene.joint_sensor("pole.joint", "/World/Robot/cart_to_pole")
    scene.contact_sensor("cart.contact", "/World/Robot/cart")
    scene.rangefinder("ray", ball, angle=-math.pi / 2, max_range=5.0)
    scene.site("ball.top", ball, ke.Pose(0.0, 0.1))
    scene.camera("main", center=(0.0, 1.0), zoom=120.0)
    return scene.build()


# ------------------------------------------------------------------------- leaf types


def test_pose_compose_transform_inverse() -> None:
    p = ke.Pose(1.0, 2.0, math.pi / 2)
    x, y = p.transform_point((1.0, 0.0))
    assert (x, y) == pytest.approx((1.0, 3.0))
    q = p.compose(ke.Pose(1.0, 0.0, 0.25))
    assert (q.x, q.y, q.angle) == pytest.approx((1.0, 3.0, math.pi / 2 + 0.25))
    ident = p.compose(p.inverse())
    assert (ident.x, ident.y, ident.angle) == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)
    assert ke.Pose.identity() == ke.Pose(0, 0, 0)
    assert isinstance(ke.Pose(1, 2).x, float)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: ke.Pose(float("nan")), "Pose.x"),
        (lambda: ke.Circle(0.0), "Circle.radius"),
        (lambda: ke.Box(1.0, -1.0), "Box.height"),
        (lambda: ke.Segment((0, 0), (0, 0)), "Segment.b"),
        (lambda: ke.Polygon(((0, 0), (0, 1), (1, 0))), "Polygon.vertices"),  # clockwise
        (lambda: ke.Polygon(((0, 0), (1, 0))), "Polygon.vertices"),
        (lambda: ke.Material(restitution=1.5), "Material.restitution"),
        (lambda: ke.Material(density=0.0), "Material.density"),
        (lambda: ke.Material(static_friction=-0.1, dynamic_friction=-0.2), "static_friction"),
        (lambda: ke.RenderHint(color=(0, 0, 300)), "RenderHint.color"),
        (lambda: ke.EffortActuator(limit=0.0), "EffortActuator.limit"),
        (lambda: ke.PDActuator(kp=-1.0, kd=0.0, limit=1.0), "PDActuator.kp"),
        (lambda: ke.RevoluteJoint("j", "a", "b", limits=(1.0, -1.0)), "limits"),
        (lambda: ke.PrismaticJoint("j", "a", "b", axis=(0.0, 0.0)), "axis"),
        (lambda: ke.RevoluteJoint("j", "a", "world"), "child"),
        (lambda: ke.SpringJoint("j", "a", "b", stiffness=-1.0), "SpringJoint.stiffness"),
        (lambda: ke.BodySpec("b", (), mass=1.0), "shapes"),
        (lambda: ke.BodySpec("b", (ke.Circle(1.0),), body_type="floating"), "body_type"),
        (lambda: ke.BodySpec("b", (ke.Segment((0, 0), (1, 0)),)), "mass"),
        (lambda: ke.Prop(ke.Circle(0.1), mass=-1.0), "BodySpec.mass"),
    ],
)
def test_validation_names_the_field(make, field: str) -> None:
    with pytest.raises(ValueError, match=re.escape(field)):
        make()


def test_numpy_scalars_are_stored_as_python_numbers_and_bools_refused() -> None:
    import numpy as np

    pose = ke.Pose(np.float32(0.5), np.int64(2), np.float64(-0.0))
    assert pose == ke.Pose(0.5, 2.0, 0.0) and {type(v) for v in dataclasses.astuple(pose)} == {
        float
    }
    hint = ke.RenderHint(color=tuple(np.array([1, 2, 3])), layer=np.int16(-4), visible=np.True_)
    assert (hint.color, hint.layer, hint.visible) == ((1, 2, 3), -4, True)
    assert {type(c) for c in hint.color} == {int} and type(hint.layer) is int
    spec = ke.BodySpec("b", (ke.Circle(np.float32(0.25)),), mass=np.int32(2))
    assert spec.mass == 2.0 and type(spec.mass) is float
    b = ke.SceneBuilder()
    b.add(
        ke.Prop(ke.Circle(np.float32(0.25)), mass=np.int32(2), initial_pose=pose, render=hint), "/B"
    )
    json.dumps(b.build().to_dict())  # numpy inputs leave a plain-JSON scene
    with pytest.raises(ValueError, match=r"^Pose.x must be a finite number, got True; give an"):
        ke.Pose(True, 0.0)
    with pytest.raises(ValueError, match=r"^RenderHint.visible must be True or False, got 1$"):
        ke.RenderHint(visible=1)
    with pytest.raises(ValueError, match=r"^RenderHint.layer must be an int within ±1000000, got"):
        ke.RenderHint(layer=True)


def test_material_dynamic_above_static_explains_fix() -> None:
    with pytest.raises(ValueError) as err:
        ke.Material(static_friction=0.5, dynamic_friction=0.8)
    msg = str(err.value)
    assert "dynamic_friction (0.8)" in msg and "static_friction (0.5)" in msg
    assert "lower dynamic_friction or raise static_friction" in msg


def test_shapes_area_and_polygon_ccw() -> None:
    assert ke.Circle(1.0).area() == pytest.approx(math.pi)
    assert ke.Box(2.0, 3.0).area() == 6.0
    assert ke.Polygon(((0, 0), (1, 0), (0, 1))).area() == pytest.approx(0.5)
    assert ke.Segment((0, 0), (1, 0), radius=0.5).area() == pytest.approx(1.0 + math.pi / 4)
    assert ke.BodySpec("b", (ke.Box(0.1, 0.1),)).resolved_mass() == pytest.approx(10.0)


def test_prismatic_axis_is_normalised() -> None:
    joint = ke.PrismaticJoint("j", "world", "b", axis=(3.0, 4.0))
    assert joint.axis == pytest.approx((0.6, 0.8))


def test_everything_is_frozen() -> None:
    scene = build_reference_scene()
    for obj in (scene, scene.bodies[0], scene.bodies[1].spec, scene.joints[0].spec, ke.Pose()):
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.x = 1.0  # type: ignore[attr-defined]
    assert isinstance(scene.bodies, tuple) and isinstance(scene.bodies[1].spec.shapes, tuple)
    assert hash(scene) == hash(build_reference_scene())  # hashable by value


# ------------------------------------------------------------------ robot description


def test_robot_description_rejects_bad_references() -> None:
    body = ke.BodySpec("a", (ke.Circle(0.1),))
    other = ke.BodySpec("b", (ke.Circle(0.1),))
    with pytest.raises(ValueError, match="joint name 'j' is already used"):
        ke.RobotDescription(
            "r",
            (body, other),
            (ke.RevoluteJoint("j", "a", "b"), ke.RevoluteJoint("j", "world", "a")),
        )
    with pytest.raises(ValueError, match=r"parent='ghost'.*use one of \['a', 'b', 'world'\]"):
        ke.RobotDescription("r", (body, other), (ke.RevoluteJoint("j", "ghost", "b"),))
    with pytest.raises(ValueError, match=r"child='ghost'"):
        ke.RobotDescription("r", (body, other), (ke.FixedJoint("j", "a", "ghost"),))
    with pytest.raises(ValueError, match="body name 'a' is already used"):
        ke.RobotDescription("r", (body, body))
    with pytest.raises(ValueError, match="site 's' is on body 'zz'"):
        ke.RobotDescription("r", (body,), sites=(ke.Site("s", "zz"),))


# ----------------------------------------------------------------------------- builder


def test_builder_flattens_in_order_with_paths() -> None:
    scene = build_reference_scene()
    assert [b.path for b in scene.bodies] == [
        "/ground",
        "/World/Robot/cart",
        "/World/Robot/pole",
        "/World/Ball",
    ]
    assert [b.per_environment for b in scene.bodies] == [False, True, True, True]
    assert scene.bodies[0].spec.body_type == "static"
    assert [j.path for j in scene.joints] == [
        "/World/Robot/slider_to_cart",
        "/World/Robot/cart_to_pole",
    ]
    slider, hinge = scene.joints
    assert slider.parent_path is None and slider.child_path == "/World/Robot/cart"
    assert hinge.parent_path == "/World/Robot/cart" and hinge.child_path == "/World/Robot/pole"
    (robot,) = scene.robots
    assert robot.path == "/World/Robot" and robot.name == "cartpole"
    assert robot.body_paths == ("/World/Robot/cart", "/World/Robot/pole")
    assert [s.kind for s in scene.sensors] == ["imu", "pose", "joint", "contact", "rangefinder"]
    assert scene.sensors[1].target == "/World/Ball"
    assert scene.sensors[4].param("max_range") == 5.0
    assert [s.name for s in scene.sites] == ["/World/Robot/pole_tip", "ball.top"]
    assert scene.cameras == (ke.CameraSpec("main", (0.0, 1.0), 120.0),)
    assert scene.gravity == (0.0, -9.81)
    assert scene.body("/World/Ball").spec.mass == 0.2


def test_terrain_plane_top_surface_at_height() -> None:
    terrain = ke.Terrain.plane(name="floor", height=0.5)
    spec = terrain.body_spec()
    top = max(terrain.pose.compose(s.offset).transform_point(v)[1] for s in spec.shapes
              for v in s.vertices())  # fmt: skip
    assert top == pytest.approx(0.5)
    assert spec.body_type == "static"
    b = ke.SceneBuilder()
    assert b.add(terrain, at="/") == "/floor"
    assert b.add(ke.Terrain.plane(name="other"), at="/World/Ground") == "/World/Ground"


def test_robot_initial_pose_moves_bodies_and_world_anchors() -> None:
    scene = build_reference_scene(ke.Pose(2.0, 0.0, 0.0))
    base = build_reference_scene()
    cart, moved = base.body("/World/Robot/cart"), scene.body("/World/Robot/cart")
    assert moved.pose.x == pytest.approx(cart.pose.x + 2.0)
    assert scene.joints[0].spec.anchor[0] == pytest.approx(base.joints[0].spec.anchor[0] + 2.0)
    assert scene.joints[1].spec == base.joints[1].spec  # parent-frame anchors don't move
    tilted = build_reference_scene(ke.Pose(0.0, 0.0, math.pi / 2))
    assert tilted.joints[0].spec.axis == pytest.approx((0.0, 1.0))


def test_duplicate_and_bad_paths_raise_naming_the_path() -> None:
    b = ke.SceneBuilder()
    b.add(ke.Robot(_cartpole()), at="/World/Robot")
    with pytest.raises(ValueError, match="'/World/Robot'"):
        b.add(ke.Prop(ke.Circle(0.1), mass=1.0), at="/World/Robot")
    with pytest.raises(ValueError, match="'/World/Robot/pole'"):
        b.add(ke.Prop(ke.Circle(0.1), mass=1.0), at="/World/Robot/pole")
    for bad in ("World/Ball", "/World/", "/World//Ball", "/", ""):
        with pytest.raises(ValueError, match="absolute path"):
            b.add(ke.Prop(ke.Circle(0.1), mass=1.0), at=bad)
    with pytest.raises(ValueError, match="must be a ke.Robot, ke.Prop or ke.Terrain"):
        b.add("robot", at="/X")  # type: ignore[arg-type]
    robot = ke.Robot(_cartpole())
    b.add(robot, at="/World/Robot2")
    with pytest.raises(ValueError, match="already added at '/World/Robot2'"):
        b.add(robot, at="/World/Robot3")


def test_sensor_errors() -> None:
    b = ke.SceneBuilder()
    b.add(ke.Robot(_cartpole()), at="/World/Robot")
    with pytest.raises(ValueError, match="'/World/Robot/torso' is not in the scene"):
        b.imu("torso.imu", "/World/Robot/torso")
    with pytest.raises(ValueError, match="was not added"):
        b.imu("ball.imu", ke.Prop(ke.Circle(0.1), mass=1.0))
    with pytest.raises(ValueError, match="joint '/World/Robot/nope' is not in the scene"):
        b.joint_sensor("j", "/World/Robot/nope")
    b.imu("cart.imu", "/World/Robot/cart")
    with pytest.raises(ValueError, match="sensor name 'cart.imu' is already used"):
        b.imu("cart.imu", "/World/Robot/pole")
    with pytest.raises(ValueError, match="sensor must be a ke.SensorConfig"):
        b.imu("x", "/World/Robot/pole", sensor={"noise": 1.0})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_range"):
        b.rangefinder("r", "/World/Robot/cart", max_range=0.0)


# ----------------------------------------------------------- serialisation, fingerprint


def test_round_trip_equality_and_fingerprint() -> None:
    scene = build_reference_scene()
    again = Scene.from_dict(scene.to_dict())
    assert again == scene and again.fingerprint == scene.fingerprint
    via_json = Scene.from_dict(json.loads(json.dumps(scene.to_dict())))
    assert via_json == scene and via_json.fingerprint == scene.fingerprint
    assert re.fullmatch(r"[0-9a-f]{64}", scene.fingerprint)
    assert build_reference_scene().fingerprint == scene.fingerprint


def test_round_trip_every_joint_and_shape_kind() -> None:
    bodies = (
        ke.BodySpec("a", (ke.Polygon(((0, 0), (1, 0), (0, 1))), ke.Segment((0, 0), (1, 0), 0.1))),
        ke.BodySpec("b", (ke.Box(0.2, 0.1, offset=ke.Pose(0.1, 0, 0.3)),), mass=1.0),
        ke.BodySpec("c", (ke.Circle(0.1),), mass=1.0, body_type="kinematic"),
    )
    joints = (
        ke.SpringJoint("s", "world", "a", (1.0, 2.0), (0.0, 0.1), 0.5, 100.0, 2.0),
        ke.FixedJoint("f", "a", "b"),
        ke.PrismaticJoint("p", "b", "c", actuator=ke.PDActuator(10.0, 1.0, 5.0)),
    )
    robot = ke.Robot(ke.RobotDescription("custom", bodies, joints, self_collide=True))
    b = ke.SceneBuilder(gravity=(0.0, -1.62))
    b.add(robot, at="/R", per_environment=False)
    scene = b.build()
    again = Scene.from_dict(json.loads(json.dumps(scene.to_dict())))
    assert again == scene and again.fingerprint == scene.fingerprint
    assert scene.robots[0].self_collide is True
    assert scene.joints[0].spec.anchor_parent == (1.0, 2.0)


def _variants() -> dict[str, ke.Scene]:
    def with_builder(edit) -> ke.Scene:
        b = ke.SceneBuilder()
        b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
        edit(b)
        return b.build()

    desc = _cartpole().description
    pole = desc.body("pole")
    heavier = dataclasses.replace(
        desc, bodies=(desc.bodies[0], dataclasses.replace(pole, mass=0.2))
    )
    slick = dataclasses.replace(
        desc,
        bodies=(desc.bodies[0], dataclasses.replace(pole, material=ke.Material(restitution=0.1))),
    )
    weaker = dataclasses.replace(
        desc,
        joints=(
            dataclasses.replace(desc.joints[0], actuator=ke.EffortActuator(50.0)),
            desc.joints[1],
        ),
    )
    return {
        "base": with_builder(lambda b: b.add(ke.Robot(desc), at="/World/Robot")),
        "mass": with_builder(lambda b: b.add(ke.Robot(heavier), at="/World/Robot")),
        "material": with_builder(lambda b: b.add(ke.Robot(slick), at="/World/Robot")),
        "actuator": with_builder(lambda b: b.add(ke.Robot(weaker), at="/World/Robot")),
        "path": with_builder(lambda b: b.add(ke.Robot(desc), at="/World/Robot2")),
        "pose": with_builder(
            lambda b: b.add(ke.Robot(desc, ke.Pose(0.0, 0.0, 1e-9)), at="/World/Robot")
        ),
        "per_env": with_builder(
            lambda b: b.add(ke.Robot(desc), at="/World/Robot", per_environment=False)
        ),
        "sensor": with_builder(
            lambda b: (
                b.add(ke.Robot(desc), at="/World/Robot"),
                b.imu("i", "/World/Robot/pole", sensor=ke.SensorConfig(noise=0.001)),
            )
        ),
        "color": with_builder(
            lambda b: b.add(
                ke.Robot(
                    dataclasses.replace(
                        desc,
                        bodies=(
                            desc.bodies[0],
                            dataclasses.replace(pole, render=ke.RenderHint(color=(1, 2, 3))),
                        ),
                    )
                ),
                at="/World/Robot",
            )
        ),
    }


def test_fingerprint_changes_on_any_change() -> None:
    variants = _variants()
    prints = {name: scene.fingerprint for name, scene in variants.items()}
    assert len(set(prints.values())) == len(prints), prints
    assert variants["base"].fingerprint == _variants()["base"].fingerprint


def test_int_and_float_inputs_fingerprint_alike() -> None:
    def make(value) -> ke.Scene:
        b = ke.SceneBuilder()
        b.add(ke.Prop(ke.Circle(value), mass=value, initial_pose=ke.Pose(value, -0.0)), at="/P")
        b.imu("i", "/P", sensor=ke.SensorConfig(cutoff_hz=value * 20))
        return b.build()

    assert make(1) == make(1.0) and make(1).fingerprint == make(1.0).fingerprint


def test_fingerprint_stable_across_processes() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r})\n"
        "from test_scene import build_reference_scene\n"
        "print(build_reference_scene().fingerprint)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
    )
    assert out.stdout.strip() == build_reference_scene().fingerprint


def _small_scene() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/")
    ball = ke.Prop(ke.Circle(0.1), mass=0.25, initial_pose=ke.Pose(0.5, 0.1, 0.1))
    b.add(ball, at="/World/Ball")
    b.imu("ball.imu", ball, sensor=ke.SensorConfig(sample_interval=1 / 120, noise=0.005))
    return b.build()


def test_fingerprint_golden_value() -> None:
    # Pins the canonical encoding (key order, float repr, type tags) so the fingerprint is
    # identical on every machine and Python version. Changing the scene format on purpose
    # means bumping SCENE_VERSION and this value together.
    assert _small_scene().fingerprint == GOLDEN


def test_from_dict_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="format='kelab.scene'"):
        Scene.from_dict({"bodies": []})
    data = build_reference_scene().to_dict()
    data["version"] = 99
    with pytest.raises(ValueError, match="version must be the int 1, got 99"):
        Scene.from_dict(data)
    data = build_reference_scene().to_dict()
    data["bodies"][0]["type"] = "Evil"
    with pytest.raises(ValueError, match="unknown type 'Evil'"):
        Scene.from_dict(data)
    data = build_reference_scene().to_dict()
    data["joints"][1]["child_path"] = "/nowhere"
    with pytest.raises(ValueError, match="unknown body '/nowhere'"):
        Scene.from_dict(data)


def test_docs_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "docs/scene.md has no python example"
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {"__name__": "__docs__"})
    out = capsys.readouterr().out
    assert "/World/Robot" in out and re.search(r"\b[0-9a-f]{64}\b", out)


# -------------------------------------------------------------- the description layer

DESCRIPTION = (
    "kelab.sim.scene.fields", "kelab.sim.scene.shapes", "kelab.sim.scene.collision",
    "kelab.sim.scene.joints", "kelab.sim.scene.sensor_config", "kelab.sim.scene.sensor_kinds",
    "kelab.sim.scene.items",
    "kelab.sim.scene.instances", "kelab.sim.scene._checks", "kelab.sim.scene._io",
    "kelab.sim.scene.scene", "kelab.sim.scene", "kelab.sim.scene.builder",
    "kelab.sim.scene.assets", "kelab.sim.scene.assets.biped", "kelab.sim.scene.assets.cartpole",
    "kelab.sim.scene.assets.pi",
)  # fmt: skip


def _kelab_imports(module: str) -> set[tuple[str, str]]:
    """``(module, name)`` for every kelab import in ``module``'s source, wherever it sits
    (top level, TYPE_CHECKING blocks, functions); ``name`` is "" for ``import x``."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return set()
    out: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(pathlib.Path(spec.origin).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {(a.name, "") for a in node.names if a.name.startswith("kelab")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kelab"):
            assert node.level == 0, f"{module} uses a relative import"
            out |= {(node.module, a.name) for a in node.names}
    return out


def test_scene_description_imports_only_itself_downward_and_no_private_names():
    edges: dict[str, set[str]] = {}
    for mod in DESCRIPTION:
        edges[mod] = set()
        for target, name in _kelab_imports(mod):
            to = f"{target}.{name}" if f"{target}.{name}" in DESCRIPTION else target
            if to.startswith("kelab.sim") and to not in DESCRIPTION:
                pytest.fail(f"{mod} imports {to}: the scene description needs no runtime")
            if to != mod and name.startswith("_") and not name.startswith("__"):
                pytest.fail(f"{mod} imports the private name {target}.{name}")
            if to != mod and to in DESCRIPTION:
                edges[mod].add(to)
    left = dict(edges)  # no circle: peel off the modules that import no remaining one
    while left:
        leaves = [m for m, deps in left.items() if not deps & left.keys()]
        assert leaves, f"import circle among {sorted(left)}"
        for m in leaves:
            del left[m]


# ----------------------------------------------------------------- sensor kinds registry


def _ball_scene(add_sensors) -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/")
    b.add(ke.Robot(_cartpole()), at="/World/Robot")
    ball = ke.Prop(ke.Circle(0.1), mass=0.5, initial_pose=ke.Pose(0.5, 1.0))
    b.add(ball, at="/World/Ball")
    add_sensors(b, ball)
    return b.build()


def test_every_sensor_kind_reports_its_registered_width():
    from kelab.sim.scene.sensor_kinds import SENSOR_KINDS

    camera = (("size", (8, 6)), ("channels", 3), ("zoom", 10.0), ("offset", ke.Pose()),
              ("follow", "pose"), ("background", (0, 0, 0)))  # fmt: skip

    def sensors(b, ball):
        for kind in SENSOR_KINDS:
            target = "/World/Robot/cart_to_pole" if kind == "joint" else ball
            params = {
                "rangefinder": (("angle", -1.5), ("max_range", 3.0), ("offset", ke.Pose())),
                "camera": camera,
            }
            b.add_sensor(f"s.{kind}", kind, target, params=params.get(kind, ()))

    scene = _ball_scene(sensors)
    assert [s.kind for s in scene.sensors] == list(SENSOR_KINDS)
    world = ke.World(scene, num_envs=2)
    world.step(1 / 60)
    for kind, spec in SENSOR_KINDS.items():
        # a kind with a reading (the camera: its image) reports that, the others their values
        want = (2, 6, 8, 3) if spec.reading else (2, spec.width)
        assert world.read_sensor(f"s.{kind}").shape == want
    world.close()


def test_add_sensor_is_what_the_named_methods_do():
    def by_method(b, ball):
        b.imu("imu", ball)
        b.rangefinder("rf", ball, angle=0.5, max_range=2.0)
        b.joint_sensor("js", "/World/Robot/cart_to_pole")

    def generic(b, ball):
        b.add_sensor("imu", "imu", ball)
        rf = (("angle", 0.5), ("max_range", 2.0), ("offset", ke.Pose()))
        b.add_sensor("rf", "rangefinder", "/World/Ball", params=rf)
        b.add_sensor("js", "joint", "/World/Robot/cart_to_pole")

    assert _ball_scene(by_method).fingerprint == _ball_scene(generic).fingerprint
    with pytest.raises(ValueError, match=r"SceneBuilder.add_sensor: kind must be one of"):
        _ball_scene(lambda b, ball: b.add_sensor("x", "sonar", ball))
    with pytest.raises(ValueError, match=r"joint sensor 'j': joint '/World/Ball' is not in"):
        _ball_scene(lambda b, ball: b.add_sensor("j", "joint", "/World/Ball"))
    with pytest.raises(ValueError, match=r"must have the keys \['angle', 'max_range', 'offset'\]"):
        _ball_scene(lambda b, ball: b.add_sensor("r", "rangefinder", ball))


def test_a_new_sensor_kind_is_one_registry_entry(monkeypatch):
    from kelab.sim.scene import sensor_kinds

    def height(inputs, body, params):  # the body's height above y = params["floor"]
        return inputs.raw[:, body, 1:2] - params["floor"]

    kind = sensor_kinds.SensorKind(1, "height", "body", height, {"floor": lambda o, n, v: float(v)})
    monkeypatch.setitem(sensor_kinds.SENSOR_KINDS, "height", kind)
    floor = (("floor", 0.25),)
    scene = _ball_scene(lambda b, ball: b.add_sensor("h", "height", ball, params=floor))
    assert Scene.from_dict(json.loads(json.dumps(scene.to_dict()))) == scene
    world = ke.World(scene, num_envs=2)
    for _ in range(3):
        world.step(1 / 60)
    ball = world.body_names.index("/World/Ball")
    assert (world.read_sensor("h")[:, 0] == world.body_poses[:, ball, 1] - 0.25).all()
    world.close()


def test_robot_takes_any_object_with_a_description():
    class MyAsset:  # the RobotAsset protocol: ke.Asset is one, so is this
        description = _cartpole().description

    robot = ke.Robot(MyAsset())
    assert robot.description.name == "cartpole"
