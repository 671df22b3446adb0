"""The World's input limits (issue #25): what the physics can be given, and how much.

Every fault here once hung the process in C (Chipmunk's spatial hash walking ~2**32
cells for a body far out) or died allocating; each runs in a subprocess under a time and
an address-space limit, so a regression fails its test instead of hanging or killing
the suite. The children start early, beside the suite (tests/prestart.py).
"""

from __future__ import annotations

import resource
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from prestart import Prestart

LAYOUTS = ("isolated", "packed")

_PRELUDE = """
import numpy as np
import kelab as ke

def ball_scene(ground=False):
    b = ke.SceneBuilder()
    if ground:
        b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Prop(ke.Circle(0.1), mass=1.0, initial_pose=ke.Pose(0.0, 1.0)), at="/World/Ball")
    return b.build()
"""


def _limits(memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def run_limited(code: str, timeout: float = 60.0, memory: int = 4 * 2**30) -> str:
    """Run ``code`` (after a prelude) in a fresh interpreter; return its stdout.

    Fails the test (never hangs it) when the child runs past ``timeout`` seconds, and
    names the exit status and stderr when it does not exit cleanly.
    """
    job = _JOBS.get((code, timeout, memory)) or limited_job(code, timeout, memory)
    try:
        done = job.result()
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child hung: still running after {timeout} s")
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr[-3000:]}"
    return done.stdout


#: The children declared by `limited_job`, by their code and limits
_JOBS: dict[tuple[str, float, int], Prestart] = {}


def limited_job(code: str, timeout: float = 60.0, memory: int = 4 * 2**30) -> Prestart:
    """`run_limited`'s child as a job that may start before its test, beside the suite
    (tests/prestart.py): a test marked ``prestart`` with it gets its result from
    ``run_limited`` with the same code and limits."""
    return _JOBS.setdefault(
        (code, timeout, memory),
        Prestart(
            [sys.executable, "-c", _PRELUDE + textwrap.dedent(code)],
            timeout=timeout,
            cwd=Path.cwd(),
            preexec_fn=lambda: _limits(memory),
        ),
    )


def limited_cases(code_of: Callable[..., str], cases: Iterable, **limits: float) -> list:
    """``cases`` as pytest params, each marked to start its child ``code_of(case)`` early."""
    params = []
    for case in cases:
        args = case if isinstance(case, tuple) else (case,)
        params.append(
            pytest.param(*args, marks=pytest.mark.prestart(limited_job(code_of(*args), **limits)))
        )
    return params


def starts_early(code: str, **limits: float) -> pytest.MarkDecorator:
    """Mark a test whose ``run_limited(code, ...)`` child may start early."""
    return pytest.mark.prestart(limited_job(code, **limits))


# ---------------------------------------------------------------- 25.1: far bodies
def _huge_dt(layout: str) -> str:
    return f"""
        w = ke.World(ball_scene(), layout={layout!r})
        for _ in range(2):
            try:
                w.step(1e5)
            except ValueError as e:
                print("refused:", e)
        print("steps", w.step_count, "y", w.body_poses[0, 0, 1])
        """


@pytest.mark.parametrize("layout", limited_cases(_huge_dt, LAYOUTS))
def test_a_huge_dt_is_refused_before_it_steps(layout: str) -> None:
    """Two step(1e5) calls hung the packed layout; isolated put the ball at -9.8e10 m."""
    out = run_limited(_huge_dt(layout))
    refused = "refused: World.step: dt must be a finite number of seconds in (0, 1], got 100000.0"
    assert out.count(refused) == 2
    assert "steps 0 y 1.0" in out


_FLUNG = """
w = ke.World(ball_scene(), num_envs=3, layout={layout!r})
f = np.zeros((3, 1, 2))
f[1, 0, 0] = 1e9  # 1e9 N on 1 kg: 1.7e7 m/s after one step
w.set_body_forces(f)
for k in range(3):
    try:
        w.step(1 / 60)
        print("stepped", w.step_count)
    except FloatingPointError as e:
        print("error:", e)
w.reset_envs([1])
for _ in range(5):
    w.step(1 / 60)
print("after reset", w.step_count, np.abs(w.body_poses).max() < 10)
"""


def _flung(layout: str) -> str:
    return _FLUNG.format(layout=layout)


