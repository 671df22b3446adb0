"""Time travel with the user's own App: changes made in code, failing hooks, state compared
by value, drags across a seek, keys that do not act, bad state_dicts, a bounded history (#37).

Each test here failed before its fix (issue #37, "Time travel with the user's own App").
"""

from __future__ import annotations

import copy
import hashlib
import os
import socket
import threading
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

import kelab as ke

BALL = 2  # body index of /World/Ball (after /ground and /World/Box)


def _scene() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    b.add(ke.Prop(ke.Box(0.3, 0.3), mass=1.0, initial_pose=ke.Pose(-0.4, 1.0)), at="/World/Box")
    b.add(ke.Prop(ke.Circle(0.2), mass=1.0, initial_pose=ke.Pose(0.4, 0.2)), at="/World/Ball")
    return b.build()


class Counter(ke.App):
    """Counts its steps and the presses of K it reads (both rewound by its state hooks)."""

    def setup(self) -> None:
        self.n = 0
        self.kicks = 0

    def fixed_update(self, ts: float) -> None:
        self.n += 1
        if self.input.key_pressed("k"):
            self.kicks += 1

    def state_dict(self) -> dict:
        return {"n": self.n, "kicks": self.kicks}

    def load_state_dict(self, state: dict) -> None:
        self.n, self.kicks = state["n"], state["kicks"]


def _app(cls: type = Counter, **settings) -> ke.App:
    settings.setdefault("size", (320, 240))
    return cls(headless=True, world=ke.World(_scene()), render_hz=None,
               time_mode=ke.TimeMode.SIM_HIGH_PERF, **settings)  # fmt: skip


def _hash(app: ke.App) -> str:
    w = app.world
    raw = b"".join(
        np.ascontiguousarray(a).tobytes()
        for a in (w.body_poses, w.body_velocities, w.external_forces)
    )
    return hashlib.sha256(raw).hexdigest()


def _state(app: ke.App) -> tuple:
    return (_hash(app), repr(app.state_dict()), app.timeline.time, app.sim_time)


def _run(app: ke.App, frames: int, seen: dict | None = None) -> dict:
    seen = {} if seen is None else seen
    for _ in range(frames):
        app.renderFrameOnce()
        seen[app.fixed_step] = _state(app)
    return seen


def _press(app: ke.App, key: str) -> None:
    app.inject_event(ke.InputEvent("key_down", key=key))
    app.inject_event(ke.InputEvent("key_up", key=key))


def _screen(app: ke.App, point: tuple[float, float]) -> tuple[int, int]:
    x, y = app.camera.world_to_screen(point)
    return (int(round(x)), int(round(y)))


def _lift_box(app: ke.App, y: float) -> None:
    w = app.world
    poses, vels = w.body_poses, w.body_velocities
    poses[0, 1, 1] = y
    vels[0, 1] = 0.0
    w.set_body_states([0], poses, vels)


# ------------------------------------------------------------------ 1. changes made in code
def test_a_forward_seek_lands_on_a_change_made_in_code_between_steps() -> None:
    """``seek(25); seek(40)`` ran on from 25 with the logged inputs and skipped the change at 30."""
    app = _app()
    seen = _run(app, 30)
    _lift_box(app, 5.0)  # a change made in code at step 30
    seen[30] = _state(app)
    _run(app, 10, seen)
    assert app.world.body_poses[0, 1, 1] > 4.0
    for a, b in ((25, 40), (0, 40), (29, 31), (25, 30), (31, 39), (12, 35), (40, 40)):
        app.seek(a)
        assert a == 0 or _state(app) == seen[a], a
        app.seek(b)
        assert _state(app) == seen[b], (a, b)
    assert app.time_travel.branch == 0
    app.close()


def test_a_forward_seek_still_runs_on_where_nothing_was_changed_in_code(monkeypatch) -> None:
    """The shortcut stays where it is exact: no World restore for a short forward seek."""
    app = _app()
    seen = _run(app, 30)
    _lift_box(app, 5.0)
    _run(app, 30, seen)
    app.seek(41)
    restores = []
    real = app.world.restore
    monkeypatch.setattr(app.world, "restore", lambda snap: (restores.append(1), real(snap)))
    app.seek(47)
    app.seek(60)
    assert restores == [] and _state(app) == seen[60]
    app.seek(20)
    app.seek(33)  # the change at 30 lies between: from its keyframe, not from here
    assert restores == [1, 1] and _state(app) == seen[33]
    app.close()


