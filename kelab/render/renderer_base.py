"""Renderer: the interface every render backend implements (a window or an offscreen frame).

A backend is a module with a ``Renderer`` subclass (its ``canvas`` a ``Canvas`` subclass)
registered by name in :data:`kelab.render.renderer.BACKEND_CLASSES`; see docs/rendering.md,
"Adding a backend". Backends import this module, never the factory.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kelab._validate import is_bool, must
from kelab.render.camera import Camera, check_size
from kelab.render.canvas import Canvas
from kelab.render.events import InputEvent

__all__ = [
    "DisplayUnavailableError",
    "Renderer",
    "check_antialias",
    "display_available",
    "require_display",
]


class Renderer(ABC):
    """A drawing target: a window, or an offscreen frame when ``headless``.

    Draw between :meth:`begin_frame` and :meth:`end_frame` through :attr:`canvas`;
    ``end_frame`` presents the frame (window) or finishes it (offscreen), and
    :meth:`read_rgb_pixels` returns the last finished frame. Create one with
    :func:`create_renderer`. A renderer is a context manager that closes itself.

    Example:
        >>> import kelab as ke
        >>> with ke.create_renderer("gl", size=(64, 48), headless=True) as r:
        ...     r.begin_frame()
        ...     r.canvas.clear((10, 20, 30))
        ...     r.end_frame()
        ...     r.read_rgb_pixels().shape
        (48, 64, 3)
    """

    #: Backend name, "pygame" or "gl".
    backend: str = ""

    def __init__(
        self,
        size: Sequence[int],
        title: str,
        headless: bool,
        vsync: bool,
        antialias: bool | str,
    ) -> None:
        self._camera = Camera(size=check_size(size))
        self.antialias: bool | str = check_antialias(antialias)
        """True (analytic edges), False (hard edges) or ``"msaa"`` (gl only)."""
        self.title = str(title)
        self.headless = bool(headless)
        self.vsync = bool(vsync)
        self._closed = False
        self._in_frame = False
        self._frames = 0
        self._should_close = False

    # -- properties ---------------------------------------------------------------------------
    @property
    @abstractmethod
    def canvas(self) -> Canvas:
        """The canvas to draw the current frame on."""

    @property
    def camera(self) -> Camera:
        """The camera of :attr:`canvas` (its size follows the frame size on resize)."""
        return self._camera

    @camera.setter
    def camera(self, camera: Camera) -> None:
        if not isinstance(camera, Camera):
            raise ValueError(must("Renderer.camera", "a kelab Camera", camera))
        camera.size = self._camera.size
        self._camera = camera
        self.canvas.camera = camera

    @property
    def size(self) -> tuple[int, int]:
        """Frame size ``(width, height)`` in pixels."""
        return self._camera.size

    @property
    def should_close(self) -> bool:
        """True once the user asked to close the window (close button) or after close()."""
        return self._should_close or self._closed

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    @property
    def frame_count(self) -> int:
        """Number of frames finished so far."""
        return self._frames

    # -- frame protocol -----------------------------------------------------------------------
    def begin_frame(self) -> None:
        """Start drawing a frame (the canvas keeps the previous content until cleared)."""
        self._check_open()
        if self._in_frame:
            raise RuntimeError("begin_frame() called twice; call end_frame() first")
        self._begin()
        self.canvas.start_frame()
        self._in_frame = True

    def end_frame(self) -> None:
        """Finish the frame: present it to the window, or finish the offscreen frame."""
        self._check_open()
        if not self._in_frame:
            raise RuntimeError("end_frame() called without begin_frame()")
        self._end()
        self._in_frame = False
        self._frames += 1

    def poll_events(self) -> list[InputEvent]:
        """Return the input events since the last call (always empty when headless).

        Returns:
            Normalised events, oldest first. A "resize" event has already updated
            :attr:`size` and the camera; a "quit" event sets :attr:`should_close`.
        """
        if self.headless or self._closed:
            return []
        events = self._poll()
        for ev in events:
            if ev.kind == "quit":
                self._should_close = True
        return events

    def read_rgb_pixels(self, flip_y: bool = True) -> np.ndarray:
        """Return the last finished frame as an RGB image.

        Args:
            flip_y: True (default) for image order, the top row first (as Gymnasium's
                ``rgb_array`` and PNG files); False for OpenGL order, the bottom row first.

        Returns:
            A new ``(height, width, 3)`` uint8 array.
        """
        self._check_open()
        if self._frames == 0:
            raise RuntimeError(
                "no finished frame to read yet; draw one between begin_frame() and end_frame()"
            )
        img = self._read_top_first()
        return img if flip_y else np.ascontiguousarray(img[::-1])

    def write_png(self, path: str | os.PathLike[str]) -> Path:
        """Save the last finished frame as a PNG file.

        Args:
            path: Destination file; missing parent folders are created.

        Returns:
            The path written.
        """
        from kelab.render.pygame_door import pygame

        img = self.read_rgb_pixels(flip_y=True)
        h, w = img.shape[:2]
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        surf = pygame.image.frombuffer(img.tobytes(), (w, h), "RGB")
        pygame.image.save(surf, str(out), "PNG")
        return out

    def close(self) -> None:
        """Release the window or offscreen context; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._in_frame = False
        self._close()

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "headless" if self.headless else "window"
        return f"<{type(self).__name__} {self.backend} {mode} {self.size[0]}x{self.size[1]}>"

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self.backend} renderer is closed")

    def _resized(self, size: tuple[int, int]) -> None:
        """Apply a new frame size to the camera (backends also resize their targets)."""
        self._camera.size = size

    # -- backend hooks --------------------------------------------------------------------------
    @abstractmethod
    def _begin(self) -> None: ...

    @abstractmethod
    def _end(self) -> None: ...

    @abstractmethod
    def _poll(self) -> list[InputEvent]: ...

    @abstractmethod
    def _read_top_first(self) -> np.ndarray: ...

    @abstractmethod
    def _close(self) -> None: ...


