"""``create_renderer`` and the registry of render backends.

Each backend is one module with a :class:`~kelab.render.renderer_base.Renderer` subclass,
named here by ``"module:Class"``; the factory imports a backend's module only when a
renderer of it is made (pygame, moderngl and glfw stay unimported until then), and no
backend imports this module. Adding a backend is a new module plus one entry in
:data:`BACKEND_CLASSES` (docs/rendering.md, "Adding a backend").
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from kelab._validate import must
from kelab.render.camera import check_size
from kelab.render.renderer_base import (
    DisplayUnavailableError,
    Renderer,
    check_antialias,
    display_available,
    require_display,
)

__all__ = [
    "BACKENDS",
    "BACKEND_CLASSES",
    "DisplayUnavailableError",
    "Renderer",
    "check_antialias",
    "create_renderer",
    "display_available",
    "require_display",
]

BACKEND_CLASSES: dict[str, str] = {
    "pygame": "kelab.render.pygame_backend:PygameRenderer",
    "gl": "kelab.render.gl_backend:GLRenderer",
}
"""Every backend by name: ``"module:Class"`` of its Renderer subclass (imported when used)."""

BACKENDS: tuple[str, ...] = tuple(BACKEND_CLASSES)
"""The backend names, ``("pygame", "gl")``: what ``App.backend`` and ``--backend`` accept."""


def create_renderer(
    backend: str = "pygame",
    size: Sequence[int] = (800, 600),
    title: str = "KELab",
    headless: bool = False,
    vsync: bool = False,
    antialias: bool | str = True,
) -> Renderer:
    """Create a renderer by backend name.

    Args:
        backend: "pygame" (SDL window through pygame-ce, software drawing) or "gl"
            (glfw window, moderngl OpenGL 3.3 core, batched draw calls).
        size: Frame size ``(width, height)`` in pixels.
        title: Window title.
        headless: Draw offscreen with no window and no display needed (pygame: a
            plain Surface; gl: an EGL standalone context and a framebuffer).
        vsync: Wait for the display's refresh when presenting (windows only).
        antialias: True smooths shape edges analytically (pygame: antialiased
            outlines; gl: one-pixel fringe strips blended in the same draw call);
            ``"msaa"`` ("gl" only) renders through a 4x multisampled framebuffer
            instead, which is close to free on a GPU but costs ~1.2 ms per 600x400
            frame on software OpenGL (llvmpipe); False draws hard (aliased) edges.
            Interiors keep exact colours in every mode.

    Returns:
        The renderer; close it (or use it in a ``with`` block) when done.

    Raises:
        ValueError: On an unknown backend, a bad size or a bad ``antialias``.
        DisplayUnavailableError: (a RuntimeError) When a window is requested and no
            display is available.
    """
    wh = check_size(size)
    where = BACKEND_CLASSES.get(backend) if isinstance(backend, str) else None
    if where is None:
        raise ValueError(must("backend", f"one of {BACKENDS}", backend))
    module, _, name = where.partition(":")
    cls = getattr(importlib.import_module(module), name)
    return cls(wh, title, headless, vsync, antialias)