# ------------------------------------------------------------------ 2. all or nothing
class Fragile(Counter):
    """Its next ``load_failures`` loads fail half-way; its re-run steps fail on ``fail_step``."""

    load_failures = 0
    fail_step = False

    def fixed_update(self, ts: float) -> None:
        if self.fail_step and self.time_travel.replaying:
            raise RuntimeError("step failed")
        super().fixed_update(ts)

    def load_state_dict(self, state: dict) -> None:
        if self.load_failures:
            self.load_failures -= 1
            self.n = -1  # half-loaded
            raise RuntimeError("load failed")
        super().load_state_dict(state)


def _whole(app: ke.App) -> tuple:
    tt = app.time_travel
    return (
        _state(app),
        app.fixed_step,
        app.world.step_count,
        app.world.sim_time,
        app.timeline.time_state(),
        app.clock.time_state(),
        app.history,
        tt.newest,
        tt.branch,
        app.input.step_view(),
    )


@pytest.mark.parametrize("failing", ["load", "step"])
def test_a_seek_that_fails_leaves_the_app_exactly_as_it_was(failing: str) -> None:
    app = _app(Fragile)
    twin = _app(Fragile)  # never seeks: the App must go on exactly like it
    seen = _run(app, 100)
    _run(twin, 100)
    before = _whole(app)
    app.fail_step = failing == "step"
    targets = (16, 30, 99, 0, 50) if failing == "load" else (17, 30, 99, 5, 50)
    for target in targets:  # each needs a keyframe restored (load) or steps re-run (step)
        app.load_failures = int(failing == "load")
        with pytest.raises(RuntimeError, match=f"{failing} failed"):
            app.seek(target)
        assert _whole(app) == before, target
    app.fail_step = False
    app.seek(40)
    app.fail_step = failing == "step"
    before = _whole(app)
    app.load_failures = int(failing == "load")
    if failing == "step":  # on from 40, no restore: the World comes back from the undo
        with pytest.raises(RuntimeError, match="step failed"):
            app.seek(45)
        assert _whole(app) == before
    app.fail_step = False
    app.load_failures = 0
    app.seek(100)
    assert _run(app, 30) == _run(twin, 30)  # going on: bit for bit as if no seek was tried
    app.seek(30)
    assert _state(app) == seen[30]  # and the history is intact
    app.close()
    twin.close()


def test_a_seek_whose_rollback_load_fails_too_still_puts_the_app_back() -> None:
    app = _app(Fragile)
    _run(app, 60)
    before = _whole(app)[1:]
    app.load_failures = 2  # fails on the keyframe's state and again on the way back
    with pytest.raises(RuntimeError, match="load failed") as err:
        app.seek(10)
    assert any("could not be put back" in n for n in err.value.__notes__)
    assert _whole(app)[1:] == before  # the App's own parts are back; only its subclass is not
    app.close()


# ------------------------------------------------------------------ 3. state by value
class Gains:
    """A plain object: its repr holds its address."""

    def __init__(self, kp: float) -> None:
        self.kp = kp
        self.history = np.zeros(3)


class WithObject(Counter):
    def setup(self) -> None:
        super().setup()
        self.gains = Gains(2.0)

    def fixed_update(self, ts: float) -> None:
        super().fixed_update(ts)
        self.gains.history[self.n % 3] = self.n

    def state_dict(self) -> dict:
        return {**super().state_dict(), "gains": self.gains}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.gains = state["gains"]


