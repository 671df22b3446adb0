"""Dragging: the App's picking, hovering and mouse dragging of World bodies.

The App owns one (``app.dragging``): the App's input step calls `press`, `release` and
`frame`; a timeline binding (main runner, CONTROL phase, priority `DRAG_PRIORITY`)
calls `step`, which holds the drag spring's force on the body for that step's physics;
drawing calls `draw`. It sees the App only as a `kelab.app.ports.DragHost`: its
``world``, ``input``, ``camera`` and ``live`` settings (``interaction``,
``drag_frequency_hz``), and its hooks (``on_pick``, ``on_pick_hover``,
``on_drag_begin``, ``on_drag_update``, ``on_drag_end``).
Picking and the spring itself are `kelab.app.interaction`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kelab.app.hooks import call_hook
from kelab.app.interaction import DragSpring, PickedBody, pick_body

if TYPE_CHECKING:
    from kelab.app.ports import DragHost
    from kelab.render.canvas import Canvas

__all__ = ["DRAG_COLOR", "DRAG_PRIORITY", "PICK_TOLERANCE_PX", "Dragging"]

#: Priority of the drag spring's force update: after OnUpdate (-200), before controllers.
DRAG_PRIORITY = -100
#: How close (pixels) the cursor must be to a body to pick it.
PICK_TOLERANCE_PX = 3.0
#: Colour of the drag line and target dot.
DRAG_COLOR = (250, 210, 80)


class Dragging:
    """Picks the body under the cursor and drags dynamic bodies with a spring.

    Args:
        app: The App (as a `DragHost`): the World, input and hooks it uses.
    """

    def __init__(self, app: DragHost) -> None:
        self._app = app
        self._hover: PickedBody | None = None
        self._drag: DragSpring | None = None
        self._target: tuple[float, float] | None = None

    @property
    def hovered(self) -> PickedBody | None:
        """The body under the cursor, if any (None while dragging)."""
        return self._hover

    @property
    def dragged(self) -> PickedBody | None:
        """The body being dragged, if any."""
        return self._drag.picked if self._drag is not None else None

    @property
    def target(self) -> tuple[float, float] | None:
        """Where the drag spring pulls (metres), while dragging."""
        return self._target

    @property
    def spring(self) -> DragSpring | None:
        """The drag spring while dragging."""
        return self._drag

    def _active(self) -> bool:
        return self._app.live.interaction and self._app.world is not None

    def _tolerance(self) -> float:
        return PICK_TOLERANCE_PX / self._app.camera.zoom

    def press(self) -> None:
        """The left button went down: pick (``on_pick``), and grab a dynamic body."""
        app = self._app
        point = app.input.mouse_world
        if not self._active() or point is None:
            return
        world = app.world
        assert world is not None
        body = pick_body(world, point, self._tolerance())
        if body is None:
            return
        call_hook("on_pick", app.on_pick, body)
        if body.dynamic and self._drag is None:
            self._drag = DragSpring(world, body, frequency_hz=app.live.drag_frequency_hz)
            self._target = body.point
            call_hook("on_drag_begin", app.on_drag_begin, body)

    def release(self) -> None:
        """End the drag, if any: the body's force is cleared, then ``on_drag_end``."""
        drag, self._drag = self._drag, None
        self._target = None
        if drag is None:
            return
        drag.remove()
        call_hook("on_drag_end", self._app.on_drag_end, drag.picked)

    def frame(self) -> None:
        """Once per frame after input: follow the cursor, or hover (``on_pick_hover``)."""
        app = self._app
        if not self._active():
            self._hover = None
            return
        drag = self._drag
        if drag is not None:
            if not drag.alive:  # the copy was reset (or its force set by someone else)
                self.release()
            elif app.input.mouse_world is not None:
                self._target = app.input.mouse_world
                call_hook("on_drag_update", app.on_drag_update, drag.picked, self._target)
            self._hover = None
            return
        point = app.input.mouse_world
        world = app.world
        assert world is not None
        self._hover = None if point is None else pick_body(world, point, self._tolerance())
        if self._hover is not None:
            call_hook("on_pick_hover", app.on_pick_hover, self._hover)

    def step(self, ts: float) -> None:
        """The timeline callback: hold the spring force for this step's physics."""
        drag = self._drag
        if drag is not None and self._target is not None and drag.alive:
            drag.set_target(self._target)
            drag.apply(ts)  # held by the World for this step's physics (in its replay log)

    def draw(self, canvas: Canvas) -> None:
        """Draw the line from the grab point to the target, while dragging."""
        if self._drag is not None and self._target is not None:
            anchor = self._drag.anchor_world()
            canvas.line(anchor, self._target, DRAG_COLOR, width=0.0)
            canvas.circle(self._target, 4.0 / canvas.camera.zoom, DRAG_COLOR)
