from __future__ import annotations

import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from prestart import Prestart

import kelab as ke

IDS = ["kelab/CartPole-v0", "kelab/Humanoid-v0", "kelab/Pi-Locomotion-v0", "kelab/BallToGoal-v0"]


# Gymnasium's check_env warns about any infinite Box bound; the entries left infinite have
# no hard bound (test_infinite_observation_bounds_are_the_unbounded_entries), so just
# those two warnings are expected here, nothing else
INFINITE_BOUND_WARNINGS = (
    "ignore:.*A Box observation space minimum value is -infinity:UserWarning",
    "ignore:.*A Box observation space maximum value is infinity:UserWarning",
)


@pytest.mark.filterwarnings(INFINITE_BOUND_WARNINGS[0])
@pytest.mark.filterwarnings(INFINITE_BOUND_WARNINGS[1])
@pytest.mark.parametrize("env_id", IDS)
def test_check_env_passes(env_id, monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")  # check_env also opens the "human" mode
    env = gymnasium.make(env_id)
    assert isinstance(env.unwrapped, ke.DirectRLEnv)
    check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize(
    "env_id, hz, decimation, names",
    [
        ("kelab/CartPole-v0", 120, 2, ("pole fell", "cart left the track")),
        ("kelab/CartPole-Pixels-v0", 120, 2, ("pole fell", "cart left the track")),
        ("kelab/Humanoid-v0", 120, 2, ("torso fell",)),
        ("kelab/Pi-Locomotion-v0", 1000, 20, ("body fell",)),
        ("kelab/BallToGoal-v0", 120, 2, ("ball stayed at the goal", "ball left the table")),
    ],
)
def test_make_vec_gives_a_learning_env(env_id, hz, decimation, names):
    env = gymnasium.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point")
    assert isinstance(env, ke.LearningEnv) and env.num_envs == 2
    assert env.timing.physics_hz == pytest.approx(hz) and env.timing.decimation == decimation
    env.reset(seed=0)
    env.step(np.zeros(env.action_space.shape, np.float32))
    assert env.task.terminations.names == names
    assert env.task.robot.path is not None and env.task.success_rule is not None
    env.close()


def test_per_episode_values_are_public():
    env = gymnasium.make_vec(
        "kelab/BallToGoal-v0", num_envs=3, vectorization_mode="vector_entry_point"
    )
    env.reset(seed=1)
    goals = env.task.goal_pos.copy()
    assert goals.shape == (3, 2) and len({tuple(g) for g in goals}) == 3
    dist = np.linalg.norm(goals - env.task.ball_pos(), axis=1)
    assert ((dist >= 1.0 - 1e-9) & (dist <= 1.5 + 1e-9)).all()
    pi = gymnasium.make_vec(
        "kelab/Pi-Locomotion-v0", num_envs=2, vectorization_mode="vector_entry_point"
    )
    obs, _ = pi.reset(seed=0)
    assert obs[:, -1].tolist() == pi.task.command.astype(np.float32).tolist()


def _fresh(job: Prestart) -> str:
    out = job.result()
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


#: Two fresh interpreters, started early, beside the suite (tests/prestart.py)
REGISTERS = Prestart(
    [
        sys.executable,
        "-c",
        "import sys, kelab, gymnasium; "
        "assert not [f for f in sys.meta_path if 'kelab' in type(f).__module__]; "
        "assert not {'pymunk', 'pygame', 'moderngl', 'kelab.rl.env'} & set(sys.modules); "
        "print(sorted(k for k in gymnasium.registry if k.startswith('kelab/')))",
    ],
    cwd=Path.cwd(),
    timeout=120,
)
MODULE_FORM = Prestart(
    [
        sys.executable,
        "-c",
        "import gymnasium; env = gymnasium.make('kelab:kelab/CartPole-v0'); "
        "print(type(env.unwrapped).__name__, 'kelab/Humanoid-v0' in gymnasium.registry)",
    ],
    cwd=Path.cwd(),
    timeout=120,
)


@pytest.mark.prestart(REGISTERS)
@pytest.mark.prestart(MODULE_FORM)
def test_import_kelab_registers_explicitly_and_lightly():
    # import kelab registers with gymnasium.register (no import hook, no loader patch) and
    # leaves the physics and rendering libraries unimported
    assert _fresh(REGISTERS) == str(sorted([*IDS, "kelab/CartPole-Pixels-v0"]))
    # without importing kelab first: Gymnasium's own "module:id" form imports it
    assert _fresh(MODULE_FORM) == "DirectRLEnv True"


def test_register_task_makes_user_tasks_like_the_built_in_ones():
    from kelab.tasks.cartpole import CartPoleTask

    class Short(CartPoleTask):  # defined in a function: stored as the class itself
        episode_length_s = 1.0

    ids = ["test/Short-v0", "test/ByName-v0", "test/Factory-v0"]
    try:
        ke.register_task(ids[0], Short, layout="isolated")
        ke.register_task(ids[0], Short, layout="isolated")  # the same again: a no-op
        ke.register_task(ids[1], "kelab.tasks.cartpole:CartPoleTask")
        ke.register_task(ids[2], lambda: Short())
        env = gymnasium.make(ids[0])
        assert isinstance(env.unwrapped, ke.DirectRLEnv)
        assert type(env.unwrapped.task) is Short
        env.close()
        vec = gymnasium.make_vec(ids[0], num_envs=3, vectorization_mode="vector_entry_point")
        assert isinstance(vec, ke.LearningEnv) and vec.num_envs == 3
        assert vec.max_episode_length == round(1.0 / vec.step_dt)
        vec.close()
        for env_id in ids[1:]:
            env = gymnasium.make(env_id)
            assert isinstance(env.unwrapped.task, CartPoleTask)
            env.close()
        assert gymnasium.registry[ids[1]].kwargs == {"task": "kelab.tasks.cartpole:CartPoleTask"}
        # an importable class is stored by name: a plain, JSON-able spec
        ke.register_task("test/Named-v0", CartPoleTask)
        ids.append("test/Named-v0")
        assert gymnasium.registry[ids[-1]].kwargs["task"] == "kelab.tasks.cartpole:CartPoleTask"
        with pytest.raises(ValueError, match="already registered.*replace=True"):
            ke.register_task(ids[0], CartPoleTask)
        ke.register_task(ids[0], CartPoleTask, replace=True)
        assert gymnasium.registry[ids[0]].kwargs["task"] == "kelab.tasks.cartpole:CartPoleTask"
    finally:
        for env_id in ids:
            gymnasium.registry.pop(env_id, None)


@pytest.mark.parametrize(
    "env_id, task, match",
    [
        ("bad id", "kelab.tasks.cartpole:CartPoleTask", "env_id must be a Gymnasium id"),
        ("mod:me/X-v0", "kelab.tasks.cartpole:CartPoleTask", "no ':'"),
        (7, "kelab.tasks.cartpole:CartPoleTask", "env_id must be"),
        ("me/X-v0", "kelab.tasks.cartpole.CartPoleTask", "'module:Class'"),
        ("me/X-v0", int, "must be a ke.Task subclass"),
        ("me/X-v0", 3, "function returning a ke.Task"),
    ],
)
def test_register_task_rejects_bad_input(env_id, task, match):
    with pytest.raises(ValueError, match=match):
        ke.register_task(env_id, task)
    assert "me/X-v0" not in gymnasium.registry


def test_a_factory_that_returns_no_task_is_named():
    try:
        ke.register_task("test/Nothing-v0", lambda: None)
        with pytest.raises(ValueError, match="not a ke.Task"):
            gymnasium.make("test/Nothing-v0")
    finally:
        gymnasium.registry.pop("test/Nothing-v0", None)


def test_humanoid_falls_without_control_and_pi_stands():
    env = gymnasium.make_vec(
        "kelab/Humanoid-v0", num_envs=2, vectorization_mode="vector_entry_point"
    )
    report = ke.evaluate(
        env, lambda obs: np.zeros((2, 6), np.float32), episodes=2, seed=0, max_steps=600
    )
    assert report.ended_by["torso fell"] == 2 and report.success_rate == 0.0


@pytest.mark.parametrize(
    ("target", "episodes"),
    [
        ("kelab.tasks.humanoid:HumanoidTask", 20),  # the figures in its checkpoint's JSON
        ("kelab.tasks.pi_locomotion:PiLocomotionTask", 10),  # 10 of the recorded 50
    ],
)
def test_shipped_locomotion_policies_reach_their_evaluation_figures(target, episodes):
    # the tasks share kelab/tasks/_locomotion.py; the policies trained before that must
    # still see the same observations, rewards and endings, so their figures hold. The
    # figures were recorded with the torch actor; playback runs the numpy actor, whose
    # float32 sums differ from torch's by <= 6e-7 an action (tests/train/test_numpy_actor.py),
    # and a thousand steps of contacts carry that into the returns (Humanoid: 2498.9 with
    # torch, 2503.6 with numpy). Successes and endings are exact; the mean return within 1 %.
    import json

    from kelab.tasks.registry import task_class
    from kelab.train.shipped import shipped_policy

    path = shipped_policy(target)
    recorded = json.loads(path.read_text())["evaluation"]
    player = ke.RLPlayer(path, render_mode=None)
    # the figures were recorded in TrainConfig's "packed" layout (not EnvConfig's default)
    env = ke.LearningEnv(task_class(target)(), num_envs=episodes, seed=1000, layout="packed")
    report = ke.evaluate(env, player.policy, episodes=episodes, seed=1000)
    env.close()
    if episodes == recorded["episodes"]:
        assert report.successes == recorded["successes"], report.table()
        assert report.return_mean == pytest.approx(recorded["return_mean"], rel=0.01)
        assert {k: v for k, v in report.ended_by.items() if v} == recorded["ended_by"]
    else:
        assert report.success_rate == recorded["success_rate"] == 1.0, report.table()


@pytest.mark.parametrize("backend", ["pygame", "gl"])
def test_ball_to_goal_frame_shows_a_table_a_visible_ball_and_a_marked_goal(backend, monkeypatch):
    """Top down: a floor (no sky), green felt, the ball drawn big enough, a labelled target."""
    from kelab.tasks import ball_to_goal as btg

    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    cfg = ke.EnvConfig(render_mode="rgb_array", seed=0, render_backend=backend)
    env = ke.DirectRLEnv(btg.BallToGoalTask(), config=cfg)
    try:
        env.reset(seed=3)
        for _ in range(20):  # under way towards the goal
            env.step(np.full(2, 0.3, np.float32))
        frame = env.render().astype(int)
        assert env.renderer.backend == backend  # drawn by the backend the config chose
        cam = env.renderer.camera
        texts = env.renderer.canvas.text_boxes()
        task = env.task
        ball = task.world.body_poses[0, task._ball, :2]
        goal = task.goal_pos[0]
    finally:
        env.close()
    h, w = frame.shape[:2]

    def near(pixels, color, tol=10):
        return np.abs(np.asarray(pixels).reshape(-1, 3) - color).max(axis=1) <= tol

    def ring_hits(center, radius_px, color):
        """Of 16 rays, how many cross a pixel of ``color`` within 2 px of the radius."""
        hits = 0
        for ang in np.linspace(0, 2 * np.pi, 16, endpoint=False):
            ray = [
                frame[
                    int(round(center[1] - r * np.sin(ang))), int(round(center[0] + r * np.cos(ang)))
                ]
                for r in np.linspace(radius_px - 2, radius_px + 1, 7)
            ]
            hits += bool(near(ray, color, tol=30).any())
        return hits

    # a floor all round, the same colour at the top and the bottom: no sky gradient
    corners = [frame[h - 4, 3], frame[h - 4, w - 4], frame[3, w - 4]]
    assert near(corners, btg.FLOOR).all(), corners
    # felt inside the table, a wooden frame just outside its edge
    fx, fy = (int(round(v)) for v in cam.world_to_screen((-1.5, -1.5)))
    assert near(frame[fy - 2 : fy + 3, fx - 2 : fx + 3], btg.FELT).mean() > 0.8
    rx, ry = (int(round(v)) for v in cam.world_to_screen((0.0, -btg.TABLE_RADIUS - 0.06)))
    assert near(frame[ry, rx], btg.TABLE_FRAME).all()
    # the ball: most of its disc in the ball's colour, and an orange halo around it
    bx, by = cam.world_to_screen(ball)
    yy, xx = np.mgrid[0:h, 0:w]
    dist = np.hypot(xx - bx, yy - by)
    r_px = btg.BALL_RADIUS * cam.zoom
    assert r_px >= 5.0
    disc = frame[dist <= 0.8 * r_px]
    assert near(disc, btg.BALL_COLOR, tol=30).mean() > 0.6
    assert ring_hits((bx, by), 2.0 * r_px, btg.BALL_HALO) >= 14
    # the goal: its zone filled in the goal colour, a white ring, and the word "goal"
    gx, gy = cam.world_to_screen(goal)
    gdist = np.hypot(xx - gx, yy - gy)
    assert near(frame[gdist <= 0.7 * btg.GOAL_RADIUS * cam.zoom], btg.GOAL_COLOR).mean() > 0.9
    assert ring_hits((gx, gy), 2.2 * btg.GOAL_RADIUS * cam.zoom, btg.GOAL_MARK) >= 14
    assert any(abs(x0 - gx) < 60 and abs(y0 - gy) < 40 for x0, y0, _, _ in texts), texts


# which entries of each task's observation have a hard bound (low, high); None: unbounded
HARD_BOUNDS = {
    # cart x and pole angle: soft limit / unwrapped angle; velocities
    "kelab/CartPole-v0": [None] * 4,
    # torso height, angle (unwrapped), velocities, joint positions (soft limits), velocities
    "kelab/Humanoid-v0": [None] * 17,
    "kelab/Pi-Locomotion-v0": [None] * 21 + [(0.0, 0.8)],  # ... and the command U(0, 0.8)
    # sensed position and velocity (noisy), the goal: |start| <= 0.3 plus <= 1.5 per axis
    "kelab/BallToGoal-v0": [None] * 4 + [(-1.81, 1.81)] * 2,
}


@pytest.mark.parametrize("env_id", IDS)
def test_infinite_observation_bounds_are_the_unbounded_entries(env_id):
    """A finite bound wherever the quantity has a hard one, infinity only where it has none."""
    env = gymnasium.make(env_id)
    space = env.observation_space
    env.close()
    want = HARD_BOUNDS[env_id]
    assert space.shape == (len(want),)
    for k, bound in enumerate(want):
        got = (float(space.low[k]), float(space.high[k]))
        if bound is None:
            assert got == (-np.inf, np.inf), (k, got)
        else:
            assert got == pytest.approx(bound), (k, got)


def test_joint_limits_are_soft_so_joint_positions_keep_infinite_bounds():
    """Full force into CartPole's +-3 m track limit carries the cart past it: no hard bound."""
    b = ke.SceneBuilder()
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    world = ke.World(b.build())
    robot = world.robot("/World/Robot")
    slider = robot.find_joints("slider_to_cart")
    furthest = 0.0
    for k in range(600):  # 100 N right for 2.5 s, then left
        robot.set_joint_effort_target(np.full((1, 1), 100.0 if k < 300 else -100.0), slider)
        world.step(1 / 120)
        furthest = max(furthest, abs(float(world.joint_positions[0, 0])))
    assert furthest > 3.05  # measured 3.19 m (2026-12-03)