def test_a_plain_object_in_the_state_is_compared_by_value() -> None:
    app = _app(WithObject)
    seen = _run(app, 80)
    tt = app.time_travel
    assert len(tt._keys) <= 80 // tt.keyframe_every + 1  # not one keyframe per step
    app.seek(10)
    again = _run(app, 70)
    assert tt.branch == 0 and app.history == range(0, 81)  # a redo, not a branch
    assert {k: v[0] for k, v in again.items()} == {k: seen[k][0] for k in again}
    app.gains.kp = 3.0  # a change of its value is a change made in code
    app.seek(40)
    app.gains.kp = 5.0
    app.renderFrameOnce()
    assert tt.branch == 1
    app.close()


@dataclass
class _Point:
    x: float
    y: float


class _Slots:
    __slots__ = ("a", "b")

    def __init__(self, a: object, b: object) -> None:
        self.a, self.b = a, b


class _Plain:
    def __init__(self, **kw: object) -> None:
        self.__dict__.update(kw)


def test_the_value_digest_compares_values_and_tells_types_apart() -> None:
    from kelab.app.state_values import state_digest

    def same(a: object, b: object) -> bool:
        return state_digest(a, "s").digest == state_digest(b, "s").digest

    arr = np.arange(6, dtype=np.float64).reshape(2, 3)
    assert same(arr, arr.copy()) and same(arr, np.asfortranarray(arr))
    assert not same(arr, arr.astype(np.float32)) and not same(arr, arr.reshape(3, 2))
    assert not same(arr, arr + 1e-12)
    assert same({"a": 1, "b": [1.0, 2]}, {"b": [1.0, 2], "a": 1})  # key order is no change
    assert not same([1, 2], (1, 2)) and not same(1, 1.0) and not same(1, True)
    assert not same(0.0, -0.0) and same(float("nan"), float("nan"))
    assert same(np.float32(1.5), np.float32(1.5)) and not same(np.float32(1.5), 1.5)
    assert same(_Point(1.0, 2.0), _Point(1.0, 2.0)) and not same(_Point(1.0, 2.0), _Point(1.0, 3.0))
    assert same(_Slots(1, [2]), _Slots(1, [2])) and not same(_Slots(1, [2]), _Slots(1, [3]))
    assert same(_Plain(a=arr), _Plain(a=arr.copy())) and not same(_Plain(a=1), _Plain(a=2))
    assert not same(_Plain(a=1), _Slots(1, None))  # the type is part of the value
    assert same({1, 2, 3}, {3, 2, 1}) and same(b"ab", b"ab") and not same("ab", b"ab")
    rng = np.random.default_rng(3)
    assert same(rng, np.random.default_rng(3))
    rng.normal()
    assert not same(rng, np.random.default_rng(3))
    assert state_digest(np.zeros(1000), "s").nbytes >= 8000


def test_the_value_digest_reads_tensors_by_their_values() -> None:
    torch = pytest.importorskip("torch")
    from kelab.app.state_values import state_digest

    def digest(value: object) -> bytes:
        return state_digest(value, "s").digest

    layer = torch.nn.Linear(3, 2)
    twin = copy.deepcopy(layer)
    assert digest(layer.state_dict()) == digest(twin.state_dict())
    with torch.no_grad():
        twin.bias[0] += 1.0
    assert digest(layer.state_dict()) != digest(twin.state_dict())
    assert digest(torch.arange(4.0, requires_grad=True)) == digest(torch.arange(4.0))
    assert digest(torch.arange(4.0)) != digest(torch.arange(4.0) + 1)
    assert digest(torch.arange(4.0)) != digest(np.arange(4.0))


# ------------------------------------------------------------------ 4./5. drags
class Grabber(Counter):
    """Holds the grabbed body's path in its state; notes every drag hook call."""

    def setup(self) -> None:
        super().setup()
        self.held = None
        self.calls: list[tuple[str, int, bool]] = []  # not rewound: what ran, in order

    def on_drag_begin(self, body) -> None:
        self.held = body.path
        self.calls.append(("begin", self.fixed_step, self.time_travel.replaying))

    def on_drag_end(self, body) -> None:
        self.held = None
        self.calls.append(("end", self.fixed_step, self.time_travel.replaying))

    def state_dict(self) -> dict:
        return {**super().state_dict(), "held": self.held}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.held = state["held"]


