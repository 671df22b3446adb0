"""Joints and actuators of a robot description. Re-exported by :mod:`kelab.sim.scene`.

Every joint names a ``parent`` and a ``child`` body of the same robot; ``parent`` may be
the special name ``"world"``, the static ground frame of one environment copy. Anchors
and axes are given in the parent's frame at the initial configuration (for ``"world"``:
in the robot's root frame inside a description, in the copy's ground frame once a scene
flattens it, see ``Scene.joints``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kelab.sim.shapes import Vec2, _positive, _set, _vec2

WORLD = "world"
"""The special parent name: the static ground frame of an environment copy."""


@dataclass(frozen=True)
class EffortActuator:
    """Applies the commanded force (prismatic) or torque (revolute), clipped to ``±limit``.

    Attributes:
        limit: Largest magnitude of effort in N (prismatic) or N·m (revolute), > 0.
    """

    limit: float

    def __post_init__(self) -> None:
        _set(self, "limit", _positive("EffortActuator", "limit", self.limit))


@dataclass(frozen=True)
class PDActuator:
    """Tracks a position target: ``effort = kp*(target - pos) + kd*(0 - vel)``, clipped.

    Attributes:
        kp: Stiffness in N/m or N·m/rad, >= 0.
        kd: Damping in N·s/m or N·m·s/rad, >= 0.
        limit: Largest magnitude of effort in N or N·m, > 0.
    """

    kp: float
    kd: float
    limit: float

    def __post_init__(self) -> None:
        _set(self, "kp", _positive("PDActuator", "kp", self.kp, allow_zero=True))
        _set(self, "kd", _positive("PDActuator", "kd", self.kd, allow_zero=True))
        _set(self, "limit", _positive("PDActuator", "limit", self.limit))


Actuator = EffortActuator | PDActuator


def _check_names(owner: str, joint: object) -> None:
    for attr in ("name", "parent", "child"):
        value = getattr(joint, attr)
        if not isinstance(value, str) or not value.strip() or "/" in value:
            raise ValueError(
                f"{owner}.{attr} must be a non-empty string without '/', got {value!r}"
            )
    if joint.child == WORLD:  # type: ignore[attr-defined]
        raise ValueError(
            f"{owner} {joint.name!r}: child must be a body of the robot, not {WORLD!r}; "  # type: ignore[attr-defined]
            f"put {WORLD!r} in parent instead"
        )
    if joint.parent == joint.child:  # type: ignore[attr-defined]
        raise ValueError(
            f"{owner} {joint.name!r}: parent and child are both {joint.child!r}; "  # type: ignore[attr-defined]
            "a joint connects two different bodies"
        )


def _check_limits(owner: str, name: str, limits: object) -> tuple[float, float] | None:
    if limits is None:
        return None
    lo, hi = _vec2(owner, "limits", limits)
    if not lo < hi:
        raise ValueError(
            f"{owner} {name!r}: limits must be (lo, hi) with lo < hi, got {limits!r}; "
            "use None for an unlimited joint"
        )
    return (lo, hi)


def _check_actuator(owner: str, name: str, actuator: object) -> None:
    if actuator is not None and not isinstance(actuator, (EffortActuator, PDActuator)):
        raise ValueError(
            f"{owner} {name!r}: actuator must be None, EffortActuator or PDActuator, "
            f"got {actuator!r}"
        )


@dataclass(frozen=True)
class RevoluteJoint:
    """A pin: child rotates about ``anchor``. Position = relative angle minus its initial value.

    Attributes:
        name: Joint name, unique within the robot.
        parent: Parent body name, or ``"world"``.
        child: Child body name.
        anchor: Pivot point in the parent frame at the initial configuration, metres.
        limits: ``(lo, hi)`` in radians relative to the initial configuration, or None.
        actuator: EffortActuator, PDActuator, or None for a passive joint.
    """

    name: str
    parent: str
    child: str
    anchor: Vec2 = (0.0, 0.0)
    limits: tuple[float, float] | None = None
    actuator: Actuator | None = None

    def __post_init__(self) -> None:
        _check_names("RevoluteJoint", self)
        _set(self, "anchor", _vec2("RevoluteJoint", "anchor", self.anchor))
        _set(self, "limits", _check_limits("RevoluteJoint", self.name, self.limits))
        _check_actuator("RevoluteJoint", self.name, self.actuator)


@dataclass(frozen=True)
class PrismaticJoint:
    """A slider: child translates along ``axis`` through ``anchor``, without rotating.

    Position = displacement along ``axis`` from the initial configuration.

    Attributes:
        name: Joint name, unique within the robot.
        parent: Parent body name, or ``"world"``.
        child: Child body name.
        anchor: A point of the slide line in the parent frame; it coincides with the child's
            origin at the initial configuration (position 0), metres.
        axis: Slide direction in the parent frame; normalised to unit length on creation.
        limits: ``(lo, hi)`` in metres along ``axis`` from the initial position, or None.
        actuator: EffortActuator, PDActuator, or None for a passive joint.
    """

    name: str
    parent: str
    child: str
    anchor: Vec2 = (0.0, 0.0)
    axis: Vec2 = (1.0, 0.0)
    limits: tuple[float, float] | None = None
    actuator: Actuator | None = None

    def __post_init__(self) -> None:
        _check_names("PrismaticJoint", self)
        _set(self, "anchor", _vec2("PrismaticJoint", "anchor", self.anchor))
        ax, ay = _vec2("PrismaticJoint", "axis", self.axis)
        norm = math.hypot(ax, ay)
        if norm < 1e-9:
            raise ValueError(
                f"PrismaticJoint {self.name!r}: axis must be a non-zero direction, got "
                f"{self.axis!r}; e.g. (1.0, 0.0) for horizontal sliding"
            )
        _set(self, "axis", (ax / norm + 0.0, ay / norm + 0.0))
        _set(self, "limits", _check_limits("PrismaticJoint", self.name, self.limits))
        _check_actuator("PrismaticJoint", self.name, self.actuator)


@dataclass(frozen=True)
class FixedJoint:
    """Welds child to parent in their initial relative pose. Has no degree of freedom.

    Attributes:
        name: Joint name, unique within the robot.
        parent: Parent body name, or ``"world"``.
        child: Child body name.
    """

    name: str
    parent: str
    child: str

    def __post_init__(self) -> None:
        _check_names("FixedJoint", self)


@dataclass(frozen=True)
class SpringJoint:
    """A damped spring between two anchor points. Not a degree of freedom, but measured.

    Its position is the current length minus ``rest_length``.

    Attributes:
        name: Joint name, unique within the robot.
        parent: Parent body name, or ``"world"``.
        child: Child body name.
        anchor_parent: Attachment point in the parent frame, metres.
        anchor_child: Attachment point in the child frame, metres.
        rest_length: Length with no spring force, metres, >= 0.
        stiffness: N/m, >= 0.
        damping: N·s/m, >= 0.
    """

    name: str
    parent: str
    child: str
    anchor_parent: Vec2 = (0.0, 0.0)
    anchor_child: Vec2 = (0.0, 0.0)
    rest_length: float = 0.0
    stiffness: float = 0.0
    damping: float = 0.0

    def __post_init__(self) -> None:
        _check_names("SpringJoint", self)
        _set(self, "anchor_parent", _vec2("SpringJoint", "anchor_parent", self.anchor_parent))
        _set(self, "anchor_child", _vec2("SpringJoint", "anchor_child", self.anchor_child))
        for attr in ("rest_length", "stiffness", "damping"):
            _set(self, attr, _positive("SpringJoint", attr, getattr(self, attr), allow_zero=True))


Joint = RevoluteJoint | PrismaticJoint | FixedJoint | SpringJoint
JOINT_TYPES = (RevoluteJoint, PrismaticJoint, FixedJoint, SpringJoint)
