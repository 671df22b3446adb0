"""Sensor kinds, in one place: what each reports, its parameters and its ideal value.

A sensor of a scene (``SensorSpec``) names its kind; :data:`SENSOR_KINDS` says, per
kind, how many values it reports per copy, whether it targets a body or a joint, which
parameters it takes (checked here when a SensorSpec is made) and how its ideal (true,
noise-free) value is computed from a step's body states (the World's sensor suite calls
:attr:`SensorKind.ideal`; the pipelines add rate, delay, filter and noise after it).

Adding a kind is one entry in :data:`SENSOR_KINDS` (plus, for convenience, a
``SceneBuilder`` method that calls ``SceneBuilder.add_sensor``); see docs/scene.md,
"Sensors". A kind whose reading is not its held values (the camera: it holds every
body's pose and draws them when read) names its reading's class, ``"module:Class"``,
which the World imports when it builds the sensor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kelab._validate import is_int, must
from kelab.errors import UserError
from kelab.sim.scene.fields import field_number, field_positive, field_tuple, short_repr
from kelab.sim.scene.sensor_config import SensorConfig
from kelab.sim.scene.shapes import ANGLE_MAX, LENGTH_MAX, LENGTH_MIN, field_pose

__all__ = [
    "CAMERA_FOLLOW",
    "CAMERA_SIZE_MAX",
    "CAMERA_SIZE_MIN",
    "SENSOR_KINDS",
    "WORLD_FRAME",
    "ZOOM_MAX",
    "ZOOM_MIN",
    "SensorInputs",
    "SensorKind",
    "check_params",
]

ZOOM_MIN, ZOOM_MAX = 1e-3, 1e6
"""Range of a view's zoom in pixels per metre (``CameraSpec.zoom``, a camera sensor's)."""
ZOOM_FIX = (
    "zoom is pixels per metre: e.g. the image's width in pixels over the metres it should see"
)
"""What a zoom out of :data:`ZOOM_MIN`..:data:`ZOOM_MAX` is told to do."""
CAMERA_SIZE_MIN, CAMERA_SIZE_MAX = 4, 1024
"""Range of a camera sensor's image width and height in pixels."""
WORLD_FRAME = "/"
"""A ``"frame"`` target naming the copy's own frame: a camera fixed to the world."""
CAMERA_FOLLOW = ("pose", "position")
"""How a camera on a body follows it: its position and angle, or its position only."""


class SensorInputs(Protocol):
    """What an ideal-value function reads: one step's (or the present) body states.

    Attributes:
        ids: The copies, ``(n,)`` ints.
        raw: Their body states ``(n, num_bodies, 6)``: x, y, angle, vx, vy, angular
            velocity, in each copy's frame.
        after_step: True right after a physics step of ``dt``; False for the present
            state as if it had been held (no acceleration, no contact force).
        dt: The step, seconds (None when not ``after_step``).
        gravity: ``(2,)`` m/s², or ``(n, 2)`` (a row per copy of ``ids``) once some copy
            has its own (``World.set_gravity``).
        v_prev: Body velocities ``(num_envs, num_bodies, 2)`` after the previous step.
    """

    ids: np.ndarray
    raw: np.ndarray
    after_step: bool
    dt: float | None
    gravity: np.ndarray
    v_prev: np.ndarray

    def joint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Joint positions and velocities ``(n, num_joints)`` each (computed once)."""
        ...

    def contacts(self) -> np.ndarray:
        """The step's contact force sums ``(num_envs, num_bodies, 2)``."""
        ...

    def segment_first(
        self, body: int, starts: np.ndarray, ends: np.ndarray, ids: np.ndarray
    ) -> np.ndarray:
        """Per copy, how far along ``starts -> ends`` the first hit is (0..1; NaN: none).

        The shapes of ``body``'s robot (or of that body alone) are not hit; the World's
        layout casts the rays.
        """
        ...


Ideal = Callable[[SensorInputs, int, Mapping[str, Any]], np.ndarray]
"""``ideal(inputs, target, params) -> (n, width)``: ``target`` is the body index (the
joint index for a joint sensor), ``params`` the sensor's checked parameters."""