class Toucher(Grabber):
    """Its drag hooks only note the call (nothing rewound changes)."""

    def on_drag_begin(self, body) -> None:
        self.calls.append(("begin", self.fixed_step, self.time_travel.replaying))

    def on_drag_end(self, body) -> None:
        self.calls.append(("end", self.fixed_step, self.time_travel.replaying))


def _drag_run(app: ke.App, start: int, stop: int, total: int, seen: dict | None = None) -> dict:
    """Grab the ball at fixed step ``start``, pull it up, let go at ``stop``."""
    seen = {} if seen is None else seen
    while app.fixed_step < total:
        if app.fixed_step == start:
            ball = tuple(app.world.body_poses[0, BALL, :2])
            app.inject_event(ke.InputEvent("mouse_down", button=1, pos=_screen(app, ball)))
        elif start < app.fixed_step < stop:
            app.inject_event(ke.InputEvent("mouse_move", pos=_screen(app, (0.4, 1.2))))
        elif app.fixed_step == stop:
            app.inject_event(ke.InputEvent("mouse_up", button=1, pos=_screen(app, (0.4, 1.2))))
        app.renderFrameOnce()
        seen[app.fixed_step] = _state(app)
    return seen


def test_a_redo_across_a_drag_calls_its_hooks_and_stays_a_redo() -> None:
    app = _app(Grabber)
    seen = _drag_run(app, 10, 30, 60)
    assert app.calls == [("begin", 10, False), ("end", 30, False)]
    assert seen[20][1] == repr({"n": 20, "kicks": 0, "held": "/World/Ball"})
    app.seek(0)
    app.calls.clear()
    again = _run(app, 60)
    assert app.calls == [("begin", 10, False), ("end", 30, False)]
    assert app.time_travel.branch == 0 and again == {k: seen[k] for k in again}
    app.close()


def test_a_seek_that_re_runs_across_a_drag_calls_its_hooks() -> None:
    app = _app(Toucher)
    app.time_travel.keyframe_every = 10_000  # keyframes at 0 and the release (a change) only
    seen = _drag_run(app, 10, 30, 60)
    app.seek(0)
    app.calls.clear()
    app.seek(25)  # re-runs steps 0..24 from the first keyframe: the drag's start
    assert app.calls == [("begin", 10, True)] and _state(app) == seen[25]
    app.seek(45)  # on from 25 (or from the keyframe at the release): exact either way
    assert _state(app) == seen[45]
    app.seek(0)
    app.calls.clear()
    app.seek(29)
    app.seek(31)
    assert app.calls == [("begin", 10, True)] and _state(app) == seen[31]
    app.close()


@pytest.mark.parametrize("into", [20, 24])  # 24: a keyframe, no step re-run
def test_a_redo_from_inside_a_replayed_drag_goes_on_with_it(into: int) -> None:
    app = _app(Grabber)
    seen = _drag_run(app, 10, 50, 80)
    app.seek(into)
    app.calls.clear()
    again = _run(app, 80 - into)
    assert app.time_travel.branch == 0 and again == {k: seen[k] for k in again}
    assert app.calls == [("end", 50, False)]  # the replayed drag's own end
    app.close()


@pytest.mark.parametrize("into", [20, 24, 16])  # 16 and 24: keyframes, no step re-run
def test_a_branch_from_inside_a_replayed_drag_lets_the_body_go(into: int) -> None:
    app = _app(Grabber)
    _drag_run(app, 10, 50, 60)
    app.seek(into)
    assert app.world.external_forces[0, BALL].any()  # the spring holds it there
    assert not app.input.mouse_held(1)  # the button is not held now (it was then)
    assert app.held == "/World/Ball"
    app.calls.clear()
    _press(app, "k")  # a key the App reads: a branch
    _run(app, 150)
    assert app.time_travel.branch == 1 and app.time_travel.branch_points == (into,)
    assert app.calls == [("end", into, False)] and app.held is None
    assert not app.world.external_forces.any() and not app.input.mouse_held(1)
    assert abs(app.world.body_poses[0, BALL, 1] - 0.2) < 0.01  # back on the ground
    # the branch replays exactly too
    seen = _run(app, 1)
    app.seek(into + 5)
    app.seek(app.history.stop - 1)
    assert _state(app) == seen[app.fixed_step]
    app.close()


