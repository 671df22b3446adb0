"""The App's loop: hook order, fixed steps per frame, alpha, time modes, controls, errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from app_helpers import FakeClock, ball_scene, cartpole_scene, make_app

import kelab as ke


class Recording(ke.App):
    """Logs every lifecycle hook."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.log: list[str] = []
        self.alphas: list[float] = []
        self.step_times: list[float] = []

    def setup(self):
        self.log.append("setup")

    def pre_update(self):
        self.log.append("pre_update")

    def fixed_update(self, ts):
        self.log.append("fixed_update")
        self.step_times.append(self.timeline.time_s)
        assert ts == pytest.approx(0.02)

    def late_update(self, ts):
        self.log.append("late_update")

    def pre_render(self):
        self.log.append("pre_render")

    def render(self, canvas, alpha):
        self.log.append("render")
        self.alphas.append(alpha)

    def post_render(self):
        self.log.append("post_render")


def test_hook_order_steps_per_frame_and_alpha(fake_clock: FakeClock):
    app = make_app(fake_clock, Recording)
    app.renderFrameOnce()  # the first frame only starts the clock: no steps
    assert app.log == ["setup", "pre_update", "pre_render", "render", "post_render"]
    app.log.clear()
    fake_clock.advance(0.05)  # 2.5 steps of 20 ms
    app.renderFrameOnce()
    assert app.log == [
        "pre_update",
        "fixed_update",
        "late_update",
        "fixed_update",
        "late_update",
        "pre_render",
        "render",
        "post_render",
    ]
    assert app.alphas[-1] == pytest.approx(0.5) and app.alpha == pytest.approx(0.5)
    assert app.clock.last_frame_steps == 2
    # ten 50 ms frames run exactly 25 steps in total (integer-exact accumulation)
    for _ in range(9):
        fake_clock.advance(0.05)
        app.render_frame_once()
    assert app.log.count("fixed_update") == 25 and app.alphas[-1] == 0.0
    assert app.step_times == [pytest.approx(i * 0.02) for i in range(25)]
    app.close()


def test_start_counts_frames_and_request_close(fake_clock: FakeClock):
    class Stopper(ke.App):
        def post_render(self):
            fake_clock.advance(0.02)
            if self.frame_count == 4:  # frame_count counts finished frames
                self.request_close()

    app = make_app(fake_clock, Stopper)
    app.start()
    assert app.frame_count == 5 and app.should_close()
    assert app.renderer is not None and app.renderer.closed
    app2 = make_app(fake_clock)
    app2.start(max_frames=3)
    assert app2.frame_count == 3 and app2.drawn_frames == 3
    with pytest.raises(RuntimeError, match="closed"):
        app2.renderFrameOnce()


def test_execution_order_table_and_extra_bindings(fake_clock: FakeClock):
    app = make_app(fake_clock, world=ke.World(ball_scene()))
    seen = []
    app.timeline.bind(lambda ts: seen.append(("ctrl", ts)), runner="Capture", name="capture_ctrl")
    order = app.execution_order()
    names = [(r.phase.name, r.priority, r.name, r.runner) for r in order]
    assert names == [
        ("CONTROL", -200, "fixed_update", "Robot"),
        ("CONTROL", -100, "drag_spring", "Robot"),
        ("CONTROL", 0, "capture_ctrl", "Robot")[:3] + ("Capture",),
        ("PHYSICS", 0, "world.step", "Robot"),
        ("VALIDATION", 0, "late_update", "Robot"),
        ("EXPORT", 0, "sync_point", "Sync"),
    ]
    assert "fixed_update" in str(order)
    app.renderFrameOnce()
    fake_clock.advance(0.1)
    app.renderFrameOnce()  # 5 Robot steps: Capture fires at 0, 33, 67 ms
    assert [s[1] for s in seen] == [pytest.approx(1 / 30)] * 3
    app.close()


