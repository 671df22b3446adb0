"""Every demo runs headless from the command line and writes a non-blank PNG."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from prestart import Prestart

import kelab as ke

# imageio-ffmpeg (0.6) leaves ffmpeg's stdin/stdout pipes open once a read reaches the
# end of an mp4 (read_frames closes them only while ffmpeg still runs): ignore just that
IMAGEIO_PIPES = "ignore:unclosed file <_io.Buffered:ResourceWarning"

DEMOS = Path(__file__).resolve().parents[2] / "demos"
CASES = [
    ("physics_playground.py", "pygame", 200),
    ("cartpole_keyboard.py", "gl", 120),
    ("multi_rate.py", "pygame", 100),
    ("manual_loop.py", "gl", 120),
]


def _demo_command(demo: str, backend: str, frames: int) -> Callable[[Path], list[str]]:
    def command(folder: Path) -> list[str]:
        return [
            sys.executable,
            str(DEMOS / demo),
            "--headless",
            "--frames",
            str(frames),
            "--out",
            str(folder / "shot.png"),
            "--backend",
            backend,
            "--record-dir",
            str(folder / "rec"),
        ]

    return command


#: The headless ``--frames`` default each demo's ``--help`` names
FRAMES_DEFAULT = {"physics_playground.py": 200, "cartpole_keyboard.py": 180, "manual_loop.py": 200}


#: Each demo's headless run (~2 s each), started early beside the suite (tests/prestart.py)
RUNS = {
    demo: Prestart(
        _demo_command(demo, backend, frames),
        env=dict(os.environ, PYGAME_HIDE_SUPPORT_PROMPT="1"),
        timeout=60,
    )
    for demo, backend, frames in CASES
}


def _demo_module(monkeypatch, name: str):
    """Import a demo script as a module (its folder on sys.path, as when it runs)."""
    monkeypatch.syspath_prepend(str(DEMOS))
    return importlib.import_module(name)


def _fast_app(cls, world, **settings):
    """The demo's App, headless, stepping many fixed steps per frame without drawing."""
    return cls(
        world=world,
        headless=True,
        time_mode=ke.TimeMode.SIM_HIGH_PERF,
        render_hz=None,
        disable_viewport_rendering=True,
        **settings,
    )


def test_multi_rate_controller_balances_for_minutes_and_recovers_from_a_knock(monkeypatch):
    """The balance controller keeps the pole up and the cart mid-track: 30 s, knock, 60 s."""
    mr = _demo_module(monkeypatch, "multi_rate")
    world = ke.World(mr.build_scene())
    app = _fast_app(mr.MultiRate, world, steps_per_frame=250)  # 5 s per frame
    states: list[np.ndarray] = []
    app.timeline.bind(
        lambda ts: states.append(world.joint_positions[0].copy()),
        runner="Robot",
        phase=ke.Phase.VALIDATION,
        priority=10,
        name="probe",
    )
    try:
        for _ in range(6):
            app.renderFrameOnce()
        calm = np.array(states)  # (x, theta) every 20 ms for 30 s
        assert len(calm) == 1500
        assert np.abs(calm[:, 1]).max() < 0.05, "the pole left upright"
        assert np.abs(calm[:, 0]).max() < 0.1, "the cart left the middle"
        # knock it: the pole 0.3 rad over, the cart 1 m right of the middle
        names = world.body_names
        cart, pole = names.index("/World/Robot/cart"), names.index("/World/Robot/pole")
        poses = world.body_poses[:1]
        theta, x = 0.3, 1.0
        poses[0, cart, 0] = x
        poses[0, pole, :] = (
            x - 0.5 * np.sin(theta),
            poses[0, cart, 1] + 0.1 + 0.5 * np.cos(theta),
            theta,
        )
        world.set_body_states([0], poses)
        states.clear()
        for _ in range(12):
            app.renderFrameOnce()
    finally:
        app.close()
    knocked = np.array(states)
    assert len(knocked) == 3000
    assert np.abs(knocked[:, 1]).max() < 0.5 and np.abs(knocked[:, 0]).max() < 2.0
    settled = knocked[500:]  # from 10 s after the knock to 60 s
    assert np.abs(settled[:, 1]).max() < 0.01 and np.abs(settled[:, 0]).max() < 0.05


