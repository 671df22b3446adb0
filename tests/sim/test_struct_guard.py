"""The run-time guard of Chipmunk's mirrored structs (kelab/sim/physics/_guard.py, #38.5).

Before the C helper is configured or a layout offers warm rebases, pymunk's version is
checked against the versions verified and a self-test reads and writes probes through
the mirrors. Faked here two ways, each in a process of its own (the check runs once per
process): a pymunk version outside the bound, and a mirror with two fields swapped. Each
must warn once, take pymunk's public path and give the same bits as the helper.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from prestart import Prestart

from kelab.sim.physics import _chipmunk as cp
from kelab.sim.physics import _guard

ROOT = Path(__file__).resolve().parents[2]

_RUN = textwrap.dedent(
    """
    import hashlib, json, sys, warnings
    warnings.simplefilter("always")
    fake = sys.argv[2]
    import pymunk
    if fake == "version":
        pymunk.version = "7.9.0"  # a pymunk past the verified bound
    from kelab.sim.physics import _chipmunk as cp
    if fake == "mirror":  # a mirror whose angle and angular velocity trade places
        cp._MIRROR_CDEF = cp._MIRROR_CDEF.replace("double a, w, t;", "double w, a, t;")
    import gymnasium
    import numpy as np
    import kelab as ke
    from kelab.sim.physics import _guard
    sys.path.insert(0, sys.argv[1])
    from test_world_resets import _scene

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        env = gymnasium.make_vec(
            "kelab/Humanoid-v0", num_envs=6, vectorization_mode="vector_entry_point",
            layout="packed", num_threads=2,
        )
        env.reset(seed=3)
        world = env.unwrapped.world
        rng = np.random.default_rng(0)
        rows = []
        for t in range(150):
            env.step(rng.uniform(-1, 1, env.action_space.shape))
            if t % 40 == 39:
                world.reset_envs([1, 4])  # in place with the helper, rebuilt without it
            rows.append(np.concatenate([world.body_poses, world.body_velocities], axis=2))
        states = np.array(rows)
        iso = ke.World(_scene(), num_envs=2, max_log_steps=40)
        for t in range(90):  # two rebases: warm with the helper's structs, else cold
            iso.set_joint_efforts(np.tile([30.0 * np.sin(t / 7.0), 0.0], (2, 1)))
            iso.step(1 / 120)
        again = ke.World(_scene(), num_envs=2, layout="packed")  # no second warning
    kept = world._backend._shards[0].kept is not None
    print(json.dumps({
        "warnings": [str(w.message) for w in seen if w.category is RuntimeWarning],
        "native": _guard.native_module() is not None,
        "kept": kept,
        "warm": iso.warm_rebases,
        "states": hashlib.sha256(states.tobytes()).hexdigest(),
        "moved": float(np.abs(states[-1]).max()),
    }))
    """
)


#: Each process (~0.6 s), started early, beside the suite (tests/prestart.py)
RUNS = {
    fake: Prestart(
        [sys.executable, "-c", _RUN, str(ROOT / "tests" / "sim"), fake], cwd=ROOT, timeout=300
    )
    for fake in ("none", "version", "mirror")
}


def _run(fake: str) -> dict:
    done = RUNS[fake].result()
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def helper_run() -> dict:
    out = _run("none")
    if not out["native"]:
        pytest.skip("the C helper is not built here (no compiler at install)")
    return out


@pytest.mark.prestart(RUNS["none"])
def test_the_guard_passes_with_the_pymunk_installed(helper_run: dict) -> None:
    assert helper_run["warnings"] == []
    assert helper_run["kept"] and helper_run["warm"] and helper_run["moved"] > 0


@pytest.mark.parametrize(
    ("fake", "said"),
    [
        pytest.param(
            *case, marks=[pytest.mark.prestart(RUNS["none"]), pytest.mark.prestart(RUNS[case[0]])]
        )
        for case in [
            ("version", "pymunk 7.9.0 is not in [7.0, 7.4), the versions verified"),
            ("mirror", "cpBody a, w, t reads"),
        ]
    ],
)
def test_a_pymunk_the_mirrors_do_not_fit_warns_once_and_takes_the_public_path(
    helper_run: dict, fake: str, said: str
) -> None:
    out = _run(fake)
    assert len(out["warnings"]) == 1, out["warnings"]  # one warning for the whole process
    assert said in out["warnings"][0] and "public path" in out["warnings"][0]
    assert not out["native"] and not out["kept"]  # no C helper, no in-place resets
    assert not out["warm"]  # the isolated layout's rebases are cold
    assert out["states"] == helper_run["states"]  # the same bits as the helper's path


def test_the_self_test_finds_every_field_in_place() -> None:
    assert _guard.self_test() is None
    assert _guard.structs_hold()


def test_the_version_check_reads_major_and_minor() -> None:
    low, high = cp.PYMUNK_VERSIONS
    assert _guard.version_verified(f"{low[0]}.{low[1]}.0")
    assert _guard.version_verified(f"{high[0]}.{high[1] - 1}.9rc1")
    assert not _guard.version_verified(f"{high[0]}.{high[1]}.0")
    assert not _guard.version_verified(f"{low[0]}.{low[1] - 1}") if low[1] else True
    assert not _guard.version_verified("6.9.0")
    assert not _guard.version_verified("dev")


class _Uncounted:
    """The C helper as a build of an older ``_native.c`` under the same table format has
    it: ``write_shapes`` writes and fills ``moved`` but returns no count of moved bodies."""

    def __init__(self, module: object) -> None:
        self._module = module

    def __getattr__(self, name: str) -> object:
        return getattr(self._module, name)

    def write_shapes(self, *args: object) -> None:
        self._module.write_shapes(*args)


def test_a_helper_whose_write_shapes_returns_no_count_fails_its_self_test() -> None:
    """The mass writer takes a count of 0 (or None) as "no copy moved" and reads no copy
    again (tests/sim/test_world_params.py); a build that returns no count must be
    declined (the pymunk path), not trusted."""
    module = _guard.native_module()
    if module is None:
        pytest.skip("the C helper is not built here (no compiler at install)")
    assert _guard.helper_self_test(module) is None
    found = _guard.helper_self_test(_Uncounted(module))
    assert found == (
        "write_shapes (count moved) reads [None, None, None, None] where pymunk has [1, 0, 0, 0]"
    )


class _Without:
    """The C helper as a build of an older ``_native_params.c`` has it: no ``write_rows``
    nor ``within`` (the parameter writers then have no table writer to call)."""

    def __init__(self, module: object) -> None:
        self._module = module

    def __getattr__(self, name: str) -> object:
        if name in ("write_rows", "within"):
            raise AttributeError(name)
        return getattr(self._module, name)


class _RowsInOrder(_Without):
    """A ``write_rows`` that takes the table's rows in order, not the rows it is given."""

    def __getattr__(self, name: str) -> object:
        return getattr(self._module, name)

    def write_rows(self, what: int, grid: np.ndarray, rows: np.ndarray, *rest: object) -> int:
        return self._module.write_rows(what, grid, np.arange(rows.size, dtype=np.int64), *rest)


def test_a_helper_without_the_table_writer_or_a_right_one_fails_its_self_test() -> None:
    """Declined (the pymunk path), not called: a build without ``write_rows``/``within``,
    or one whose ``write_rows`` misplaces the rows."""
    module = _guard.native_module()
    if module is None:
        pytest.skip("the C helper is not built here (no compiler at install)")
    assert _guard.helper_self_test(_Without(module)) == (
        "it has no write_rows or within (an older build of this table format)"
    )
    found = _guard.helper_self_test(_RowsInOrder(module))
    assert found is not None and found.startswith("write_rows (friction) reads")
