"""Text rasterisation with pygame.freetype, shared by both backends (cached).

Small text is rasterised at :data:`SUPERSAMPLE` times its size and scaled down: FreeType
places hinted glyphs on whole pixels, so at 8-11 px every glyph's rounding error shows as
uneven letter spacing ("ste ps", "C apture"); at 4x the error is a quarter pixel.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from kelab.render.pygame_door import pygame  # with pygame.freetype

__all__ = ["SUPERSAMPLE", "TextCache", "shared_text_cache"]

SUPERSAMPLE = 4
"""Text is rendered this many times larger, then smooth-scaled down (even glyph spacing)."""


class TextCache:
    """Renders strings to antialiased RGBA pygame surfaces and keeps the recent ones.

    Both backends draw text from these surfaces (the GL backend uploads them as
    textures), so text looks the same everywhere. Uses pygame's built-in default font.

    Args:
        capacity: How many rendered strings to keep (least recently used are dropped).
    """

    def __init__(self, capacity: int = 256) -> None:
        if not pygame.freetype.get_init():
            pygame.freetype.init()
        self._fonts: dict[int, pygame.freetype.Font] = {}
        self._surfaces: OrderedDict[tuple[str, tuple[int, int, int], int], pygame.Surface] = (
            OrderedDict()
        )
        self._coverage: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()
        self.capacity = capacity

    def font(self, size: int) -> pygame.freetype.Font:
        """Return the default font (pygame's bundled sans) for ``size`` pixels.

        FreeType with kerning, at :data:`SUPERSAMPLE` times the pixel size (see
        :meth:`surface`). ``size`` keeps pygame.font's meaning of the default font's size,
        whose glyphs are 0.6875 of the nominal size.

        Args:
            size: Font size in pixels.

        Returns:
            A cached ``pygame.freetype.Font``.
        """
        f = self._fonts.get(size)
        if f is None:
            px = max(1, round(size * 0.6875)) * SUPERSAMPLE
            f = self._fonts[size] = pygame.freetype.Font(None, px)
            f.kerning = True
            f.antialiased = True
        return f

    def coverage(self, string: str, size: int) -> np.ndarray:
        """Return how much of each pixel ``string`` covers, ``(h, w)`` uint8 (0..255).

        FreeType renders the string at :data:`SUPERSAMPLE` times the size (antialiased,
        kerned, as 8-bit coverage without a surface), then each block of
        ``SUPERSAMPLE x SUPERSAMPLE`` is averaged (an exact ratio: an inexact one would
        stretch each string differently) and rounded. Cached per ``(string, size)``;
        colours share it.

        Args:
            string: One line of text.
            size: Font size in pixels.

        Returns:
            A read-only ``(h, w)`` uint8 array (do not modify it: it is cached).
        """
        key = (string, size)
        cover = self._coverage.get(key)
        if cover is not None:
            self._coverage.move_to_end(key)
            return cover
        raw, (w, h) = self.font(size).render_raw(string)
        k = SUPERSAMPLE
        rows, cols = -(-h // k) * k, -(-w // k) * k
        big = np.zeros((rows, cols), dtype=np.uint16)
        big[:h, :w] = np.frombuffer(raw, dtype=np.uint8).reshape(h, w)
        # block sums along each axis in turn (3x faster than one sum over two axes)
        sums = big.reshape(rows // k, k, cols).sum(axis=1, dtype=np.uint16)
        sums = sums.reshape(rows // k, cols // k, k).sum(axis=2, dtype=np.uint16)
        # rint(sum / k^2) as float32 is exact here, so this matches a float mean
        cover = np.rint(sums.astype(np.float32) * np.float32(1.0 / (k * k))).astype(np.uint8)
        cover.flags.writeable = False
        self._coverage[key] = cover
        if len(self._coverage) > self.capacity:
            self._coverage.popitem(last=False)
        return cover

    def surface(self, string: str, color: tuple[int, int, int], size: int) -> pygame.Surface:
        """Return ``string`` rendered in ``color`` on a transparent background.

        Args:
            string: One line of text.
            color: ``(r, g, b)`` ints in 0..255.
            size: Font size in pixels.

        Returns:
            A 32-bit surface with per-pixel alpha (do not modify it: it is cached).
        """
        key = (string, color, size)
        surf = self._surfaces.get(key)
        if surf is not None:
            self._surfaces.move_to_end(key)
            return surf
        cover = self.coverage(string, size)
        # the colour is uniform, so partly covered pixels keep the full colour with a
        # partial alpha
        surf = pygame.Surface(cover.shape[::-1], pygame.SRCALPHA)
        surf.fill((*color, 0))
        alpha = pygame.surfarray.pixels_alpha(surf)
        alpha[:] = cover.T
        del alpha  # unlock the surface
        self._surfaces[key] = surf
        if len(self._surfaces) > self.capacity:
            self._surfaces.popitem(last=False)
        return surf


_SHARED: TextCache | None = None


def shared_text_cache() -> TextCache:
    """A process-wide cache for measuring text (``Canvas.text_size``).

    Drawing uses each backend's own cache.
    """
    global _SHARED
    if _SHARED is None:
        _SHARED = TextCache(capacity=512)
    return _SHARED
