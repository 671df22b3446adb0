"""Long RL episodes keep a bounded replay log (issue #25.6).

An RL env gives its World ``max_log_steps`` of at least one whole episode, so that no
built-in task is rebased mid-episode; with an episode limit of 10**6 s that made the log,
every snapshot and every restore grow with the run (100k entries, 12.5 MB, 25 s to
restore). The bound is now capped (``kelab.sim.world.MAX_EPISODE_LOG_STEPS``): a longer
episode is rebased inside, as any World is (docs/world.md, "Snapshots"), and its snapshots
stay small and exact.
"""

from __future__ import annotations

import numpy as np

import kelab as ke
from kelab.sim.world import MAX_EPISODE_LOG_STEPS, MAX_LOG_STEPS
from kelab.tasks.cartpole import CartPoleTask
from kelab.tasks.pi_locomotion import PiLocomotionTask

DECIMATION = 16  # few env steps per physics step: the test runs 3 bounds in seconds


class EndlessCartPole(CartPoleTask):
    """CartPole whose episodes end only at the time limit (the pole lies on the ground)."""

    success_rule = None

    def get_dones(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """No early end: only the time limit."""
        return {}, self.episode_length_buf >= self.max_episode_length - 1


def _env(n: int = 2) -> ke.LearningEnv:
    timing = ke.SimulationTimingConfig(sim_dt=1 / 120, decimation=DECIMATION, episode_length_s=1e6)
    return ke.LearningEnv(EndlessCartPole(), num_envs=n, seed=1, timing=timing)


def test_a_long_episode_keeps_its_log_and_snapshot_bounded_and_restores_exactly() -> None:
    env = _env()
    world = env._core.world
    assert world.max_log_steps == MAX_EPISODE_LOG_STEPS  # capped (was 1.2e8 steps + 16)
    rng = np.random.default_rng(0)
    bound_env_steps = MAX_EPISODE_LOG_STEPS // DECIMATION
    env.reset()
    sizes, entries = [], []
    for k in range(3 * bound_env_steps + 40):
        env.step(rng.uniform(-1, 1, (2, 1)).astype(np.float32))
        if k % bound_env_steps == bound_env_steps - 1:
            sizes.append(len(env.snapshot().to_bytes()))
            entries.append(len(world._log))
    assert world.step_count > 3 * MAX_EPISODE_LOG_STEPS  # one episode, well past the bound
    assert int(env._core.episode_length_buf.min()) == 3 * bound_env_steps + 40
    # one entry per env step (the held efforts) since the oldest rebase, a few more for it
    assert max(entries) <= bound_env_steps + 8, entries  # was 3 * bound_env_steps
    assert max(sizes) <= 1.1 * sizes[0], sizes  # constant, not growing with the run
    assert max(sizes) < 600_000, sizes  # ~300 kB at 2 copies (was 1 MB at the end)

    data = env.snapshot().to_bytes()
    actions = rng.uniform(-1, 1, (30, 2, 1)).astype(np.float32)
    future = [env.step(a)[0] for a in actions]
    fresh = _env()
    fresh.reset()
    fresh.restore(ke.Snapshot.from_bytes(data))
    again = [fresh.step(a)[0] for a in actions]
    assert all(np.array_equal(x, y) for x, y in zip(future, again, strict=True))


def test_episodes_within_the_bound_are_never_rebased() -> None:
    # the built-in tasks keep whole episodes in the log (bit-identical to before the cap)
    for task in (CartPoleTask(), PiLocomotionTask()):
        env = ke.LearningEnv(task, num_envs=1)
        steps = (env.max_episode_length + 1) * env.timing.decimation
        assert env._core.world.max_log_steps == max(MAX_LOG_STEPS, steps) <= MAX_EPISODE_LOG_STEPS
        env.close()
