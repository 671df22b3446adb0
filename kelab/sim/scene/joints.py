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

from kelab._validate import must
from kelab.errors import UserError
from kelab.sim.scene.fields import (
    Vec2,
    field_number,
    field_positive,
    field_vec2,
    set_field,
    short_repr,
)
from kelab.sim.scene.shapes import ANGLE_MAX, COORD_MAX, EFFORT_MAX, LENGTH_MAX

WORLD = "world"
"""The special parent name: the static ground frame of an environment copy."""


@dataclass(frozen=True)
class EffortActuator:
    """Applies the commanded force (prismatic) or torque (revolute), clipped to ``±limit``.

    Attributes:
        limit: Largest magnitude of effort in N (prismatic) or N·m (revolute), in
            (0, EFFORT_MAX] (1e9).
    """

    limit: float

    def __post_init__(self) -> None:
        set_field(
            self, "limit", field_positive("EffortActuator", "limit", self.limit, hi=EFFORT_MAX)
        )


@dataclass(frozen=True)
class PDActuator:
    """Tracks a position target: ``effort = kp*(target - pos) + kd*(0 - vel)``, clipped.

    Attributes:
        kp: Stiffness in N/m or N·m/rad, in [0, EFFORT_MAX].
        kd: Damping in N·s/m or N·m·s/rad, in [0, EFFORT_MAX].
        limit: Largest magnitude of effort in N or N·m, in (0, EFFORT_MAX].
    """

    kp: float
    kd: float
    limit: float

    def __post_init__(self) -> None:
        for attr in ("kp", "kd"):
            value = getattr(self, attr)
            set_field(
                self,
                attr,
                field_positive("PDActuator", attr, value, allow_zero=True, hi=EFFORT_MAX),
            )
        set_field(self, "limit", field_positive("PDActuator", "limit", self.limit, hi=EFFORT_MAX))


Actuator = EffortActuator | PDActuator


def _check_names(owner: str, joint: object) -> None:
    for attr in ("name", "parent", "child"):
        value = getattr(joint, attr)
        if not isinstance(value, str) or not value.strip() or "/" in value:
            raise UserError(
                f"{owner}.{attr} must be a non-empty string without '/', got {short_repr(value)}"
            )
    if joint.child == WORLD:  # type: ignore[attr-defined]
        raise UserError(
            f"{owner} {joint.name!r}: child must be a body of the robot, not {WORLD!r}; "  # type: ignore[attr-defined]
            f"put {WORLD!r} in parent instead"
        )
    if joint.parent == joint.child:  # type: ignore[attr-defined]
        raise UserError(
            f"{owner} {joint.name!r}: parent and child are both {joint.child!r}; "  # type: ignore[attr-defined]
            "a joint connects two different bodies"
        )


def _check_limits(
    owner: str, name: str, limits: object, bound: float
) -> tuple[float, float] | None:
    if limits is None:
        return None
    lo, hi = field_vec2(owner, "limits", limits, limit=bound)
    if not lo < hi:
        raise UserError(
            f"{owner} {name!r}: limits must be (lo, hi) with lo < hi, got {short_repr(limits)}; "
            "use None for an unlimited joint"
        )
    return (lo, hi)


def _check_actuator(owner: str, name: str, actuator: object) -> None:
    if actuator is not None and not isinstance(actuator, (EffortActuator, PDActuator)):
        raise UserError(
            f"{owner} {name!r}: actuator must be None, EffortActuator or PDActuator, "
            f"got {short_repr(actuator)}"
        )


DEFAULT_ERROR_CORRECTION = 0.1
"""Chipmunk's own rate: a tenth of a joint's position error corrected every 1/60 s."""

MIN_ERROR_CORRECTION = 1e-6
"""The least ``error_correction``: below ~1e-16 Chipmunk's bias ``(1 - c) ** 60`` rounds to
1.0, which corrects nothing at all."""


def _check_error_correction(owner: str, name: str, value: object) -> float | None:
    if value is None:
        return None
    fix = (
        f"use None for Chipmunk's {DEFAULT_ERROR_CORRECTION:g}, 0.2-0.4 for joints that come "
        "apart under large torques"
    )
    try:
        number = field_number(owner, "error_correction", value, fix)
    except ValueError as exc:
        raise UserError(f"{owner} {name!r}: {exc}") from None
    if not MIN_ERROR_CORRECTION <= number <= 1.0:
        allowed = (
            f"None or a number in [{MIN_ERROR_CORRECTION:g}, 1] (the fraction of the joint's "
            "drift corrected every 1/60 s)"
        )
        raise UserError(
            f"{owner} {name!r}: " + must(f"{owner}.error_correction", allowed, value, fix)
        )
    return number


