"""Time travel in a real window (Xvfb): the paused keys and the panel's timeline slider,
driven by real key and mouse events (#28)."""

from __future__ import annotations

import hashlib
import os

import numpy as np
from app_helpers import FakeClock, ball_scene, make_app

import kelab as ke

SHOTS = os.environ.get("KELAB_SHOTS")  # a folder: save the screenshots there to look at


class Shaker(ke.App):
    """Random pushes from its own Generator; K kicks the first ball up."""

    def setup(self) -> None:
        self.rng = np.random.default_rng(3)
        self.kicks = 0

    def fixed_update(self, ts: float) -> None:
        f = np.zeros((1, len(self.world.body_names), 2))
        f[0, :, 0] = self.rng.normal(0.0, 3.0, size=f.shape[1])
        if self.input.key_pressed("k"):
            self.kicks += 1
            f[0, 0, 1] = 400.0
        self.world.set_body_forces(f)

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state, "kicks": self.kicks}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state, self.kicks = state["rng"], state["kicks"]


def _state(app: ke.App) -> str:
    w = app.world
    raw = b"".join(np.ascontiguousarray(a).tobytes() for a in (w.body_poses, w.body_velocities))
    return hashlib.sha256(raw).hexdigest()


def _frame(app: ke.App, clock: FakeClock, seen: dict[int, str] | None = None) -> None:
    clock.advance(0.02)  # one fixed step of the 50 Hz Robot runner while running
    app.renderFrameOnce()
    if seen is not None and not app.paused:
        seen.setdefault(app.fixed_step, _state(app))


def _key(app: ke.App, clock: FakeClock, key: str, mods: frozenset[str] = frozenset()) -> None:
    for kind in ("key_down", "key_up"):
        app.inject_event(ke.InputEvent(kind, key=key, mods=mods))
        _frame(app, clock)


def _mouse(app: ke.App, clock: FakeClock, kind: str, pos: tuple[int, int]) -> None:
    button = None if kind == "mouse_move" else 1
    app.inject_event(ke.InputEvent(kind, button=button, pos=pos))
    _frame(app, clock)


def _shot(app: ke.App, name: str) -> None:
    if SHOTS:
        app.write_pixels_png(os.path.join(SHOTS, name))


def test_keys_and_the_panel_slider_scrub_and_mark_the_branch(real_window) -> None:
    clock = FakeClock()
    app = make_app(
        clock,
        Shaker,
        headless=False,
        world=ke.World(ball_scene(2)),
        size=(960, 540),
        time_mode=ke.TimeMode.SIM_REALTIME,
    )
    seen: dict[int, str] = {}
    for _ in range(120):
        _frame(app, clock, seen)
    newest = app.fixed_step
    assert newest >= 100
    # paused keys: Return pauses, Left steps back, Shift+Left one second back
    _key(app, clock, "return")
    assert app.paused and app.fixed_step == newest
    _key(app, clock, "left")
    assert app.fixed_step == newest - 1 and _state(app) == seen[newest - 1]
    _key(app, clock, "left", frozenset({"shift"}))
    assert app.fixed_step == newest - 51 and _state(app) == seen[newest - 51]
    # F2: the panel, its timeline slider; drag the grab to about step 30
    _key(app, clock, "f2")
    assert app.panel_open
    strip = app.panel_window.host.ui.history
    x0, y0, x1, y1 = strip.rect
    assert x1 - x0 > 200 and strip.model.app.time_travel.history == range(0, newest + 1)
    y = (y0 + y1) // 2
    _mouse(app, clock, "mouse_move", (round(strip.x_of(app.fixed_step)), y))
    _mouse(app, clock, "mouse_down", (round(strip.x_of(app.fixed_step)), y))
    sought = []
    for target in (60, 45, 30):  # the view follows while dragging: each move seeks
        _mouse(app, clock, "mouse_move", (round(strip.x_of(target)), y))
        sought.append(app.fixed_step)
        assert abs(app.fixed_step - target) <= 1 and _state(app) == seen[app.fixed_step]
    _mouse(app, clock, "mouse_up", (round(strip.x_of(30)), y))
    assert sought == sorted(sought, reverse=True) and app.paused
    at = app.fixed_step
    _shot(app, "time_travel_scrubbed.png")
    # resume and kick: a branch at the step the kick is seen, marked on the slider
    _key(app, clock, "return")
    app.inject_event(ke.InputEvent("key_down", key="k"))
    _frame(app, clock)
    app.inject_event(ke.InputEvent("key_up", key="k"))
    for _ in range(40):
        _frame(app, clock)
    tt = app.time_travel
    assert tt.branch == 1 and app.kicks == 1
    (point,) = tt.branch_points
    assert at <= point <= at + 2 and app.history.stop - 1 == app.fixed_step
    _key(app, clock, "return")  # pause: the strip shows the whole history with its tick
    _frame(app, clock)
    assert set(strip.ticks) == {point}
    assert abs(strip.ticks[point] - strip.x_of(point)) < 1e-9 and x0 < strip.ticks[point] < x1
    _shot(app, "time_travel_branch.png")
    app.close()
