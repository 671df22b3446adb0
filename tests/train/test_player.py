"""RLPlayer: act, policy for ke.evaluate, playback to video, dims refused, shipped policy."""

from __future__ import annotations

import imageio.v2 as imageio
import numpy as np
import pytest
from train_helpers import NOT_YET_SHIPPED, shipped_task_ids

import kelab as ke
from kelab.tasks.ball_to_goal import BallToGoalTask
from kelab.tasks.cartpole import CartPoleTask
from kelab.train.shipped import shipped_policy


def test_act_and_policy(trained_run):
    player = ke.RLPlayer(f"{trained_run['dir']}:best", render_mode=None)
    obs = np.zeros((5, 4), np.float32)
    actions = player.act(obs)
    assert actions.shape == (5, 1) and np.all(np.abs(actions) <= 1.0)
    assert np.array_equal(player.act(obs), actions)  # deterministic
    assert player.act(obs[0]).shape == (1,)
    with pytest.raises(ValueError, match=r"observations must have shape \(N, 4\)"):
        player.act(np.zeros((2, 6)))
    env = ke.LearningEnv(CartPoleTask(), num_envs=8, seed=2)
    report = ke.evaluate(env, player.policy, episodes=8, seed=2)
    assert report.episodes == 8
    env.close()


def test_play_headless_builds_the_checkpoints_task(trained_run):
    with ke.RLPlayer(f"{trained_run['dir']}:best", render_mode=None) as player:
        result = player.play(episodes=2)
        assert type(player.env.task) is CartPoleTask
        assert player.env.step_dt == pytest.approx(1 / 60)
    assert result["episodes"] == 2 and len(result["returns"]) == 2
    assert result["steps"] == sum(result["lengths"])


# imageio-ffmpeg (0.6) leaves ffmpeg's pipes open once a read reaches the end of an mp4
@pytest.mark.filterwarnings("ignore:unclosed file <_io.Buffered:ResourceWarning")
def test_play_writes_a_video_offscreen(trained_run, tmp_path):
    out = tmp_path / "play.mp4"
    with ke.RLPlayer(f"{trained_run['dir']}:best", render_mode="rgb_array") as player:
        result = player.play(episodes=1, video=out)
    assert result["video"] == str(out) and out.stat().st_size > 1000
    frames = imageio.mimread(out)
    assert len(frames) == result["steps"] + 1  # the reset frame and one per step
    assert len(np.unique(frames[0].reshape(-1, 3), axis=0)) > 3  # a drawn picture
    with ke.RLPlayer(f"{trained_run['dir']}:best", render_mode=None) as player:
        with pytest.raises(ValueError, match="video= needs render_mode='rgb_array'"):
            player.play(video=tmp_path / "x.mp4")


def test_player_refuses_an_env_of_other_dimensions(trained_run):
    env = ke.DirectRLEnv(BallToGoalTask())
    with pytest.raises(
        ValueError,
        match=r"\(trained on kelab/CartPole-v0\) has observation_dim=4, action_dim=1.*"
        r"observation_dim=6",
    ):
        ke.RLPlayer(f"{trained_run['dir']}:best", env=env)
    env.close()


def test_the_shipped_cartpole_policy_reaches_its_success_rate():
    path = shipped_policy("kelab.tasks.cartpole:CartPoleTask")
    assert path is not None, "kelab/train/policies/CartPoleTask.json is missing"
    player = ke.RLPlayer(path, render_mode=None)
    assert player.checkpoint.meta["optimizer"] is None  # a small, policy-only checkpoint
    env = ke.LearningEnv(CartPoleTask(), num_envs=100, seed=1000)
    report = ke.evaluate(env, player.policy, episodes=100, seed=1000)
    env.close()
    assert report.success_rate >= 0.95, report.table()


def test_every_builtin_task_ships_a_policy_that_fits_it():
    from kelab.tasks import TASK_IDS
    from kelab.tasks.registry import task_class

    for env_id in NOT_YET_SHIPPED:  # the list cannot go stale
        assert shipped_policy(TASK_IDS[env_id]) is None, f"{env_id} ships one now: unlist it"
    for env_id in shipped_task_ids():
        target = TASK_IDS[env_id]
        path = shipped_policy(target)
        assert path is not None, env_id
        cls = task_class(target)
        env = ke.DirectRLEnv(cls())
        player = ke.RLPlayer(path, env=env)  # dims checked, scene fingerprint compared
        obs, _ = env.reset(seed=0)
        assert player.act(obs).shape == (cls.action_dim,)
        assert player.checkpoint.meta["task"]["id"] == env_id
        env.close()


