from __future__ import annotations

import numpy as np
import pytest

import kelab as ke
from kelab.tasks.cartpole import CartPoleTask


class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.mark.parametrize(
    "render_mode, mode",
    [(None, "HEADLESS_FAST"), ("human", "PACED"), ("rgb_array", "OFFSCREEN_FAST")],
)
def test_mode_follows_render_mode(render_mode, mode, monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    env = ke.DirectRLEnv(CartPoleTask(), render_mode=render_mode)
    assert env.run_config.mode.name == mode
    env.close()


@pytest.mark.parametrize(
    "mode, render_mode, required",
    [
        ("paced", None, "'human'"),
        ("offscreen_fast", "human", "'rgb_array'"),
        ("headless_fast", "rgb_array", "None"),
    ],
)
def test_mismatched_run_config_names_the_required_render_mode(mode, render_mode, required):
    with pytest.raises(ValueError, match=f"requires render_mode={required}"):
        ke.DirectRLEnv(
            CartPoleTask(), render_mode=render_mode, run_config=ke.SimulationRunConfig(mode)
        )
    with pytest.raises(ValueError, match="render_mode must be"):
        ke.DirectRLEnv(CartPoleTask(), render_mode="ansi")


def test_headless_never_renders_and_offscreen_renders_on_request():
    env = ke.DirectRLEnv(CartPoleTask())
    env.reset(seed=0)
    env.step(np.zeros(1, np.float32))
    assert env.render() is None and env.renderer is None
    off = ke.DirectRLEnv(CartPoleTask(), render_mode="rgb_array")
    off.reset(seed=0)
    off.step(np.zeros(1, np.float32))
    assert off._presenter.frames == 0  # nothing drawn until asked
    frame = off.render()
    assert frame.shape == (480, 640, 3) and frame.dtype == np.uint8
    assert off.pacer is None and off._presenter.frames == 1
    assert len(np.unique(frame.reshape(-1, 3), axis=0)) > 3  # the cartpole is drawn
    off.close()


def test_paced_renders_per_step_and_waits_with_the_pacer(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    clock = FakeClock()
    pacer = ke.SimulationPacer(1 / 60, clock=clock, sleep=clock.sleep)
    env = ke.DirectRLEnv(CartPoleTask(), render_mode="human", pacer=pacer)
    assert env.metadata["render_fps"] == pytest.approx(60.0)
    env.reset(seed=1)
    assert env._presenter.frames == 1  # rendered after reset
    clock.now += 0.004  # the step itself takes 4 ms of wall time
    env.step(np.zeros(1, np.float32))
    assert env._presenter.frames == 2  # once per env step, not per physics substep
    assert clock.sleeps == [pytest.approx(1 / 60 - 0.004)]
    clock.now += 0.050  # a slow step: no wait and no catch-up burst afterwards
    env.step(np.zeros(1, np.float32))
    assert len(clock.sleeps) == 1 and pacer.late_steps == 1
    env.step(np.zeros(1, np.float32))
    assert clock.sleeps[-1] == pytest.approx(1 / 60)
    env.close()


def _push_until_the_pole_falls(env):
    for _ in range(300):
        _, _, terminated, truncated, info = env.step(np.ones(1, np.float32))
        if terminated or truncated:
            return info
    raise AssertionError("the pole never fell")


def test_a_frame_after_an_episode_ended_shows_how_it_ended_not_the_restart(monkeypatch):
    # same-step autoreset restarts the copy inside step(); the episode's last state is
    # drawn before that, so a video's last frame of an episode is the fall itself
    off = ke.DirectRLEnv(CartPoleTask(), render_mode="rgb_array", seed=0)
    off.reset(seed=0)
    snap = off.snapshot()
    start = off.render()  # as a recorder does: from now on an ending is drawn
    info = _push_until_the_pole_falls(off)
    assert info["ended_by"] == "pole fell"
    last = off.render()
    assert np.array_equal(last, off.render())  # current until the next step or reset
    off.restore(snap)  # a restored state is drawn as it is, not the kept frame
    assert np.array_equal(off.render(), start)
    _push_until_the_pole_falls(off)
    off.reset()
    first = off.render()
    assert not np.array_equal(last, first)  # the reset state is drawn after reset()
    off.step(np.zeros(1, np.float32))
    assert not np.array_equal(off.render(), last)
    # a replay (same seed and actions) draws the same last frame, and counts the steps
    replay = ke.DirectRLEnv(CartPoleTask(), render_mode="rgb_array", seed=0)
    replay.reset(seed=0)
    replay.render()
    steps = 0
    while True:
        _, _, terminated, _, _ = replay.step(np.ones(1, np.float32))
        steps += 1
        if terminated:
            break
    assert np.array_equal(replay.render(), last)  # deterministic: the same last frame
    off.close()
    replay.close()
    # PACED: the last state is drawn and held for one step before the restart is drawn
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    clock = FakeClock()
    pacer = ke.SimulationPacer(1 / 60, clock=clock, sleep=clock.sleep)
    paced = ke.DirectRLEnv(CartPoleTask(), render_mode="human", pacer=pacer, seed=0)
    paced.reset(seed=0)
    _push_until_the_pole_falls(paced)
    assert paced.frame_count == 1 + steps + 1  # reset, each step, the ending
    assert len(clock.sleeps) == steps + 1
    paced.close()


def test_an_ending_is_drawn_only_for_a_recorder_and_a_drawing_error_keeps_the_env_in_step():
    env = ke.DirectRLEnv(CartPoleTask(), render_mode="rgb_array", seed=0)
    env.reset(seed=0)
    _push_until_the_pole_falls(env)  # render() never called: nothing drawn
    assert env.frame_count == 0 and env.renderer is None
    env.reset()
    env.render()

    def broken() -> None:
        raise RuntimeError("GL context lost")

    env._presenter.draw = broken  # the next ending's frame cannot be drawn
    with pytest.raises(RuntimeError, match="GL context lost"):
        _push_until_the_pole_falls(env)
    del env._presenter.draw
    assert env._core.episode_length_buf[0] == 0  # the ended copy restarted: the env is in step
    env.step(np.zeros(1, np.float32))  # and goes on
    env.close()


def test_unbatched_api_and_episode_end():
    env = ke.DirectRLEnv(CartPoleTask(), seed=0)
    obs, info = env.reset()
    assert obs.shape == (4,) and obs.dtype == np.float32 and info == {}
    for _ in range(400):
        obs, reward, terminated, truncated, info = env.step(np.ones(1, np.float32))
        assert isinstance(reward, float) and isinstance(terminated, bool)
        if terminated or truncated:
            break
    assert info["ended_by"] == "cart left the track" or info["ended_by"] == "pole fell"
    assert info["is_success"] is False and info["episode_length"] > 0
    new, _ = env.reset()
    assert not np.array_equal(new, obs)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(2))
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.array([np.nan]))