@pytest.mark.parametrize("layout", limited_cases(_flung, LAYOUTS))
def test_a_body_flung_out_of_the_world_is_named_and_stops_the_steps(layout: str) -> None:
    """A held 1e9 N force on a 1 kg ball hung the packed step; isolated went on silently."""
    out = run_limited(_FLUNG.format(layout=layout))
    lines = out.splitlines()
    assert lines[0].startswith("error: World: body state must stay within the world's limits")
    assert "'/World/Ball' in copy 1 (vx = 1.66667e+07 m/s)" in lines[0]
    assert "after step 1" in lines[0] and "copies [1]" in lines[0]
    assert "reset those copies (reset_envs / set_body_states)" in lines[0]
    # the next step is refused (it would hang in C), with the same words, until a reset
    assert lines[1].startswith("error: World: body state must stay within")
    assert "copies [1]" in lines[1] and lines[2] == lines[1]
    assert lines[3] == "after reset 6 True"


@starts_early(_flung("isolated"))
@starts_early(_flung("packed"))
def test_both_layouts_stop_at_the_same_step_with_the_same_words() -> None:
    outs = [run_limited(_FLUNG.format(layout=lay)) for lay in LAYOUTS]
    assert outs[0].startswith("error: World: body state must stay within")
    assert outs[0] == outs[1]


def _drifting(layout: str) -> str:
    return f"""
        w = ke.World(ball_scene(), layout={layout!r})
        w.set_body_states(None, [[[0.0, -9.99e6, 0.0]]], [[[0.0, -1e6, 0.0]]])
        try:
            for _ in range(100):
                w.step(1 / 60)
        except FloatingPointError as e:
            print(e)
        """


@pytest.mark.parametrize("layout", limited_cases(_drifting, LAYOUTS))
def test_a_body_drifting_past_the_position_limit_is_named(layout: str) -> None:
    out = run_limited(_drifting(layout))
    assert "'/World/Ball' in copy 0 (y = -1.00067e+07 m)" in out
    assert "after step 1" in out


def _forces(layout: str) -> str:
    return f"""
        w = ke.World(ball_scene(), layout={layout!r})
        try:
            w.set_body_forces(np.full((1, 1, 2), 1e12))
        except ValueError as e:
            print(e)
        """


@pytest.mark.parametrize("layout", limited_cases(_forces, LAYOUTS))
def test_forces_beyond_the_bound_are_refused_by_the_api_as_by_restore(layout: str) -> None:
    out = run_limited(_forces(layout))
    assert "set_body_forces: forces and torques must be within ±1e+09 (N, N·m), got 1e+12" in out


def _replay_flings(layout: str) -> str:
    return f"""
        w = ke.World(ball_scene(ground=True), num_envs=2, layout={layout!r})
        nb, ball = len(w.body_names), w.body_names.index("/World/Ball")
        w.set_body_forces(np.ones((2, nb, 2)))
        for _ in range(100):
            w.step(1 / 60)
        snap = w.snapshot()
        arrays = {{k: np.array(v) for k, v in snap.arrays.items()}}
        kinds, offsets = arrays["log/kind"], arrays["log/val_off"]
        entry = int(np.flatnonzero(kinds == 5)[-1])
        # copy 1's fx on the ball: within the force bound, so the snapshot is valid
        arrays["log/vals"][offsets[entry] + 3 * (nb + ball)] = 1e9
        bad = ke.Snapshot(snap.fingerprint, snap.step_count, snap.sim_time, arrays, snap.meta)
        print("bytes", len(bad.to_bytes()) < 8000)
        w.step(1 / 60)
        before = (w.step_count, w.body_poses.tobytes(), w.external_forces.tobytes())
        try:
            w.restore(bad)
        except ValueError as e:
            print("refused:", e)
        after = (w.step_count, w.body_poses.tobytes(), w.external_forces.tobytes())
        print("unchanged", after == before)
        w.step(1 / 60)
        w.restore(snap)  # the genuine one still restores
        print("restored", w.step_count)
        """


@pytest.mark.parametrize("layout", limited_cases(_replay_flings, LAYOUTS))
def test_a_snapshot_whose_replay_flings_a_body_out_is_refused_and_changes_nothing(
    layout: str,
) -> None:
    """A valid 3 kB snapshot holding a 1e9 N force hung restore in the packed layout."""
    out = run_limited(_replay_flings(layout))
    assert "bytes True" in out
    assert "refused: World.restore: the snapshot's log drives body '/World/Ball' in copy 1" in out
    assert "out of the world's limits" in out
    assert "unchanged True" in out and "restored 100" in out


