"""RLPlayer interactive: the policy acts in the App's fixed_update; pause, step, drag."""

from __future__ import annotations

import numpy as np
import pytest

import kelab as ke
from kelab.tasks.cartpole import CartPoleTask
from kelab.train.interactive import policy_app
from kelab.train.shipped import shipped_policy


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


def _frames(app, clock, n, dt=1 / 60):
    for _ in range(n):
        clock.now += dt
        app.renderFrameOnce()


def _screen(app, point):
    x, y = app.camera.world_to_screen(point)
    return (int(round(x)), int(round(y)))


def test_policy_plays_in_an_app_window_with_pause_step_and_drag(real_window):
    player = ke.RLPlayer(shipped_policy("kelab.tasks.cartpole:CartPoleTask"), render_mode=None)
    env = ke.DirectRLEnv(CartPoleTask(), seed=4)
    clock = Clock()
    app = policy_app(env, player.act, episodes=5, seed=4, size=(320, 240), render_hz=None,
                     clock=clock, sleep=clock.sleep)  # fmt: skip
    _frames(app, clock, 30)
    assert app.renderer is not None and not app.renderer.headless  # a real window
    steps = app.env_steps
    assert steps >= 25  # one env step per fixed step at 60 Hz
    assert abs(env.unwrapped.task.pole_angle()[0]) < 0.2  # the policy balances
    app.pause()
    _frames(app, clock, 10)
    assert app.env_steps == steps  # paused: no env steps
    app.step_once()
    _frames(app, clock, 1)
    assert app.env_steps == steps + 1
    app.resume()
    # drag the pole tip sideways with the mouse: the policy has to fight the push
    world = env.unwrapped.world
    pole = world.body_names.index("/World/Robot/pole")
    tip = tuple(world.body_poses[0, pole, :2])
    app.inject_event(ke.InputEvent("mouse_move", pos=_screen(app, tip)))
    app.inject_event(ke.InputEvent("mouse_down", button=1, pos=_screen(app, tip)))
    _frames(app, clock, 2)
    assert app.dragged is not None and app.dragged.path == "/World/Robot/pole"
    target = (tip[0] + 1.0, tip[1])
    app.inject_event(ke.InputEvent("mouse_move", pos=_screen(app, target)))
    pushes = []
    for _ in range(10):  # the pull may topple the pole: the episode then resets
        _frames(app, clock, 1)
        pushes.append(float(np.abs(world.external_forces).sum()))
    assert pushes[0] > 0  # the drag spring pushes
    app.inject_event(ke.InputEvent("mouse_up", button=1, pos=_screen(app, target)))
    _frames(app, clock, 2)
    assert app.dragged is None
    # it kept playing, or the pull toppled the pole: that episode ended and goes on limp
    assert app.env_steps > steps + 10 or len(app.results) == 1
    pixels = app.read_rgb_pixels()
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 10
    app.close()
    env.close()


def test_an_early_ending_goes_on_limp_then_restarts_and_is_reported_at_once():
    from kelab.train.interactive import FALL_HOLD_S

    env = ke.DirectRLEnv(CartPoleTask(), seed=2)
    ended = []
    app = policy_app(
        env, lambda obs: np.ones(1, dtype=np.float32), episodes=None, seed=2, size=(320, 240),
        render_hz=None, headless=True, on_episode=lambda n, info: ended.append((n, info)),
    )  # fmt: skip
    hz = env.unwrapped.timing.control_hz
    pole = env.unwrapped.world.body_names.index("/World/Robot/pole")
    while not ended:  # full force one way: the pole falls, the task ends the episode
        app.fixed_update(1.0 / hz)
    assert len(app.results) == 1 and ended[0][0] == 1
    assert ended[0][1]["ended_by"] == app.results[0]["ended_by"] != "time limit"
    steps, angle = app.env_steps, env.unwrapped.world.body_poses[0, pole, 2]
    hold = round(FALL_HOLD_S * hz)
    for _ in range(hold - 1):  # the physics goes on (limp), the env is not stepped
        app.fixed_update(1.0 / hz)
    assert app.env_steps == steps and app.episode_steps > 0
    assert env.unwrapped.world.body_poses[0, pole, 2] != angle  # the fall went on
    app.fixed_update(1.0 / hz)  # the hold's last step restarts the episode
    assert app.episode_steps == 0 and len(app.results) == 1 and not app.done
    # exactly the env's own restart: the same first observation and World as without the App
    ref = ke.DirectRLEnv(CartPoleTask(), seed=2)
    ref.reset(seed=2)
    while not ref.step(np.ones(1, dtype=np.float32))[2]:
        pass
    first, _ = ref.reset()
    np.testing.assert_array_equal(app.obs, first)
    np.testing.assert_array_equal(env.unwrapped.world.body_poses, ref.unwrapped.world.body_poses)
    ref.close()
    app.fixed_update(1.0 / hz)
    assert app.env_steps == steps + 1 and app.episode_steps == 1
    app.renderFrameOnce()  # draws the status line (episode 2, the banner of episode 1's ending)
    app.close()
    env.close()


def test_play_until_closed_needs_interactive():
    player = ke.RLPlayer(shipped_policy("kelab.tasks.cartpole:CartPoleTask"), render_mode=None)
    with pytest.raises(ValueError, match="episodes=None .* needs interactive=True"):
        player.play(episodes=None)
    player.close()


