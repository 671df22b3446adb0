"""The single env (``gymnasium.make``) computes what a copy of the batched env computes (#42.1).

The single env takes cheaper paths for its one copy (kelab/rl/direct.py, the World's
step); none may change a bit: over episodes that end and restart, its observations,
rewards and flags equal those of a ``LearningEnv(num_envs=1)`` seeded alike and of the
same copy of a larger batch (``copy_offset``: copy ``i`` of a batch draws from the
streams of copy ``i``).
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import kelab as ke
import kelab.tasks  # noqa: F401  (registers the kelab/ tasks)
from kelab.tasks.cartpole import CartPoleTask

# steps per task: enough for episodes to end and restart under random actions
TASKS = {
    "CartPole-v0": 150,
    "Humanoid-v0": 120,
    "BallToGoal-v0": 400,
    "Pi-Locomotion-v0": 70,
}
# the settings of both sides: the quadruped stands through random actions, so its episodes
# end at a time limit shortened to 0.6 s (30 steps) here
SETTINGS = {
    "Pi-Locomotion-v0": {
        "timing": ke.SimulationTimingConfig(sim_dt=1 / 1000, decimation=20, episode_length_s=0.6)
    }
}


def _single(
    task_id: str, seed: int, actions: np.ndarray, offset: int = 0
) -> tuple[list[bytes], int]:
    """The single env's steps as bytes (obs, reward, flags; a restart's first obs).

    ``offset``: the single env of copy ``offset`` of a batch (``copy_offset``).
    """
    env = gymnasium.make(
        f"kelab/{task_id}", seed=seed, copy_offset=offset, **SETTINGS.get(task_id, {})
    )
    obs, _ = env.reset()
    out, ends = [obs.tobytes()], 0
    for a in actions:
        obs, rew, term, trunc, _ = env.step(a)
        assert isinstance(rew, float) and obs.dtype == np.float32
        out.append(obs.tobytes() + np.float32(rew).tobytes() + bytes([term, trunc]))
        if term or trunc:
            ends += 1
            obs, _ = env.reset()
            out.append(obs.tobytes())
    env.close()
    return out, ends


def _batched(task_id: str, seed: int, actions: np.ndarray, n: int, i: int) -> list[bytes]:
    """Copy ``i`` of an ``n``-copy LearningEnv, in the single env's terms."""
    env = gymnasium.make_vec(
        f"kelab/{task_id}",
        num_envs=n,
        vectorization_mode="vector_entry_point",
        seed=seed,
        **SETTINGS.get(task_id, {}),
    )
    obs, _ = env.reset()
    out = [obs[i].tobytes()]
    rng = np.random.default_rng(7)  # the other copies get their own random actions
    for a in actions:
        batch = rng.uniform(-1, 1, (n, a.size)).astype(np.float32)
        batch[i] = a
        obs, rew, term, trunc, info = env.step(batch)
        ended = bool(term[i] or trunc[i])
        final = info["final_obs"][i] if ended else obs[i]
        out.append(final.tobytes() + rew[i].tobytes() + bytes([bool(term[i]), bool(trunc[i])]))
        if ended:
            out.append(obs[i].tobytes())
    env.close()
    return out


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_the_single_env_is_a_copy_of_the_batched_env(task_id):
    steps = TASKS[task_id]
    space = gymnasium.make(f"kelab/{task_id}").action_space
    actions = np.random.default_rng(3).uniform(-1, 1, (steps, *space.shape)).astype(np.float32)
    single, ends = _single(task_id, 5, actions)
    assert ends >= 1  # episodes ended and restarted on the way
    assert _batched(task_id, 5, actions, 1, 0) == single
    # copy 1 of three (its neighbours end and restart at other steps)
    assert _batched(task_id, 5, actions, 3, 1) == _single(task_id, 5, actions, offset=1)[0]


def test_the_single_env_is_a_direct_env():
    env = gymnasium.make("kelab/CartPole-v0")
    assert isinstance(env.unwrapped, ke.DirectRLEnv)
    env.close()


def test_a_robots_per_step_attributes_are_its_views_and_refused_before_binding():
    # Robot reads joint_pos & co. through a descriptor (no failed lookup first): the same
    # values as its view's, and the same error as any runtime attribute before binding
    robot = ke.Robot(asset=ke.Asset.from_registry("kelab/robot/cartpole:v1"))
    for name in ("joint_pos", "set_joint_effort_target", "find_joints"):
        with pytest.raises(AttributeError, match=f"no attribute '{name}' until an environment"):
            getattr(robot, name)
    env = ke.DirectRLEnv(CartPoleTask())
    env.reset()
    robot, view = env.task.robot, env.task.robot._view
    for name in ("joint_pos", "joint_vel", "root_pose", "root_velocity"):
        assert np.array_equal(getattr(robot, name), getattr(view, name))
    assert robot.set_joint_effort_target == view.set_joint_effort_target
    env.close()
