"""The packed layout without its C helper (kelab/sim/physics/_native.c).

A machine with no C compiler at ``pip install`` gets no helper, and ``KELAB_NO_NATIVE=1``
turns it off: the World then reads, writes and resets through pymunk.batch and
Chipmunk's own calls. The rest of the suite runs with the helper where it is built, so
this runs the packed layout's exactness tests again in a process without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = [
    "tests/sim/test_world_packed.py",
    "tests/sim/test_world_resets.py",
    "tests/sim/test_world_full_reset.py",
    "tests/sim/test_packed_fastpath.py",
    "tests/sim/test_determinism.py",
    "tests/sim/test_friction_native.py",
    "tests/sim/test_world_params.py",
    "tests/sim/test_world_steps.py",
]


def test_the_packed_layouts_exactness_tests_pass_without_the_c_helper() -> None:
    env = {**os.environ, "KELAB_NO_NATIVE": "1"}
    off = subprocess.run(
        [sys.executable, "-c", "from kelab.sim.physics import _guard; "
         "print(_guard.native_module() is None)"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert off.stdout.strip() == "True", off.stdout + off.stderr
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *FILES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout
