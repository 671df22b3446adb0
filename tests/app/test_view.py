"""The App's view: follow a body, wheel zoom, drag to pan, reset; HUD placement; Escape."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from app_helpers import FakeClock, make_app

import kelab as ke
from kelab.app.hud import free_corner
from kelab.app.view import ViewController


def _drifting_ball_world(vx: float = 3.0, vy: float = 0.6) -> ke.World:
    b = ke.SceneBuilder()
    b.gravity = (0.0, 0.0)
    b.add(ke.Prop(ke.Circle(0.2), mass=1.0, initial_pose=ke.Pose(0.0, 1.0)), at="/World/Ball")
    world = ke.World(b.build())
    poses, vels = world.body_poses, world.body_velocities
    vels[0, 0] = (vx, vy, 0.0)
    world.set_body_states([0], poses, vels)
    return world


def _run(app: ke.App, clock: FakeClock, frames: int, each=None) -> None:
    for i in range(frames):
        clock.advance(1 / 60)
        assert app.renderFrameOnce()
        if each is not None:
            each(i)


@pytest.mark.parametrize("axes", ["x", "xy"])
def test_follow_keeps_a_moving_body_in_frame_for_10_s(fake_clock, axes):
    world = _drifting_ball_world(vy=0.0 if axes == "x" else 0.6)
    app = make_app(fake_clock, world=world, follow="/World/Ball", size=(200, 150))
    app.view.follow_axes = axes
    seen = []

    def check(_):
        cam = app.camera
        sx, sy = cam.world_to_screen(world.body_poses[0, 0, :2])
        w, h = cam.size
        seen.append((sx, sy))
        assert 0.1 * w < sx < 0.9 * w and 0.1 * h < sy < 0.9 * h, (sx, sy, app.sim_time)

    _run(app, fake_clock, 600, check)
    assert app.sim_time == pytest.approx(10.0, abs=0.03)
    assert world.body_poses[0, 0, 0] > 25.0  # it really travelled ~30 m
    app.close()


def test_without_follow_the_body_leaves_the_frame(fake_clock):
    world = _drifting_ball_world()
    app = make_app(fake_clock, world=world, size=(200, 150))
    _run(app, fake_clock, 120)
    sx, _ = app.camera.world_to_screen(world.body_poses[0, 0, :2])
    assert sx > 200
    app.close()


def test_follow_of_an_unknown_body_names_the_fix():
    world = _drifting_ball_world()
    view = ViewController("/World/Bal")
    with pytest.raises(ValueError, match="follow must name a body.*did you mean"):
        view.body_position(world)
    world.close()


def test_app_follow_of_an_unknown_body_is_refused_when_made(fake_clock):
    # before: accepted, and the first frame ended the App
    world = _drifting_ball_world()
    with pytest.raises(ValueError, match="^follow must name a body.*got '/World/Nope'"):
        make_app(fake_clock, world=world, follow="/World/Nope")
    app = make_app(fake_clock, follow="/World/Nope")  # no World: nothing to check, unused
    app.renderFrameOnce()
    app.close()
    world.close()


def test_wheel_zoom_keeps_the_point_under_the_cursor_and_pan_and_reset(fake_clock):
    world = _drifting_ball_world(0.0, 0.0)
    app = make_app(fake_clock, world=world, camera=ke.Camera((0.0, 1.0), 100.0))
    _run(app, fake_clock, 1)
    cam = app.camera
    home = (cam.center, cam.zoom)
    cursor = (40, 30)
    before = cam.screen_to_world(cursor)
    app.inject_event(ke.InputEvent("mouse_wheel", wheel=(0.0, 2.0), pos=cursor))
    _run(app, fake_clock, 1)
    assert cam.zoom == pytest.approx(100.0 * 1.15**2)
    assert cam.screen_to_world(cursor) == pytest.approx(before)
    # middle-button drag pans: the grabbed world point stays under the pointer
    grab = cam.screen_to_world((80, 60))
    app.inject_events(
        [
            ke.InputEvent("mouse_move", pos=(80, 60)),
            ke.InputEvent("mouse_down", button=2, pos=(80, 60)),
            ke.InputEvent("mouse_move", pos=(120, 40)),
            ke.InputEvent("mouse_up", button=2, pos=(120, 40)),
        ]
    )
    _run(app, fake_clock, 1)
    assert cam.screen_to_world((120, 40)) == pytest.approx(grab)
    assert app.dragged is None  # a pan, not a body drag
    app.inject_event(ke.InputEvent("key_down", key="home"))
    _run(app, fake_clock, 1)
    assert (cam.center, cam.zoom) == home
    app.close()


def test_escape_quits_unless_switched_off(fake_clock):
    app = make_app(fake_clock)
    app.inject_event(ke.InputEvent("key_down", key="escape"))
    fake_clock.advance(1 / 60)
    assert not app.renderFrameOnce()  # the frame ran and the App asks to close
    app.close()
    keep = make_app(fake_clock, escape_quits=False)
    keep.inject_event(ke.InputEvent("key_down", key="escape"))
    fake_clock.advance(1 / 60)
    assert keep.renderFrameOnce()
    keep.close()
    assert "escape" in ke.app.app.HOTKEYS


class _Texty(ke.App):
    corners = ("tl",)

    def render(self, canvas, alpha):
        w, h = canvas.camera.size
        if "tl" in self.corners:
            canvas.text((10, 8), "drag: left button on a body   spawn", (255, 255, 255), 15, True)
            canvas.text((10, 30), "spawned 4", (255, 255, 255), 18, True)
        if "tr" in self.corners:
            canvas.text((w - 200, 10), "t =   2.467 s   red: shared", (255, 255, 255), 16, True)
        self.app_boxes = canvas.text_boxes()


@pytest.mark.parametrize("corners", [("tl",), ("tl", "tr")])
def test_hud_and_recording_badge_do_not_cover_app_text(fake_clock, tmp_path, corners):
    app = make_app(fake_clock, _Texty, size=(640, 360), show_hud=True, recording_dir=tmp_path)
    app.corners = corners
    _run(app, fake_clock, 3)
    app.start_video_recording(tmp_path / "v.mp4")
    _run(app, fake_clock, 3)
    boxes = app.renderer.canvas.text_boxes()
    app_text = app.app_boxes
    assert len(app_text) == len(corners) + ("tl" in corners)
    hud = boxes[len(app_text) :]
    assert len(hud) > 4  # the HUD's lines and the badge

    def overlap(a, b):
        return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])

    for mine in hud:
        for theirs in app_text:
            assert not overlap(mine, theirs), (mine, theirs)
    app.stop_video_recording()
    app.close()


def test_free_corner_prefers_top_right_then_the_least_covered():
    assert free_corner((400, 300), (100, 50), []) == (294, 6, 394, 56)
    assert free_corner((400, 300), (100, 50), [(300, 0, 400, 40)])[:2] == (6, 6)
    full_top = [(0, 0, 400, 60)]
    assert free_corner((400, 300), (100, 50), full_top)[1] == 300 - 6 - 50


def test_f9_prints_where_the_video_went(fake_clock, tmp_path, capsys):
    app = make_app(fake_clock, recording_dir=tmp_path, size=(64, 48))
    app.inject_event(ke.InputEvent("key_down", key="f9"))
    _run(app, fake_clock, 20)
    app.inject_event(ke.InputEvent("key_down", key="f9"))
    _run(app, fake_clock, 1)
    out = capsys.readouterr().out
    assert "recording video to" in out and "saved video" in out
    saved = Path(out.split("saved video ", 1)[1].split(" (")[0])
    assert saved.exists() and saved.parent == tmp_path.resolve()
    app.close()


def test_multi_rate_strip_leaves_the_ground_and_labels_whole(fake_clock):
    demos = Path(__file__).resolve().parents[2] / "demos"
    sys.path.insert(0, str(demos))
    try:
        import multi_rate
    finally:
        sys.path.remove(str(demos))
    world = ke.World(multi_rate.build_scene())
    app = make_app(fake_clock, multi_rate.MultiRate, world=world, size=(960, 540))
    _run(app, fake_clock, 40)
    cam = app.camera
    strip_top = 540 - multi_rate.STRIP_PX
    ground = cam.world_to_screen((0.0, 0.0))[1]
    assert ground < strip_top - 30  # a band of ground shows above the strip
    wheel_bottom = cam.world_to_screen((0.0, world.body_poses[0, 1, 1] - 0.2))[1]
    assert wheel_bottom < strip_top
    boxes = app.renderer.canvas.text_boxes()
    labels = [b for b in boxes if b[1] > strip_top]
    assert len(labels) == 2 and all(b[0] >= 0 for b in labels)
    widths = sorted(b[2] - b[0] for b in labels)
    assert widths[0] > 25  # "Robot" and "Capture" whole, not "Rob"/"Cap"
    img = app.read_rgb_pixels()
    assert img[int(ground) + 10, 5].tolist() != img[strip_top + 5, 5].tolist()
    app.close()
    world.close()
    np.testing.assert_array_less(0, widths)


def _demo_module(name: str):
    demos = Path(__file__).resolve().parents[2] / "demos"
    sys.path.insert(0, str(demos))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(demos))


def test_cartpole_keyboard_key_press_walks_the_cart_with_the_pole_up(fake_clock):
    demo = _demo_module("cartpole_keyboard")
    world = ke.World(demo.build_scene())
    app = make_app(fake_clock, demo.CartpoleKeys, world=world, size=(320, 180))
    hinge = world.joint_names.index("/World/Robot/cart_to_pole")
    slider = world.joint_names.index("/World/Robot/slider_to_cart")
    worst = 0.0

    def each(frame: int) -> None:
        nonlocal worst
        if frame == 10:
            app.inject_event(ke.InputEvent("key_down", key="right"))
        if frame == 46:  # held 0.6 s
            app.inject_event(ke.InputEvent("key_up", key="right"))
        worst = max(worst, abs(float(world.joint_positions[0, hinge])))

    _run(app, fake_clock, 180, each)
    assert worst < 0.3  # the pole never falls (a 30 N push threw it flat)
    assert world.joint_positions[0, slider] > 0.2  # and the cart moved right
    assert abs(world.joint_positions[0, hinge]) < 0.05  # upright at the end
    boxes = app.renderer.canvas.text_boxes()
    assert any(b[1] > 180 - 80 for b in boxes)  # the alpha chart has its label
    app.close()


def test_playground_crate_lands_on_the_ground_not_in_it(fake_clock):
    demo = _demo_module("physics_playground")
    world = ke.World(demo.build_scene())
    timeline = ke.Timeline()
    timeline.add_runner("Physics", demo.PHYSICS_HZ)
    app = make_app(
        fake_clock,
        demo.Playground,
        world=world,
        timeline=timeline,
        runner="Physics",
        max_steps_per_frame=16,
    )
    _run(app, fake_clock, 1)
    app.spawns.append(("crate", (0.0, 4.0)))
    crate = app.pools["crate"][0]
    lowest = np.inf

    def each(_):
        nonlocal lowest
        x, y, a = world.body_poses[0, crate]
        corners = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * 0.175
        lowest = min(lowest, float((y + corners @ np.array([np.sin(a), np.cos(a)])).min()))

    _run(app, fake_clock, 90, each)
    assert world.body_poses[0, crate, 1] < 0.3  # it landed
    assert lowest > -0.03  # at 50 Hz physics it sank 0.18 m into the ground
    app.close()
