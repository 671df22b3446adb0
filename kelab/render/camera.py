"""Camera: the mapping between world metres (+Y up) and screen pixels (+Y down).

This is the only place in KELab where the Y axis is flipped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kelab._validate import check_positive, must

if TYPE_CHECKING:
    from kelab.sim.scene import CameraSpec

__all__ = ["Camera", "check_size"]


def check_size(size: Sequence[int]) -> tuple[int, int]:
    """Return a frame size as ``(width, height)`` positive ints (Camera's and renderers').

    Args:
        size: ``(width, height)`` in pixels; integral floats and numpy ints are accepted.

    Returns:
        The size as plain ints.

    Raises:
        ValueError: If it is not two positive whole numbers.
    """
    try:
        w, h = (int(v) for v in size)
        ok = all(float(v) == int(v) for v in size)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok or w <= 0 or h <= 0:
        raise ValueError(must("Camera size", "(width, height) positive integers in pixels", size))
    return w, h


class Camera:
    """A 2D view of the world: centre in metres, zoom in pixels per metre, size in pixels.

    World axes are +X right, +Y up; screen pixels are +X right, +Y down with (0, 0) at
    the top-left corner of the top-left pixel. The camera centre maps to the screen
    centre ``(width / 2, height / 2)``. The camera is mutable (the App pans and zooms it);
    every assignment is validated.

    Args:
        center: World point (metres) shown at the centre of the screen.
        zoom: Pixels per metre, > 0.
        size: Screen size ``(width, height)`` in pixels.

    Example:
        >>> cam = Camera(center=(1.0, 0.0), zoom=100.0, size=(600, 400))
        >>> cam.world_to_screen((1.0, 0.5))
        (300.0, 150.0)
        >>> cam.screen_to_world((300.0, 150.0))
        (1.0, 0.5)
    """

    def __init__(
        self,
        center: Sequence[float] = (0.0, 0.0),
        zoom: float = 100.0,
        size: Sequence[int] = (800, 600),
    ) -> None:
        self.center = center  # type: ignore[assignment]
        self.zoom = zoom
        self.size = size  # type: ignore[assignment]

    @classmethod
    def from_spec(cls, spec: CameraSpec, size: Sequence[int]) -> Camera:
        """Build a camera from a scene camera description (anything with center and zoom).

        Args:
            spec: An object with ``center`` (x, y) and ``zoom`` attributes, e.g. one of
                ``scene.cameras``.
            size: Screen size ``(width, height)`` in pixels.

        Returns:
            A new camera.
        """
        return cls(center=tuple(spec.center), zoom=float(spec.zoom), size=size)

    # -- validated properties ------------------------------------------------------------
    @property
    def center(self) -> tuple[float, float]:
        """World point (metres) at the screen centre."""
        return self._center

    @center.setter
    def center(self, value: Sequence[float]) -> None:
        try:
            x, y = (float(v) for v in value)
        except (TypeError, ValueError):
            x = y = math.nan
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ValueError(must("Camera center", "a finite (x, y) pair in metres", value))
        self._center = (x, y)

    @property
    def zoom(self) -> float:
        """Pixels per metre (> 0)."""
        return self._zoom

    @zoom.setter
    def zoom(self, value: float) -> None:
        self._zoom = check_positive(value, "Camera zoom", unit="pixels per metre")

    @property
    def size(self) -> tuple[int, int]:
        """Screen size ``(width, height)`` in pixels."""
        return self._size

    @size.setter
    def size(self, value: Sequence[int]) -> None:
        self._size = check_size(value)

    # -- mapping -------------------------------------------------------------------------
    def world_to_screen(self, point: Sequence[float]) -> tuple[float, float]:
        """Map one world point (metres) to screen pixels.

        Args:
            point: ``(x, y)`` in metres.

        Returns:
            ``(sx, sy)`` in pixels (floats; +Y down).
        """
        w, h = self._size
        return (
            w * 0.5 + (float(point[0]) - self._center[0]) * self._zoom,
            h * 0.5 - (float(point[1]) - self._center[1]) * self._zoom,
        )

    def screen_to_world(self, point: Sequence[float]) -> tuple[float, float]:
        """Map one screen pixel position to the world (the inverse of world_to_screen).

        Args:
            point: ``(sx, sy)`` in pixels, e.g. a mouse position.

        Returns:
            ``(x, y)`` in metres.
        """
        w, h = self._size
        return (
            self._center[0] + (float(point[0]) - w * 0.5) / self._zoom,
            self._center[1] - (float(point[1]) - h * 0.5) / self._zoom,
        )

    def world_to_screen_batch(self, points: np.ndarray) -> np.ndarray:
        """Map many world points to screen pixels at once.

        Args:
            points: Array of shape ``(..., 2)`` in metres.

        Returns:
            float64 array of the same shape in pixels.
        """
        p = _points(points)
        w, h = self._size
        out = np.empty_like(p)
        out[..., 0] = (p[..., 0] - self._center[0]) * self._zoom + w * 0.5
        out[..., 1] = (self._center[1] - p[..., 1]) * self._zoom + h * 0.5
        return out

    def screen_to_world_batch(self, points: np.ndarray) -> np.ndarray:
        """Map many screen pixel positions to world points at once.

        Args:
            points: Array of shape ``(..., 2)`` in pixels.

        Returns:
            float64 array of the same shape in metres.
        """
        p = _points(points)
        w, h = self._size
        out = np.empty_like(p)
        out[..., 0] = self._center[0] + (p[..., 0] - w * 0.5) / self._zoom
        out[..., 1] = self._center[1] - (p[..., 1] - h * 0.5) / self._zoom
        return out

    def visible_world_rect(self) -> tuple[float, float, float, float]:
        """The world rectangle on screen.

        Returns:
            ``(x_min, y_min, x_max, y_max)`` in metres.
        """
        w, h = self._size
        hw, hh = w * 0.5 / self._zoom, h * 0.5 / self._zoom
        cx, cy = self._center
        return (cx - hw, cy - hh, cx + hw, cy + hh)

    def __repr__(self) -> str:
        return f"Camera(center={self._center!r}, zoom={self._zoom!r}, size={self._size!r})"


def _points(points: npt.ArrayLike) -> np.ndarray:
    """``points`` as float64 ``(..., 2)``; the one shape check of the batch mappings."""
    p = np.asarray(points, dtype=np.float64)
    if p.shape[-1:] != (2,):
        raise ValueError(f"points must have shape (..., 2), got {p.shape}")
    return p