def test_play_needs_a_direct_env_and_the_policy_serves_a_learning_env():

    spec = shipped_policy("kelab.tasks.cartpole:CartPoleTask")
    env = ke.LearningEnv(CartPoleTask(), num_envs=2, seed=4)
    with pytest.raises(
        ValueError,
        match=r"^RLPlayer env must be a DirectRLEnv \(or gym\.make\('kelab/\.\.\.'\), wrapped or "
        r"not\), got LearningEnv; use "
        r"ke\.evaluate\(env, player\.policy, \.\.\.\) for a LearningEnv",
    ):
        ke.RLPlayer(spec, env=env)
    player = ke.RLPlayer(spec, render_mode=None)  # no env: policy and act fit any env
    report = ke.evaluate(env, player.policy, episodes=2, seed=4)
    assert report.episodes == 2
    env.close()


def test_the_player_plays_a_gym_make_env_through_its_wrappers(tmp_path):
    import gymnasium as gym

    spec = shipped_policy("kelab.tasks.cartpole:CartPoleTask")
    made = gym.make("kelab/CartPole-v0", render_mode="rgb_array")
    with ke.RLPlayer(spec, env=made) as player:
        result = player.play(episodes=1, video=tmp_path / "made.mp4", seed=3)
    assert result["ended_by"] == ["time limit"] and result["successes"] == [True]
    assert imageio.get_reader(tmp_path / "made.mp4").count_frames() == result["steps"] + 1
    direct = ke.DirectRLEnv(CartPoleTask(), render_mode="rgb_array")
    with ke.RLPlayer(spec, env=direct) as player:  # the same episode as the bare env
        assert player.play(episodes=1, seed=3)["returns"] == result["returns"]
    made.close()
    direct.close()
    # a wrapper that ends episodes itself: the player counts them from the rewards
    short = gym.wrappers.TimeLimit(gym.make("kelab/CartPole-v0"), max_episode_steps=25)
    result = ke.RLPlayer(spec, env=short).play(episodes=2)
    assert result["lengths"] == [25, 25] and result["steps"] == 50
    assert result["ended_by"] == ["a gymnasium wrapper"] * 2 and result["returns"][0] > 0
    short.close()


def test_a_checkpoint_of_another_task_class_with_the_same_sizes_warns(tmp_path):
    import warnings

    class OtherCartPole(CartPoleTask):
        """The same sizes under another class: the checkpoint names CartPoleTask."""

    spec = shipped_policy("kelab.tasks.cartpole:CartPoleTask")
    env = ke.DirectRLEnv(OtherCartPole())
    with pytest.warns(UserWarning, match=r"trained on the task kelab\.tasks\.cartpole:"
                      r"CartPoleTask, the env's is .*OtherCartPole"):  # fmt: skip
        ke.RLPlayer(spec, env=env)
    env.close()
    env = ke.DirectRLEnv(CartPoleTask())  # its own task: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ke.RLPlayer(spec, env=env)
    env.close()


def test_a_checkpoint_played_on_another_robot_says_both_task_and_scene_differ():
    import warnings

    from kelab.tasks.humanoid import HumanoidTask

    class OldBiped(HumanoidTask):
        asset = "kelab/robot/biped:v1"  # the robot before its joints were made firmer

    spec = shipped_policy("kelab.tasks.humanoid:HumanoidTask")
    env = ke.DirectRLEnv(OldBiped())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ke.RLPlayer(spec, env=env)
    env.close()
    assert len(seen) == 1  # one warning with both differences
    message = str(seen[0].message)
    assert "trained on the task kelab.tasks.humanoid:HumanoidTask" in message
    assert "the env's scene (its robots' bodies, joints, actuators or materials) differs" in message
    same_class = HumanoidTask()
    same_class.asset = "kelab/robot/biped:v1"
    env = ke.DirectRLEnv(same_class)
    with pytest.warns(UserWarning, match=r"scene fingerprint [0-9a-f]{12} against [0-9a-f]{12}"):
        ke.RLPlayer(spec, env=env)
    env.close()


def _policy_copy(tmp_path, source: str, task: dict) -> object:
    """A copy of a shipped policy in ``tmp_path`` whose JSON names ``task``."""
    import json
    import shutil

    src = shipped_policy(source)
    meta = json.loads(src.read_text())
    meta["task"] = task
    shutil.copy(src.parent / meta["weights"]["file"], tmp_path / meta["weights"]["file"])
    path = tmp_path / "best.json"
    path.write_text(json.dumps(meta))
    return path


def _hostile_module(tmp_path) -> object:
    """``evil_task.py`` beside a checkpoint: importing it writes a marker file."""
    marker = tmp_path / "IMPORTED"
    (tmp_path / "evil_task.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "from kelab.tasks.cartpole import CartPoleTask\n\n\n"
        "class EvilTask(CartPoleTask):\n    pass\n"
    )
    return marker


