"""Small text keeps even letter spacing on both backends (sizes 12-16).

Where each glyph lands is measured through the real canvas: the ink a string adds over
its prefix is the last glyph, and its column centroid is that glyph's position. The
positions are compared with FreeType's own layout at 8x the size (scaled by a fitted
line); hinted whole-pixel placement showed as gaps off by up to 1.5 px ("ste ps").
"""

from __future__ import annotations

import numpy as np
import pygame
import pygame.freetype
import pytest
from render_helpers import BACKENDS

import kelab as ke

WORDS = ("Humanoid", "steps/frame", "Capture", "left")
SIZES = (12, 13, 14, 15, 16)
MAX_GAP_ERROR_PX = 0.45  # the old renderer: up to 1.54 px; 4x supersampling: <= 0.33 px


def _centroids(ink_of, word: str) -> np.ndarray:
    out = []
    prev = np.zeros(0)
    for k in range(1, len(word) + 1):
        cur = ink_of(word[:k])
        n = max(len(cur), len(prev))
        d = np.pad(cur, (0, n - len(cur))) - np.pad(prev, (0, n - len(prev)))
        prev = cur
        if word[k - 1] == " ":
            continue
        x = np.arange(n) + 0.5
        out.append(float((d * x).sum() / d.sum()))
    return np.array(out)


def _reference(word: str, size: int) -> np.ndarray:
    if not pygame.freetype.get_init():
        pygame.freetype.init()
    font = pygame.freetype.Font(None, round(size * 8 * 0.6875))
    font.kerning = True

    def ink(s: str) -> np.ndarray:
        if not s:
            return np.zeros(0)
        surf, _ = font.render(s, (255, 255, 255))
        return pygame.surfarray.array_alpha(surf).astype(np.float64).sum(axis=1)

    return _centroids(ink, word)


@pytest.mark.parametrize("backend", BACKENDS)
def test_small_text_glyph_gaps_are_even(backend):
    worst = 0.0
    with ke.create_renderer(backend, size=(220, 28), headless=True) as r:
        for size in SIZES:

            def ink(s: str, size: int = size) -> np.ndarray:
                r.begin_frame()
                r.canvas.clear((0, 0, 0))
                if s:
                    r.canvas.text((4, 4), s, (255, 255, 255), size=size, screen_space=True)
                r.end_frame()
                return r.read_rgb_pixels()[..., 0].astype(np.float64).sum(axis=0)

            for word in WORDS:
                got = _centroids(ink, word)
                ref = _reference(word, size)
                a = np.vstack([ref, np.ones_like(ref)]).T
                fit, *_ = np.linalg.lstsq(a, got, rcond=None)
                residual = got - a @ fit
                gap_error = float(np.abs(np.diff(residual)).max())
                worst = max(worst, gap_error)
                assert gap_error < MAX_GAP_ERROR_PX, (backend, size, word, residual.round(2))
                assert 0.09 < fit[0] < 0.16  # the 8x reference scaled to the drawn size
    assert worst > 0.0  # something was measured