def test_running_on_from_a_seek_at_the_newest_step_of_a_drag_lets_the_body_go() -> None:
    app = _app(Grabber)
    _drag_run(app, 10, 10_000, 40)  # still dragging at the newest step
    app.seek(40)  # the live drag ends; the recorded one holds the ball at 40
    _run(app, 150)
    assert not app.world.external_forces.any() and app.held is None
    assert abs(app.world.body_poses[0, BALL, 1] - 0.2) < 0.01
    app.close()


# ------------------------------------------------------------------ 6. keys that do not act
@pytest.mark.parametrize("key", ["f1", "f2", "j", "z"])
def test_keys_the_simulation_does_not_read_never_branch(key: str) -> None:
    app = _app(Counter)
    seen = _run(app, 100)
    app.seek(50)
    _press(app, key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # F2 without imgui-bundle says so
        again = _run(app, 50)
    assert app.time_travel.branch == 0 and app.history == range(0, 101)
    assert again == {k: seen[k] for k in again}
    app.seek(60)
    _press(app, "k")  # one it reads: a branch
    _run(app, 2)
    assert app.time_travel.branch == 1 and app.kicks == 1
    app.close()


def test_a_click_on_nothing_while_rewound_does_not_branch() -> None:
    app = _app(Counter)
    seen = _run(app, 60)
    app.seek(20)
    for kind in ("mouse_down", "mouse_up"):
        app.inject_event(ke.InputEvent(kind, button=1, pos=(5, 5)))  # the sky
        app.renderFrameOnce()
    assert app.time_travel.branch == 0 and _state(app) == seen[22]
    app.close()


# -------------------------------------------------------- 7. before the start, after close
def test_seek_before_the_first_frame_and_after_close() -> None:
    app = _app()
    twin = _app()
    app.seek(0)  # nothing recorded yet: the App stands at step 0
    assert app.fixed_step == 0 and app.history == range(0, 1)
    with pytest.raises(ValueError, match="newest step run so far is 0"):
        app.seek(1)
    assert _run(app, 20) == _run(twin, 20)
    app.close()
    twin.close()
    for step in (10, 0, 99):
        with pytest.raises(RuntimeError, match="this App was closed; seek"):
            app.seek(step)
    assert app.history == range(20, 21)  # the history was let go


# ------------------------------------------------------------------ 8. bad state_dicts
class Looped(Counter):
    def state_dict(self) -> dict:
        state = super().state_dict()
        state["me"] = {"parent": state}
        return state


class Deep(Counter):
    def state_dict(self) -> dict:
        state = inner = {}
        for _ in range(5000):
            inner["child"] = {}
            inner = inner["child"]
        return state


class Locked(Counter):
    def setup(self) -> None:
        super().setup()
        self.lock = threading.Lock()

    def state_dict(self) -> dict:
        return {**super().state_dict(), "lock": self.lock}


class WithFile(Counter):
    """An open file has a __dict__ (its mode) yet no copy: refused like a lock, not a
    bare ``TypeError: cannot pickle '_io.TextIOWrapper'``."""

    def setup(self) -> None:
        super().setup()
        self.log = open(os.devnull, "w")  # noqa: SIM115 - the point is holding it open

    def state_dict(self) -> dict:
        return {**super().state_dict(), "files": [self.log]}


class WithSocket(Counter):
    """A socket's own __getstate__ raises."""

    def setup(self) -> None:
        super().setup()
        self.sock = socket.socket()

    def state_dict(self) -> dict:
        return {**super().state_dict(), "sock": self.sock}


class WithThread(Counter):
    def state_dict(self) -> dict:
        return {**super().state_dict(), "v": threading.Thread()}


class WithGenerator(Counter):
    def state_dict(self) -> dict:
        return {**super().state_dict(), "gen": (i for i in range(3))}


class _NoCopy:
    def __deepcopy__(self, memo: dict) -> _NoCopy:
        raise RuntimeError("no\ncopy")


class WithBadDeepcopy(Counter):
    def state_dict(self) -> dict:
        return {**super().state_dict(), "odd": _NoCopy()}


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (Looped, r"holds itself at state\['me'\]\['parent'\]"),
        (Deep, r"nested deeper than 64 levels at state\['child'\]\['child'\]"),
        (Locked, r"cannot be copied or compared by value: a _thread.lock at state\['lock'\]"),
        (WithFile, r"a _io.TextIOWrapper at state\['files'\]\[0\]; leave it out"),
        (WithSocket, r"a socket.socket at state\['sock'\]; leave it out"),
        (WithThread, r"a _thread.lock at state\['v'\]._started._cond._lock; leave"),
        (WithGenerator, r"a generator at state\['gen'\]; leave it out"),
        (WithBadDeepcopy, r"copy.deepcopy can copy, got one whose copy raised RuntimeError"),
    ],
)
def test_a_state_dict_time_travel_cannot_keep_is_one_clear_error(cls: type, message: str) -> None:
    app = _app(cls)
    with pytest.raises(ValueError, match=message) as err:
        app.renderFrameOnce()
    text = str(err.value)
    assert text.startswith("App.state_dict() must return") and "\n" not in text
    with pytest.raises(RuntimeError, match="closed"):  # the App closed once, like any hook error
        app.renderFrameOnce()
    for held in (getattr(app, "log", None), getattr(app, "sock", None)):
        if held is not None:
            held.close()


