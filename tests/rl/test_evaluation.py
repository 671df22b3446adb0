from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from _rl_tasks import RecordingTask, wobbly

import kelab as ke
from kelab.rl.evaluation import episode_quotas
from kelab.tasks.ball_to_goal import BallToGoalTask
from kelab.tasks.cartpole import CartPoleTask


@ke.success
def dropped(task):
    task.check("always true", np.ones(task.num_envs, bool))
    return task.ended_by("ball dropped")


def test_report_on_a_scripted_outcome():
    # copy 0 drops the ball on step 2, copy 1 is cut short on step 3, copy 2 times out
    env = ke.LearningEnv(RecordingTask(end_at=[2, 0, 0], cut_at=[0, 3, 0], reward=0.5), num_envs=3)
    report = ke.evaluate(env, lambda obs: np.zeros((3, 1)), episodes=5, success=dropped, seed=0)
    # episode k is copy k % 3's: copies 0 and 1 run two episodes each, copy 2 one (6 steps),
    # however early copy 0 finishes (it would finish 3 by step 6)
    assert report.episodes == 5
    assert report.ended_by == {
        "ball dropped": 2,
        "never": 0,
        "time limit": 1,
        "cut short by the task": 2,
    }
    assert report.successes == 2 and report.success_rate == pytest.approx(0.4)
    assert report.checks == {"always true": 1.0}
    assert report.length_mean == pytest.approx((2 + 3 + 6 + 2 + 3) / 5)
    assert report.return_mean == pytest.approx(0.5 * report.length_mean)
    d = report.to_dict()
    assert d["success_rate"] == pytest.approx(0.4) and d["ended_by"]["ball dropped"] == 2
    table = report.table()
    assert "success (dropped)" in table and "cut short by the task" in table and "40.0 %" in table
    assert env.success_rule is None  # evaluate restores the env's own rule
    assert env.condition_names == ("ball dropped", "never")


@ke.success
def survived(task):
    return task.survived()


def test_early_failures_do_not_bias_the_report():
    # even copies fail on step 2, odd copies survive to the time limit (6 steps): half the
    # episodes succeed. Counting the first 100 episodes to finish would count 3 failures
    # per success (25 %).
    env = ke.LearningEnv(RecordingTask(end_at=[2, 0, 2, 0]), num_envs=4)
    zeros = np.zeros((4, 1), np.float32)
    report = ke.evaluate(env, lambda obs: zeros, episodes=100, success=survived, seed=0)
    assert report.episodes == 100 and report.successes == 50
    assert report.ended_by["ball dropped"] == 50 and report.ended_by["time limit"] == 50
    assert report.length_mean == pytest.approx((50 * 2 + 50 * 6) / 100)
    # 10 episodes on 4 copies: copies 0 and 1 run three, copies 2 and 3 two (5 successes)
    report = ke.evaluate(env, lambda obs: zeros, episodes=10, success=survived, seed=0)
    assert report.successes == 5 and report.ended_by["ball dropped"] == 5
    # fewer episodes than copies: copies 0 and 1 run one each, 2 and 3 are ignored
    report = ke.evaluate(env, lambda obs: zeros, episodes=2, success=survived, seed=0)
    assert report.successes == 1 and report.ended_by["ball dropped"] == 1
    with pytest.raises(ValueError, match=r"only 6 of 8 episodes finished within max_steps=6"):
        ke.evaluate(env, lambda obs: zeros, episodes=8, success=survived, max_steps=6)
    env.close()


def test_episode_quotas():
    assert episode_quotas(10, 4).tolist() == [3, 3, 2, 2]
    assert episode_quotas(8, 4).tolist() == [2, 2, 2, 2]
    assert episode_quotas(2, 4).tolist() == [1, 1, 0, 0]
    assert episode_quotas(7, 1).tolist() == [7]