def test_world_is_stepped_in_physics_and_drawn(fake_clock: FakeClock):
    world = ke.World(ball_scene(), num_envs=1)
    app = make_app(fake_clock, world=world, size=(200, 150), max_steps_per_frame=100)
    app.renderFrameOnce()
    fake_clock.advance(0.2)
    app.renderFrameOnce()
    assert world.step_count == 10 and world.sim_time == pytest.approx(0.2)
    img = app.read_rgb_pixels()
    assert img.shape == (150, 200, 3) and img.dtype == np.uint8
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 3  # ground, balls, background
    app.close()


def test_sim_realtime_drops_backlog(fake_clock: FakeClock):
    app = make_app(fake_clock, Recording, max_frame_delta=None, max_steps_per_frame=8)
    app.renderFrameOnce()
    fake_clock.advance(1.0)  # 50 steps due
    app.renderFrameOnce()
    assert app.log.count("fixed_update") == 8
    assert app.clock.dropped_time == pytest.approx(42 * 0.02)
    assert app.sim_time == pytest.approx(8 * 0.02)  # the simulation slowed down
    app.close()


def test_game_realtime_skips_time_and_timeline_boundaries(fake_clock: FakeClock):
    app = make_app(
        fake_clock,
        Recording,
        time_mode=ke.TimeMode.GAME_REALTIME,
        max_frame_delta=None,
        max_steps_per_frame=8,
    )
    app.renderFrameOnce()
    fake_clock.advance(1.0)
    app.renderFrameOnce()
    assert app.step_times == [pytest.approx(i * 0.02) for i in range(42, 50)]
    fake_clock.advance(0.02)
    app.renderFrameOnce()
    assert app.step_times[-1] == pytest.approx(1.0)
    assert app.sim_time == pytest.approx(1.02)
    assert app.timeline.runner("Robot").steps == 9  # skipped boundaries never ran
    app.close()


def test_sim_high_perf_ignores_wall_time_and_can_skip_drawing(fake_clock: FakeClock):
    app = make_app(
        fake_clock,
        Recording,
        time_mode=ke.TimeMode.SIM_HIGH_PERF,
        steps_per_frame=3,
        disable_viewport_rendering=True,
        render_hz=30.0,  # not applied in SIM_HIGH_PERF
    )
    for _ in range(4):
        app.renderFrameOnce()  # the wall clock never moves
    assert app.log.count("fixed_update") == 12 and app.log.count("render") == 0
    assert app.drawn_frames == 0 and fake_clock.slept == []
    app.pause()  # paused: drawing resumes so the user sees the state
    app.renderFrameOnce()
    assert app.log.count("render") == 1 and app.alphas[-1] == 1.0
    app.close()


def test_frame_delta_clamp_adds_to_dropped_wall_time(fake_clock: FakeClock):
    app = make_app(fake_clock, Recording, max_frame_delta=0.1, max_steps_per_frame=100)
    app.renderFrameOnce()
    fake_clock.advance(5.0)  # a window drag / debugger stop
    app.renderFrameOnce()
    assert app.log.count("fixed_update") == 5  # 0.1 s of 20 ms steps, not 250
    assert app.clock.dropped_wall_time == pytest.approx(4.9)
    fake_clock.advance(0.04)
    app.renderFrameOnce()
    assert app.log.count("fixed_update") == 7 and app.clock.dropped_wall_time == pytest.approx(4.9)
    app.clock.max_frame_delta = None
    fake_clock.advance(1.0)
    app.renderFrameOnce()
    assert app.log.count("fixed_update") == 57
    with pytest.raises(ValueError, match="max_frame_delta"):
        app.clock.max_frame_delta = -1.0
    app.close()


def test_pause_single_step_and_time_scale(fake_clock: FakeClock):
    app = make_app(fake_clock, Recording)
    app.renderFrameOnce()
    app.pause()
    fake_clock.advance(1.0)
    app.renderFrameOnce()
    assert app.log.count("fixed_update") == 0 and app.paused
    app.step_once()
    fake_clock.advance(0.001)
    app.renderFrameOnce()
    assert app.log.count("fixed_update") == 1
    app.resume()
    app.clock.time_scale = 0.5
    app.renderFrameOnce()  # restarts the wall-time reference
    for _ in range(4):
        fake_clock.advance(0.04)  # 0.02 s of simulated time per frame
        app.renderFrameOnce()
    assert app.log.count("fixed_update") == 5
    app.close()


def test_hotkeys_pause_step_hud_and_switch_off(fake_clock: FakeClock, tmp_path):
    app = make_app(fake_clock, Recording, recording_dir=tmp_path)
    app.renderFrameOnce()
    app.inject_event(ke.InputEvent("key_down", key="return"))
    app.renderFrameOnce()
    assert app.paused
    app.inject_event(ke.InputEvent("key_down", key="space"))  # paused: one step
    fake_clock.advance(0.5)
    app.renderFrameOnce()
    assert app.log.count("fixed_update") == 1 and app.paused
    app.inject_events(
        [ke.InputEvent("key_up", key="space"), ke.InputEvent("key_down", key="return")]
    )
    app.renderFrameOnce()
    assert not app.paused
    app.inject_event(ke.InputEvent("key_down", key="space"))  # running: pause
    app.renderFrameOnce()
    assert app.paused
    assert not app.live.show_hud
    app.inject_event(ke.InputEvent("key_down", key="f1"))
    app.renderFrameOnce()
    assert app.live.show_hud and app.stats.lines()[0].startswith("FPS")
    app.live.hotkeys = False
    app.inject_events([ke.InputEvent("key_up", key="f1"), ke.InputEvent("key_down", key="f1")])
    app.renderFrameOnce()
    assert app.live.show_hud and app.input.frame_key_pressed("f1")  # input still sees it
    app.close()


# imageio-ffmpeg (0.6) leaves ffmpeg's pipes open once a read reaches the end of an mp4
@pytest.mark.filterwarnings("ignore:unclosed file <_io.Buffered:ResourceWarning")
def test_f9_records_a_video(fake_clock: FakeClock, tmp_path):
    import imageio.v3 as iio

    app = make_app(fake_clock, recording_dir=tmp_path, time_mode=ke.TimeMode.SIM_HIGH_PERF)
    app.renderFrameOnce()
    app.inject_event(ke.InputEvent("key_down", key="f9"))
    for _ in range(10):
        app.renderFrameOnce()
    assert app.recording
    app.inject_events([ke.InputEvent("key_up", key="f9"), ke.InputEvent("key_down", key="f9")])
    app.renderFrameOnce()
    assert not app.recording
    files = sorted(tmp_path.glob("*.mp4"))
    assert [f.name for f in files] == ["KELab-000.mp4"]
    frames = iio.imread(files[0])
    assert frames.shape[0] >= 5 and frames.shape[1:] == (120, 160, 3)
    app.close()


def test_render_hz_paces_with_absolute_deadlines(fake_clock: FakeClock):
    app = make_app(fake_clock, render_hz=50.0)
    for _ in range(3):
        fake_clock.advance(0.005)  # each frame takes 5 ms of work
        app.renderFrameOnce()
    assert fake_clock.slept[1:] == [pytest.approx(0.015)] * 2
    app.close()


def test_renderframeonce_and_pacer_refused_inside_fixed_update(fake_clock: FakeClock):
    class Nested(ke.App):
        errors: list[str] = []

        def fixed_update(self, ts):
            for call in (self.renderFrameOnce, ke.SimulationPacer(0.02).wait):
                try:
                    call()
                except RuntimeError as exc:
                    self.errors.append(str(exc))

    app = make_app(fake_clock, Nested)
    app.renderFrameOnce()
    fake_clock.advance(0.02)
    app.renderFrameOnce()
    assert len(app.errors) == 2
    assert "App.renderFrameOnce() was called from inside an App fixed step" in app.errors[0]
    assert "SimulationPacer.wait() was called from inside an App fixed step" in app.errors[1]
    app.close()


def test_renderframeonce_refused_inside_a_frame_callback(fake_clock: FakeClock):
    class Nested(ke.App):
        def render(self, canvas, alpha):
            self.renderFrameOnce()

    app = make_app(fake_clock, Nested)
    with pytest.raises(RuntimeError, match="inside a frame callback.*'render'"):
        app.start(max_frames=2)
    assert app.renderer.closed


# imageio-ffmpeg (0.6) leaves ffmpeg's pipes open once a read reaches the end of an mp4
@pytest.mark.filterwarnings("ignore:unclosed file <_io.Buffered:ResourceWarning")
@pytest.mark.parametrize("where", ["fixed_update", "render", "setup", "late_update"])
def test_exception_closes_window_and_recorders(fake_clock: FakeClock, tmp_path, where):
    import imageio.v3 as iio

    class Crashing(ke.App):
        def setup(self):
            self.n = 0
            if where == "setup":
                raise ValueError("boom")

        def fixed_update(self, ts):
            self.n += 1
            if where == "fixed_update" and self.n == 40:
                raise ValueError("boom")

        def late_update(self, ts):
            if where == "late_update" and self.n == 40:
                raise ValueError("boom")

        def render(self, canvas, alpha):
            if where == "render" and self.n >= 40:
                raise ValueError("boom")

    world = ke.World(cartpole_scene())
    app = make_app(fake_clock, Crashing, world=world, time_mode=ke.TimeMode.SIM_HIGH_PERF)
    data = app.add_recorder(ke.DataRecorder(tmp_path / "log.csv"))
    video = app.add_recorder(ke.VideoRecorder(tmp_path / "run.mp4"))
    with pytest.raises(ValueError, match=f"boom.*{where}") as err:
        app.start(max_frames=1000)
    shown = [str(err.value), *getattr(err.value, "__notes__", [])]
    assert " ".join(shown).count("raised in") == 1, shown  # where: once, in the message
    assert app.renderer.closed and app.should_close()
    assert data.closed and video.closed
    if where == "setup":
        return
    table = np.loadtxt(tmp_path / "log.csv", delimiter=",", skiprows=1)
    assert table.shape[0] == data.rows > 20 and table.shape[1] == len(data.columns)
    assert iio.imread(tmp_path / "run.mp4").shape[0] == video.frames > 10


def test_keyboard_interrupt_also_closes(fake_clock: FakeClock, tmp_path):
    class Interrupted(ke.App):
        def pre_update(self):
            if self.frame_count == 3:
                raise KeyboardInterrupt

    app = make_app(fake_clock, Interrupted)
    rec = app.add_recorder(
        ke.DataRecorder(tmp_path / "t.npz", bodies=(), signals={"one": lambda: 1.0})
    )
    with pytest.raises(KeyboardInterrupt):
        app.start()
    assert app.renderer.closed and rec.closed and (tmp_path / "t.npz").exists()


@pytest.mark.parametrize("backend", ["pygame", "gl"])
def test_pixels_through_the_app_headless(fake_clock: FakeClock, tmp_path, backend):
    class Dot(ke.App):
        def render(self, canvas, alpha):
            canvas.circle(self.camera.center, 0.2, (255, 0, 0))

    app = make_app(fake_clock, Dot, backend=backend, size=(64, 48), background=(0, 0, 255))
    app.start(max_frames=2)  # closed now: the last frame is kept
    img = app.read_rgb_pixels()
    assert img.shape == (48, 64, 3) and img.dtype == np.uint8
    # the backdrop is `background` in the lower half, shading paler towards the top
    assert tuple(img[24, 32]) == (255, 0, 0) and tuple(img[46, 1]) == (0, 0, 255)
    assert tuple(img[0, 1]) != (0, 0, 255)
    assert np.array_equal(app.read_rgb_pixels(flip_y=False), img[::-1])
    path = app.write_pixels_png(tmp_path / "shot.png")
    import imageio.v3 as iio

    assert np.array_equal(iio.imread(path)[..., :3], img)


