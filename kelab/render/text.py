"""Text rasterisation with pygame.font, shared by both backends (cached)."""

from __future__ import annotations

from collections import OrderedDict

import pygame

__all__ = ["TextCache"]


class TextCache:
    """Renders strings to antialiased RGBA pygame surfaces and keeps the recent ones.

    Both backends draw text from these surfaces (the GL backend uploads them as
    textures), so text looks the same everywhere. Uses pygame's built-in default font.

    Args:
        capacity: How many rendered strings to keep (least recently used are dropped).
    """

    def __init__(self, capacity: int = 256) -> None:
        if not pygame.font.get_init():
            pygame.font.init()
        self._fonts: dict[int, pygame.font.Font] = {}
        self._surfaces: OrderedDict[tuple[str, tuple[int, int, int], int], pygame.Surface] = (
            OrderedDict()
        )
        self.capacity = capacity

    def font(self, size: int) -> pygame.font.Font:
        """Return the default font at ``size`` pixels.

        Args:
            size: Font size in pixels.

        Returns:
            A cached ``pygame.font.Font``.
        """
        f = self._fonts.get(size)
        if f is None:
            f = self._fonts[size] = pygame.font.Font(None, size)
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
        surf = self.font(size).render(string, True, color)  # SRCALPHA, antialiased
        self._surfaces[key] = surf
        if len(self._surfaces) > self.capacity:
            self._surfaces.popitem(last=False)
        return surf
