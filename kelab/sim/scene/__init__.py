"""The scene description: what a World is built from, with no pymunk and no World.

The lowest room of :mod:`kelab.sim` (then :mod:`kelab.sim.physics`, then the runtime in
:mod:`kelab.sim` itself). Its modules, each importing only those above it in this list:
:mod:`~kelab.sim.scene.fields` (field checks), :mod:`~kelab.sim.scene.shapes` (poses,
shapes, materials), :mod:`~kelab.sim.scene.joints`, :mod:`~kelab.sim.scene.sensor_config`
(how a sensor degrades its signal), :mod:`~kelab.sim.scene.sensor_kinds` (the sensor
kinds: add one there), :mod:`~kelab.sim.scene.items` (what a task adds),
:mod:`~kelab.sim.scene.instances` (the flattened form), the cross-item checks
(``_checks``) and the JSON codec (``_io``), :mod:`~kelab.sim.scene.scene` (the
:class:`Scene`), then :mod:`~kelab.sim.scene.builder` and :mod:`~kelab.sim.scene.assets`.

This package re-exports the vocabulary, the :class:`SceneBuilder` and :class:`Asset`, so
``from kelab.sim.scene import BodySpec, Circle, SceneBuilder`` works. See docs/scene.md.
"""

from kelab.sim.scene.assets import Asset
from kelab.sim.scene.builder import SceneBuilder
from kelab.sim.scene.scene import (
    MAX_DEPTH,
    SCENE_FORMAT,
    SCENE_VERSION,
    SENSOR_KINDS,
    WORLD,
    ZOOM_MAX,
    ZOOM_MIN,
    Actuator,
    BodyInstance,
    BodySpec,
    Box,
    CameraSpec,
    Circle,
    EffortActuator,
    FixedJoint,
    Joint,
    JointInstance,
    Material,
    PDActuator,
    Polygon,
    Pose,
    PrismaticJoint,
    Prop,
    RenderHint,
    RevoluteJoint,
    Robot,
    RobotDescription,
    RobotInstance,
    Scene,
    Segment,
    SensorSpec,
    Shape,
    Site,
    SiteInstance,
    SpringJoint,
    Terrain,
    shape_lowest_point,
)
from kelab.sim.scene.sensor_config import SensorConfig

__all__ = [
    "MAX_DEPTH",
    "SCENE_FORMAT",
    "SCENE_VERSION",
    "SENSOR_KINDS",
    "WORLD",
    "ZOOM_MAX",
    "ZOOM_MIN",
    "Actuator",
    "Asset",
    "BodyInstance",
    "BodySpec",
    "Box",
    "CameraSpec",
    "Circle",
    "EffortActuator",
    "FixedJoint",
    "Joint",
    "JointInstance",
    "Material",
    "PDActuator",
    "Polygon",
    "Pose",
    "PrismaticJoint",
    "Prop",
    "RenderHint",
    "RevoluteJoint",
    "Robot",
    "RobotDescription",
    "RobotInstance",
    "Scene",
    "SceneBuilder",
    "Segment",
    "SensorConfig",
    "SensorSpec",
    "Shape",
    "Site",
    "SiteInstance",
    "SpringJoint",
    "Terrain",
    "shape_lowest_point",
]