def test_manual_loop_keeps_every_ball_in_view_for_minutes(monkeypatch):
    """Five simulated minutes of the loop (kicks every 2 s): every ball stays wholly on screen."""
    ml = _demo_module(monkeypatch, "manual_loop")
    world = ke.World(ml.build_scene())
    app = _fast_app(ml.Manual, world)  # one 20 ms step per frame (the demo: 0.83 at 60 fps)
    between_frames = ml.Kicker(world)
    r = ml.BALL_RADIUS
    worst, top = np.inf, 0.0
    try:
        for _ in range(15000):
            app.renderFrameOnce()
            between_frames(app)
            left, _, right, upper = app.camera.visible_world_rect()
            balls = world.body_poses[0, 1:]
            worst = min(
                worst,
                float((balls[:, 0] - r - left).min()),
                float((right - balls[:, 0] - r).min()),
                float((upper - balls[:, 1] - r).min()),
            )
            if app.sim_time > 240.0:
                top = max(top, float(balls[:, 1].max()))
    finally:
        app.close()
    assert app.sim_time == pytest.approx(300.0)
    assert worst > 0.0, f"a ball left the view by {-worst:.2f} m"
    assert top > 0.6, "the balls stopped hopping"


def _demo_job(demo: str, *args: str) -> Prestart:
    return Prestart(
        [sys.executable, str(DEMOS / demo), *args],
        env=dict(os.environ, PYGAME_HIDE_SUPPORT_PROMPT="1"),
        timeout=60,
    )


REFUSED = {d: (_demo_job(d, "--headless"), _demo_job(d, "--help")) for d in FRAMES_DEFAULT}


@pytest.mark.parametrize(
    "demo",
    [pytest.param(d, marks=[pytest.mark.prestart(j) for j in REFUSED[d]]) for d in REFUSED],
)
def test_headless_without_out_is_refused_in_one_line_and_help_names_the_defaults(demo):
    """`--headless` with no `--out` would draw and keep nothing: refused (exit 2) in one
    line before any work; `--help` gives the headless `--frames` default (#42 item 5)."""
    refusal, help_job = REFUSED[demo]
    proc = refusal.result()
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert f"{demo}: --headless needs --out to keep what it draws; add --out shot.png" in (
        proc.stderr
    )
    assert list(proc.folder.iterdir()) == []  # nothing written where it ran
    helped = help_job.result()
    default = FRAMES_DEFAULT[demo]
    assert f"(default: {default} with --headless;" in " ".join(helped.stdout.split())


# last in the file: the runs started with the session have had the tests above to finish
@pytest.mark.filterwarnings(IMAGEIO_PIPES)
@pytest.mark.parametrize(
    "demo", [pytest.param(c[0], marks=pytest.mark.prestart(RUNS[c[0]]), id=c[0]) for c in CASES]
)
def test_demo_runs_headless_and_draws(demo):
    import imageio.v3 as iio

    proc = RUNS[demo].result()
    assert proc.returncode == 0, proc.stderr
    folder = proc.folder
    img = iio.imread(folder / "shot.png")[..., :3]
    assert img.shape == (540, 960, 3)
    rgb = img.astype(np.uint32)  # a colour as one int: unique(axis=0) took 0.8 s a frame
    colours = np.unique(rgb[..., 0] << 16 | rgb[..., 1] << 8 | rgb[..., 2])
    assert len(colours) > 20 and img.std() > 10  # bodies, text and ground, not a blank frame
    if demo == "multi_rate.py":
        data = np.loadtxt(folder / "rec" / "multi_rate.csv", delimiter=",", skiprows=1)
        assert data.shape[0] == 50 and data[1, 0] == pytest.approx(1 / 30)  # 30 Hz rows
        frames_mp4 = iio.imread(folder / "rec" / "multi_rate.mp4")
        assert frames_mp4.shape[0] == 50  # one frame per Capture step