def test_a_module_a_checkpoint_names_is_never_imported(tmp_path, monkeypatch):
    import sys

    from kelab.train.checkpoint import CheckpointError

    path = _policy_copy(
        tmp_path, "kelab.tasks.cartpole:CartPoleTask", {"id": None, "class": "evil_task:EvilTask"}
    )
    marker = _hostile_module(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "evil_task", raising=False)
    with pytest.raises(
        CheckpointError,
        match=r"trained on task 'evil_task:EvilTask', not a built-in one; KELab never "
        r"imports code a checkpoint names: pass the task, RLPlayer\(\.\.\., task=",
    ):
        with ke.RLPlayer(path, render_mode=None) as player:
            player.play(episodes=1)
    with pytest.raises(CheckpointError, match="never imports code a checkpoint names"):
        ke.RLPlayer(path, render_mode=None).play(episodes=1, interactive=True, max_frames=1)
    assert not marker.exists() and "evil_task" not in sys.modules
    # the task named by the user plays it; a task it was not trained on is an error
    with pytest.raises(
        ValueError,
        match=r"was trained on task 'evil_task:EvilTask', not on .*CartPoleTask; play it with "
        r"the task it was trained on",
    ):
        ke.RLPlayer(path, render_mode=None, task="CartPole-v0")
    assert not marker.exists()


def test_the_player_builds_the_task_the_user_names(tmp_path):
    with ke.RLPlayer(
        shipped_policy("kelab.tasks.cartpole:CartPoleTask"), render_mode=None, task="CartPole-v0"
    ) as player:
        assert player.play(episodes=1)["episodes"] == 1
        assert type(player.env.task) is CartPoleTask
    with pytest.raises(ValueError, match=r"has observation_dim=4, action_dim=1, but the env's"):
        ke.RLPlayer(  # refused when made, before any env or window
            shipped_policy("kelab.tasks.cartpole:CartPoleTask"), render_mode=None,
            task=BallToGoalTask,
        )  # fmt: skip
    with pytest.raises(ValueError, match="pass env= or task=, not both"):
        ke.RLPlayer(
            shipped_policy("kelab.tasks.cartpole:CartPoleTask"),
            env=ke.DirectRLEnv(CartPoleTask()),
            task="CartPole-v0",
        )


def test_kelab_play_never_imports_the_module_a_checkpoint_names(tmp_path, monkeypatch, capsys):
    import sys

    from kelab.cli import main

    path = _policy_copy(
        tmp_path, "kelab.tasks.cartpole:CartPoleTask", {"id": None, "class": "evil_task:EvilTask"}
    )
    marker = _hostile_module(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "evil_task", raising=False)
    code = main(["eval", "CartPole-v0", "--checkpoint", str(path), "--episodes", "2"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "was trained on task 'evil_task:EvilTask'" in err
    assert not marker.exists() and "evil_task" not in sys.modules


def test_a_builtin_task_trained_through_the_api_plays_without_naming_it(tmp_path):
    """Training ``CartPoleTask()`` with no ``task_id`` records its built-in id, so
    ``RLPlayer("run:best")`` builds the task; a checkpoint written before that (id None,
    a built-in class) plays too. A subclass of a built-in task is still not one (#42)."""
    import json

    from train_helpers import tiny_config

    env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
    with ke.RLTrainer(env, seed=3, run_dir=tmp_path / "a", config=tiny_config(), log=False) as tr:
        tr.train(1)
    env.close()
    best = tmp_path / "a" / "best.json"
    assert json.loads(best.read_text())["task"]["id"] == "kelab/CartPole-v0"
    with ke.RLPlayer(f"{tmp_path / 'a'}:best", render_mode=None) as player:
        assert player.play(episodes=1)["episodes"] == 1
        assert type(player.env.task) is CartPoleTask
    old = tmp_path / "old"
    old.mkdir()
    path = _policy_copy(old, "kelab.tasks.cartpole:CartPoleTask",
                        {"id": None, "class": "kelab.tasks.cartpole:CartPoleTask"})  # fmt: skip
    with ke.RLPlayer(path, render_mode=None) as player:
        assert player.play(episodes=1)["episodes"] == 1

    from kelab.train.rundir import builtin_task_id

    class MyCartPole(CartPoleTask):
        pass

    assert builtin_task_id(MyCartPole()) is None


def test_a_checkpoint_that_is_not_a_path_is_a_one_line_error():
    # the trial (2026-12-06): RLPlayer(shipped_policy(...)) for a task that ships none
    # raised os.fspath's bare TypeError from deep in resolve_spec
    from kelab.train.checkpoint import CheckpointError, load_checkpoint

    spec = shipped_policy("my_tasks:MyTask")
    assert spec is None  # a user's task ships none
    with pytest.raises(CheckpointError) as info:
        ke.RLPlayer(spec, render_mode=None)
    message = str(info.value)
    assert "\n" not in message and isinstance(info.value, ke.UserError)
    assert message.startswith("checkpoint must be a path (RUN_DIR:best, RUN_DIR:latest or ")
    assert ", got None; " in message and "shipped_policy() returns None" in message
    assert "kelab train" in message
    for bad in (3, ["run:best"]):
        with pytest.raises(CheckpointError, match=r"^checkpoint must be a path .*, got ") as info:
            load_checkpoint(bad)
        assert f"got {bad!r}; pass one of those as a str or pathlib.Path" in str(info.value)
