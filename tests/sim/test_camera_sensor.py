"""The camera sensor (#43): images of every copy drawn in one batched call per shape."""

import hashlib
import json

import numpy as np
import pytest

import kelab as ke
from kelab.sim.camera import CameraView
from kelab.sim.raster import Primitive, draw, luma
from kelab.tasks.cartpole import CartPoleTask

DT = 1 / 120


def cartpole_scene(**camera):
    b = ke.SceneBuilder()
    CartPoleTask().build(b)
    args = dict(size=(64, 48), channels=3, zoom=10.0, offset=ke.Pose(0.0, 0.6))
    args.update(camera)
    body = args.pop("body", None)
    sensor = args.pop("sensor", None)
    b.camera_sensor("eye", body, sensor=sensor, **args)
    return b.build()


def tilt(world, angles, xs=None):
    """Put every copy's cart at ``xs`` and its pole at ``angles`` (radians, CCW)."""
    n = world.num_envs
    xs = np.zeros(n) if xs is None else np.asarray(xs, float)
    angles = np.asarray(angles, float)
    p = world.body_poses
    p[:, 1, 0] = xs
    p[:, 2, 0] = xs - 0.5 * np.sin(angles)
    p[:, 2, 1] = 0.25 + 0.5 * np.cos(angles)
    p[:, 2, 2] = angles
    world.set_body_states(None, p)


def digest(images):
    return hashlib.sha256(images.tobytes()).hexdigest()


# ------------------------------------------------------------------ shape and dtype
@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_reading_is_num_envs_height_width_channels_uint8(channels, layout):
    world = ke.World(cartpole_scene(channels=channels), num_envs=3, layout=layout)
    before = world.read_sensor("eye")  # before the first step: the present poses
    world.step(DT)
    after = world.read_sensor("eye")
    for img in (before, after):
        assert img.shape == (3, 48, 64, channels)
        assert img.dtype == np.uint8
    assert after.flags.writeable and not np.shares_memory(after, world.read_sensor("eye"))
    world.close()


def test_a_camera_on_a_body_follows_it():
    scene = cartpole_scene(body="/World/Robot/cart", offset=ke.Pose(0.0, 0.3), zoom=40.0)
    world = ke.World(scene, num_envs=2)
    tilt(world, [0.0, 0.0], xs=[0.0, 1.5])
    img = world.read_sensor("eye")
    # the cart is at the same place in both images, however far it drove
    assert np.array_equal(img[0], img[1])
    fixed = ke.World(cartpole_scene(zoom=40.0, offset=ke.Pose(0.0, 0.45)), num_envs=2)
    tilt(fixed, [0.0, 0.0], xs=[0.0, 1.5])
    seen = fixed.read_sensor("eye")
    assert not np.array_equal(seen[0], seen[1])  # fixed to the world: the cart moved away
    world.close()
    fixed.close()


# ------------------------------------------------------------------ expected pixels
def one_box_scene(**camera):
    b = ke.SceneBuilder()
    b.add(
        ke.Prop(ke.Box(1.0, 1.0), initial_pose=ke.Pose(), render=ke.RenderHint(color=(255, 0, 0))),
        at="/Crate",
    )
    args = dict(size=(8, 8), channels=3, zoom=2.0)
    args.update(camera)
    b.camera_sensor("eye", **args)
    return b.build()


def test_a_box_covers_the_pixels_under_it():
    world = ke.World(one_box_scene(), num_envs=1)
    img = world.read_sensor("eye")[0]
    want = np.zeros((8, 8, 3), np.uint8)
    want[3:5, 3:5] = (255, 0, 0)  # 1 m at 2 px/m: the 2x2 pixels around the centre
    assert np.array_equal(img, want)
    world.close()