_TINY_SPACING = """
        w = ke.World(ball_scene(), num_envs=2, env_spacing=0.001, layout="packed")
        w.set_body_states(None, np.tile([[[9.9e6, -9.9e6, 0.0]]], (2, 1, 1)))
        for _ in range(3):
            w.step(1 / 60)
        print("stepped", w.step_count, w.body_poses[1, 0, :2].round(1).tolist())
        """


@starts_early(_TINY_SPACING)
def test_a_body_within_the_limits_never_hangs_the_packed_step_even_at_a_tiny_spacing() -> None:
    """Cells of spacing / 2 (2**-11 m here) overflowed the hash's C ints at 1e6 m."""
    out = run_limited(_TINY_SPACING)
    assert out.strip().startswith("stepped 3 [9900000.0, -9900000.")


# ---------------------------------------------------------------- 25.8: too many copies
_ROBOT = """
from kelab.sim.scene.assets import Asset
b = ke.SceneBuilder()
b.add(ke.Terrain.plane(), at="/")
b.add(ke.Robot(Asset.from_registry("kelab/robot/biped:v1")), at="/World/Robot")
scene = b.build()
"""


def _too_large(layout: str, num_envs: int, extra: str) -> str:
    return (
        _ROBOT
        + f"""
try:
    ke.World(scene, num_envs={num_envs}, layout={layout!r}{extra})
except ValueError as e:
    print(type(e).__name__, isinstance(e, MemoryError))
    print(e)
"""
    )


@pytest.mark.parametrize(
    ("layout", "num_envs", "extra"),
    limited_cases(
        _too_large,
        [
            ("isolated", 10**9, ""),  # np.arange(10**9) took 7.45 GiB before any check
            ("isolated", 10**5, ""),  # segfaulted in Space() under a 4 GB address space
            ("packed", 5 * 10**7, ", env_spacing=2**-10"),  # within the packed cap
        ],
        timeout=60,
    ),
)
def test_a_world_too_large_for_the_address_space_is_refused_in_one_line(
    layout: str, num_envs: int, extra: str
) -> None:
    out = run_limited(_too_large(layout, num_envs, extra), timeout=60)
    kind, msg = out.splitlines()[:2]
    assert kind == "WorldMemoryError True"
    assert msg.startswith("World: num_envs must be at most ")
    assert f"for layout={layout!r} in this process, got num_envs={num_envs}" in msg
    assert "kB per copy (estimated from the scene)" in msg
    assert "left under the address-space limit (ulimit -v)" in msg  # the binding limit
    assert "fewer copies" in msg and len(out.splitlines()) == 2


_ISOLATED_ESTIMATE = (
    _ROBOT
    + """
try:
    ke.World(scene, num_envs=10**5)
except ValueError as e:
    most = int(str(e).split("at most ")[1].split()[0])
    print(most)
    w = ke.World(scene, num_envs=most // 2)
    w.step(1 / 60)
    print("built", w.num_envs)
"""
)


@starts_early(_ISOLATED_ESTIMATE, timeout=120)  # ~6 s of building copies
def test_the_isolated_estimate_follows_the_limit_it_names() -> None:
    """Under 4 GB the biped fits a few thousand isolated copies, and they build."""
    out = run_limited(_ISOLATED_ESTIMATE, timeout=120)
    most, built = out.splitlines()
    assert 2000 < int(most) < 12000, most
    assert built == f"built {int(most) // 2}"


_HUGE_LEARNING_ENV = """
from kelab.tasks.cartpole import CartPoleTask
try:
    ke.LearningEnv(CartPoleTask(), num_envs=10**9)
except ValueError as e:
    print(type(e).__name__)
    print(e)
"""


@starts_early(_HUGE_LEARNING_ENV, timeout=60)
def test_a_learning_env_with_a_huge_num_envs_is_refused_cleanly() -> None:
    out = run_limited(_HUGE_LEARNING_ENV, timeout=60)
    kind, msg = out.splitlines()[:2]
    assert kind == "WorldMemoryError" or "num_envs must be at most" in msg
    assert "num_envs=1000000000" in msg
