from __future__ import annotations

import numpy as np
import pytest
from _rl_tasks import RecordingTask

import kelab as ke
from kelab.rl.success import RuleContext, judge


def make_task(n=3):
    task = RecordingTask()
    env = ke.LearningEnv(task, num_envs=n)
    env.reset()
    return task


def test_helpers_raise_outside_a_rule():
    task = make_task()
    for call in (
        task.survived,
        lambda: task.ended_by("ball dropped"),
        lambda: task.check("x", np.ones(3, bool)),
    ):
        with pytest.raises(RuntimeError, match="@ke.success"):
            call()


def test_helpers_inside_a_rule():
    task = make_task()
    conds = np.array([[True, False, False], [False, False, False]])
    ctx = RuleContext(3, ("ball dropped", "never"), conds, np.array([False, True, False]),
                      np.array([False, True, True]))  # fmt: skip
    seen = {}

    @ke.success
    def rule(t):
        seen["survived"] = t.survived()
        seen["dropped"] = t.ended_by("ball dropped")
        seen["time"] = t.ended_by("time limit")
        seen["cut"] = t.ended_by("cut short by the task")
        value = np.array([True, True, False])
        assert t.check("ball kept", value) is value
        with pytest.raises(ValueError, match="unknown condition"):
            t.ended_by("ball lifted")
        with pytest.raises(ValueError, match="twice"):
            t.check("ball kept", value)
        with pytest.raises(ValueError, match="bool array"):
            t.check("other", np.ones(3))
        return seen["survived"]

    ok, checks = judge(rule, task, ctx)
    assert ok.tolist() == [False, True, False]
    assert seen["dropped"].tolist() == [True, False, False]
    assert seen["time"].tolist() == [False, True, False]
    assert seen["cut"].tolist() == [False, False, True]
    assert checks["ball kept"].tolist() == [True, True, False]
    with pytest.raises(RuntimeError):
        task.survived()  # the context is gone after the rule


def test_rule_must_return_bool_per_copy():
    task = make_task()
    ctx = RuleContext(3, (), np.zeros((0, 3), bool), np.zeros(3, bool), np.zeros(3, bool))
    with pytest.raises(ke.TaskError, match="bool array"):
        judge(ke.success(lambda t: 1.0), task, ctx)


def test_env_reports_is_success_on_ended_copies():
    @ke.success
    def survived(task):
        task.check("always", np.ones(task.num_envs, bool))
        return task.survived()

    env = ke.LearningEnv(RecordingTask(end_at=[2, 0]), num_envs=2, success=survived)
    env.reset()
    infos = [env.step(np.zeros((2, 1)))[4] for _ in range(6)]
    assert infos[1]["is_success"].tolist() == [False, False]
    assert infos[1]["_is_success"].tolist() == [True, False]
    last = infos[5]
    assert last["ended_by"][1] == "time limit" and last["is_success"][1]
    assert last["checks"]["always"][1]


def test_dwell_timer_rewards_arrive_and_stay():
    timer = ke.DwellTimer(num_envs=2, hold_s=0.5, dt=0.1)
    assert timer.hold_steps == 5
    through = [True, True, False, True, True, True, True, True]
    out = [timer.update(np.array([c, c])).tolist()[0] for c in through]
    assert out == [False, False, False, False, False, False, False, True]
    assert timer.progress.tolist() == [1.0, 1.0] and timer.done.all()
    timer.reset([0])
    assert timer.count.tolist() == [0, 5] and timer.held_s[1] == pytest.approx(0.5)
    state = timer.state_dict()
    timer.update(np.array([True, True]))
    timer.load_state_dict(state)
    assert timer.count.tolist() == [0, 5]
    with pytest.raises(ValueError, match="hold_s"):
        ke.DwellTimer(2, 0.0, 0.1)
    with pytest.raises(ValueError, match=r"^DwellTimer.num_envs must be an int >= 1, got True$"):
        ke.DwellTimer(True, 0.5, 0.1)
    with pytest.raises(ValueError, match=r"^DwellTimer.dt must be a finite number of seconds > 0"):
        ke.DwellTimer(2, 0.5, float("nan"))
    assert ke.DwellTimer(np.int64(2), np.float32(0.5), 0.1).hold_steps == 5
    with pytest.raises(ValueError, match="bool array"):
        timer.update(np.ones(2))


def _plain(task):
    return task.survived()


class _PlainRuleTask(RecordingTask):
    success_rule = _plain  # forgot @ke.success: on the instance it is a bound method


@pytest.mark.parametrize("make", [ke.LearningEnv, ke.DirectRLEnv])
@pytest.mark.parametrize(
    ("rule", "got"),
    [
        (None, "the plain function _plain()"),  # None: the class attribute above
        (lambda task: task.survived(), "the plain function <lambda>()"),
        ("survived", "a str"),
    ],
)
def test_a_success_rule_without_the_decorator_is_refused_when_the_env_is_made(make, rule, got):
    task = _PlainRuleTask()
    if rule is not None:
        task.success_rule = rule
    with pytest.raises(ValueError) as err:
        make(task)
    assert str(err.value).startswith(
        f"_PlainRuleTask.success_rule must be a rule marked with @ke.success, got {got}; "
        "put @ke.success above its def"
    )
    assert "\n" not in str(err.value)
    # nothing was bound: the same task runs once its rule is marked
    task.success_rule = ke.success(_plain)
    env = make(task)
    assert env.success_rule.fn is _plain
    env.close()
