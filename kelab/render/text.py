"""Text rasterisation with pygame.freetype, shared by both backends (cached)."""

from __future__ import annotations

from collections import OrderedDict

import pygame
import pygame.freetype

__all__ = ["TextCache"]


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
        self.capacity = capacity

    def font(self, size: int) -> pygame.freetype.Font:
        """Return the default font (pygame's bundled sans) for ``size`` pixels.

        FreeType with kerning: pygame.font's renderer spaces small text unevenly
        ("le ft"). ``size`` keeps pygame.font's meaning of the default font's size, whose
        glyphs are 0.6875 of the nominal size.

        Args:
            size: Font size in pixels.

        Returns:
            A cached ``pygame.freetype.Font``.
        """
        f = self._fonts.get(size)
        if f is None:
            f = self._fonts[size] = pygame.freetype.Font(None, max(1, round(size * 0.6875)))
            f.kerning = True
            f.antialiased = True
        return f

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
        surf, _ = self.font(size).render(string, color)  # SRCALPHA, antialiased, kerned
        self._surfaces[key] = surf
        if len(self._surfaces) > self.capacity:
            self._surfaces.popitem(last=False)
        return surf
