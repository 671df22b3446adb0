"""The packed layout without its C helper (kelab/sim/physics/_native.c).

A machine with no C compiler at ``pip install`` gets no helper, and ``KELAB_NO_NATIVE=1``
turns it off: the World then reads, writes and resets through pymunk.batch and
Chipmunk's own calls. The rest of the suite runs with the helper where it is built, so
this runs the packed layout's exactness tests again in a process without it (started
early, on the core the suite leaves idle: tests/prestart.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from prestart import Prestart

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
#: One interpreter: it says whether the helper is off, then runs the files' tests
WITHOUT_NATIVE = Prestart(
    [
        sys.executable,
        "-c",
        "import sys, pytest; from kelab.sim.physics import _guard; "
        "print('helper off:', _guard.native_module() is None, flush=True); "
        "sys.exit(pytest.main(sys.argv[1:]))",
        "-p",
        "no:cacheprovider",
        *FILES,
    ],
    env={**os.environ, "KELAB_NO_NATIVE": "1"},
    cwd=ROOT,
    timeout=600,
)


@pytest.mark.prestart(WITHOUT_NATIVE)
def test_the_packed_layouts_exactness_tests_pass_without_the_c_helper() -> None:
    run = WITHOUT_NATIVE.result()
    assert run.stdout.startswith("helper off: True\n"), run.stdout[:2000] + run.stderr
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout
