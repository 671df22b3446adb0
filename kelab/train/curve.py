"""``training_curve.png``: mean return and success rate against env steps (pygame, offscreen)."""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["write_training_curve"]

_SIZE = (720, 420)
_MARGIN = (64, 44, 28, 44)  # left, right, top, bottom
_RETURN = (40, 110, 200)
_SUCCESS = (220, 110, 40)
_EVAL = (30, 150, 70)


def _fmt(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v / 1e6:.1f}M"
    if abs(v) >= 1e3:
        return f"{v / 1e3:.0f}k"
    return f"{v:.3g}"


def write_training_curve(
    path: str | os.PathLike[str],
    history: Sequence[tuple[int, float, float | None]],
    evaluations: Sequence[tuple[int, float]] = (),
) -> Path:
    """Draw ``(env_steps, mean_return, success_rate)`` rows and save them as a PNG atomically.

    Mean return uses the left axis (blue), the training success rate (with exploration
    noise) the right axis, 0..1 (orange); ``evaluations``, ``(env_steps, success_rate)``
    of the deterministic policy, are green points on the same axis.

    Returns:
        The path written.
    """
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    import pygame

    from kelab.train.checkpoint import atomic_write_bytes

    if not pygame.font.get_init():
        pygame.font.init()
    w, h = _SIZE
    left, right, top, bottom = _MARGIN
    surf = pygame.Surface(_SIZE)
    surf.fill((250, 250, 252))
    pw, ph = w - left - right, h - top - bottom
    pygame.draw.rect(surf, (200, 200, 205), (left, top, pw, ph), 1)
    steps = [r[0] for r in history] + [e[0] for e in evaluations]
    returns = [r[1] for r in history if math.isfinite(r[1])]
    x0, x1 = (min(steps), max(steps)) if steps else (0, 1)
    if x1 <= x0:
        x1 = x0 + 1
    y0, y1 = (min(returns), max(returns)) if returns else (0.0, 1.0)
    if y1 - y0 < 1e-9:
        y0, y1 = y0 - 1.0, y1 + 1.0

    def px(step: float) -> float:
        return left + (step - x0) / (x1 - x0) * pw

    def py(value: float, lo: float, hi: float) -> float:
        return top + ph - (value - lo) / (hi - lo) * ph

    ret_pts = [(px(s), py(r, y0, y1)) for s, r, _ in history if math.isfinite(r)]
    suc_pts = [(px(s), py(v, 0.0, 1.0)) for s, _, v in history if v is not None]
    for pts, color in ((ret_pts, _RETURN), (suc_pts, _SUCCESS)):
        if len(pts) >= 2:
            pygame.draw.aalines(surf, color, False, pts)
        elif pts:
            pygame.draw.circle(surf, color, pts[0], 2)
    for s, v in evaluations:
        pygame.draw.circle(surf, _EVAL, (px(s), py(v, 0.0, 1.0)), 3)
    font = pygame.font.Font(None, 18)

    def text(s: str, pos: tuple[float, float], color: tuple[int, int, int], anchor: str) -> None:
        img = font.render(s, True, color)
        rect = img.get_rect(**{anchor: (int(pos[0]), int(pos[1]))})
        surf.blit(img, rect)

    text(_fmt(y1), (left - 6, top), _RETURN, "midright")
    text(_fmt(y0), (left - 6, top + ph), _RETURN, "midright")
    text("1.0", (left + pw + 4, top), _SUCCESS, "midleft")
    text("0.0", (left + pw + 4, top + ph), _SUCCESS, "midleft")
    text(_fmt(x0), (left, top + ph + 6), (60, 60, 60), "midtop")
    text(_fmt(x1), (left + pw, top + ph + 6), (60, 60, 60), "midtop")
    text("env steps", (left + pw / 2, top + ph + 22), (60, 60, 60), "midtop")
    text("mean return", (left + 8, top + 6), _RETURN, "topleft")
    text("success rate (training)", (left + 110, top + 6), _SUCCESS, "topleft")
    if evaluations:
        text("evaluated", (left + 280, top + 6), _EVAL, "topleft")
    png = io.BytesIO()  # encoded in memory: no side file for a kill to leave behind
    pygame.image.save(surf, png, "png")
    return atomic_write_bytes(Path(path), png.getvalue())
