"""The demos in a real window (Xvfb): the window's menu bar does not hide their own text
(#42 item 5). Headless frames have no menu bar, so only a windowed frame shows this."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import numpy as np
import pytest
from app_helpers import FakeClock

import kelab as ke

DEMOS = Path(__file__).resolve().parents[2] / "demos"
SHOTS = os.environ.get("KELAB_SHOTS")  # a folder: save the windowed frames there to look at


def _manual(mod):
    return mod.Manual, {"world": ke.World(mod.build_scene())}


def _cartpole(mod):
    return mod.CartpoleKeys, {"world": ke.World(mod.build_scene()), "show_hud": False}


def _playground(mod):
    timeline = ke.Timeline()
    timeline.add_runner("Physics", mod.PHYSICS_HZ)
    world = ke.World(mod.build_scene())
    return mod.Playground, {"world": world, "timeline": timeline, "runner": "Physics"}


# (demo module, how its main() builds the App, the start of its first line of text)
CASES = [
    ("manual_loop", _manual, "manual loop: frame"),
    ("cartpole_keyboard", _cartpole, "fixed step"),
    ("physics_playground", _playground, "drag: left button"),
]


@pytest.mark.parametrize(("name", "build", "first"), CASES, ids=[c[0] for c in CASES])
def test_the_menu_bar_leaves_the_demos_text_visible(
    real_window, monkeypatch, tmp_path, name, build, first
) -> None:
    monkeypatch.syspath_prepend(str(DEMOS))
    cls, kwargs = build(importlib.import_module(name))
    clock = FakeClock()
    app = cls(
        headless=False, size=(960, 540), render_hz=None, clock=clock, sleep=clock.sleep, **kwargs
    )
    try:
        assert app.menu.shown and app.menu.height > 0
        for _ in range(5):
            clock.advance(1 / 60)
            app.renderFrameOnce()
        canvas = app.renderer.canvas
        texts = [t for t in canvas.frame_texts if t[2].startswith(first)]
        assert len(texts) == 1, canvas.frame_texts
        x, y, string, size = texts[0]
        w, h = canvas.text_size(string, size)
        png = app.write_pixels_png(Path(SHOTS or tmp_path) / f"{name}_window.png")
    finally:
        app.close()
    import imageio.v3 as iio

    img = iio.imread(png)[..., :3].astype(int)
    bar = img[: app.menu.height]
    assert (np.abs(bar - np.array([36, 39, 46])).sum(axis=2) < 4).mean() > 0.8  # the bar is there
    assert y >= app.menu.height, f"{first!r} starts at y={y}, under the {app.menu.height}-px bar"
    # read back: the glyphs' light pixels fill the line's own height, none cut off by the bar
    box = img[y : y + h, x : x + w]
    lit = np.nonzero((box.min(axis=2) > 150).any(axis=1))[0]
    assert lit.size and lit[-1] - lit[0] >= 0.5 * size, (lit, size)
