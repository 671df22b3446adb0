"""The App's view controls: follow a body, wheel zoom, drag to pan, reset the view.

A :class:`ViewController` owns no camera: each frame the App hands it the renderer's
camera and the World, and it moves the camera. Mouse-wheel zoom keeps the world point
under the cursor still; a middle-button drag (or Shift + left drag on empty space) pans;
panning or zooming by hand stops following until the view is reset ("home" or "c").
Following tracks the chosen body's interpolated position (what is drawn) with a
critically damped lag, and keeps it inside the middle of the frame whatever its speed.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from kelab.render.camera import Camera
from kelab.render.events import InputEvent

if TYPE_CHECKING:
    from kelab.sim.world import World

__all__ = ["ViewController", "ZOOM_LIMITS", "ZOOM_STEP", "lift_color"]

ZOOM_STEP = 1.15
"""Zoom factor of one wheel notch."""
ZOOM_LIMITS = (2.0, 20000.0)
"""Smallest and largest zoom (pixels per metre) the wheel reaches."""


def lift_color(color: tuple[int, int, int], amount: float = 0.35) -> tuple[int, int, int]:
    """``color`` moved ``amount`` of the way to a pale blue-grey (a backdrop's top row).

    Args:
        color: ``(r, g, b)`` ints.
        amount: 0 keeps it, 1 gives the pale colour.
    """
    pale = (150, 170, 195) if sum(color) < 384 else (205, 220, 238)
    return tuple(  # type: ignore[return-value]
        int(round(c + amount * (p - c))) for c, p in zip(color, pale, strict=True)
    )


class ViewController:
    """Moves an App's camera: follow, wheel zoom, drag-to-pan and reset.

    Args:
        follow: Path of a body to follow (e.g. ``"/World/Robot/torso"``), copy 0; None
            follows nothing.
        follow_axes: ``"x"`` (horizontal only: the ground stays put, the default for
            walkers) or ``"xy"``.
        smoothing_s: Time constant of the follow lag in seconds (0: locked on).
        keep_inside: Fraction of the half-frame the followed body may drift from the
            centre before the camera catches up at once (0..1).
    """

    def __init__(
        self,
        follow: str | None = None,
        follow_axes: str = "x",
        smoothing_s: float = 0.15,
        keep_inside: float = 0.5,
    ) -> None:
        if follow is not None and not isinstance(follow, str):
            raise ValueError(f"follow must be a body path (str) or None, got {follow!r}")
        if follow_axes not in ("x", "xy"):
            raise ValueError(f"follow_axes must be 'x' or 'xy', got {follow_axes!r}")
        if not (math.isfinite(smoothing_s) and smoothing_s >= 0):
            raise ValueError(f"smoothing_s must be a number >= 0, got {smoothing_s!r}")
        if not (0.0 < keep_inside <= 1.0):
            raise ValueError(f"keep_inside must be in (0, 1], got {keep_inside!r}")
        self.follow = follow
        self.follow_axes = follow_axes
        self.smoothing_s = float(smoothing_s)
        self.keep_inside = float(keep_inside)
        self.following = follow is not None
        """Whether the camera follows ``follow`` now (hand pan/zoom turns it off)."""
        self._home: tuple[tuple[float, float], float] | None = None
        self._pan_from: tuple[float, float] | None = None
        self._pan_button: int | None = None
        self._index: int | None = None
        self._index_of: World | None = None  # the World ``_index`` was found in

    # ----------------------------------------------------------------- setup
    def remember_home(self, camera: Camera) -> None:
        """Record the view that :meth:`reset` returns to (the App calls it once)."""
        self._home = (camera.center, camera.zoom)

    def reset(self, camera: Camera) -> None:
        """Back to the starting view, following again if a body is set."""
        if self._home is not None:
            camera.center, camera.zoom = self._home
        self.following = self.follow is not None
        self._pan_from = None

    # ----------------------------------------------------------------- input
    @property
    def panning(self) -> bool:
        """True while a pan drag is in progress."""
        return self._pan_from is not None

    def handle(self, event: InputEvent, camera: Camera, over_body: bool = False) -> bool:
        """Apply one input event to the camera.

        Args:
            event: The event.
            camera: The camera to move.
            over_body: True when the pointer is over a body (Shift + left drag then
                drags the body, not the view).

        Returns:
            True when the event was used (a zoom or a pan), so the App does not also
            treat it as a pick or a click.
        """
        if event.kind == "mouse_wheel" and event.wheel is not None:
            steps = float(event.wheel[1])
            if steps == 0.0:
                return False
            self.zoom_at(camera, ZOOM_STEP**steps, event.pos)
            return True
        if event.kind == "mouse_down" and event.pos is not None:
            shift_left = event.button == 1 and "shift" in event.mods and not over_body
            if event.button == 2 or shift_left:
                self._pan_from = camera.screen_to_world(event.pos)
                self._pan_button = event.button
                return True
            return False
        if event.kind == "mouse_move" and event.pos is not None and self._pan_from is not None:
            here = camera.screen_to_world(event.pos)
            cx, cy = camera.center
            camera.center = (cx + self._pan_from[0] - here[0], cy + self._pan_from[1] - here[1])
            self.following = False
            return True
        if event.kind == "mouse_up" and self._pan_from is not None:
            if event.button == self._pan_button:
                self._pan_from = None
                self._pan_button = None
                return True
        return False

    def zoom_at(self, camera: Camera, factor: float, pos: Sequence[float] | None = None) -> None:
        """Zoom by ``factor`` keeping the world point under screen ``pos`` still.

        Args:
            camera: The camera.
            factor: > 1 zooms in.
            pos: Screen pixel to zoom about (None: the centre).
        """
        old = camera.zoom
        new = float(np.clip(old * factor, *ZOOM_LIMITS))
        if new == old:
            return
        if pos is None:
            camera.zoom = new
            return
        before = camera.screen_to_world(pos)
        camera.zoom = new
        after = camera.screen_to_world(pos)
        cx, cy = camera.center
        camera.center = (cx + before[0] - after[0], cy + before[1] - after[1])
        if self.following and self.follow_axes == "xy":
            self.following = False  # the user aimed at a point: stop re-centring

    # ----------------------------------------------------------------- follow
    def check_follow(self, world: World) -> None:
        """Refuse a ``follow`` that names no body of ``world`` (the App asks when made).

        Raises:
            ValueError: One line with the closest body path and the first bodies.
        """
        names = list(world.body_names)
        if self.follow is None or self.follow in names:
            return
        near = difflib.get_close_matches(str(self.follow), names, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else "; give one of the World's bodies"
        raise ValueError(
            f"follow must name a body of the World, got {self.follow!r}{hint} "
            f"(bodies: {', '.join(names[:8])}{' ...' if len(names) > 8 else ''})"
        )

    def body_position(self, world: World, poses: np.ndarray | None = None) -> tuple[float, float]:
        """World position of the followed body in copy 0 (``poses`` overrides the pose).

        Raises:
            ValueError: When ``follow`` names no body of the World.
        """
        if self._index_of is not world:
            self.check_follow(world)
            self._index = list(world.body_names).index(self.follow)
            self._index_of = world
        p = world.body_poses[0, self._index] if poses is None else poses[0, self._index]
        origin = getattr(world, "env_origins", None)
        ox, oy = (0.0, 0.0) if origin is None else (float(origin[0][0]), float(origin[0][1]))
        return float(p[0]) + ox, float(p[1]) + oy

    def update(
        self,
        camera: Camera,
        world: World,
        dt: float,
        previous: np.ndarray | None = None,
        alpha: float = 1.0,
    ) -> None:
        """Move the camera towards the followed body (call once per drawn frame).

        Args:
            camera: The camera.
            world: The World.
            dt: Wall seconds since the previous frame (the lag's time step).
            previous: Poses one physics step earlier; with ``alpha`` the body's drawn
                (interpolated) position is followed, so it does not judder.
            alpha: Interpolation factor in [0, 1] (1: the current poses).
        """
        if not self.following or self.follow is None or world is None:
            return
        bx, by = self.body_position(world)
        if previous is not None and alpha < 1.0:
            px, py = self.body_position(world, previous)
            bx, by = px + alpha * (bx - px), py + alpha * (by - py)
        cx, cy = camera.center
        tx, ty = bx, (by if self.follow_axes == "xy" else cy)
        k = 1.0 if self.smoothing_s == 0.0 else 1.0 - math.exp(-max(dt, 0.0) / self.smoothing_s)
        nx, ny = cx + k * (tx - cx), cy + k * (ty - cy)
        # never let the body leave the middle of the frame, whatever the lag
        w, h = camera.size
        lim_x = self.keep_inside * 0.5 * w / camera.zoom
        lim_y = self.keep_inside * 0.5 * h / camera.zoom
        nx = min(max(nx, bx - lim_x), bx + lim_x)
        if self.follow_axes == "xy":
            ny = min(max(ny, by - lim_y), by + lim_y)
        camera.center = (nx, ny)