def test_y_is_up_x_is_right_and_edges_are_anti_aliased():
    world = ke.World(one_box_scene(size=(16, 16), zoom=4.0, channels=1), num_envs=1)
    # the box 1 m right and 1.5 m up: 4 px right, 6 px up, edges half a pixel off the grid
    world.set_body_states(None, np.array([[[1.125, 1.5, 0.0]]]))
    img = world.read_sensor("eye")[0, :, :, 0]
    red = luma((255, 0, 0))
    rows, cols = np.nonzero(img == red)
    assert (rows.min(), rows.max()) == (0, 3)  # the top rows: +y is up
    assert (cols.min(), cols.max()) == (11, 13)  # right of the centre (8): +x is right
    # its left and right edges fall mid-pixel: half coverage there
    assert img[1, 10] == (red + 1) // 2 and img[1, 14] == (red + 1) // 2
    world.close()


def test_grayscale_is_the_luma_and_layers_draw_in_order():
    b = ke.SceneBuilder()
    under = ke.RenderHint(color=(0, 0, 255), layer=2)
    over = ke.RenderHint(color=(0, 255, 0), layer=5)
    hidden = ke.RenderHint(color=(255, 255, 255), layer=9, visible=False)
    b.add(ke.Prop(ke.Box(2.0, 2.0), render=over), at="/A")  # added first, drawn last
    b.add(ke.Prop(ke.Box(4.0, 4.0), render=under), at="/B")
    b.add(ke.Prop(ke.Box(9.0, 9.0), render=hidden), at="/C")
    b.camera_sensor("rgb", size=(8, 8), zoom=2.0, background=(10, 20, 30))
    b.camera_sensor("gray", size=(8, 8), zoom=2.0, channels=1, background=(10, 20, 30))
    world = ke.World(b.build(), num_envs=1)
    rgb, gray = world.read_sensor("rgb")[0], world.read_sensor("gray")[0, :, :, 0]
    assert tuple(rgb[4, 4]) == (0, 255, 0) and tuple(rgb[1, 1]) == (0, 0, 255)
    assert tuple(rgb[0, 0]) == (0, 0, 255)  # the 4 m box reaches the 8 px image's corners
    want = {(0, 255, 0): luma((0, 255, 0)), (0, 0, 255): luma((0, 0, 255))}
    for r in range(8):
        for c in range(8):
            assert gray[r, c] == want[tuple(rgb[r, c])]
    world.close()


def test_circles_and_capsules_are_round():
    images = np.zeros((1, 21, 21, 1), np.uint8)
    cam, bodies = np.zeros((1, 3)), np.zeros((1, 1, 3))
    draw(images, Primitive.circle(0, (0.0, 0.0), 5.0, (200,)), cam, bodies, zoom=1.0)
    img = images[0, :, :, 0].astype(int)
    assert np.array_equal(img, img.T) and np.array_equal(img, img[::-1])  # symmetric
    assert img[10, 10] == 200 and img[10, 15] == 100 and img[10, 16] == 0  # r = 5 px
    line = np.zeros((1, 21, 21, 1), np.uint8)
    a, b = np.array([-5.0, 0.0]), np.array([5.0, 0.0])
    draw(line, Primitive.capsule(0, a, b, 2.0, (200,)), cam, bodies, zoom=1.0)
    img = line[0, :, :, 0].astype(int)
    assert list(img[10, 2:19]) == [0, 100] + [200] * 13 + [100, 0]  # -7..7 px
    assert list(img[7:14, 10]) == [0, 100] + [200] * 3 + [100, 0]


def test_the_world_fixed_background_holds_the_static_bodies():
    world = ke.World(cartpole_scene(channels=1), num_envs=1)
    view = CameraView(world.scene, world.body_names, world.scene.sensors[0], 1)
    img = world.read_sensor("eye")[0]
    ground = luma(world.scene.bodies[0].spec.render.color)
    row = 34  # y = -0.5 m: inside the ground box (its top at -0.02 m, 1 m thick)
    assert (view.background[row] == ground).all()  # the ground is drawn once, into it
    assert (img[row] == ground).all() and (img[0] == 0).all() and (img[-1] == 0).all()
    world.close()


