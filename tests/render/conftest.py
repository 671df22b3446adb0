"""Shared fixtures for render tests (helpers live in render_helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from render_helpers import BACKENDS

import kelab as ke


@pytest.fixture(params=BACKENDS)
def headless(request) -> Iterator[ke.Renderer]:
    r = ke.create_renderer(request.param, size=(200, 150), headless=True)
    yield r
    r.close()


@pytest.fixture
def real_window_env(x_display: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A real (visible) window: the session X display (tests/conftest.py starts Xvfb when
    DISPLAY is unset, and fails rather than skips without one) and SDL's default driver."""
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    return x_display
