"""Image observations (#43 item 2): a task's observation_shape, kelab/CartPole-Pixels-v0."""

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import kelab as ke
from kelab.tasks.cartpole_pixels import CAMERAS, FRAMES, GAPS, CartPolePixelsTask


def test_the_pixel_task_is_registered_and_passes_gymnasiums_check_env():
    env = gymnasium.make("kelab/CartPole-Pixels-v0", render_mode=None)
    space = env.observation_space
    assert space == gymnasium.spaces.Box(0, 255, (36, 64, 4), np.uint8)
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=3)
    assert obs.dtype == np.uint8 and obs.shape == (36, 64, 4) and space.contains(obs)
    env.close()


def test_the_vector_env_gives_image_batches_and_final_observations():
    env = gymnasium.make_vec(
        "kelab/CartPole-Pixels-v0", num_envs=3, vectorization_mode="vector_entry_point"
    )
    assert env.single_observation_space.shape == (36, 64, 4)
    assert env.observation_space.shape == (3, 36, 64, 4)
    obs, _ = env.reset(seed=0)
    ended = None
    for _ in range(400):  # pushed hard one way: the pole falls, the episodes end
        obs, _, terminated, truncated, info = env.step(np.ones((3, 1), np.float32))
        assert obs.dtype == np.uint8 and obs.shape == (3, 36, 64, 4)
        if (terminated | truncated).any():
            ended = info
            break
    assert ended is not None
    final = ended["final_obs"]
    assert final.dtype == np.uint8 and final.shape == (3, 36, 64, 4)
    done = ended["_final_obs"]
    # the new episode's stacks hold its first images twice; the final ones do not
    assert (obs[done, ..., 0] == obs[done, ..., 1]).all()
    assert (obs[done, ..., 2] == obs[done, ..., 3]).all()
    assert not np.array_equal(final[done], obs[done])
    env.close()


def test_each_camera_s_image_of_gap_steps_ago_and_its_newest():
    env = ke.LearningEnv(task=CartPolePixelsTask(), num_envs=2, seed=1)
    env.reset(seed=1)

    def images():
        return [env.world.read_sensor(name)[..., 0] for name in CAMERAS]

    seen = [images()]
    for _ in range(GAPS[0] + 2):
        obs, *_ = env.step(np.full((2, 1), 0.3, np.float32))
        seen.append(images())
    for k, gap in enumerate(GAPS):
        assert np.array_equal(obs[..., FRAMES * k], seen[-1 - gap][k])
        assert np.array_equal(obs[..., FRAMES * k + 1], seen[-1][k])
        assert not np.array_equal(seen[-1 - gap][k], seen[-1][k])  # it moved
    assert not np.array_equal(seen[-1][0], seen[-1][1])  # the track, the pole up close
    env.close()


def test_env_snapshots_give_back_the_frames():
    env = ke.LearningEnv(task=CartPolePixelsTask(), num_envs=2, seed=1)
    env.reset(seed=1)
    actions = np.random.default_rng(0).uniform(-1, 1, (30, 2, 1)).astype(np.float32)
    for a in actions[:10]:
        env.step(a)
    snap = env.snapshot()
    first = [env.step(a)[0] for a in actions[10:]]
    env.restore(snap)
    again = [env.step(a)[0] for a in actions[10:]]
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    env.close()


class _Images(ke.Task):
    observation_shape = (4, 5, 1)
    observation_dim = 20
    action_dim, episode_length_s = 1, 1.0
    result = None

    def build(self, scene):
        scene.add(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(0.0, 1.0)), at="/Ball")

    def apply_actions(self, actions):
        pass

    def get_observations(self):
        return self.result(self.num_envs)

    def get_rewards(self):
        return np.zeros(self.num_envs, np.float32)

    def get_dones(self):
        return {}, self.episode_length_buf >= self.max_episode_length - 1

    def reset_idx(self, env_ids):
        pass


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (lambda n: np.zeros((n, 4, 5, 1), np.float32), r"must return a uint8 array of shape"),
        (lambda n: np.zeros((n, 5, 4, 1), np.uint8), r"\(2, 4, 5, 1\) \(one image per copy"),
        (lambda n: np.zeros((n, 20), np.uint8), r"must return a uint8 array"),
    ],
)
def test_an_image_task_returning_other_arrays_is_a_task_error(result, message):
    task = _Images()
    task.result = result
    env = ke.LearningEnv(task=task, num_envs=2)
    with pytest.raises(ke.TaskError, match=message):
        env.reset()
    env.close()


