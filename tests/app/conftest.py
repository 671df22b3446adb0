"""Fixtures for App tests."""

from __future__ import annotations

import os

import pytest
from app_helpers import FakeClock

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def real_window(x_display: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A real window on the session X display (Xvfb when DISPLAY is unset), SDL default driver."""
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    return x_display
