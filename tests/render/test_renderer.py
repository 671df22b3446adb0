import numpy as np
import pytest

import kelab as ke


def _half_frame(r: ke.Renderer, color) -> None:
    r.begin_frame()
    r.canvas.clear((0, 0, 0))
    w, h = r.size
    r.canvas.polygon([(0, 0), (w, 0), (w, h / 2), (0, h / 2)], color, width=0)
    r.end_frame()


def test_read_rgb_pixels_shape_dtype_and_flip(headless):
    headless.camera.zoom = 1.0
    headless.camera.center = (100.0, 75.0)  # world == pixels, with +Y up
    _half_frame(headless, (0, 200, 0))  # covers world y in [0, 75]: the BOTTOM half
    img = headless.read_rgb_pixels()
    assert img.shape == (150, 200, 3) and img.dtype == np.uint8 and img.flags.writeable
    assert (img[100:] == (0, 200, 0)).all() and (img[:70] == 0).all()
    gl_order = headless.read_rgb_pixels(flip_y=False)
    assert (gl_order[:70] == (0, 200, 0)).all()
    np.testing.assert_array_equal(gl_order, img[::-1])


def test_reads_return_the_last_finished_frame(headless):
    with pytest.raises(RuntimeError, match="no finished frame"):
        headless.read_rgb_pixels()
    headless.begin_frame()
    headless.canvas.clear((255, 0, 0))
    headless.end_frame()
    headless.begin_frame()
    headless.canvas.clear((0, 0, 255))  # not finished yet
    assert tuple(headless.read_rgb_pixels()[10, 10]) == (255, 0, 0)
    headless.end_frame()
    assert tuple(headless.read_rgb_pixels()[10, 10]) == (0, 0, 255)
    assert headless.frame_count == 2


def test_frame_protocol_errors_and_idempotent_close(headless):
    with pytest.raises(RuntimeError, match="without begin_frame"):
        headless.end_frame()
    headless.begin_frame()
    with pytest.raises(RuntimeError, match="twice"):
        headless.begin_frame()
    headless.end_frame()
    assert headless.poll_events() == [] and not headless.should_close
    headless.close()
    headless.close()
    assert headless.closed and headless.should_close
    with pytest.raises(RuntimeError, match="closed"):
        headless.begin_frame()


def test_write_png_round_trips(headless, tmp_path):
    import pygame

    headless.begin_frame()
    headless.canvas.clear((12, 34, 56))
    headless.canvas.circle((0, 0), 0.3, (250, 10, 10))
    headless.end_frame()
    path = headless.write_png(tmp_path / "sub" / "frame.png")
    loaded = pygame.surfarray.array3d(pygame.image.load(str(path))).transpose(1, 0, 2)
    np.testing.assert_array_equal(loaded, headless.read_rgb_pixels())


def test_factory_validates_and_replaces_camera():
    with pytest.raises(ValueError, match="backend"):
        ke.create_renderer("vulkan", headless=True)
    with pytest.raises(ValueError, match="size"):
        ke.create_renderer("pygame", size=(0, 10), headless=True)
    with ke.create_renderer("pygame", size=(64, 48), headless=True) as r:
        r.camera = ke.Camera(center=(5.0, 5.0), zoom=10.0, size=(1, 1))
        assert r.camera.size == (64, 48) and r.canvas.camera is r.camera
        r.begin_frame()
        r.canvas.clear((0, 0, 0))
        r.canvas.circle((5.0, 5.0), 0.5, (0, 0, 255))
        r.end_frame()
        assert tuple(r.read_rgb_pixels()[24, 32]) == (0, 0, 255)


def test_headless_needs_no_display(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    for backend in ("pygame", "gl"):
        with ke.create_renderer(backend, size=(32, 32), headless=True) as r:
            r.begin_frame()
            r.canvas.clear((1, 2, 3))
            r.end_frame()
            assert tuple(r.read_rgb_pixels()[0, 0]) == (1, 2, 3)


def test_window_without_display_explains_the_fix(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    for backend in ("pygame", "gl"):
        with pytest.raises(RuntimeError, match="headless=True"):
            ke.create_renderer(backend, size=(32, 32))


def _kelab_imports(module: str) -> set[tuple[str, str]]:
    """``(module, name)`` for every kelab import in ``module``'s source, wherever it sits
    (top level, TYPE_CHECKING blocks, functions); ``name`` is "" for ``import x``."""
    import ast
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    out: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {(a.name, "") for a in node.names if a.name.startswith("kelab")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kelab"):
            assert node.level == 0, f"{module} uses a relative import"
            out |= {(node.module, a.name) for a in node.names}
    return out


def test_render_modules_import_downward_and_no_private_names():
    import pkgutil

    import kelab.render

    names = [f"kelab.render.{m.name}" for m in pkgutil.iter_modules(kelab.render.__path__)]
    edges: dict[str, set[str]] = {}
    for mod in names:
        edges[mod] = set()
        for target, name in _kelab_imports(mod):
            sub = f"{target}.{name}"
            to = sub if sub in names else target
            if to in names and to != mod:
                edges[mod].add(to)
            if target != mod and name.startswith("_") and not name.startswith("__"):
                pytest.fail(f"{mod} imports the private name {target}.{name}")
    # no circle: repeatedly drop the modules that import no remaining module
    left = dict(edges)
    while left:
        leaves = [m for m, deps in left.items() if not deps & left.keys()]
        assert leaves, f"import circle among {sorted(left)}"
        for m in leaves:
            del left[m]


def test_backends_are_one_registry_of_module_paths():
    from kelab.render import renderer

    assert renderer.BACKENDS == tuple(renderer.BACKEND_CLASSES) == ("pygame", "gl")
    for name, where in renderer.BACKEND_CLASSES.items():
        with ke.create_renderer(name, size=(8, 8), headless=True) as r:
            assert f"{type(r).__module__}:{type(r).__qualname__}" == where
            assert r.backend == name
    with pytest.raises(ValueError, match=r"backend must be one of \('pygame', 'gl'\)"):
        ke.create_renderer("vulkan", headless=True)


def test_backends_override_only_the_canvas_public_protocol():
    # #26: a backend implements Canvas's public painters, not private hooks
    from kelab.render.canvas import Canvas
    from kelab.render.gl_canvas import GLCanvas
    from kelab.render.pygame_backend import PygameCanvas

    base = {n for n in vars(Canvas) if callable(getattr(Canvas, n))}
    for backend in (GLCanvas, PygameCanvas):
        overridden = {n for n in vars(backend) if n in base and not n.startswith("__")}
        assert overridden, backend
        assert not {n for n in overridden if n.startswith("_")}, (backend, sorted(overridden))
