"""Small tasks for the rl tests: a recording task with scripted endings; a CartPole controller."""

from __future__ import annotations

import numpy as np

import kelab as ke


class RecordingTask(ke.Task):
    """A ball per copy; records every call; endings are scripted per copy.

    ``end_at[i]``: the episode step (1-based) on which copy i's condition "ball
    dropped" fires (0: never); ``cut_at[i]``: the step on which the task truncates it.
    Observations: (copy index, episode count of that copy, steps taken in the episode).
    """

    observation_dim = 3
    action_dim = 1
    episode_length_s = 0.1  # 6 steps at 60 Hz

    def __init__(self, end_at=None, cut_at=None, reward=1.0):
        self.calls = []
        self.end_at = end_at
        self.cut_at = cut_at
        self.reward = reward

    def build(self, scene):
        scene.add(ke.Terrain.plane(), at="/")
        scene.add(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(0.0, 0.1)), at="/World/Ball")

    def on_start(self, env):
        self.calls.append(("on_start",))
        n = self.num_envs
        self.episodes = np.zeros(n, dtype=np.int64)
        self.end_at = np.zeros(n, np.int64) if self.end_at is None else np.asarray(self.end_at)
        self.cut_at = np.zeros(n, np.int64) if self.cut_at is None else np.asarray(self.cut_at)
        self.last_actions = None

    def apply_actions(self, actions):
        self.calls.append(("apply_actions", self.world.step_count))
        self.last_actions = actions
        actions *= 2.0  # the task's own copy: scaling in place is safe

    def on_post_physics_step(self):
        self.calls.append(("on_post_physics_step", self.world.step_count))

    def get_dones(self):
        self.calls.append(("get_dones",))
        step = self.episode_length_buf + 1
        dropped = (self.end_at > 0) & (step >= self.end_at)
        cut = (self.cut_at > 0) & (step >= self.cut_at)
        time_up = self.episode_length_buf >= self.max_episode_length - 1
        return {"ball dropped": dropped, "never": np.zeros(self.num_envs, bool)}, cut | time_up

    def get_rewards(self):
        self.calls.append(("get_rewards",))
        return np.full(self.num_envs, self.reward, dtype=np.float64)

    def get_observations(self):
        self.calls.append(("get_observations",))
        return np.stack(
            [np.arange(self.num_envs), self.episodes, self.episode_length_buf], axis=1
        ).astype(np.float64)

    def reset_idx(self, env_ids):
        self.calls.append(("reset_idx", env_ids.tolist()))
        self.episodes[env_ids] += 1


def names(calls):
    return [c[0] for c in calls]


def wobbly(obs: np.ndarray) -> np.ndarray:
    """A weak CartPole controller: some episodes reach the time limit, others end early."""
    gains = np.array([0.0, 0.0, -0.1, -0.02], np.float32)
    return np.clip(obs @ gains, -1.0, 1.0)[:, None].astype(np.float32)
