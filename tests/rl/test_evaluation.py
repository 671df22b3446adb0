from __future__ import annotations

import numpy as np
import pytest
from _rl_tasks import RecordingTask

import kelab as ke
from kelab.tasks.ball_to_goal import BallToGoalTask


@ke.success
def dropped(task):
    task.check("always true", np.ones(task.num_envs, bool))
    return task.ended_by("ball dropped")


def test_report_on_a_scripted_outcome():
    # copy 0 drops the ball on step 2, copy 1 is cut short on step 3, copy 2 times out
    env = ke.LearningEnv(RecordingTask(end_at=[2, 0, 0], cut_at=[0, 3, 0], reward=0.5), num_envs=3)
    report = ke.evaluate(env, lambda obs: np.zeros((3, 1)), episodes=5, success=dropped, seed=0)
    # steps 2 and 4: copy 0; step 3: copy 1; step 6: copies 0 (its 3rd) and 1 ...
    assert report.episodes == 5
    assert report.ended_by == {
        "ball dropped": 3,
        "never": 0,
        "time limit": 0,
        "cut short by the task": 2,
    }
    assert report.successes == 3 and report.success_rate == pytest.approx(0.6)
    assert report.checks == {"always true": 1.0}
    assert report.length_mean == pytest.approx((2 + 3 + 2 + 2 + 3) / 5)
    assert report.return_mean == pytest.approx(0.5 * report.length_mean)
    d = report.to_dict()
    assert d["success_rate"] == pytest.approx(0.6) and d["ended_by"]["ball dropped"] == 3
    table = report.table()
    assert "success (dropped)" in table and "cut short by the task" in table and "60.0 %" in table
    assert env.success_rule is None  # evaluate restores the env's own rule


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