@pytest.mark.parametrize(
    ("shape", "dim", "message"),
    [
        ((4, 5), 20, r"observation_shape must be None or \(height, width, channels\)"),
        ((4, 5, 0), 20, r"observation_shape must be None or \(height, width, channels\)"),
        ((4, 5, 1), 4, r"observation_dim must be 20, the size of its observation_shape"),
    ],
)
def test_a_bad_observation_shape_is_refused_in_one_line(shape, dim, message):
    task = type("Bad", (_Images,), {"observation_shape": shape, "observation_dim": dim})()
    with pytest.raises(ke.TaskError, match=message) as info:
        ke.LearningEnv(task=task, num_envs=1)
    assert "\n" not in str(info.value)


def test_an_image_task_s_space_is_gymnasiums_image_box():
    task = _Images()
    task.result = lambda n: np.full((n, 4, 5, 1), 7, np.uint8)
    env = ke.DirectRLEnv(task)
    assert env.observation_space == gymnasium.spaces.Box(0, 255, (4, 5, 1), np.uint8)
    obs, _ = env.reset()
    assert obs.shape == (4, 5, 1) and (obs == 7).all()
    env.close()


def test_the_ray_env_refuses_an_image_task_before_starting_ray():
    with pytest.raises(ValueError, match=r"CartPolePixelsTask observes images \(36, 64, 4\)"):
        ke.RayLearningEnv(CartPolePixelsTask(), num_envs=2, num_workers=1)


def test_frames_show_what_the_policy_sees(monkeypatch):
    """A rendered frame holds the first copy's newest camera images, 3x, top right."""
    from kelab.tasks.cartpole_pixels import FRAMES, SIZE, VIEW_SCALE

    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    env = ke.LearningEnv(
        task=CartPolePixelsTask(), num_envs=1, seed=2, render_mode="rgb_array",
        render_backend="pygame",
    )  # fmt: skip
    env.reset(seed=2)
    for _ in range(5):
        obs, *_ = env.step(np.full((1, 1), 0.5, np.float32))
    frame = env.render()
    env.close()
    w, h = SIZE[0] * VIEW_SCALE, SIZE[1] * VIEW_SCALE
    x0, y = frame.shape[1] - w - 10, 46
    for k in range(len(CAMERAS)):
        shown = frame[y : y + h : VIEW_SCALE, x0 : x0 + w : VIEW_SCALE]  # one per pixel
        want = obs[0, ..., k * FRAMES + FRAMES - 1]
        inside = np.ones_like(want, dtype=bool)
        inside[:6, :20] = False  # the camera's name is written there
        assert (shown[..., 0][inside] == want[inside]).all()
        assert (shown[..., 0] == shown[..., 2]).all()  # gray
        y += h + 8


def test_the_ground_marks_touch_nothing_the_physics_is_cartpoles_bit_for_bit():
    from kelab.tasks.cartpole import CartPoleTask

    def joints(task):
        env = ke.LearningEnv(task=task, num_envs=3, seed=4)
        env.reset(seed=4)
        rng = np.random.default_rng(0)
        states = []
        for _ in range(40):
            env.step(rng.uniform(-1, 1, (3, 1)).astype(np.float32))
            states.append(np.concatenate([task.robot.joint_pos, task.robot.joint_vel], axis=1))
        env.close()
        return np.stack(states)

    pixels, plain = joints(CartPolePixelsTask()), joints(CartPoleTask())
    assert pixels.tobytes() == plain.tobytes()


def test_the_track_camera_draws_the_marks_once_into_its_background(monkeypatch):
    """The marks lie below the moving bodies, so the world-fixed camera pre-draws them; the
    images are those of marks drawn over the cart and pole, bit for bit (#43)."""
    from kelab.sim.camera import CameraView
    from kelab.tasks import cartpole_pixels

    def images():
        env = ke.LearningEnv(task=CartPolePixelsTask(), num_envs=4, layout="packed", seed=5)
        env.reset(seed=5)
        rng = np.random.default_rng(1)
        out = [env.step(rng.uniform(-1, 1, (4, 1)).astype(np.float32))[0] for _ in range(60)]
        world = env.world
        spec = next(s for s in world.scene.sensors if s.name == CAMERAS[0])
        view = CameraView(world.scene, world.body_names, spec, 1)
        env.close()
        return np.stack(out), view

    shown, view = images()
    over = ke.RenderHint(color=cartpole_pixels.MARKS_RENDER.color, layer=5)
    monkeypatch.setattr(cartpole_pixels, "MARKS_RENDER", over)  # drawn after the moving bodies
    drawn_over, view_over = images()
    # the marks are in the one background (the other holds the ground alone)
    assert (view.background != view_over.background).sum() >= 13
    assert shown.tobytes() == drawn_over.tobytes()