@dataclass(frozen=True)
class SensorKind:
    """One sensor kind.

    Attributes:
        width: Values it reports per copy.
        values: What they are, in order (docs and messages).
        target: ``"body"`` or ``"joint"``: what ``SensorSpec.target`` names;
            ``"frame"``: a body path, or ``"/"`` for the copy's own frame (fixed to the
            world).
        ideal: Its noise-free value (see :data:`Ideal`).
        params: Its parameters' checks by name, ``check(owner, name, value) -> value``;
            a sensor of this kind must give exactly these keys.
        per_body: ``width`` values for each body of the scene (the camera's poses).
        reading: ``"module:Class"`` of what turns the held values into the reading
            (``Class(scene, body_paths, spec, num_envs)``, called with the held values
            ``(num_envs, k)``); None: the held values are the reading.
        refuses: ``SensorConfig`` fields this kind does not take (left at their defaults).
    """

    width: int
    values: str
    target: str
    ideal: Ideal
    params: Mapping[str, Callable[[str, str, object], Any]] = field(default_factory=dict)
    per_body: bool = False
    reading: str | None = None
    refuses: tuple[str, ...] = ()

    def held_width(self, num_bodies: int) -> int:
        """Values a sensor of this kind holds per copy in a scene of ``num_bodies`` bodies."""
        return self.width * num_bodies if self.per_body else self.width

    def check_config(self, name: str, kind: str, config: SensorConfig) -> None:
        """Refuse a ``SensorConfig`` that sets a field this kind does not take.

        Raises:
            UserError: Naming the sensor, the field and its value.
        """
        defaults = SensorConfig()
        for key in self.refuses:
            value = getattr(config, key)
            if value != getattr(defaults, key):
                raise UserError(
                    f"sensor {name!r}: a {kind} sensor takes no SensorConfig.{key}, got "
                    f"{short_repr(value)}; leave it at {getattr(defaults, key)!r} "
                    '(docs/sensors.md, "Cameras")'
                )


def _imu(inputs: SensorInputs, b: int, params: Mapping[str, Any]) -> np.ndarray:
    raw = inputs.raw
    a = raw[:, b, 2]
    if inputs.after_step:
        assert inputs.dt is not None
        acc = (raw[:, b, 3:5] - inputs.v_prev[inputs.ids, b]) / inputs.dt - inputs.gravity
    else:
        acc = np.broadcast_to(-inputs.gravity, (inputs.ids.size, 2))
    ca, sa = np.cos(a), np.sin(a)
    return np.stack(
        [
            raw[:, b, 5],
            ca * acc[:, 0] + sa * acc[:, 1],
            -sa * acc[:, 0] + ca * acc[:, 1],
            a,
        ],
        axis=1,
    )


def _joint(inputs: SensorInputs, k: int, params: Mapping[str, Any]) -> np.ndarray:
    pos, vel = inputs.joint_state()
    return np.stack([pos[:, k], vel[:, k]], axis=1)


def _contact(inputs: SensorInputs, b: int, params: Mapping[str, Any]) -> np.ndarray:
    if inputs.after_step:
        return inputs.contacts()[inputs.ids, b, :]
    return np.zeros((inputs.ids.size, 2))


def _pose(inputs: SensorInputs, b: int, params: Mapping[str, Any]) -> np.ndarray:
    return inputs.raw[:, b, 0:3]


def _rangefinder(inputs: SensorInputs, b: int, params: Mapping[str, Any]) -> np.ndarray:
    """Ray casts, one ``segment_query_first`` per copy (pymunk has no batched query)."""
    raw = inputs.raw
    offset = params["offset"]
    max_range = float(params["max_range"])
    ang = float(params["angle"])
    a = raw[:, b, 2]
    ca, sa = np.cos(a), np.sin(a)
    sx = raw[:, b, 0] + ca * offset.x - sa * offset.y
    sy = raw[:, b, 1] + sa * offset.x + ca * offset.y
    d = a + offset.angle + ang
    ex = sx + max_range * np.cos(d)
    ey = sy + max_range * np.sin(d)
    alpha = inputs.segment_first(
        b, np.stack([sx, sy], axis=1), np.stack([ex, ey], axis=1), inputs.ids
    )
    return np.where(np.isnan(alpha), max_range, alpha * max_range)[:, None]


def _camera(inputs: SensorInputs, b: int, params: Mapping[str, Any]) -> np.ndarray:
    """Every body's x, y, angle: held (sampled, delayed), then drawn when read."""
    raw = inputs.raw
    return raw[:, :, 0:3].reshape(raw.shape[0], raw.shape[1] * 3)


