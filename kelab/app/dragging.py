"""Dragging: the App's picking, hovering and mouse dragging of World bodies.

The App owns one (``app.dragging``): the App's input step calls `press`, `release` and
`frame`; a timeline binding (main runner, CONTROL phase, priority `DRAG_PRIORITY`)
calls `step`, which holds the drag spring's force on the body for that step's physics;
drawing calls `draw`. It is given a `DragContext`, never the App: the World, the input,
the live settings (``interaction``, ``drag_frequency_hz``), the camera and the hooks
(`DragHooks`: ``on_pick``, ``on_pick_hover``, ``on_drag_begin``, ``on_drag_update``,
``on_drag_end``). Picking and the spring itself are `kelab.app.interaction`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kelab.app.hooks import call_hook
from kelab.app.interaction import DragSpring, PickedBody, pick_body

if TYPE_CHECKING:
    from kelab.app.config import LiveSettings
    from kelab.app.input import Input
    from kelab.render.camera import Camera
    from kelab.render.canvas import Canvas
    from kelab.sim.world import World

__all__ = [
    "DRAG_COLOR",
    "DRAG_PRIORITY",
    "PICK_TOLERANCE_PX",
    "DragContext",
    "DragHooks",
    "Dragging",
]

#: Priority of the drag spring's force update: after OnUpdate (-200), before controllers.
DRAG_PRIORITY = -100
#: How close (pixels) the cursor must be to a body to pick it.
PICK_TOLERANCE_PX = 3.0
#: Colour of the drag line and target dot.
DRAG_COLOR = (250, 210, 80)


def _ignore(*args: object) -> None:
    """A hook that does nothing."""


@dataclass(frozen=True)
class DragHooks:
    """The interaction hooks a drag calls (the App's own ``on_pick``... methods).

    Each defaults to doing nothing.
    """

    on_pick: Callable[[PickedBody], None] = _ignore
    """The left button went down over a body."""
    on_pick_hover: Callable[[PickedBody], None] = _ignore
    """The cursor is over a body (every frame, while nothing is dragged)."""
    on_drag_begin: Callable[[PickedBody], None] = _ignore
    """A dynamic body was grabbed (also where time travel replays a drag's start)."""
    on_drag_update: Callable[[PickedBody, tuple[float, float]], None] = _ignore
    """Every frame while dragging, with the spring's target (metres)."""
    on_drag_end: Callable[[PickedBody], None] = _ignore
    """The drag ended (also where time travel ends a replayed drag)."""


@dataclass(frozen=True)
class DragContext:
    """What `Dragging` is given: the App's World, input, settings, camera and hooks."""

    world: World | None
    """The World whose bodies are picked and dragged (None: nothing to pick)."""
    input: Input
    """The mouse state (``mouse_world``)."""
    live: LiveSettings
    """``interaction`` (picking on or off) and ``drag_frequency_hz``."""
    camera: Callable[[], Camera]
    """The view now (its zoom sets the pick tolerance)."""
    hooks: DragHooks = field(default_factory=DragHooks)
    """The hooks a pick, hover and drag call."""


class Dragging:
    """Picks the body under the cursor and drags dynamic bodies with a spring.

    Args:
        context: What it uses of the App (`DragContext`).
    """

    def __init__(self, context: DragContext) -> None:
        self._ctx = context
        self._hooks = context.hooks
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
        return self._ctx.live.interaction and self._ctx.world is not None

    def _tolerance(self) -> float:
        return PICK_TOLERANCE_PX / self._ctx.camera().zoom

    def press(self) -> None:
        """The left button went down: pick (``on_pick``), and grab a dynamic body."""
        ctx = self._ctx
        point = ctx.input.mouse_world
        if not self._active() or point is None:
            return
        world = ctx.world
        assert world is not None
        body = pick_body(world, point, self._tolerance())
        if body is None:
            return
        call_hook("on_pick", self._hooks.on_pick, body)
        if body.dynamic and self._drag is None:
            self._drag = DragSpring(world, body, frequency_hz=ctx.live.drag_frequency_hz)
            self._target = body.point
            call_hook("on_drag_begin", self._hooks.on_drag_begin, body)

    def release(self) -> None:
        """End the drag, if any: the body's force is cleared, then ``on_drag_end``."""
        drag, self._drag = self._drag, None
        self._target = None
        if drag is None:
            return
        drag.remove()
        call_hook("on_drag_end", self._hooks.on_drag_end, drag.picked)

    def frame(self) -> None:
        """Once per frame after input: follow the cursor, or hover (``on_pick_hover``)."""
        ctx = self._ctx
        if not self._active():
            self._hover = None
            return
        drag = self._drag
        if drag is not None:
            if not drag.alive:  # the copy was reset (or its force set by someone else)
                self.release()
            elif ctx.input.mouse_world is not None:
                self._target = ctx.input.mouse_world
                call_hook("on_drag_update", self._hooks.on_drag_update, drag.picked, self._target)
            self._hover = None
            return
        point = ctx.input.mouse_world
        world = ctx.world
        assert world is not None
        self._hover = None if point is None else pick_body(world, point, self._tolerance())
        if self._hover is not None:
            call_hook("on_pick_hover", self._hooks.on_pick_hover, self._hover)

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
