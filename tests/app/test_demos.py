"""Every demo runs headless from the command line and writes a non-blank PNG."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

DEMOS = Path(__file__).resolve().parents[2] / "demos"
CASES = [
    ("physics_playground.py", "pygame", 200),
    ("cartpole_keyboard.py", "gl", 120),
    ("multi_rate.py", "pygame", 100),
    ("manual_loop.py", "gl", 120),
]


@pytest.mark.parametrize(("demo", "backend", "frames"), CASES, ids=[c[0] for c in CASES])
def test_demo_runs_headless_and_draws(tmp_path, demo, backend, frames):
    import imageio.v3 as iio

    out = tmp_path / "shot.png"
    env = dict(os.environ, PYGAME_HIDE_SUPPORT_PROMPT="1")
    cmd = [
        sys.executable,
        str(DEMOS / demo),
        "--headless",
        "--frames",
        str(frames),
        "--out",
        str(out),
        "--backend",
        backend,
        "--record-dir",
        str(tmp_path / "rec"),
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    img = iio.imread(out)[..., :3]
    assert img.shape == (540, 960, 3)
    colours = np.unique(img.reshape(-1, 3), axis=0)
    assert len(colours) > 20 and img.std() > 10  # bodies, text and ground, not a blank frame
    if demo == "multi_rate.py":
        data = np.loadtxt(tmp_path / "rec" / "multi_rate.csv", delimiter=",", skiprows=1)
        assert data.shape[0] == 50 and data[1, 0] == pytest.approx(1 / 30)  # 30 Hz rows
        frames_mp4 = iio.imread(tmp_path / "rec" / "multi_rate.mp4")
        assert frames_mp4.shape[0] == 50  # one frame per Capture step
