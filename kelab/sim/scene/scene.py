"""The immutable scene: a flattened, fingerprinted description a World is built from.

A :class:`SceneBuilder` (:mod:`kelab.sim.scene.builder`) collects items at absolute paths
(``"/World/Robot"``) and ``build()`` returns a :class:`Scene`: frozen dataclasses all the
way down, the ordered bodies, joints, sensors, sites and cameras that the World and the
renderer consume, JSON-round-trippable and fingerprinted. See docs/scene.md.

The vocabulary lives in the modules beside this one (the package docstring,
:mod:`kelab.sim.scene`, lists them bottom to top); the package re-exports it from there
(the one re-export layer), so ``from kelab.sim.scene import BodySpec, Circle`` works.

Example:
    >>> import kelab as ke
    >>> b = ke.SceneBuilder()
    >>> b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    '/ground'
    >>> b.add(ke.Prop(ke.Circle(0.1), mass=0.5, initial_pose=ke.Pose(0.0, 0.1)), at="/World/Ball")
    '/World/Ball'
    >>> [body.path for body in b.build().bodies]
    ['/ground', '/World/Ball']
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from kelab._validate import is_int, must
from kelab.errors import UserError
from kelab.sim.scene._checks import validate_scene
from kelab.sim.scene._io import check_keys, decode, encode
from kelab.sim.scene.fields import Vec2, field_tuple, field_vec2, set_field, short_repr
from kelab.sim.scene.instances import (
    BodyInstance,
    CameraSpec,
    JointInstance,
    RobotInstance,
    SensorSpec,
    SiteInstance,
)
from kelab.sim.scene.shapes import GRAVITY_MAX

__all__ = ["SCENE_FORMAT", "SCENE_VERSION", "Scene"]

SCENE_FORMAT = "kelab.scene"
SCENE_VERSION = 1


@dataclass(frozen=True)
class Scene:
    """An immutable, flattened, fingerprinted scene. Build one with :class:`SceneBuilder`.

    Construction validates everything (each field's type and range, unique paths and names,
    the joint graph, robots' and sensors' references), so a Scene that exists never crashes
    a World (which may still refuse what a layout cannot do); see docs/scene.md.

    Attributes:
        gravity: ``(gx, gy)`` in m/s², each within ±GRAVITY_MAX (1e4).
        bodies: Bodies in insertion order (a robot's bodies in description order).
        joints: Joints in insertion order.
        sensors: Sensors in declaration order.
        sites: Named frames.
        cameras: Views.
        robots: Robots in insertion order.
    """

    gravity: Vec2 = (0.0, -9.81)
    bodies: tuple[BodyInstance, ...] = ()
    joints: tuple[JointInstance, ...] = ()
    sensors: tuple[SensorSpec, ...] = ()
    sites: tuple[SiteInstance, ...] = ()
    cameras: tuple[CameraSpec, ...] = ()
    robots: tuple[RobotInstance, ...] = ()

    def __post_init__(self) -> None:
        set_field(self, "gravity", field_vec2("Scene", "gravity", self.gravity, limit=GRAVITY_MAX))
        for attr, types in (
            ("bodies", (BodyInstance,)),
            ("joints", (JointInstance,)),
            ("sensors", (SensorSpec,)),
            ("sites", (SiteInstance,)),
            ("cameras", (CameraSpec,)),
            ("robots", (RobotInstance,)),
        ):
            set_field(self, attr, field_tuple("Scene", attr, getattr(self, attr), types))
        validate_scene(
            robots=self.robots, bodies=self.bodies, joints=self.joints,
            sensors=self.sensors, sites=self.sites, cameras=self.cameras,
        )  # fmt: skip

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 hex digest of the canonical JSON of ``to_dict()``."""
        return hashlib.sha256(self.canonical_json().encode("ascii")).hexdigest()

    def canonical_json(self) -> str:
        """Return ``to_dict()`` as JSON with sorted keys and no spaces (floats as repr)."""
        return json.dumps(
            self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True,
            allow_nan=False,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-compatible dict (lists, dicts, str, float, int, bool, None)."""
        out: dict[str, Any] = {"format": SCENE_FORMAT, "version": SCENE_VERSION}
        for f in dataclasses.fields(self):
            out[f.name] = encode(getattr(self, f.name))
        return out

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Scene:
        """Rebuild a Scene from ``to_dict()`` output (also after a JSON round trip).

        The dict is untrusted data: every object must have exactly its class's keys, every
        value is validated as in the constructors, nesting is bounded by ``MAX_DEPTH``, and
        every problem is a ValueError naming where it is (``bodies[2].spec.mass``).

        Args:
            data: A dict as returned by :meth:`to_dict`.

        Returns:
            The Scene, equal to the one that was serialised.

        Raises:
            UserError: If the data is not a valid scene of this format and version.
        """
        if not isinstance(data, dict):
            raise UserError(
                f"Scene.from_dict: data must be a dict (the output of Scene.to_dict()), got "
                f"{type(data).__name__}"
            )
        if data.get("format") != SCENE_FORMAT:
            raise UserError(
                f"Scene.from_dict expects a dict with format={SCENE_FORMAT!r}, got format "
                f"{short_repr(data.get('format', '<missing>'))}; pass the output of Scene.to_dict()"
            )
        version = data.get("version")
        if not (is_int(version) and version == SCENE_VERSION):
            raise UserError(
                must(
                    "Scene.from_dict: version",
                    f"the int {SCENE_VERSION}",
                    version,
                    "it is the only version this KELab reads",
                )
            )
        names = [f.name for f in dataclasses.fields(Scene)]
        check_keys("Scene.from_dict", "the scene", data, ["format", "version", *names])
        kwargs = {name: decode(data[name], name, 1) for name in names}
        try:
            return Scene(**kwargs)
        except ValueError as exc:
            raise UserError(f"Scene.from_dict: {exc}") from None

    def body(self, path: str) -> BodyInstance:
        """Return the body at ``path`` (KeyError listing the paths if unknown)."""
        for body in self.bodies:
            if body.path == path:
                return body
        raise KeyError(f"no body at {path!r}; bodies: {[b.path for b in self.bodies]}")

    def joint(self, path: str) -> JointInstance:
        """Return the joint at ``path`` (KeyError listing the paths if unknown)."""
        for joint in self.joints:
            if joint.path == path:
                return joint
        raise KeyError(f"no joint at {path!r}; joints: {[j.path for j in self.joints]}")

    def robot(self, path: str) -> RobotInstance:
        """Return the robot at ``path`` (KeyError listing the paths if unknown)."""
        for robot in self.robots:
            if robot.path == path:
                return robot
        raise KeyError(f"no robot at {path!r}; robots: {[r.path for r in self.robots]}")
