"""Sync points under stress (#37, items 10-13): resubmitting calls, submit racing close,
the step a published state belongs to, and closing the App from inside a frame."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from app_helpers import FakeClock, ball_scene, make_app

import kelab as ke

HIGH = ke.TimeMode.SIM_HIGH_PERF


def _app(tmp_path, cls=ke.App, **kw):
    kw.setdefault("time_mode", HIGH)
    kw.setdefault("settings", tmp_path / "scene.kelab.json")
    return make_app(FakeClock(), cls, **kw)


# ---------------------------------------------------------------------------- 10: resubmit
RESUBMIT = """
import os

import kelab as ke

app = ke.App(headless=True, size=(64, 48), render_hz=None,
             time_mode=ke.TimeMode.SIM_HIGH_PERF, settings="/nonexistent.json")
seen = []

def tick(a):
    seen.append(a.clock.steps)
    if len(seen) > 1000:             # all inside one sync point: fail fast, bounded
        os._exit(3)
    a.sync.submit(tick)              # again, at the next sync point

first = app.sync.submit(tick)
for _ in range(30):                  # 30 steps: sync points at steps 1, 6, ..., 26
    app.renderFrameOnce()
assert first.done() and first.exception() is None
assert seen == [1, 6, 11, 16, 21, 26], seen
assert app.sync.pending == 1         # the next one waits for step 31
app.close()
print("ok", len(seen))
"""


def test_a_call_submitted_during_a_sync_point_waits_for_the_next_one(tmp_path):
    # in a subprocess: before the fix the first sync point never ends
    out = subprocess.run(
        [sys.executable, "-c", RESUBMIT],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env=dict(os.environ, SDL_VIDEODRIVER="dummy"),
    )
    assert out.returncode != 3, "a resubmitting call ran again and again in one sync point"
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok 6"


def test_calls_submitted_by_a_sync_call_run_once_per_sync_point(tmp_path):
    app = _app(tmp_path, ke.App)
    order = []

    def first(a):
        order.append(("first", a.clock.steps))
        a.sync.submit(lambda b: order.append(("second", b.clock.steps)))

    app.sync.submit(first)
    for _ in range(6):
        app.renderFrameOnce()
    app.close()
    assert order == [("first", 1), ("second", 6)]


# ---------------------------------------------------------------------------- 11: submit vs close
def _submit_until_closed(app: ke.App, futures: list, go: threading.Event) -> None:
    go.wait()
    while True:
        try:
            futures.append(app.sync.submit(lambda a: 1))
        except RuntimeError as exc:  # the App closed: no more calls
            assert "closed" in str(exc)
            return


def test_every_future_ends_done_when_submit_races_close(tmp_path):
    # the threads take turns every 0.1 ms, not every 5: close meets the submits sooner
    # (hundreds of futures to settle a round, not thousands) and in finer interleavings
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        _submit_races_close(tmp_path)
    finally:
        sys.setswitchinterval(switch)


def _submit_races_close(tmp_path) -> None:
    rounds, threads_per_round = 40, 3
    undone = 0
    for r in range(rounds):
        app = _app(tmp_path, ke.App)
        if r % 2:
            app.renderFrameOnce()  # half the rounds close an open App
        futures: list = []
        go = threading.Event()
        workers = [
            threading.Thread(target=_submit_until_closed, args=(app, futures, go))
            for _ in range(threads_per_round)
        ]
        for w in workers:
            w.start()
        go.set()
        while len(futures) < 50 and any(w.is_alive() for w in workers):  # submitting
            pass
        app.close()
        for w in workers:
            w.join(timeout=30)
            assert not w.is_alive()
        undone += sum(not f.done() for f in futures)
        for f in futures:
            if f.done():
                exc = f.exception(timeout=0)
                assert exc is None or "closed" in str(exc)
    assert undone == 0, f"{undone} futures left pending"


def test_calls_left_in_a_sync_point_after_close_fail_with_a_clear_error(tmp_path):
    app = _app(tmp_path, ke.App)
    first = app.sync.submit(lambda a: a.close())
    later = app.sync.submit(lambda a: "ran")
    app.renderFrameOnce()
    assert first.result(timeout=0) is None
    with pytest.raises(RuntimeError, match="the App closed before the sync point"):
        later.result(timeout=0)


# ---------------------------------------------------------------------------- 12: step
class StepLog(ke.App):
    def setup(self):
        self.after_step = {}  # step -> the World's poses after its physics

    def late_update(self, ts):
        # VALIDATION, after PHYSICS; clock.steps counts the frame's steps ahead, so count here
        self.after_step[len(self.after_step) + 1] = self.world.body_poses.copy()

    def state_dict(self):  # the log is read before any seek only
        return {}

    def load_state_dict(self, state):
        pass


def test_the_published_state_names_the_step_whose_poses_it_holds(tmp_path):
    clock = FakeClock()
    app = make_app(
        clock,
        StepLog,
        world=ke.World(ball_scene(1)),
        time_mode=ke.TimeMode.SIM_REALTIME,
        settings=tmp_path / "s.kelab.json",
    )
    app.renderFrameOnce()  # the first tick only starts the clock
    assert app.sync.latest() is None
    clock.advance(0.06 + 1e-9)  # three catch-up steps in one frame
    app.renderFrameOnce()
    assert app.clock.last_frame_steps == 3
    state = app.sync.latest()  # the Sync boundary at t=0 runs in step 1
    assert state.step == 1
    assert state.time == pytest.approx(0.02)
    assert np.array_equal(state.body_poses, app.after_step[1])
    assert not np.array_equal(state.body_poses, app.after_step[3])  # the ball falls
    for _ in range(10):  # to step 33: sync points in steps 6, 11, ..., 31
        clock.advance(0.06)
        app.renderFrameOnce()
    state = app.sync.latest()
    assert (state.step, app.clock.steps) == (31, 33)
    assert state.time == pytest.approx(31 * 0.02)
    assert np.array_equal(state.body_poses, app.after_step[31])
    app.seek(state.step)  # the step it names is the one seek returns to
    assert app.sim_time == pytest.approx(state.time)
    assert np.array_equal(app.world.body_poses, state.body_poses)
    app.close()


def test_a_sync_call_sees_the_step_it_runs_in(tmp_path):
    clock = FakeClock()
    app = make_app(clock, StepLog, world=ke.World(ball_scene(1)), settings=tmp_path / "s.json")
    app.renderFrameOnce()
    got = app.sync.submit(lambda a: (a.clock.current_step, a.clock.steps))
    clock.advance(0.06 + 1e-9)
    app.renderFrameOnce()
    assert got.result(timeout=0) == (1, 3)
    assert app.clock.current_step == app.clock.steps == 3  # outside a tick: the same
    app.close()


def test_current_step_follows_the_tick_and_resets_after_an_error():
    tl = ke.Timeline()
    clock = ke.FixedStepClock.for_timeline(tl, "Robot", time_mode=HIGH, steps_per_frame=4)
    seen = []
    tl.bind(lambda ts: seen.append((clock.current_step, clock.steps)), runner="Robot")
    clock.tick_timeline(tl)
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]

    def boom(ts):
        raise ValueError("boom")

    tl.bind(boom, runner="Robot")
    with pytest.raises(ValueError, match="boom"):
        clock.tick_timeline(tl)
    assert clock.current_step == clock.steps


# ---------------------------------------------------------------------------- 13: close inside
class Closer(ke.App):
    where = "fixed_update"

    def setup(self):
        self.calls = []

    def _maybe_close(self, hook):
        self.calls.append(hook)
        if hook == self.where and self.calls.count(hook) == 1:
            self.close()

    def pre_update(self):
        self._maybe_close("pre_update")

    def fixed_update(self, ts):
        self._maybe_close("fixed_update")

    def pre_render(self):
        self._maybe_close("pre_render")

    def render(self, canvas, alpha):
        canvas.circle((0.0, 1.0), 0.1, (255, 0, 0))
        self._maybe_close("render")

    def post_render(self):
        self._maybe_close("post_render")


@pytest.mark.parametrize("where", ["pre_update", "fixed_update", "render", "post_render"])
def test_close_from_a_callback_ends_the_frame_cleanly(tmp_path, where):
    app = _app(tmp_path, Closer, world=ke.World(ball_scene(1)))
    app.where = where
    assert app.renderFrameOnce() is False  # no "renderer is closed" error
    assert app.calls[-1] == "post_render"  # the frame ran to its end
    assert "closed" in repr(app)
    assert app.read_rgb_pixels().shape == (120, 160, 3)  # the last frame kept
    with pytest.raises(RuntimeError, match="closed"):
        app.renderFrameOnce()
    with pytest.raises(RuntimeError, match="the App is closed"):
        app.sync.submit(lambda a: None)


def test_close_from_a_sync_call_ends_the_frame_and_start_returns(tmp_path):
    app = _app(tmp_path, Closer, world=ke.World(ball_scene(1)))
    app.where = "nowhere"
    done = app.sync.submit(lambda a: a.close())
    app.start(max_frames=100)  # returns: no error, one frame
    assert done.result(timeout=0) is None
    assert app.frame_count == 1 and app.calls[-1] == "post_render"
    assert "closed" in repr(app)


def test_close_from_setup_closes_before_any_frame(tmp_path):
    class CloseInSetup(ke.App):
        frames = 0

        def setup(self):
            self.close()

        def pre_update(self):
            self.frames += 1

    app = _app(tmp_path, CloseInSetup)
    assert app.renderFrameOnce() is False
    assert app.frames == 0 and "closed" in repr(app)


# ------------------------------------------------- a sync call's change is kept by time travel
class _Counter(ke.App):
    def setup(self):
        self.n = 0

    def state_dict(self):
        return {"n": self.n}

    def load_state_dict(self, state):
        self.n = state["n"]


def _set_n(app):
    app.n = 5
    return app.clock.current_step


def _lift(app):
    poses = app.world.body_poses.copy()
    poses[0, list(app.world.body_names).index("/World/Ball0"), 1] = 3.0
    app.world.set_body_states([0], poses, np.zeros_like(poses))
    return app.clock.current_step


@pytest.mark.parametrize("change", [_set_n, _lift], ids=["state_dict", "set_body_states"])
def test_a_change_made_by_a_sync_call_is_kept_by_seek_and_a_redo_stays_a_redo(tmp_path, change):
    # before the fix: seek(k) landed on a state without the change (n 0, the ball low),
    # and a redo over step k branched, dropping the recorded future
    app = _app(tmp_path, _Counter, world=ke.World(ball_scene(1)))
    recorded = {}

    def frame():
        app.renderFrameOnce()  # one fixed step a frame
        recorded[app.fixed_step] = (app.n, app.world.body_poses.copy())

    for _ in range(3):
        frame()
    fut = app.sync.submit(change)
    while not fut.done():
        frame()
    k = fut.result()
    assert k % app.time_travel.keyframe_every != 0  # no regular keyframe there
    assert recorded[k][0] == 5 or 3.0 in recorded[k][1][0, :, 1]
    for _ in range(30):
        frame()
    newest = app.fixed_step

    def assert_at(step):
        assert app.fixed_step == step
        n, poses = recorded[step]
        assert app.n == n and np.array_equal(app.world.body_poses, poses), step

    for step in (k, k + 1, k + 3, k - 1):  # back and forward, onto and over step k
        app.seek(step)
        assert_at(step)
    app.seek(k - 2)
    app.seek(k + 2)  # forward over k from a state without the change
    assert_at(k + 2)
    app.seek(k - 2)
    for _ in range(newest - (k - 2)):  # redo over step k, to the newest step recorded
        app.renderFrameOnce()
        assert_at(app.fixed_step)
    assert app.time_travel.branch == 0 and app.history == range(0, newest + 1)
    app.close()


def test_a_new_sync_call_that_changes_state_during_a_redo_starts_a_branch(tmp_path):
    app = _app(tmp_path, _Counter, world=ke.World(ball_scene(1)))
    for _ in range(20):
        app.renderFrameOnce()
    app.seek(4)
    fut = app.sync.submit(lambda a: setattr(a, "n", 9) or a.clock.current_step)
    while not fut.done():
        app.renderFrameOnce()
    k = fut.result()
    assert app.time_travel.branch == 1 and app.time_travel.branch_points == (k,)
    app.renderFrameOnce()
    app.seek(k)  # the new change is kept there
    assert app.n == 9
    app.seek(k - 1)
    assert app.n == 0
    app.close()


DROPPED = """
import gc, sys, weakref
import kelab as ke

class A(ke.App):
    def answer(self):
        return 42

app = ke.App(headless=True, size=(64, 48), render_hz=None,
             time_mode=ke.TimeMode.SIM_HIGH_PERF, settings="/nonexistent.json")
app.renderFrameOnce()
plain = app.sync.submit(lambda a: 42)
holding = app.sync.submit(app.renderFrameOnce)   # a call that holds the App itself
gone = weakref.ref(app)
del app
gc.collect()
assert gone() is None, "the App was kept alive"
for fut in (plain, holding):
    try:
        fut.result(timeout=5)
    except RuntimeError as exc:
        print("failed:", exc)
    else:
        sys.exit("a future of a dropped App returned")
"""


def test_a_pending_call_fails_when_its_app_is_garbage_collected_unclosed(tmp_path):
    # before the fix fut.result() blocked for ever (here: a TimeoutError after 5 s)
    out = subprocess.run(
        [sys.executable, "-c", DROPPED],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env={**os.environ, "SDL_VIDEODRIVER": "dummy"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and all("garbage-collected" in line for line in lines), out.stdout
