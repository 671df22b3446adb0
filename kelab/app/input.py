"""Input: keys and mouse held now, with edges latched per frame and per fixed step.

The App feeds every window event to `Input.handle`. Two sets of edges are kept:

- **per fixed step**: a key pressed (and perhaps released again) between two fixed steps
  is seen as pressed by exactly one fixed step, the next one, never twice, however many
  frames or steps pass;
- **per frame**: edges since the previous frame, for render-side code.

``key_pressed(name)`` inside a fixed step (``fixed_update`` and anything the App's
timeline runs) answers from the fixed-step edges; outside, from the frame edges. The
``frame_*`` methods always answer from the frame edges.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kelab._validate import check_int, must
from kelab.render.events import InputEvent
from kelab.timing.guard import in_fixed_step

__all__ = ["Input", "MOUSE_BUTTONS", "StepView", "event_batch"]

_NONE: frozenset = frozenset()  # shared by every empty set a step_view holds (the history
# keeps one view per fixed step)


def _frozen(items: set) -> frozenset:
    """``items`` as a frozenset; the shared empty one when empty."""
    return frozenset(items) if items else _NONE


#: Mouse button names accepted where a button is expected (numbers work too).
MOUSE_BUTTONS = {"left": 1, "middle": 2, "right": 3}


@dataclass(frozen=True, slots=True)
class StepView:
    """What one fixed step sees of the input (`Input.step_view`): a frozen record.

    The App's time travel keeps one per fixed step and replays it (`Input.set_step_view`);
    ``dataclasses.replace`` makes an edited copy.

    Example:
        >>> import kelab as ke
        >>> inp = ke.Input()
        >>> inp.handle(ke.InputEvent("key_down", key="a"))
        >>> inp.latch_fixed_step()
        >>> view = inp.step_view()
        >>> sorted(view.keys_held), sorted(view.keys_pressed), view.mouse_world
        (['a'], ['a'], None)
    """

    keys_held: frozenset[str]
    """Keys held down."""
    buttons_held: frozenset[int]
    """Mouse buttons held down."""
    keys_pressed: frozenset[str]
    """Keys pressed since the step before (the step's edges)."""
    keys_released: frozenset[str]
    """Keys released since the step before."""
    buttons_pressed: frozenset[int]
    """Mouse buttons pressed since the step before."""
    buttons_released: frozenset[int]
    """Mouse buttons released since the step before."""
    mouse_world: tuple[float, float] | None
    """The pointer in world metres (None: not over the window yet)."""


def event_batch(events: Iterable[InputEvent] | InputEvent, name: str) -> list[InputEvent]:
    """``events`` as a list of `InputEvent`, all checked (one event is a batch of one).

    Raises:
        ValueError: ``events`` is not an event or an iterable of them: one line naming
            ``name`` (and the index of the first wrong item).
    """
    if isinstance(events, InputEvent):
        return [events]
    if not isinstance(events, Iterable) or isinstance(events, str | bytes):
        raise ValueError(must(name, "an InputEvent or an iterable (list) of ke.InputEvent", events))
    batch = list(events)
    for i, event in enumerate(batch):
        if not isinstance(event, InputEvent):
            raise ValueError(must(f"{name}[{i}]", "a ke.InputEvent", event))
    return batch


def _button(button: int | str) -> int:
    if isinstance(button, str):
        try:
            return MOUSE_BUTTONS[button.lower()]
        except KeyError:
            raise ValueError(
                must("mouse button", f"1..7 or one of {sorted(MOUSE_BUTTONS)}", button)
            ) from None
    return check_int(button, "mouse button", fix=f"or a name: one of {sorted(MOUSE_BUTTONS)}")


def _key(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(must("key name", "a non-empty str such as 'a' or 'space'", name))
    return name.lower()


class _Edges:
    """Pressed / released keys and buttons collected over one interval."""

    __slots__ = ("buttons_pressed", "buttons_released", "keys_pressed", "keys_released")

    def __init__(self) -> None:
        self.keys_pressed: set[str] = set()
        self.keys_released: set[str] = set()
        self.buttons_pressed: set[int] = set()
        self.buttons_released: set[int] = set()

    def clear(self) -> None:
        self.keys_pressed.clear()
        self.keys_released.clear()
        self.buttons_pressed.clear()
        self.buttons_released.clear()

    def copy_from(self, other: _Edges) -> None:
        self.keys_pressed = set(other.keys_pressed)
        self.keys_released = set(other.keys_released)
        self.buttons_pressed = set(other.buttons_pressed)
        self.buttons_released = set(other.buttons_released)


class Input:
    """Keyboard and mouse state of an App window.

    Key names are lowercase pygame names ("a", "space", "return", "left", "f1", ...), the
    same for both backends (see `kelab.InputEvent`). Mouse buttons are 1 left, 2 middle,
    3 right (or the names "left", "middle", "right").

    Example:
        >>> import kelab as ke
        >>> inp = ke.Input()
        >>> inp.begin_frame()
        >>> inp.handle(ke.InputEvent("key_down", key="space"))
        >>> inp.handle(ke.InputEvent("key_up", key="space"))
        >>> inp.key_held("space"), inp.frame_key_pressed("space")
        (False, True)
        >>> inp.latch_fixed_step()  # what the App does before each fixed step
        >>> inp.step_key_pressed("space")
        True
        >>> inp.latch_fixed_step()  # the next step: seen once, never twice
        >>> inp.step_key_pressed("space")
        False
    """

    def __init__(self) -> None:
        self._keys_held: set[str] = set()
        self._buttons_held: set[int] = set()
        self.mouse_pos: tuple[float, float] | None = None
        """Pointer position in screen pixels (x right, y down), or None before any move."""
        self.mouse_world: tuple[float, float] | None = None
        """Pointer position in world metres (set by the App through its camera)."""
        self.wheel: tuple[float, float] = (0.0, 0.0)
        """Scroll amount ``(dx, dy)`` summed over this frame."""
        self.mods: frozenset[str] = frozenset()
        """Modifier keys of the latest key or button event."""
        self._frame = _Edges()
        self._pending = _Edges()  # since the last fixed step
        self._step = _Edges()  # latched for the current fixed step
        self._read_keys: set[str] = set()  # the keys fixed steps asked about
        self._read_buttons: set[int] = set()
        self._read_all = False  # a fixed step read every key (keys_held, step_view)

    # -- feeding -----------------------------------------------------------------------------
    def begin_frame(self) -> None:
        """Start a new frame: forget the previous frame's edges and wheel."""
        self._frame.clear()
        self.wheel = (0.0, 0.0)

    def handle(self, event: InputEvent) -> None:
        """Apply one window event to the held state and both edge sets."""
        kind = event.kind
        if kind == "key_down" and event.key is not None:
            key = event.key  # lowercase already (InputEvent lowercases it)
            self.mods = event.mods
            if key not in self._keys_held:  # auto-repeat is not a new press
                self._keys_held.add(key)
                self._frame.keys_pressed.add(key)
                self._pending.keys_pressed.add(key)
        elif kind == "key_up" and event.key is not None:
            key = event.key
            self.mods = event.mods
            self._keys_held.discard(key)
            self._frame.keys_released.add(key)
            self._pending.keys_released.add(key)
        elif kind == "mouse_down" and event.button is not None:
            self.mods = event.mods
            if event.pos is not None:
                self.mouse_pos = (float(event.pos[0]), float(event.pos[1]))
            self._buttons_held.add(event.button)
            self._frame.buttons_pressed.add(event.button)
            self._pending.buttons_pressed.add(event.button)
        elif kind == "mouse_up" and event.button is not None:
            self.mods = event.mods
            if event.pos is not None:
                self.mouse_pos = (float(event.pos[0]), float(event.pos[1]))
            self._buttons_held.discard(event.button)
            self._frame.buttons_released.add(event.button)
            self._pending.buttons_released.add(event.button)
        elif kind == "mouse_move" and event.pos is not None:
            self.mouse_pos = (float(event.pos[0]), float(event.pos[1]))
        elif kind == "mouse_wheel" and event.wheel is not None:
            self.wheel = (self.wheel[0] + event.wheel[0], self.wheel[1] + event.wheel[1])

    def handle_all(self, events: Iterable[InputEvent]) -> None:
        """Apply several events, oldest first."""
        for event in events:
            self.handle(event)

    def latch_fixed_step(self) -> None:
        """Make the edges since the last fixed step those of the next one (the App calls it)."""
        self._step, self._pending = self._pending, self._step
        self._pending.clear()

    def step_view(self) -> StepView:
        """What a fixed step sees (held keys and buttons, the step's edges, the pointer).

        A frozen `StepView`; `set_step_view` puts it back (the App's time travel replays
        it).
        """
        if in_fixed_step():
            self._read_all = True
        e = self._step
        return StepView(
            _frozen(self._keys_held),
            _frozen(self._buttons_held),
            _frozen(e.keys_pressed),
            _frozen(e.keys_released),
            _frozen(e.buttons_pressed),
            _frozen(e.buttons_released),
            self.mouse_world,
        )

    def set_step_view(self, view: StepView) -> None:
        """Make a `step_view` the current one (pending edges are left alone).

        Raises:
            ValueError: ``view`` is not a `StepView` (nothing changed).
        """
        if not isinstance(view, StepView):
            raise ValueError(
                must("Input.set_step_view(view)", "a StepView", view, fix="pass a step_view()")
            )
        self._keys_held, self._buttons_held = set(view.keys_held), set(view.buttons_held)
        e = self._step
        e.keys_pressed, e.keys_released = set(view.keys_pressed), set(view.keys_released)
        e.buttons_pressed = set(view.buttons_pressed)
        e.buttons_released = set(view.buttons_released)
        self.mouse_world = view.mouse_world

    def drop_pending(self) -> None:
        """Forget the edges waiting for the next fixed step (and the current step's)."""
        self._pending.clear()
        self._step.clear()

    def release_all(self) -> None:
        """Forget every held key and button (e.g. when the window loses focus)."""
        for key in list(self._keys_held):
            self.handle(InputEvent("key_up", key=key))
        for button in list(self._buttons_held):
            self.handle(InputEvent("mouse_up", button=button))

    # -- held now ----------------------------------------------------------------------------
    def key_held(self, name: str) -> bool:
        """Whether key ``name`` is held down now."""
        return self._asked_key(name) in self._keys_held

    def mouse_held(self, button: int | str = 1) -> bool:
        """Whether mouse ``button`` is held down now."""
        return self._asked_button(button) in self._buttons_held

    @property
    def keys_held(self) -> frozenset[str]:
        """Every key held down now."""
        if in_fixed_step():
            self._read_all = True
        return frozenset(self._keys_held)

    def axis(self, negative: str, positive: str) -> float:
        """-1, 0 or +1 from two held keys, e.g. ``axis("left", "right")``."""
        return float(self.key_held(positive)) - float(self.key_held(negative))

    # -- edges (context aware) ---------------------------------------------------------------
    def _edges(self) -> _Edges:
        return self._step if in_fixed_step() else self._frame

    def key_pressed(self, name: str) -> bool:
        """Whether ``name`` was pressed (per fixed step inside one, else per frame).

        Inside a fixed step: pressed since the previous fixed step, so each press is seen
        by exactly one step. Outside: pressed during this frame.
        """
        return self._asked_key(name) in self._edges().keys_pressed

    def key_released(self, name: str) -> bool:
        """Whether ``name`` was released (per fixed step inside one, else per frame)."""
        return self._asked_key(name) in self._edges().keys_released

    def mouse_pressed(self, button: int | str = 1) -> bool:
        """Whether ``button`` was pressed (per fixed step inside one, else per frame)."""
        return self._asked_button(button) in self._edges().buttons_pressed

    def mouse_released(self, button: int | str = 1) -> bool:
        """Whether ``button`` was released (per fixed step inside one, else per frame)."""
        return self._asked_button(button) in self._edges().buttons_released

    # -- explicit edge sets ------------------------------------------------------------------
    def frame_key_pressed(self, name: str) -> bool:
        """Whether ``name`` was pressed during this frame."""
        return self._asked_key(name) in self._frame.keys_pressed

    def frame_key_released(self, name: str) -> bool:
        """Whether ``name`` was released during this frame."""
        return self._asked_key(name) in self._frame.keys_released

    def frame_mouse_pressed(self, button: int | str = 1) -> bool:
        """Whether ``button`` was pressed during this frame."""
        return self._asked_button(button) in self._frame.buttons_pressed

    def frame_mouse_released(self, button: int | str = 1) -> bool:
        """Whether ``button`` was released during this frame."""
        return self._asked_button(button) in self._frame.buttons_released

    def step_key_pressed(self, name: str) -> bool:
        """Whether ``name`` was pressed before the current (or last) fixed step."""
        return self._asked_key(name) in self._step.keys_pressed

    def step_key_released(self, name: str) -> bool:
        """Whether ``name`` was released before the current (or last) fixed step."""
        return self._asked_key(name) in self._step.keys_released

    # -- what the fixed steps read -----------------------------------------------------------
    def key_read_in_steps(self, name: str) -> bool:
        """Whether code inside a fixed step has asked about key ``name`` so far.

        Any of ``key_pressed``, ``key_released``, ``key_held``, ``axis``, the ``step_*``
        and ``frame_*`` methods counts; reading ``keys_held`` or ``step_view`` there counts
        for every key. The App's time travel branches only for presses the steps read
        (docs/app.md, "Time travel").
        """
        return self._read_all or _key(name) in self._read_keys

    def button_read_in_steps(self, button: int | str) -> bool:
        """Whether code inside a fixed step has asked about mouse ``button`` so far."""
        return self._read_all or _button(button) in self._read_buttons

    def _asked_key(self, name: str) -> str:
        key = _key(name)
        if in_fixed_step():
            self._read_keys.add(key)
        return key

    def _asked_button(self, button: int | str) -> int:
        b = _button(button)
        if in_fixed_step():
            self._read_buttons.add(b)
        return b

    def __repr__(self) -> str:
        return (
            f"Input(keys_held={sorted(self._keys_held)}, buttons_held="
            f"{sorted(self._buttons_held)}, mouse_pos={self.mouse_pos})"
        )
