import math

import numpy as np
import pytest
from render_helpers import BACKENDS, cartpole_world, edge_mask, make_world, prop

import kelab as ke

RED, GREEN, BLUE, BG = (255, 0, 0), (0, 255, 0), (0, 0, 255), (0, 0, 0)


def frame(r: ke.Renderer, draw) -> np.ndarray:
    r.begin_frame()
    r.canvas.clear(BG)
    draw(r.canvas)
    r.end_frame()
    return r.read_rgb_pixels()


def rows_of(img: np.ndarray, color) -> np.ndarray:
    return np.nonzero((img == color).all(-1).any(1))[0]


def cols_of(img: np.ndarray, color) -> np.ndarray:
    return np.nonzero((img == color).all(-1).any(0))[0]


def test_red_circle_at_origin_is_red_at_screen_centre(headless):
    img = frame(headless, lambda c: c.circle((0.0, 0.0), 0.1, RED))
    h, w = img.shape[:2]
    assert tuple(img[h // 2, w // 2]) == RED
    assert tuple(img[h // 2, w // 2 + 12]) == BG  # 0.1 m = 10 px radius
    assert tuple(img[0, 0]) == BG


def test_camera_center_moves_the_view(headless):
    headless.camera.center = (1.0, 0.5)
    img = frame(headless, lambda c: c.circle((1.0, 0.5), 0.05, GREEN))
    assert tuple(img[75, 100]) == GREEN


def test_primitives_land_where_the_camera_says(headless):
    def draw(c):
        c.polygon([(-0.9, 0.2), (-0.5, 0.2), (-0.5, 0.6), (-0.9, 0.6)], BLUE)
        c.line((0.2, -0.5), (0.8, -0.5), GREEN, width=0.06)
        c.circle((0.5, 0.3), 0.2, RED, width=0.04)

    img = frame(headless, draw)
    cam = headless.camera
    x, y = (int(v) for v in cam.world_to_screen((-0.7, 0.4)))
    assert tuple(img[y, x]) == BLUE
    x, y = (int(v) for v in cam.world_to_screen((0.5, -0.5)))
    assert tuple(img[y, x]) == GREEN
    x, y = (int(v) for v in cam.world_to_screen((0.5, 0.3)))
    assert tuple(img[y, x]) == BG  # outline only: the inside stays empty
    x, y = (int(v) for v in cam.world_to_screen((0.5 + 0.18, 0.3)))
    assert tuple(img[y, x]) == RED


def test_text_draws_in_both_spaces(headless):
    img = frame(headless, lambda c: c.text((5, 5), "KELab", (255, 255, 255), screen_space=True))
    ys, xs = np.nonzero(img.max(-1) > 0)
    assert ys.min() >= 5 and xs.min() >= 5 and ys.max() < 5 + 20 and xs.size > 30
    img = frame(headless, lambda c: c.text((0.0, 0.0), "KELab", (255, 255, 255), size=24))
    ys, xs = np.nonzero(img.max(-1) > 0)
    assert ys.min() >= 75 and xs.min() >= 100 and xs.max() < 170


@pytest.mark.parametrize("bad", [(1.0, 0.0, 0.0), (256, 0, 0), (-1, 0, 0), (1, 2), "red"])
def test_colours_are_validated(headless, bad):
    headless.begin_frame()
    with pytest.raises(ValueError, match="0..255"):
        headless.canvas.circle((0, 0), 0.1, bad)
    with pytest.raises(ValueError, match="0..255"):
        headless.canvas.clear(bad)


@pytest.mark.parametrize("bad", [-0.1, math.nan, True, "0.1", None])
def test_sizes_are_checked_with_the_field_and_value(headless, bad):
    headless.begin_frame()
    with pytest.raises(
        ValueError, match=r"^Canvas.circle: width must be a finite number >= 0, got"
    ):
        headless.canvas.circle((0, 0), 0.1, RED, width=bad)
    with pytest.raises(ValueError, match=r"^Canvas.line: width must be a finite number >= 0"):
        headless.canvas.line((0, 0), (1, 0), RED, width=bad)
    headless.canvas.circle((0, 0), np.float32(0.1), RED, width=np.float64(0.02))  # numpy: fine


def test_positions_must_be_finite_numbers(headless):
    """A NaN or inf position is named at the call (it used to fail deep in a backend)."""
    headless.begin_frame()
    c = headless.canvas
    with pytest.raises(ValueError, match=r"^Canvas.polygon: points must be finite, got .*nan"):
        c.polygon([(0, 0), (math.nan, 1), (1, 1)], RED)
    with pytest.raises(ValueError, match=r"^Canvas.circle: center must be finite, got \(inf, 0"):
        c.circle((math.inf, 0), 0.1, RED)
    with pytest.raises(ValueError, match=r"^Canvas.line: b must be finite"):
        c.line((0, 0), (1, -math.inf), RED, width=0.05)
    with pytest.raises(ValueError, match=r"^Canvas.line: a must be an array of shape \(2,\)"):
        c.line((0, 0, 0), (1, 1), RED)
    with pytest.raises(ValueError, match=r"^Canvas.circle: center must be numbers in metres"):
        c.circle("origin", 0.1, RED)


def test_camera_zoom_is_a_positive_number() -> None:
    cam = ke.Camera()
    cam.zoom = np.float32(50.0)
    assert cam.zoom == 50.0 and type(cam.zoom) is float
    for bad in (0, -1.0, math.inf, True, "100", None):
        with pytest.raises(ValueError, match=r"^Camera zoom must be a finite number of pixels"):
            cam.zoom = bad
    assert cam.zoom == 50.0


def test_numpy_int_colours_are_accepted(headless):
    img = frame(headless, lambda c: c.circle((0, 0), 0.1, tuple(np.array([255, 0, 0]))))
    assert tuple(img[75, 100]) == RED


def test_body_above_is_drawn_higher(headless):
    world = make_world(
        [
            (prop(ke.Box(0.2, 0.2), y=0.4, color=RED), "/A"),
            (prop(ke.Box(0.2, 0.2), y=-0.4, color=BLUE), "/B"),
        ]
    )
    img = frame(headless, lambda c: c.draw_world(world))
    assert rows_of(img, RED).max() < rows_of(img, BLUE).min()


def test_layers_decide_what_is_on_top(headless):
    world = make_world(
        [
            (prop(ke.Circle(0.3), color=RED, layer=2), "/Top"),
            (prop(ke.Box(0.5, 0.5), color=BLUE, layer=0), "/Bottom"),
        ]
    )
    img = frame(headless, lambda c: c.draw_world(world))
    assert tuple(img[75 + 10, 100]) == RED  # the later-added, lower-layer box is under it
    assert tuple(img[75 - 24, 100 - 24]) == BLUE  # box corner region outside the circle


def test_env_copies_are_offset_and_terrain_drawn_once(headless):
    world = cartpole_world(num_envs=3, spacing=1.0)
    headless.camera.center = (1.0, 0.5)
    img = frame(headless, lambda c: c.draw_world(world))
    cart = (60, 90, 160)
    ground = (90, 110, 90)
    cam = headless.camera
    for i in range(3):
        x, y = (int(v) for v in cam.world_to_screen((i * 1.0, 0.15)))
        assert tuple(img[y, x - 10]) == cart
    x, y = (int(v) for v in cam.world_to_screen((0.5, -0.2)))
    assert tuple(img[y, x]) == ground
    img = frame(headless, lambda c: c.draw_world(world, env_ids=[1]))
    for i, want in ((0, BG), (1, cart), (2, BG)):
        x, y = (int(v) for v in cam.world_to_screen((i * 1.0, 0.15)))
        assert tuple(img[y, x - 10]) == want


def test_rotation_and_circle_radius_line(headless):
    world = make_world([(prop(ke.Box(1.0, 0.1), angle=math.pi / 2, color=RED), "/Stick")])
    img = frame(headless, lambda c: c.draw_world(world))
    assert np.ptp(rows_of(img, RED)) > 80 and np.ptp(cols_of(img, RED)) < 15  # vertical now
    wheel = make_world([(prop(ke.Circle(0.5), angle=math.pi / 2, color=(200, 200, 200)), "/W")])
    img = frame(headless, lambda c: c.draw_world(wheel))
    above = img[75 - 30, 100].astype(int)  # on the radius line (pointing up)
    below = img[75 + 30, 100].astype(int)
    assert tuple(below) == (200, 200, 200)
    assert above.sum() < 300  # the darker accent line


def test_segment_with_round_caps_and_shape_offset(headless):
    seg = ke.Segment((-0.5, 0.0), (0.5, 0.0), radius=0.1, offset=ke.Pose(0.0, 0.3))
    world = make_world([(prop(seg, color=GREEN), "/Seg")])
    img = frame(headless, lambda c: c.draw_world(world))
    cam = headless.camera
    x, y = (int(v) for v in cam.world_to_screen((0.57, 0.3)))  # inside the round cap
    assert tuple(img[y, x]) == GREEN
    x, y = (int(v) for v in cam.world_to_screen((0.0, 0.0)))
    assert tuple(img[y, x]) == BG


def test_interpolation_lerps_position(headless):
    world = make_world([(prop(ke.Box(0.2, 0.2), color=RED), "/Block")])
    prev = world.body_poses.copy()
    prev[0, 0] = (-0.4, 0.0, 0.0)
    world.body_poses[0, 0] = (0.4, 0.0, 0.0)
    for alpha, centre_px in ((0.5, 100), (0.25, 80), (1.0, 140)):
        img = frame(headless, lambda c, a=alpha: c.draw_world(world, a, previous_poses=prev))
        cols = cols_of(img, RED)
        assert abs((cols.min() + cols.max() + 1) / 2 - centre_px) <= 1
    img = frame(headless, lambda c: c.draw_world(world, 0.0))  # no previous poses: current
    cols = cols_of(img, RED)
    assert abs((cols.min() + cols.max() + 1) / 2 - 140) <= 1


def test_interpolation_takes_the_short_arc(headless):
    grey = (200, 200, 200)
    world = make_world([(prop(ke.Circle(0.5), color=grey), "/Wheel")])
    prev = world.body_poses.copy()
    prev[0, 0, 2] = 2.8
    world.body_poses[0, 0, 2] = -2.8
    img = frame(headless, lambda c: c.draw_world(world, alpha=0.5, previous_poses=prev))
    # halfway along the short arc the radius line points left (angle pi), not right (0)
    assert img[75, 100 - 30].astype(int).sum() < 300
    assert tuple(img[75, 100 + 30]) == grey


def test_draw_world_validates_inputs(headless):
    world = make_world([(prop(ke.Circle(0.1)), "/Ball")], num_envs=2)
    headless.begin_frame()
    with pytest.raises(ValueError, match="previous_poses"):
        headless.canvas.draw_world(world, alpha=0.5, previous_poses=np.zeros((1, 1, 3)))
    with pytest.raises(ValueError, match="alpha"):
        headless.canvas.draw_world(world, alpha=1.5)
    with pytest.raises(ValueError, match="env_ids"):
        headless.canvas.draw_world(world, env_ids=[2])
    world.body_poses = np.zeros((3, 1, 3))
    with pytest.raises(ValueError, match="body_poses"):
        headless.canvas.draw_world(world)


def test_invisible_bodies_are_skipped(headless):
    hidden = ke.Prop(ke.Circle(0.3), mass=1.0, render=ke.RenderHint(color=RED, visible=False))
    world = make_world([(hidden, "/Ghost")])
    img = frame(headless, lambda c: c.draw_world(world))
    assert img.max() == 0


def _scene(c: ke.Canvas, world) -> None:
    c.clear((30, 30, 40))
    c.draw_world(world)
    c.circle((-0.6, 0.9), 0.15, (240, 200, 40))
    c.polygon([(0.5, 0.6), (0.9, 0.6), (0.7, 1.0)], (40, 200, 120))
    c.polygon([(-0.9, 0.2), (-0.7, 0.2), (-0.7, 0.4)], (250, 250, 250), width=0.02)
    c.line((-1.0, -0.3), (1.0, -0.3), (200, 60, 200), width=0.03)
    c.text((8, 8), "both backends", (255, 255, 255), screen_space=True)


def test_backends_agree_pixelwise(tmp_path):
    world = cartpole_world()
    world.body_poses[0, 1, 2] = 0.4  # tilt the pole
    world.body_poses[0, 1, :2] = (-0.5 * math.sin(0.4), 0.25 + 0.5 * math.cos(0.4))
    images = {}
    for backend in BACKENDS:
        with ke.create_renderer(backend, size=(300, 240), headless=True) as r:
            r.camera.center = (0.0, 0.5)
            r.camera.zoom = 110.0
            r.begin_frame()
            _scene(r.canvas, world)
            r.end_frame()
            images[backend] = r.read_rgb_pixels()
            r.write_png(tmp_path / f"{backend}.png")
    a, b = images["pygame"].astype(int), images["gl"].astype(int)
    inner = ~edge_mask(images["pygame"], images["gl"])
    assert inner.mean() > 0.6  # most of the frame is interior
    close = (np.abs(a - b).max(-1) <= 2)[inner]
    assert close.mean() >= 0.98
    whole = (np.abs(a - b).max(-1) <= 2).mean()
    assert whole >= 0.97


def test_draws_a_real_world(headless):
    b = ke.SceneBuilder()
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    b.add(ke.Terrain.plane(), at="/")
    world = ke.World(b.build(), num_envs=2, env_spacing=1.0)
    world.step(1 / 120)
    headless.camera.center = (0.5, 0.5)
    img = frame(headless, lambda c: c.draw_world(world))
    cam = headless.camera
    for i in range(2):
        x, y = (int(v) for v in cam.world_to_screen((i * 1.0, 0.9)))
        assert tuple(img[y, x]) == (210, 150, 80)  # pole of copy i
    x, y = (int(v) for v in cam.world_to_screen((0.5, -0.1)))
    assert tuple(img[y, x]) == (90, 110, 90)  # shared ground


def test_a_frame_keeps_the_previous_content_until_cleared(headless):
    frame(headless, lambda c: c.circle((0.0, 0.0), 0.1, RED))
    headless.begin_frame()  # no clear: draw on top of the previous frame
    headless.canvas.circle((0.5, 0.0), 0.1, GREEN)
    headless.end_frame()
    img = headless.read_rgb_pixels()
    assert tuple(img[75, 100]) == RED and tuple(img[75, 150]) == GREEN
    headless.begin_frame()  # nothing drawn at all: the same picture again
    headless.end_frame()
    np.testing.assert_array_equal(headless.read_rgb_pixels(), img)


def test_compiled_world_follows_zoom_copies_and_scene_changes(headless):
    world = make_world([(prop(ke.Box(0.2, 0.2), color=RED), "/Block")], num_envs=2, spacing=0.6)
    for zoom, half_px in ((100.0, 10), (50.0, 5), (100.0, 10)):
        headless.camera.zoom = zoom
        img = frame(headless, lambda c: c.draw_world(world))
        cols = cols_of(img, RED)
        assert cols.min() == 100 - half_px  # copy 0 at the centre, sized by the zoom
        assert cols.max() == 100 + int(0.6 * zoom) + half_px - 1  # copy 1, 0.6 m right
    img = frame(headless, lambda c: c.draw_world(world, env_ids=[1]))
    assert cols_of(img, RED).min() == 100 + 60 - 10
    other = make_world([(prop(ke.Box(0.2, 0.2), color=BLUE), "/Block")])
    img = frame(headless, lambda c: c.draw_world(other))
    assert rows_of(img, RED).size == 0 and tuple(img[75, 100]) == BLUE


def test_fills_keep_the_order_of_the_calls(headless):
    """Fills are drawn in call order, interleaved with lines, text and clears (pygame
    queues consecutive fills and draws them in one pass before anything else)."""
    red, blue = (255, 0, 0), (0, 0, 255)
    c = headless.canvas
    headless.begin_frame()
    c.clear((0, 0, 0))
    c.circle((0.7, 0.5), 0.1, red)  # cleared next: never seen
    c.clear((0, 0, 0))
    c.polygon([(-0.8, -0.3), (-0.1, -0.3), (-0.1, 0.3), (-0.8, 0.3)], red)
    c.line((-0.9, 0.0), (0.9, 0.0), (0, 255, 0))  # a hairline over the red square
    c.polygon([(-0.3, -0.3), (0.3, -0.3), (0.3, 0.3), (-0.3, 0.3)], blue)  # over both
    c.text((2, 2), "K", (255, 255, 255), screen_space=True)
    c.circle((0.0, 0.0), 0.05, red)  # over the blue square
    headless.end_frame()
    img = headless.read_rgb_pixels()
    assert headless.canvas.camera.zoom == 100.0 and img.shape[:2] == (150, 200)

    def px(x: float, y: float) -> tuple[int, ...]:  # the pixel at world (x, y)
        return tuple(int(v) for v in img[int(75 - 100 * y), int(100 + 100 * x)])

    assert px(-0.6, 0.15) == red  # the first square alone
    line = img[74:76, 40]  # the (antialiased) line over it
    assert line[:, 1].max() > 100 and line[:, 2].max() == 0
    assert px(0.15, 0.15) == blue  # the second square over the line
    assert all(tuple(int(v) for v in p) == blue for p in img[74:76, 115])
    assert px(0.0, 0.0) == red  # the last circle on top
    assert px(0.7, 0.5) == (0, 0, 0)  # nothing of the cleared circle


def test_frame_texts_and_camera_are_the_canvas_public_protocol(headless):
    canvas = headless.canvas
    headless.begin_frame()
    canvas.clear(BG)
    canvas.text((5, 5), "KELab", (255, 255, 255), size=12, screen_space=True)
    assert canvas.frame_texts == ((5, 5, "KELab", 12),)
    headless.end_frame()
    headless.begin_frame()  # a new frame starts with no texts
    assert canvas.frame_texts == ()
    headless.end_frame()
    cam = ke.Camera(center=(1.0, 2.0), zoom=5.0, size=headless.size)
    canvas.camera = cam
    assert canvas.camera is cam
    with pytest.raises(ValueError, match="Canvas.camera must be a kelab Camera"):
        canvas.camera = "camera"


def test_an_image_fills_its_screen_rect_pixel_by_pixel(headless):
    """Canvas.image (#43: what a policy's camera sees), nearest pixel, both backends."""
    gray = np.array([[0, 90, 90, 255], [30, 30, 200, 7]], np.uint8)
    rgb = np.zeros((2, 3, 3), np.uint8)
    rgb[0, 1], rgb[1, 2] = RED, BLUE

    def draw(c):
        c.image((20, 10, 100, 50), gray)  # 20 px per image pixel
        c.image((120, 60, 150, 80), rgb)  # 10 px per image pixel

    img = frame(headless, draw)
    for r in range(2):
        for k in range(4):
            block = img[
                10 + 20 * r + 2 : 10 + 20 * (r + 1) - 2, 20 + 20 * k + 2 : 20 + 20 * (k + 1) - 2
            ]
            assert (block == gray[r, k]).all(), (r, k)
    assert tuple(img[65, 135]) == RED and tuple(img[75, 145]) == BLUE
    assert tuple(img[65, 125]) == BG and tuple(img[5, 5]) == BG  # its black, and outside
    for bad in (np.zeros((2, 2), np.float32), np.zeros((2, 2, 4), np.uint8), [[1, 2]]):
        with pytest.raises(ValueError, match=r"Canvas.image: pixels must be a non-empty uint8"):
            headless.canvas.image((0, 0, 10, 10), bad)
