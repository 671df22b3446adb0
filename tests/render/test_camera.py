import numpy as np
import pytest

import kelab as ke


def test_center_maps_to_screen_centre_and_y_is_flipped():
    cam = ke.Camera(center=(2.0, -1.0), zoom=50.0, size=(600, 400))
    assert cam.world_to_screen((2.0, -1.0)) == (300.0, 200.0)
    x, y = cam.world_to_screen((3.0, 0.0))  # 1 m right and 1 m up
    assert (x, y) == (350.0, 150.0)


def test_round_trip_and_batch_match_scalar():
    cam = ke.Camera(center=(0.3, 0.7), zoom=123.0, size=(640, 480))
    rng = np.random.default_rng(0)
    pts = rng.uniform(-5, 5, size=(7, 3, 2))
    px = cam.world_to_screen_batch(pts)
    assert px.shape == pts.shape
    np.testing.assert_allclose(cam.screen_to_world_batch(px), pts, atol=1e-12)
    for p, q in zip(pts.reshape(-1, 2), px.reshape(-1, 2), strict=True):
        np.testing.assert_allclose(cam.world_to_screen(p), q, atol=1e-9)
        np.testing.assert_allclose(cam.screen_to_world(q), p, atol=1e-12)


def test_visible_rect_and_from_spec():
    cam = ke.Camera(center=(1.0, 0.0), zoom=100.0, size=(200, 100))
    assert cam.visible_world_rect() == (0.0, -0.5, 2.0, 0.5)
    b = ke.SceneBuilder()
    b.camera("main", center=(1.0, 2.0), zoom=40.0)
    spec = b.build().cameras[0]
    c2 = ke.Camera.from_spec(spec, size=(10, 10))
    assert (c2.center, c2.zoom, c2.size) == ((1.0, 2.0), 40.0, (10, 10))


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"zoom": 0.0}, "zoom"),
        ({"zoom": float("inf")}, "zoom"),
        ({"size": (0, 10)}, "size"),
        ({"size": (10.5, 10)}, "size"),
        ({"center": (0.0, float("nan"))}, "center"),
        ({"center": (1.0,)}, "center"),
    ],
)
def test_validation_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        ke.Camera(**kwargs)


def test_batch_rejects_wrong_shape():
    with pytest.raises(ValueError, match=r"\(\.\.\., 2\)"):
        ke.Camera().world_to_screen_batch(np.zeros((3, 3)))