@pytest.mark.parametrize("backend", ["pygame", "gl"])
def test_windowed_app_under_x(real_window, backend):
    world = ke.World(cartpole_scene())

    class Windowed(ke.App):
        def setup(self):
            self.had_window = self.renderer is not None and not self.renderer.headless

    cam = ke.Camera(center=(0.0, 0.5), zoom=40.0)
    app = Windowed(backend=backend, size=(160, 120), world=world, render_hz=None, camera=cam)
    app.start(max_frames=4)
    assert app.had_window and app.renderer.closed and app.drawn_frames == 4
    img = app.read_rgb_pixels()
    assert img.shape == (120, 160, 3) and len(np.unique(img.reshape(-1, 3), axis=0)) > 3


def test_validation_messages():
    with pytest.raises(ValueError, match="App.backend"):
        ke.App(backend="vulkan")
    with pytest.raises(ValueError, match="App.render_hz"):
        ke.App(render_hz=0)
    with pytest.raises(ValueError, match="App.time_mode"):
        ke.App(time_mode="fast")
    with pytest.raises(ValueError, match="App.world must be a ke.World .*, got <object object at"):
        ke.App(world=object())
    with pytest.raises(ValueError, match="App.camera must be a ke.Camera, got 'top'"):
        ke.App(camera="top")
    app = ke.App(headless=True, render_hz=None)
    for bad in (-1, True, 2.0):
        with pytest.raises(
            ValueError, match=f"App.start max_frames must be an int >= 0, got {bad}; or None"
        ):
            app.start(max_frames=bad)
    with pytest.raises(
        ValueError, match="App.inject_event\\(event\\) must be a ke.InputEvent, got 'q'"
    ):
        app.inject_event("q")
    app.close()
    with pytest.raises(KeyError, match="no time runner named 'Main'"):
        ke.App(runner="Main")


