"""What a task shows of itself (#39): its gravity in `kelab preview` and on every frame's
status line, and its own markers drawn by ``Task.draw(canvas, env_ids, origins)``."""

from __future__ import annotations

import numpy as np

import kelab as ke
from kelab.cli.preview import run_preview
from kelab.tasks.ball_to_goal import BallToGoalTask
from kelab.tasks.cartpole import CartPoleTask


def test_preview_prints_the_tasks_gravity():
    for task, gravity in (("CartPole-v0", "(0, -9.81)"), ("BallToGoal-v0", "(0, 0)")):
        lines: list[str] = []
        run_preview(task, seconds=0.05, render_mode=None, print_fn=lines.append)
        assert f", gravity {gravity} m/s^2, zero actions;" in lines[0], lines[0]


def test_every_frame_shows_the_gravity_on_its_status_line():
    for task, gravity in ((CartPoleTask(), "(0, -9.81)"), (BallToGoalTask(), "(0, 0)")):
        env = ke.DirectRLEnv(task, render_mode="rgb_array", seed=0)
        env.reset()
        env.render()
        status = env.renderer.canvas.frame_texts[-1][2]
        assert status.endswith(f"gravity {gravity}"), status
        env.close()


class _Marked(ke.Task):
    """A ball per copy and a marker drawn at each copy's (1, 1)."""

    observation_dim, action_dim, episode_length_s = 1, 1, 1.0
    render_zoom = 50.0  # 12.8 m across: copies 0 to 2

    def __init__(self) -> None:
        self.drawn: list[tuple[np.ndarray, np.ndarray]] = []

    def build(self, scene):
        scene.gravity = (0.0, 0.0)
        scene.add(ke.Prop(ke.Circle(0.1)), at="/World/Ball")

    def camera_center(self):
        return (4.0, 1.0)  # copy 1's origin is (4, 0): copies 0, 1 and 2 are in view

    def draw(self, canvas, env_ids, origins):
        self.drawn.append((env_ids.copy(), origins.copy()))
        for origin in origins:
            canvas.circle(origin + (1.0, 1.0), 0.1, (250, 30, 200))

    def apply_actions(self, actions):
        pass

    def get_observations(self):
        return np.zeros((self.num_envs, 1), np.float32)

    def get_rewards(self):
        return np.zeros(self.num_envs, np.float32)

    def get_dones(self):
        return {}, self.episode_length_buf >= self.max_episode_length - 1

    def reset_idx(self, env_ids):
        pass


def test_draw_gets_the_copies_in_view_and_their_origins():
    task = _Marked()
    env = ke.LearningEnv(task, num_envs=3, render_mode="rgb_array", seed=0)
    env.reset()
    frame = env.render()
    ids, origins = task.drawn[-1]
    assert ids.tolist() == [0, 1, 2]
    assert np.array_equal(origins, env.unwrapped.world.env_origins[ids])
    camera = env.unwrapped.renderer.camera
    for origin in origins:  # each copy's marker at its own (1, 1)
        x, y = camera.world_to_screen(origin + (1.0, 1.0))
        assert tuple(frame[int(y), int(x)]) == (250, 30, 200)
    env.close()