def test_saved_png_of_a_camera_image(tmp_path):
    """A camera image written as a PNG (the reviewer's look at it, issue #43)."""
    pytest.importorskip("PIL")
    from PIL import Image

    world = ke.World(cartpole_scene(size=(64, 64)), num_envs=2)
    tilt(world, [0.3, -0.2], xs=[-1.0, 1.0])
    img = world.read_sensor("eye")
    path = tmp_path / "camera.png"
    Image.fromarray(np.concatenate(list(img), axis=1)).save(path)
    assert np.array_equal(np.asarray(Image.open(path)), np.concatenate(list(img), axis=1))
    world.close()


# ------------------------------------------------------------------ determinism
def test_same_state_same_bits_in_any_batch_and_layout():
    rng = np.random.default_rng(4)
    n = 64
    angles, xs = rng.uniform(-0.6, 0.6, n), rng.uniform(-2.4, 2.4, n)
    images = {}
    for layout in ("isolated", "packed"):
        world = ke.World(cartpole_scene(), num_envs=n, layout=layout)
        tilt(world, angles, xs)
        images[layout] = world.read_sensor("eye")
        world.close()
    assert np.array_equal(images["isolated"], images["packed"])
    # a copy's image does not depend on the other copies (its own windows' pixels)
    for k in (0, 17, 63):
        alone = ke.World(cartpole_scene(), num_envs=1)
        tilt(alone, angles[k : k + 1], xs[k : k + 1])
        assert np.array_equal(alone.read_sensor("eye")[0], images["packed"][k])
        alone.close()


def test_runs_repeat_bit_for_bit_and_snapshots_restore_the_image():
    def run():
        env_world = ke.World(cartpole_scene(sensor=ke.SensorConfig(delay=2 * DT)), num_envs=8)
        tilt(env_world, np.linspace(-0.2, 0.2, 8))
        seen = []
        for _ in range(30):
            env_world.step(DT)
            seen.append(env_world.read_sensor("eye"))
        return env_world, seen

    world, first = run()
    again, second = run()
    assert [digest(a) for a in first] == [digest(b) for b in second]
    snap = world.snapshot()
    ahead = []
    for _ in range(5):
        world.step(DT)
        ahead.append(world.read_sensor("eye"))
    world.restore(snap)
    assert np.array_equal(world.read_sensor("eye"), first[-1])
    for img in ahead:
        world.step(DT)
        assert np.array_equal(world.read_sensor("eye"), img)
    restored = ke.World(world.scene, num_envs=8)
    restored.restore(ke.Snapshot.from_bytes(snap.to_bytes()))
    assert np.array_equal(restored.read_sensor("eye"), first[-1])
    for w in (world, again, restored):
        w.close()