def test_app_config_is_the_full_form_and_keywords_the_shorthand(fake_clock: FakeClock):
    from kelab.app import AppConfig

    cfg = AppConfig(size=[160, 120], headless=True, render_hz=None, max_steps_per_frame=3)
    assert cfg.size == (160, 120) and cfg.recording_dir.name == "recordings"
    full = ke.App(config=cfg, clock=fake_clock, title="x")  # a keyword replaces a field
    short = ke.App(size=(160, 120), headless=True, render_hz=None, max_steps_per_frame=3, title="x")
    assert full.config == short.config and full.config.title == "x" and cfg.title == "KELab"
    assert full.clock.max_steps_per_frame == 3 and full.config.size == (160, 120)
    with pytest.raises(TypeError, match="unknown settings \\['titel'\\]"):
        ke.App(titel="x")
    with pytest.raises(TypeError, match="only positional argument is an AppConfig"):
        ke.App("title")
    with pytest.raises(ValueError, match="App.headless must be True or False, got 1"):
        AppConfig(headless=1)
    with pytest.raises(ValueError, match="App.size must be two positive ints"):
        AppConfig(size=(0, 10))
    with pytest.raises(ValueError, match="App.max_steps_per_frame must be an int >= 1"):
        AppConfig(max_steps_per_frame=0)
    with pytest.raises(ValueError, match="App.background"):
        AppConfig(background=(0, 0, 300))
    with pytest.raises(ValueError, match="App.time_scale"):
        AppConfig(time_scale=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.title = "y"  # type: ignore[misc]
    full.close()
    short.close()


def test_live_settings_have_one_home(fake_clock: FakeClock):
    """What changes while running lives in app.live or app.clock, never as App copies."""
    from kelab.app.config import LIVE_SETTINGS, LiveSettings

    app = make_app(fake_clock, show_hud=False, time_scale=2.0)
    assert isinstance(app.live, LiveSettings)
    for name in [*LIVE_SETTINGS, "time_scale", "time_mode", "max_frame_delta", "title"]:
        assert name not in vars(app), name  # no copied field beside config/live/clock
    app.renderFrameOnce()
    app.inject_event(ke.InputEvent("key_down", key="f1"))
    app.renderFrameOnce()
    assert app.live.show_hud and not app.config.show_hud  # F1 edits the live home
    app.live.render_hz = 30
    assert app.live.render_hz == 30.0 and app.config.render_hz is None
    with pytest.raises(ValueError, match="App.render_hz must be a finite number > 0 or None"):
        app.live.render_hz = 0
    with pytest.raises(ValueError, match="App.background"):
        app.live.background = (0, 0, 300)
    with pytest.raises(ValueError, match="App.hotkeys must be True or False, got 1"):
        app.live.hotkeys = 1
    with pytest.raises(AttributeError, match="App.live has no setting 'time_scale'"):
        app.live.time_scale = 1.0
    assert app.live.render_hz == 30.0 and app.live.background == app.config.background
    assert app.clock.time_scale == 2.0 and not hasattr(app, "time_scale")
    app.set_time_mode(ke.TimeMode.SIM_HIGH_PERF)
    assert app.clock.time_mode is ke.TimeMode.SIM_HIGH_PERF
    with pytest.raises(ValueError, match="FixedStepClock.time_mode"):
        app.set_time_mode("fast")  # type: ignore[arg-type]
    app.close()


def test_main_runner_rate_change_moves_the_fixed_step(fake_clock: FakeClock, tmp_path):
    class Steps(ke.App):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.ts: list[float] = []

        def fixed_update(self, ts):
            self.ts.append(ts)

    app = make_app(fake_clock, Steps, settings=tmp_path / "steps.kelab.json")
    app.renderFrameOnce()
    fake_clock.advance(0.1)
    app.renderFrameOnce()
    assert app.ts == [0.02] * 5
    assert app.panel.set_runner_hz("Robot", 25)  # what the Settings panel does
    fake_clock.advance(0.05)
    app.renderFrameOnce()
    assert app.ts[5:] == [0.04] and app.clock.step_dt == pytest.approx(0.04)
    assert app.alpha == pytest.approx(0.25)  # 10 ms of a 40 ms step, not half a 20 ms one
    assert app.timeline.runner("Robot").steps == 6 == app.clock.steps
    app.close()


def test_dragging_and_recordings_are_collaborators_the_app_owns(fake_clock: FakeClock, tmp_path):
    from kelab.app.dragging import Dragging
    from kelab.app.recordings import Recordings

    app = make_app(fake_clock, world=ke.World(ball_scene()), recording_dir=tmp_path)
    assert isinstance(app.dragging, Dragging) and isinstance(app.recordings, Recordings)
    app.renderFrameOnce()
    video = app.start_video_recording()
    assert app.recording and app.recordings.video is video and app.recorders == (video,)
    assert video.path.parent == tmp_path
    app.inject_event(
        ke.InputEvent("mouse_down", button=1, pos=app.camera.world_to_screen((-1.0, 0.2)))
    )
    fake_clock.advance(0.02)
    app.renderFrameOnce()
    assert app.dragged is app.dragging.dragged and app.dragged.path == "/World/Ball0"
    assert app.stop_video_recording() == video.path and not app.recording
    app.close()
    assert app.dragging.dragged is None and app.recorders == ()


def test_execution_order_after_close_keeps_what_ran(fake_clock: FakeClock, tmp_path):
    """After start() returns, the table still lists the recorders that ran (#39 item 5)."""
    world = ke.World(cartpole_scene())
    app = make_app(fake_clock, world=world, time_mode=ke.TimeMode.SIM_HIGH_PERF)
    app.add_recorder(ke.DataRecorder(tmp_path / "log.csv"))
    running = [(r.phase, r.priority, r.name, r.runner) for r in app.execution_order()]
    assert any("DataRecorder" in name or "log.csv" in name for _, _, name, _ in running)
    app.start(max_frames=3)
    after = [(r.phase, r.priority, r.name, r.runner) for r in app.execution_order()]
    assert after == running


def test_viewport_off_outside_high_perf_warns(fake_clock: FakeClock):
    """disable_viewport_rendering only acts in SIM_HIGH_PERF: elsewhere a warning says so."""
    with pytest.warns(UserWarning, match="disable_viewport_rendering.*SIM_HIGH_PERF"):
        app = make_app(fake_clock, disable_viewport_rendering=True)
    app.close()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_app(
            fake_clock, disable_viewport_rendering=True, time_mode=ke.TimeMode.SIM_HIGH_PERF
        ).close()
        make_app(fake_clock).close()