@dataclass(frozen=True)
class RevoluteJoint:
    """A pin: child rotates about ``anchor``. Position = relative angle minus its initial value.

    Attributes:
        name: Joint name, unique within the robot.
        parent: Parent body name, or ``"world"``.
        child: Child body name.
        anchor: Pivot point in the parent frame at the initial configuration, metres
            (within ±COORD_MAX).
        limits: ``(lo, hi)`` in radians relative to the initial configuration (within
            ±ANGLE_MAX), or None.
        actuator: EffortActuator, PDActuator, or None for a passive joint.
        error_correction: The fraction of the joint's position error (its anchors or
            limits drifting apart, as an iterative solver lets them under large forces)
            corrected every 1/60 s, in [1e-6, 1]; None is Chipmunk's 0.1. 0.2-0.4 holds
            light links against large torques (kelab/robot/biped:v2 uses 0.3); values
            near 1 can jitter.
    """

    name: str
    parent: str
    child: str
    anchor: Vec2 = (0.0, 0.0)
    limits: tuple[float, float] | None = None
    actuator: Actuator | None = None
    error_correction: float | None = None

    def __post_init__(self) -> None:
        _check_names("RevoluteJoint", self)
        set_field(
            self, "anchor", field_vec2("RevoluteJoint", "anchor", self.anchor, limit=COORD_MAX)
        )
        set_field(self, "limits", _check_limits("RevoluteJoint", self.name, self.limits, ANGLE_MAX))
        _check_actuator("RevoluteJoint", self.name, self.actuator)
        value = _check_error_correction("RevoluteJoint", self.name, self.error_correction)
        set_field(self, "error_correction", value)


@dataclass(frozen=True)
class PrismaticJoint:
    """A slider: child translates along ``axis`` through ``anchor``, without rotating.

    Position = displacement along ``axis`` from the initial configuration.

    Attributes:
        name: Joint name, unique within the robot.
        parent: Parent body name, or ``"world"``.
        child: Child body name.
        anchor: A point of the slide line in the parent frame; it coincides with the child's
            origin at the initial configuration (position 0), metres (within ±COORD_MAX).
        axis: Slide direction in the parent frame; normalised to unit length on creation.
        limits: ``(lo, hi)`` in metres along ``axis`` from the initial position (within
            ±COORD_MAX), or None.
        actuator: EffortActuator, PDActuator, or None for a passive joint.
        error_correction: The fraction of the joint's position error (its slide line
            or travel limits drifting apart, as an iterative solver lets them under large forces)
            corrected every 1/60 s, in [1e-6, 1]; None is Chipmunk's 0.1. 0.2-0.4 holds
            light links against large torques (kelab/robot/biped:v2 uses 0.3); values
            near 1 can jitter.
    """

    name: str
    parent: str
    child: str
    anchor: Vec2 = (0.0, 0.0)
    axis: Vec2 = (1.0, 0.0)
    limits: tuple[float, float] | None = None
    actuator: Actuator | None = None
    error_correction: float | None = None

    def __post_init__(self) -> None:
        _check_names("PrismaticJoint", self)
        set_field(
            self, "anchor", field_vec2("PrismaticJoint", "anchor", self.anchor, limit=COORD_MAX)
        )
        ax, ay = field_vec2("PrismaticJoint", "axis", self.axis, limit=COORD_MAX)
        norm = math.hypot(ax, ay)
        if norm < 1e-9:
            raise UserError(
                f"PrismaticJoint {self.name!r}: axis must be a non-zero direction, got "
                f"{short_repr(self.axis)}; e.g. (1.0, 0.0) for horizontal sliding"
            )
        set_field(self, "axis", (ax / norm + 0.0, ay / norm + 0.0))
        set_field(
            self, "limits", _check_limits("PrismaticJoint", self.name, self.limits, COORD_MAX)
        )
        _check_actuator("PrismaticJoint", self.name, self.actuator)
        value = _check_error_correction("PrismaticJoint", self.name, self.error_correction)
        set_field(self, "error_correction", value)


@dataclass(frozen=True)
class FixedJoint:
    """Welds child to parent in their initial relative pose. Has no degree of freedom.

    Attributes:
        name: Joint name, unique within the robot.
        parent: Parent body name, or ``"world"``.
        child: Child body name.
        error_correction: The fraction of the joint's position error (the two bodies
            drifting apart or turning, as an iterative solver lets them under large forces)
            corrected every 1/60 s, in [1e-6, 1]; None is Chipmunk's 0.1. 0.2-0.4 holds
            light links against large torques (kelab/robot/biped:v2 uses 0.3); values
            near 1 can jitter.
    """

    name: str
    parent: str
    child: str
    error_correction: float | None = None

    def __post_init__(self) -> None:
        _check_names("FixedJoint", self)
        value = _check_error_correction("FixedJoint", self.name, self.error_correction)
        set_field(self, "error_correction", value)


@dataclass(frozen=True)
class SpringJoint:
    """A damped spring between two anchor points. Not a degree of freedom, but measured.

    Its position is the current length minus ``rest_length``.

    Attributes:
        name: Joint name, unique within the robot.
        parent: Parent body name, or ``"world"``.
        child: Child body name.
        anchor_parent: Attachment point in the parent frame, metres (within ±COORD_MAX).
        anchor_child: Attachment point in the child frame, metres (within ±COORD_MAX).
        rest_length: Length with no spring force, metres, in [0, LENGTH_MAX].
        stiffness: N/m, in [0, EFFORT_MAX].
        damping: N·s/m, in [0, EFFORT_MAX].
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
        for attr in ("anchor_parent", "anchor_child"):
            set_field(
                self, attr, field_vec2("SpringJoint", attr, getattr(self, attr), limit=COORD_MAX)
            )
        for attr, hi in (
            ("rest_length", LENGTH_MAX),
            ("stiffness", EFFORT_MAX),
            ("damping", EFFORT_MAX),
        ):
            value = getattr(self, attr)
            set_field(
                self, attr, field_positive("SpringJoint", attr, value, allow_zero=True, hi=hi)
            )


Joint = RevoluteJoint | PrismaticJoint | FixedJoint | SpringJoint
JOINT_TYPES = (RevoluteJoint, PrismaticJoint, FixedJoint, SpringJoint)
