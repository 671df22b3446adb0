"""Scene (de)serialisation: the JSON data of ``Scene.to_dict`` / ``Scene.from_dict``.

It knows every class a scene is made of but not the Scene itself, which calls it.

``decode`` treats its input as untrusted: every object must carry exactly its class's keys,
nesting is bounded before recursing, ints are bounded, and the constructors validate the
values; every problem is a ValueError naming where it is (``bodies[2].spec.mass``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from kelab.errors import UserError
from kelab.sim.scene.collision import CollisionFilter
from kelab.sim.scene.fields import short_repr
from kelab.sim.scene.instances import (
    BodyInstance,
    CameraSpec,
    JointInstance,
    RobotInstance,
    SensorSpec,
    SiteInstance,
)
from kelab.sim.scene.items import BodySpec, RobotDescription, Site
from kelab.sim.scene.joints import (
    EffortActuator,
    FixedJoint,
    PDActuator,
    PrismaticJoint,
    RevoluteJoint,
    SpringJoint,
)
from kelab.sim.scene.sensor_config import SensorConfig
from kelab.sim.scene.shapes import Box, Circle, Material, Polygon, Pose, RenderHint, Segment

MAX_DEPTH = 16
"""Deepest nesting ``Scene.from_dict`` reads (a real scene is at most 8 levels deep)."""
_MAX_INT = 2**53  # ints in a scene dict are colours, layers or float-exact numbers


_CLASSES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        Pose, Circle, Box, Polygon, Segment, Material, RenderHint, BodySpec, Site,
        RobotDescription, EffortActuator, PDActuator, RevoluteJoint, PrismaticJoint,
        FixedJoint, SpringJoint, SensorConfig, BodyInstance, JointInstance, SensorSpec,
        SiteInstance, CameraSpec, RobotInstance, CollisionFilter,
    )
}  # fmt: skip

_OMITTED_AT_DEFAULT: dict[type, dict[str, object]] = {
    **{
        cls: {"error_correction": None}
        for cls in (RevoluteJoint, PrismaticJoint, FixedJoint)
    },
    BodySpec: {"collision": CollisionFilter()},
}  # fmt: skip
"""Fields added after scenes were first saved, with their defaults: left out of
``to_dict`` while at that default, so a scene that does not set them keeps the dict and
the fingerprint it had before (saved scenes, snapshots and checkpoints still match), and
accepted missing (the constructor's default)."""


def encode(value: Any) -> Any:
    """Return a scene object (or a field value) as JSON-compatible data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        if _CLASSES.get(cls.__name__) is not cls:
            raise TypeError(f"cannot serialise {cls.__name__} in a scene")
        out: dict[str, Any] = {"type": cls.__name__}
        omitted = _OMITTED_AT_DEFAULT.get(cls, {})
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name in omitted and item == omitted[f.name]:
                continue
            if cls is SensorConfig and isinstance(item, int):
                item = float(item)  # SensorConfig keeps user ints; canonicalise them
            out[f.name] = encode(item)
        return out
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UserError(f"cannot serialise non-finite number {value!r} in a scene")
        return value + 0.0
    if value is None or isinstance(value, (bool, int, str)):
        return value
    raise TypeError(f"cannot serialise {value!r} ({type(value).__name__}) in a scene")


def check_keys(owner: str, where: str, data: dict, keys: list[str]) -> None:
    """Refuse a dict whose keys are not exactly ``keys``, naming the first difference."""
    missing = [k for k in keys if k not in data]
    if missing:
        raise UserError(
            f"{owner}: {where} must have the key {missing[0]!r} (missing: {short_repr(missing)}); "
            "pass the unedited output of Scene.to_dict()"
        )
    extra = [k for k in data if k not in keys]
    if extra:
        raise UserError(
            f"{owner}: {where} has the unknown key {short_repr(extra[0])}; its keys must be "
            f"{keys}, so remove it"
        )


def decode(value: Any, where: str, depth: int) -> Any:
    """Turn JSON data back into scene objects; ``where`` names the place for errors."""
    if depth > MAX_DEPTH:
        raise UserError(
            f"Scene.from_dict: {where} must be nested at most {MAX_DEPTH} levels deep, got "
            "deeper data; this is not the output of Scene.to_dict()"
        )
    if isinstance(value, dict):
        name = value.get("type")
        cls = _CLASSES.get(name) if isinstance(name, str) else None
        if cls is None:
            raise UserError(
                f"Scene.from_dict: {where}: unknown type {short_repr(name)}; type must be one of "
                f"{sorted(_CLASSES)}, so pass the output of Scene.to_dict()"
            )
        omitted = _OMITTED_AT_DEFAULT.get(cls, {})
        names = [
            f.name for f in dataclasses.fields(cls) if f.name not in omitted or f.name in value
        ]
        check_keys("Scene.from_dict", f"{where} ({name})", value, ["type", *names])
        kwargs = {k: decode(value[k], f"{where}.{k}", depth + 1) for k in names}
        try:
            return cls(**kwargs)
        except ValueError as exc:
            raise UserError(f"Scene.from_dict: {where}: {exc}") from None
        except (TypeError, ArithmeticError) as exc:  # defence in depth
            raise UserError(f"Scene.from_dict: {where} ({name}) is invalid: {exc}") from None
    if isinstance(value, (list, tuple)):
        return tuple(decode(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))
    if value is None or isinstance(value, (bool, str, float)):
        return value
    if isinstance(value, int):
        if abs(value) > _MAX_INT:
            raise UserError(
                f"Scene.from_dict: {where} must be an int within ±2**53, got {short_repr(value)}"
            )
        return value
    raise UserError(
        f"Scene.from_dict: {where} must be JSON data (dict, list, str, number, bool or "
        f"None), got a {type(value).__name__}"
    )