# ------------------------------------------------------------------ the pipeline
def test_delay_and_sample_interval_act_on_the_image():
    ideal = ke.World(cartpole_scene(), num_envs=2)
    late = ke.World(cartpole_scene(sensor=ke.SensorConfig(delay=3 * DT)), num_envs=2)
    held = ke.World(cartpole_scene(sensor=ke.SensorConfig(sample_interval=4 * DT)), num_envs=2)
    truth, lagged, sampled = [], [], []
    for w in (ideal, late, held):
        tilt(w, [0.3, -0.3])
    for _ in range(12):
        for w, out in ((ideal, truth), (late, lagged), (held, sampled)):
            w.step(DT)
            out.append(w.read_sensor("eye"))
    assert not np.array_equal(truth[0], truth[4])  # the poles fall: the image changes
    for k in range(3, 12):
        assert np.array_equal(lagged[k], truth[k - 3])  # three steps late
    for k in range(12):
        assert np.array_equal(sampled[k], truth[k - k % 4])  # a sample every 4 steps, held
    for w in (ideal, late, held):
        w.close()


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": (2, 64)}, r"size must be \(width, height\), two ints in \[4, 1024\]"),
        ({"size": (64, 2000)}, r"size must be \(width, height\)"),
        ({"size": (64.0, 64)}, r"size must be \(width, height\)"),
        ({"size": 64}, r"size must be \(width, height\)"),
        ({"channels": 2}, r"channels must be 1 \(grayscale\) or 3 \(RGB\), got 2"),
        ({"zoom": 0.0}, r"zoom must be a finite number > 0"),
        ({"zoom": float("nan")}, r"zoom must be a finite number"),
        ({"zoom": 1e-4}, r"zoom must be in \[0.001, 1e\+06\] px/m, got 0.0001; zoom is pixels"),
        ({"follow": "spin"}, r"follow must be one of \['pose', 'position'\], got 'spin'"),
        ({"background": (0, 0, 256)}, r"background must be three ints"),
        ({"offset": (0.0, 1.0)}, r"offset must be a Pose"),
        ({"body": "/World/Nope"}, r"body '/World/Nope' is not in the scene"),
        ({"sensor": ke.SensorConfig(noise=3.0)}, r"a camera sensor takes no SensorConfig.noise"),
        ({"sensor": ke.SensorConfig(cutoff_hz=5.0)}, r"takes no SensorConfig.cutoff_hz"),
    ],
)
def test_bad_camera_arguments_are_one_line_errors(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        cartpole_scene(**kwargs)
    assert "\n" not in str(info.value)


def test_a_scene_file_naming_an_unknown_body_is_refused():
    data = cartpole_scene().to_dict()
    data["sensors"][0]["target"] = "/World/Gone"
    with pytest.raises(ValueError, match=r"sensor 'eye' targets unknown path '/World/Gone'"):
        ke.Scene.from_dict(json.loads(json.dumps(data)))
    data["sensors"][0]["target"] = "/"  # the copy's frame: fixed to the world
    assert ke.Scene.from_dict(json.loads(json.dumps(data))) == cartpole_scene()
    data["sensors"][0]["kind"] = "pose"  # only a camera may look from the copy's frame
    with pytest.raises(ValueError, match=r"target must be an absolute path"):
        ke.Scene.from_dict(json.loads(json.dumps(data)))


def test_images_too_large_for_memory_are_refused_when_the_world_is_built():
    scene = cartpole_scene(size=(1024, 1024))
    with pytest.raises(ValueError, match=r"camera sensor 'eye': one read of 4096 copies"):
        ke.World(scene, num_envs=4096, layout="packed")


def test_a_camera_scene_round_trips_through_json():
    scene = cartpole_scene(body="/World/Robot/pole", follow="position", channels=1)
    again = ke.Scene.from_dict(json.loads(json.dumps(scene.to_dict())))
    assert again == scene and again.fingerprint == scene.fingerprint


def test_reading_some_copies_draws_just_their_rows():
    scene = cartpole_scene(sensor=ke.SensorConfig(delay=2 * DT))
    world = ke.World(scene, num_envs=6)
    tilt(world, np.linspace(-0.4, 0.4, 6), xs=np.linspace(-1, 1, 6))
    for _ in range(4):
        world.step(DT)
    every = world.read_sensor("eye")
    for ids in ([4, 1], np.array([True, False, False, True, False, True]), []):
        some = world.read_sensor("eye", env_ids=ids)
        assert np.array_equal(some, every[np.asarray(ids, dtype=bool if len(ids) == 6 else int)])
    with pytest.raises(ValueError, match="env_ids"):
        world.read_sensor("eye", env_ids=[6])
    world.close()


def test_a_shape_outside_every_image_is_skipped():
    images = np.full((3, 8, 8, 1), 7, np.uint8)
    bodies = np.array([[[50.0, 0.0, 0.0]], [[0.0, -40.0, 1.0]], [[-9.0, 9.0, 0.0]]])
    draw(images, Primitive.circle(0, (0.0, 0.0), 1.0, (200,)), np.zeros((3, 3)), bodies, 1.0)
    assert (images == 7).all()