def _size(owner: str, name: str, value: object) -> tuple[int, int]:
    lo, hi = CAMERA_SIZE_MIN, CAMERA_SIZE_MAX
    ok = isinstance(value, (tuple, list)) and len(value) == 2
    if not ok or not all(is_int(v) and lo <= v <= hi for v in value):  # type: ignore[union-attr]
        raise UserError(
            must(
                f"{owner}.{name}",
                f"(width, height), two ints in [{lo}, {hi}] pixels",
                value,
                "e.g. size=(64, 64)",
            )
        )
    return (int(value[0]), int(value[1]))  # type: ignore[index]


def _channels(owner: str, name: str, value: object) -> int:
    if not is_int(value) or value not in (1, 3):
        raise UserError(
            must(f"{owner}.{name}", "1 (grayscale) or 3 (RGB)", value, "e.g. channels=3")
        )
    return int(value)  # type: ignore[call-overload]


def _color(owner: str, name: str, value: object) -> tuple[int, int, int]:
    ok = isinstance(value, (tuple, list)) and len(value) == 3
    if not ok or not all(is_int(c) and 0 <= c <= 255 for c in value):  # type: ignore[union-attr]
        raise UserError(must(f"{owner}.{name}", "three ints (r, g, b) in 0..255", value))
    return (int(value[0]), int(value[1]), int(value[2]))  # type: ignore[index]


def _follow(owner: str, name: str, value: object) -> str:
    if value not in CAMERA_FOLLOW:
        raise UserError(must(f"{owner}.{name}", f"one of {list(CAMERA_FOLLOW)}", value))
    return str(value)


SENSOR_KINDS: dict[str, SensorKind] = {
    "imu": SensorKind(4, "angular velocity, ax, ay (body frame), angle", "body", _imu),
    "joint": SensorKind(2, "position, velocity", "joint", _joint),
    "contact": SensorKind(2, "fx, fy (summed contact force)", "body", _contact),
    "rangefinder": SensorKind(
        1,
        "distance along the ray, max_range when it hits nothing",
        "body",
        _rangefinder,
        {
            "angle": lambda owner, name, v: field_number(owner, name, v, limit=ANGLE_MAX),
            "max_range": lambda owner, name, v: field_positive(
                owner, name, v, lo=LENGTH_MIN, hi=LENGTH_MAX
            ),
            "offset": field_pose,
        },
    ),
    "pose": SensorKind(3, "x, y, angle (copy frame)", "body", _pose),
    "camera": SensorKind(
        3,
        "an image (height, width, channels) uint8, drawn from every body's held x, y, angle",
        "frame",
        _camera,
        {
            "size": _size,
            "channels": _channels,
            "zoom": lambda owner, name, v: field_positive(
                owner, name, v, lo=ZOOM_MIN, hi=ZOOM_MAX, unit=" px/m", fix=ZOOM_FIX
            ),
            "offset": field_pose,
            "follow": _follow,
            "background": _color,
        },
        per_body=True,
        reading="kelab.sim.camera:CameraView",
        refuses=("cutoff_hz", "noise"),
    ),
}
"""Every sensor kind by name, in the order the docs list them."""


def check_params(name: str, kind: str, params: object) -> tuple[tuple[str, Any], ...]:
    """Check a sensor's ``(key, value)`` pairs against its kind's parameters.

    Args:
        name: The sensor's name, for messages.
        kind: A key of :data:`SENSOR_KINDS` (already checked).
        params: A tuple of ``(key, value)`` pairs.

    Returns:
        The checked pairs, in the kind's parameter order.

    Raises:
        ValueError: On a pair that is not ``(str, value)``, missing or extra keys, or a
            bad value.
    """
    owner = f"sensor {name!r}"
    pairs = field_tuple(owner, "params", params, (tuple, list))
    for i, pair in enumerate(pairs):
        if len(pair) != 2 or not isinstance(pair[0], str):
            raise ValueError(
                f"{owner}: params[{i}] must be a (key, value) pair with a str key, got "
                f"{short_repr(pair)}"
            )
    keys = tuple(k for k, _ in pairs)
    checks = dict(SENSOR_KINDS[kind].params)
    want = tuple(sorted(checks))
    if tuple(sorted(keys)) != want or len(set(keys)) != len(keys):
        raise ValueError(
            f"{owner}: a {kind} sensor's params must have the keys {list(want)}, got "
            f"{short_repr(list(keys))}; add sensors with the SceneBuilder methods"
        )
    values = dict(pairs)
    return tuple((key, check(owner, key, values[key])) for key, check in checks.items())