def test_each_copy_runs_its_own_episodes_whatever_the_others_do():
    # the report over 4 copies is the report of each copy's own episodes run alone
    # (LearningEnv(copy_offset=i) is copy i, seeded alike): no copy's episode lengths
    # change which episodes of another copy count
    task_env = ke.LearningEnv(CartPoleTask(), num_envs=4, seed=5, layout="isolated")
    together = ke.evaluate(task_env, wobbly, episodes=10, seed=7)
    task_env.close()
    assert 0 < together.successes < 10  # episodes of different lengths
    assert together.ended_by["cart left the track"] > 0
    assert together == ke.evaluate(
        ke.LearningEnv(CartPoleTask(), num_envs=4, seed=5, layout="isolated"),
        wobbly,
        episodes=10,
        seed=7,
    )  # deterministic
    alone = []
    for i, quota in enumerate(episode_quotas(10, 4).tolist()):
        env = ke.LearningEnv(CartPoleTask(), num_envs=1, seed=5, layout="isolated", copy_offset=i)
        alone.append(ke.evaluate(env, wobbly, episodes=quota, seed=7))
        env.close()
    assert together.successes == sum(r.successes for r in alone)
    for name, count in together.ended_by.items():
        assert count == sum(r.ended_by[name] for r in alone), name
    for key in ("return_mean", "length_mean"):
        mean = sum(getattr(r, key) * r.episodes for r in alone) / 10
        assert getattr(together, key) == pytest.approx(mean, rel=1e-12)


def test_refuses_an_env_that_is_not_kelab_s():
    env = gymnasium.make("CartPole-v1")
    with pytest.raises(ValueError, match="ke.LearningEnv, ke.RayLearningEnv or ke.DirectRLEnv"):
        ke.evaluate(env, lambda obs: 0, episodes=1)
    env.close()


def test_ball_to_goal_controller_always_succeeds_and_zero_never_does():
    env = ke.DirectRLEnv(BallToGoalTask(), seed=0)

    def controller(obs):
        pos, vel, goal = obs[0:2], obs[2:4], obs[4:6]
        return np.clip((3.0 * (goal - pos) - 2.5 * vel) / 10.0, -1, 1).astype(np.float32)

    good = ke.evaluate(env, controller, episodes=3, seed=0)
    assert good.success_rate == 1.0 and good.ended_by["ball stayed at the goal"] == 3
    idle = ke.evaluate(env, lambda obs: np.zeros(2, np.float32), episodes=2, seed=0)
    assert idle.success_rate == 0.0 and idle.ended_by["time limit"] == 2
    assert idle.length_mean == env.max_episode_length
    with pytest.raises(ValueError, match="max_steps"):
        ke.evaluate(env, lambda obs: np.zeros(2, np.float32), episodes=2, max_steps=10)
    with pytest.raises(ValueError, match="episodes"):
        ke.evaluate(env, controller, episodes=0)
    # arguments are checked before the env is touched, booleans are not counts
    with pytest.raises(ValueError, match=r"^evaluate: episodes must be an int >= 1, got True$"):
        ke.evaluate(env, controller, episodes=True)
    with pytest.raises(ValueError, match=r"max_steps must be an int >= 1, got '10'; give None"):
        ke.evaluate(env, controller, episodes=1, max_steps="10")


def test_on_step_reports_progress_within_episodes_that_end_together():
    # 4 copies of 6-step episodes (time limit): the episodes end together at steps 6 and
    # 12; on_episode alone said nothing before step 6 (#42: a long eval looked stuck)
    env = ke.LearningEnv(RecordingTask(end_at=[0, 0, 0, 0]), num_envs=4)
    zeros = np.zeros((4, 1), np.float32)
    stepped, ended = [], []
    report = ke.evaluate(env, lambda obs: zeros, episodes=8, seed=0,
                         on_episode=ended.append, on_step=lambda *a: stepped.append(a))  # fmt: skip
    assert report.episodes == 8 and ended == [4, 8]
    assert stepped == [(1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 4),
                       (7, 4), (8, 4), (9, 4), (10, 4), (11, 4), (12, 8)]  # fmt: skip
    assert int(episode_quotas(8, 4).max()) * env.max_episode_length == 12  # eval's bound
    # a single env too
    single = gymnasium.make("kelab/CartPole-v0")
    counts = []
    report = ke.evaluate(single, lambda obs: np.zeros(1, np.float32), episodes=1, seed=0,
                         on_step=lambda steps, done: counts.append((steps, done)))  # fmt: skip
    assert [c[0] for c in counts] == list(range(1, int(report.length_mean) + 1))
    assert counts[-1][1] == 1 and all(done == 0 for _, done in counts[:-1])
    single.close()
    env.close()
