"""KELab render layer: draws a World read-only, in a window or offscreen (see docs/rendering.md).

Two backends share one interface: ``create_renderer("pygame" | "gl", ...)`` returns a
:class:`Renderer` whose :class:`Canvas` draws in world units through a :class:`Camera`.
Backend modules (pygame, moderngl/glfw) are imported only when a renderer is created.
"""

from kelab.render.camera import Camera
from kelab.render.canvas import Canvas
from kelab.render.events import InputEvent
from kelab.render.renderer import Renderer, create_renderer

__all__ = ["Camera", "Canvas", "InputEvent", "Renderer", "create_renderer"]
