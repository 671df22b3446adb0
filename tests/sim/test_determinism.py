"""Determinism of ke.World: fresh processes, copies vs a lone copy, threads."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest
from _world_scenes import LAYOUTS, busy_scene, drive
from prestart import Prestart

import kelab as ke

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import hashlib, sys
sys.path.insert(0, "tests/sim")
import numpy as np
import kelab as ke
from _world_scenes import LAYOUTS, busy_scene, drive
n = int(sys.argv[1])
w = ke.World(busy_scene(), num_envs=n, seed=7, layout=sys.argv[2])
data = drive(w, 150)
print(hashlib.sha256(np.ascontiguousarray(data[:, 0]).tobytes()).hexdigest())
"""


def _child_job(n: int, layout: str = "isolated") -> Prestart:
    """A fresh process stepping ``n`` copies, started early, beside the suite
    (tests/prestart.py)."""
    return Prestart([sys.executable, "-c", _CHILD, str(n), layout], cwd=ROOT, timeout=120)


def _child(job: Prestart) -> str:
    res = job.result()
    res.check_returncode()
    return res.stdout.strip()


FRESH = (_child_job(1), _child_job(1))  # two processes, the same run
PACKED_FRESH = (_child_job(3, "packed"), _child_job(3, "packed"))


@pytest.mark.prestart(FRESH[0])
@pytest.mark.prestart(FRESH[1])
def test_fresh_processes_are_bit_identical() -> None:
    a = _child(FRESH[0])
    b = _child(FRESH[1])
    assert a == b and len(a) == 64
    # and the same as in this process
    w = ke.World(busy_scene(), num_envs=1, seed=7)
    data = drive(w, 150)
    assert hashlib.sha256(np.ascontiguousarray(data[:, 0]).tobytes()).hexdigest() == a


def test_copy_i_matches_a_lone_copy_with_contacts() -> None:
    # physics columns only (noise differs per copy by design: each has its own Generator)
    # (every copy has its own command: a lone copy driven as copy i must match copy i)
    scene = busy_scene(noise=0.0)
    lone = [drive(ke.World(scene, num_envs=1), 240, copy_ids=[i])[:, 0] for i in range(5)]
    for n in (2, 5):
        many = drive(ke.World(scene, num_envs=n, env_spacing=2.5), 240)
        for i in range(n):
            assert np.array_equal(many[:, i], lone[i]), (n, i)
    # the copies really differ, and contacts happened: boxes rest on the ground
    assert not np.array_equal(lone[0], lone[1])
    assert np.abs(lone[0][-1]).max() > 0


def test_noise_comes_from_each_copys_generator() -> None:
    w = ke.World(busy_scene(noise=0.1), num_envs=3, seed=3)
    drive(w, 5)
    imu = w.read_sensor("imu")
    assert not np.array_equal(imu[0], imu[1])
    w2 = ke.World(busy_scene(noise=0.1), num_envs=3, seed=3)
    drive(w2, 5)
    assert np.array_equal(w2.read_sensor("imu"), imu)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_threads_are_bit_identical_to_one_thread(layout: str) -> None:
    scene = busy_scene()
    one = drive(ke.World(scene, num_envs=6, seed=1, layout=layout), 120)
    w2 = ke.World(scene, num_envs=6, seed=1, num_threads=2, layout=layout)
    two = drive(w2, 120)
    w2.close()
    assert np.array_equal(one, two)


@pytest.mark.prestart(PACKED_FRESH[0])
@pytest.mark.prestart(PACKED_FRESH[1])
def test_packed_fresh_processes_are_bit_identical() -> None:
    a = _child(PACKED_FRESH[0])
    assert a == _child(PACKED_FRESH[1]) and len(a) == 64
    w = ke.World(busy_scene(), num_envs=3, seed=7, layout="packed")
    data = drive(w, 150)
    assert hashlib.sha256(np.ascontiguousarray(data[:, 0]).tobytes()).hexdigest() == a
