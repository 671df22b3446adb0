"""One re-export layer: the package kelab.sim.scene offers the vocabulary, scene.py its Scene."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kelab.sim.scene as package
import kelab.sim.scene.scene as scene_module

# every name ``from kelab.sim.scene import X`` offered when scene.py was made one layer
OFFERED = [
    "MAX_DEPTH", "SCENE_FORMAT", "SCENE_VERSION", "SENSOR_KINDS", "WORLD", "ZOOM_MAX",
    "ZOOM_MIN", "Actuator", "Asset", "BodyInstance", "BodySpec", "Box", "CameraSpec",
    "Circle", "CollisionFilter", "EffortActuator", "FixedJoint", "Joint", "JointInstance",
    "Material",
    "PDActuator", "Polygon", "Pose", "PrismaticJoint", "Prop", "RenderHint", "RevoluteJoint",
    "Robot", "RobotDescription", "RobotInstance", "Scene", "SceneBuilder", "Segment",
    "SensorConfig", "SensorSpec", "Shape", "Site", "SiteInstance", "SpringJoint", "Terrain",
    "shape_lowest_point",
]  # fmt: skip


@pytest.mark.parametrize("name", OFFERED)
def test_every_name_the_package_offered_still_imports(name):
    namespace: dict[str, object] = {}
    exec(f"from kelab.sim.scene import {name}", namespace)  # the public import path itself
    assert namespace[name] is getattr(package, name)
    assert name in package.__all__


def test_the_package_is_the_one_re_export_layer():
    assert sorted(package.__all__) == sorted(OFFERED)
    # scene.py exports what it defines, nothing it imports
    assert sorted(scene_module.__all__) == ["SCENE_FORMAT", "SCENE_VERSION", "Scene"]
    # and the package takes each name from the module that defines it, not via scene.py
    tree = ast.parse(Path(package.__file__).read_text())
    via_scene = [
        a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "kelab.sim.scene.scene"
        for a in node.names
    ]
    assert sorted(via_scene) == ["SCENE_FORMAT", "SCENE_VERSION", "Scene"]
