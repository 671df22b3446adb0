"""Long runs keep flat memory: resident set size after a warm-up vs after N more steps.

Each soak runs in a fresh interpreter (a subprocess), so nothing else the test session
allocates or frees shows in the figures. The bound is generous: the fixed code grows
< 0.01 MB here; with a ``pymunk.batch.Buffer`` per contact read (whose C arrays pymunk
never frees) these loops grew 1.2-2.2 kB per step, 2.4-4.1 MB over the measured steps.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from prestart import Prestart

#: Allowed growth of the resident set over the measured steps, bytes.
BOUND = 2**20

_CHILD = r"""
import gc, sys
import numpy as np
import kelab as ke
from kelab.sim.scene.assets import Asset


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


mode, n, warm, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
b = ke.SceneBuilder()
b.add(ke.Terrain.plane(), at="/")
b.add(ke.Robot(Asset.from_registry("kelab/robot/biped:v1")), at="/World/Robot")
world = ke.World(b.build(), num_envs=n, layout="packed" if mode == "packed" else "isolated")
nj = len(world.joint_names)
# efforts as a function of the phase of a 250-step cycle that ends with a reset of every
# copy: each cycle repeats the same physics (a reset copy is a fresh copy), so pymunk's
# pools (arbiters, contact buffers) reach their high-water mark in the first cycle and
# any growth after that is a leak
phase = np.arange(n)[:, None] + np.arange(nj)[None, :]
snap = None


def run(count):
    global snap
    for t in range(count):
        if mode == "snapshot":  # a branch every 8 steps, contacts read every step
            if t % 8 == 0:
                snap = world.snapshot()
            world.step(1 / 120)
            world.contact_forces
            if t % 8 == 7:
                world.restore(snap)
        else:  # efforts, the bipeds on the ground, contacts read every step
            world.set_joint_efforts(60.0 * np.sin(phase + (t % 250) / 7.0))
            world.step(1 / 120)
            world.contact_forces
            if t % 250 == 249:
                world.reset_envs()
                # a packed reset of a whole shard drops its old pymunk objects, which
                # hold reference cycles: collect them now, not whenever Python's gc runs
                gc.collect()


run(warm)
gc.collect()
before = rss()
run(steps)
gc.collect()
print(rss() - before)
"""


CASES = [("isolated", 4, 2000), ("packed", 16, 2000), ("snapshot", 4, 1500)]
#: Each case's child (~1 s of stepping), started early, beside the suite (tests/prestart.py)
SOAKS = {
    case: Prestart(
        [sys.executable, "-c", _CHILD, case[0], str(case[1]), "500", str(case[2])],
        cwd=Path.cwd(),
        timeout=300,
    )
    for case in CASES
}


@pytest.mark.parametrize(
    ("mode", "copies", "steps"),
    [pytest.param(*case, marks=pytest.mark.prestart(SOAKS[case])) for case in CASES],
)
def test_resident_memory_stays_flat(mode: str, copies: int, steps: int) -> None:
    out = SOAKS[mode, copies, steps].result()
    out.check_returncode()
    growth = int(out.stdout.split()[-1])
    assert growth < BOUND, (
        f"{mode}: resident memory grew {growth / 2**20:.1f} MB over {steps} steps"
    )