def _played(app) -> tuple:
    import hashlib

    w = app.world
    raw = b"".join(np.ascontiguousarray(a).tobytes() for a in (w.body_poses, w.body_velocities))
    rets = tuple(float(r["episode_return"]) for r in app.results)
    return (hashlib.sha256(raw).hexdigest(), app.obs.tobytes(), app.env_steps,
            app.episode_steps, rets, app._hold)  # fmt: skip


def test_rewind_before_a_fall_redo_it_exactly_then_drag_and_the_policy_goes_on():
    import warnings

    env = ke.DirectRLEnv(CartPoleTask(), seed=2)
    push = lambda obs: np.ones(1, dtype=np.float32)  # noqa: E731 - full force: a fall
    reported = []
    app = policy_app(env, push, episodes=None, seed=2, size=(320, 240), render_hz=None,
                     headless=True, time_mode=ke.TimeMode.SIM_HIGH_PERF,
                     on_episode=lambda n, info: reported.append(n))  # fmt: skip
    seen = {}
    while len(app.results) < 2:  # two falls, each held limp, then restarted
        app.renderFrameOnce()
        seen[app.fixed_step] = _played(app)
    fell = min(k for k, v in seen.items() if v[4])  # the step the first fall was reported
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the App has its state hooks: no warning
        app.seek(fell - 5)
    assert _played(app) == seen[fell - 5] and app.results == []
    newest = max(seen)
    app.seek(newest)  # a jump over both falls (from a keyframe): their results come back
    assert _played(app) == seen[newest] and len(app.results) == 2
    app.seek(fell - 5)
    app.seek(fell + 3)  # inside the fall's limp hold (a re-run through the fall)
    assert _played(app) == seen[fell + 3] and app._hold > 0
    assert reported == [1, 2]  # a seek's re-run does not report the fall again
    app.seek(fell - 5)
    while app.fixed_step < newest:  # resumed untouched: the recorded episodes come back
        app.renderFrameOnce()
        assert _played(app) == seen[app.fixed_step]
    assert app.time_travel.branch == 0 and len(app.results) == 2
    # rewind before the second fall, drag the pole: a branch, the policy goes on from there
    second = min(k for k, v in seen.items() if len(v[4]) == 2)
    app.seek(second - 8)
    pole = env.unwrapped.world.body_names.index("/World/Robot/pole")
    tip = tuple(env.unwrapped.world.body_poses[0, pole, :2])
    app.inject_event(ke.InputEvent("mouse_move", pos=_screen(app, tip)))
    app.inject_event(ke.InputEvent("mouse_down", button=1, pos=_screen(app, tip)))
    app.renderFrameOnce()
    to = (tip[0] - 1.0, tip[1])
    app.inject_event(ke.InputEvent("mouse_move", pos=_screen(app, to)))
    for _ in range(5):
        app.renderFrameOnce()
    app.inject_event(ke.InputEvent("mouse_up", button=1, pos=_screen(app, to)))
    assert _played(app) != seen[app.fixed_step]  # pushed: another future
    at = app.fixed_step
    for _ in range(10):
        app.renderFrameOnce()
    assert app.time_travel.branch == 1 and app.time_travel.branch_points == (second - 8,)
    assert app.fixed_step == at + 10
    app.close()
    env.close()


def test_a_small_window_with_the_panel_open_shows_the_robot_and_the_hints(real_window, tmp_path):
    """At 640x480 with the Settings panel open: the status and hint lines sit below the
    menu bar and left of the panel, the robot is drawn left of the panel (read back from
    the window's pixels) and the footer names the file plainly (#42 item 5)."""
    import imageio.v3 as iio

    from kelab.tasks.humanoid import HumanoidTask

    env = ke.DirectRLEnv(HumanoidTask(), seed=0)
    n = env.action_space.shape[-1]
    clock = Clock()
    app = policy_app(env, lambda obs: np.zeros(n, np.float32), episodes=None, seed=0,
                     size=(640, 480), render_hz=None, clock=clock, sleep=clock.sleep)  # fmt: skip
    try:
        app.panel_open = True
        _frames(app, clock, 12)
        canvas = app.renderer.canvas
        (px0, py0, px1, py1) = app.panel_window.rects(app.camera.size)[0]
        ours = ("episode", "Space", "paused", "the mouse", "drag")
        boxes = zip(canvas.text_boxes(), canvas.frame_texts, strict=True)
        status = [b for b, t in boxes if t[2].startswith(ours)]
        world = env.unwrapped.world
        robot = [_screen(app, p[:2]) for p in world.body_poses[0]]
        footer = app.panel_window._host.ui.footer
        png = app.write_pixels_png(tmp_path / "humanoid_640.png")
    finally:
        app.close()
    assert len(status) >= 2
    for x0, y0, x1, y1 in status:
        assert y0 >= app.menu.height and x1 <= px0, ((x0, y0, x1, y1), (px0, py0))
    assert all(0 < x < px0 for x, _ in robot), (robot, px0)
    img = iio.imread(png)[..., :3].astype(int)
    blue = (img[..., 2] > 150) & (img[..., 2] - img[..., 0] > 80)  # the robot's links
    ys, xs = np.nonzero(blue[py1 + 4 :])  # below the panel (the ImGui panel has blue too)
    left = np.nonzero(blue[:, :px0])[0]
    assert left.size > 500, left.size  # the robot, in the room left of the panel
    assert xs.size == 0 or xs.max() < px0 + 4, xs.max()
    assert footer.startswith("KELab-HumanoidTask-policy-"), footer