def check_antialias(value: object) -> bool | str:
    """Validate an ``antialias`` setting.

    Args:
        value: True, False or ``"msaa"``.

    Returns:
        The setting as a plain bool, or ``"msaa"``.

    Raises:
        ValueError: For anything else.
    """
    if is_bool(value):
        return bool(value)
    if isinstance(value, str) and value == "msaa":
        return "msaa"
    raise ValueError(
        must(
            "antialias",
            "True (analytic edges), False (hard edges) or 'msaa' (4x multisampling, "
            "backend='gl' only)",
            value,
        )
    )


class DisplayUnavailableError(RuntimeError):
    """A window was requested but no display is reachable (a user error, not a bug)."""


def display_available(backend: str = "pygame") -> bool:
    """Whether a window of ``backend`` can be opened here (a display is set).

    Args:
        backend: "pygame" (also True with ``SDL_VIDEODRIVER=dummy``/``offscreen``) or "gl".

    Returns:
        True when ``DISPLAY`` or ``WAYLAND_DISPLAY`` is set (or SDL draws invisibly).
    """
    driver = os.environ.get("SDL_VIDEODRIVER", "")
    if backend == "pygame" and driver in ("dummy", "offscreen"):
        return True  # the user chose an invisible SDL window on purpose
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def require_display(backend: str) -> None:
    """Raise a helpful :class:`DisplayUnavailableError` when no display is reachable.

    Args:
        backend: Backend name for the message.
    """
    if not display_available(backend):
        raise DisplayUnavailableError(
            f"the {backend!r} renderer needs a display for a window but neither DISPLAY nor "
            "WAYLAND_DISPLAY is set; pass headless=True for offscreen rendering, or run "
            "under a virtual display (xvfb-run -a python ...)"
        )
