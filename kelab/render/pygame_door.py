"""pygame, imported through one door: without the banner pygame prints on its first import.

pygame prints ``pygame-ce 2.5.8 (SDL ..., Python ...)`` on stdout when it is first
imported, unless ``PYGAME_HIDE_SUPPORT_PROMPT`` is set: a user's script that builds and
runs a ``ke.App`` would print it among its own output. Every kelab module that uses
pygame imports it from here (tests/render/test_pygame_door.py), so the variable is set
for that first import only and put back as it was after (a variable the user set, to any
value, is left alone). ``pygame.freetype`` comes with it.

Example:
    >>> from kelab.render.pygame_door import pygame
    >>> pygame.Rect(0, 0, 2, 3).size
    (2, 3)
"""

from __future__ import annotations

import os

__all__ = ["pygame"]

_HIDE = "PYGAME_HIDE_SUPPORT_PROMPT"
_set_here = _HIDE not in os.environ
if _set_here:
    os.environ[_HIDE] = "1"
try:
    import pygame
    import pygame.freetype  # kelab.render.text's glyphs
finally:
    if _set_here:
        os.environ.pop(_HIDE, None)