def test_timing_override():
    timing = ke.SimulationTimingConfig(sim_dt=1 / 240, decimation=4)
    env = ke.DirectRLEnv(CartPoleTask(), timing=timing)
    assert env.step_dt == pytest.approx(1 / 60) and env.max_episode_length == 300
    assert env.task.sim_dt == pytest.approx(1 / 240) and env.task.decimation == 4


def test_renderer_and_frame_count_are_public_and_read_only():
    """A frame's renderer and how many frames were drawn, without private names (#39)."""
    env = ke.DirectRLEnv(CartPoleTask(), render_mode="rgb_array", seed=0)
    env.reset(seed=0)
    assert env.frame_count == 0 and env.renderer is None
    frame = env.render()
    env.step(np.zeros(1))
    env.render()
    assert env.frame_count == 2 and env.renderer.read_rgb_pixels().shape == frame.shape
    with pytest.raises(AttributeError):
        env.frame_count = 5
    env.close()
    assert env.frame_count == 2
    headless = ke.DirectRLEnv(CartPoleTask(), seed=0)
    headless.reset(seed=0)
    headless.step(np.zeros(1))
    assert headless.frame_count == 0 and headless.render() is None
    headless.close()


class _HeavyCartPole(CartPoleTask):
    """CartPole whose copies get 5 m/s^2 more gravity downwards (domain randomization)."""

    randomization = (ke.Randomize("gravity", (0.0, -5.0), (0.0, -5.0)),)


def test_the_frame_s_status_line_shows_the_copy_s_own_gravity(monkeypatch):
    # the trial (2026-12-06): the World held gravity (0, -14.81) for the copy, the frame
    # said the scene's "gravity (0, -9.81)"
    env = ke.DirectRLEnv(_HeavyCartPole(), render_mode="rgb_array")
    env.reset(seed=0)
    env.render()  # the renderer and its canvas exist from the first frame
    lines: list[str] = []
    canvas = env._presenter.renderer.canvas
    text = canvas.text

    def spy(pos, line, *args, **kwargs):
        lines.append(line)
        return text(pos, line, *args, **kwargs)

    monkeypatch.setattr(canvas, "text", spy)
    env.render()
    gx, gy = env.world.gravity[0]
    assert (gx, gy) == pytest.approx((0.0, -14.81)) and env.world.scene.gravity[1] == -9.81
    status = next(line for line in lines if "episode time" in line)
    assert status.endswith(f"gravity ({gx:g}, {gy:g})") and "-14.81" in status, status
    env.close()
