"""The scene description: what a World is built from, with no pymunk and no World.

The lowest room of :mod:`kelab.sim` (then :mod:`kelab.sim.physics`, then the runtime in
:mod:`kelab.sim` itself). Its modules, each importing only those above it in this list:
:mod:`~kelab.sim.scene.fields` (field checks), :mod:`~kelab.sim.scene.shapes` (poses,
shapes, materials), :mod:`~kelab.sim.scene.collision` (collision filters),
:mod:`~kelab.sim.scene.joints`, :mod:`~kelab.sim.scene.sensor_config`
(how a sensor degrades its signal), :mod:`~kelab.sim.scene.sensor_kinds` (the sensor
kinds: add one there), :mod:`~kelab.sim.scene.items` (what a task adds),
:mod:`~kelab.sim.scene.instances` (the flattened form), the cross-item checks
(``_checks``) and the JSON codec (``_io``), :mod:`~kelab.sim.scene.scene` (the
:class:`Scene`), then :mod:`~kelab.sim.scene.builder` and :mod:`~kelab.sim.scene.assets`.

This package re-exports the vocabulary, the :class:`SceneBuilder` and :class:`Asset`, so
``from kelab.sim.scene import BodySpec, Circle, SceneBuilder`` works. See docs/scene.md.
"""

from kelab.sim.scene._io import MAX_DEPTH
from kelab.sim.scene.assets import Asset
from kelab.sim.scene.builder import SceneBuilder
from kelab.sim.scene.collision import CollisionFilter
from kelab.sim.scene.instances import (
    ZOOM_MAX,
    ZOOM_MIN,
    BodyInstance,
    CameraSpec,
    JointInstance,
    RobotInstance,
    SensorSpec,
    SiteInstance,
)
from kelab.sim.scene.items import BodySpec, Prop, Robot, RobotDescription, Site, Terrain
from kelab.sim.scene.joints import (
    WORLD,
    Actuator,
    EffortActuator,
    FixedJoint,
    Joint,
    PDActuator,
    PrismaticJoint,
    RevoluteJoint,
    SpringJoint,
)
from kelab.sim.scene.scene import SCENE_FORMAT, SCENE_VERSION, Scene
from kelab.sim.scene.sensor_config import SensorConfig
from kelab.sim.scene.sensor_kinds import SENSOR_KINDS
from kelab.sim.scene.shapes import (
    Box,
    Circle,
    Material,
    Polygon,
    Pose,
    RenderHint,
    Segment,
    Shape,
    shape_lowest_point,
)

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
    "CollisionFilter",
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