class Turning(Looped):
    """Its state_dict turns cyclic on ``bad``."""

    bad = False

    def state_dict(self) -> dict:
        return super().state_dict() if self.bad else Counter.state_dict(self)


def test_a_state_dict_that_turns_bad_refuses_the_seek_and_leaves_the_app() -> None:
    app = _app(Turning)
    _run(app, 40)
    before = _whole(app)
    app.bad = True
    with pytest.raises(ValueError, match="holds itself"):
        app.seek(10)
    app.bad = False
    assert _whole(app) == before
    app.close()


# ------------------------------------------------------------------ 9. bounded in bytes
class Heavy(Counter):
    """A 400 kB state_dict."""

    def setup(self) -> None:
        super().setup()
        self.big = np.zeros(50_000)

    def fixed_update(self, ts: float) -> None:
        super().fixed_update(ts)
        self.big[self.n % self.big.size] = self.n

    def state_dict(self) -> dict:
        return {**super().state_dict(), "big": self.big}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.big = state["big"].copy()


def test_the_history_is_bounded_in_bytes_and_says_so_once() -> None:
    app = _app(Heavy, history_mb=10)
    tt = app.time_travel
    assert tt.history_mb == 10 and app.config.history_mb == 10
    seen: dict = {}
    with pytest.warns(RuntimeWarning, match=r"history_mb = 10 MB") as caught:
        _run(app, 600, seen)  # 75 keyframes of > 400 kB: ~30 MB without the bound
    assert len([w for w in caught if "history_mb" in str(w.message)]) == 1
    assert tt.history_bytes <= 10 * 2**20
    hist = app.history
    assert hist.stop == 601 and 150 < len(hist) < 600  # shorter than the 60 s asked for
    for k in (hist.start, hist.start + 7, 599):
        app.seek(k)
        assert _state(app) == seen[k]
    with pytest.raises(ValueError, match="older than the history keeps"):
        app.seek(hist.start - 1)
    tt.history_mb = 4  # live: trims now
    assert tt.history_bytes <= 4 * 2**20 and len(app.history) < len(hist)
    for bad in (0, -1.0, float("nan"), True, "10"):
        with pytest.raises(ValueError, match=r"App.history_mb must be megabytes > 0"):
            ke.AppConfig(history_mb=bad)
    app.close()


def test_a_small_history_stays_whole_under_the_default_byte_budget() -> None:
    from kelab.app.time_travel import DEFAULT_HISTORY_MB

    app = _app(Counter)
    assert app.time_travel.history_mb == DEFAULT_HISTORY_MB
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(app, 400)
    assert app.history == range(0, 401) and 0 < app.time_travel.history_bytes < 2**20
    app.close()
