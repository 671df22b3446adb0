"""Packed resets that keep shapes and constraints in the space (kelab/sim/physics/_reset.py).

Each is checked against the rebuild that removes and re-adds them (the shard's ``kept``
set to None), in two worlds stepped with the same actions: the body states must stay the
same bytes, and so must the order of Chipmunk's structures that the next steps read.
The C helper's layout (offsets and functions handed to ``_native.c``) is checked against
pymunk, and its boundary against bad tables.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sysconfig

import gymnasium
import numpy as np
import pymunk
import pytest
from _world_scenes import separate_reset_states
from pymunk._chipmunk_cffi import ffi as pm_ffi
from pymunk._chipmunk_cffi import lib as pm_lib

import kelab as ke  # also registers the tasks
from kelab.sim.physics import _chipmunk as cp
from kelab.sim.physics import _guard as guard
from kelab.sim.scene import JointInstance, Scene

NATIVE = guard.native_module()
needs_c = pytest.mark.skipif(
    NATIVE is None, reason="the C helper is not built here (no compiler at install time)"
)


def test_the_c_helper_is_built_where_a_compiler_is() -> None:
    """The tests marked ``needs_c`` skip only where no compiler could build the helper.

    ``setup.py`` builds it optionally: a build that failed on a machine with a compiler
    would skip them silently, so it fails here instead. Without a compiler the pymunk
    path is the one in use (and ``test_without_native.py`` covers it everywhere).
    """
    assert os.environ.get("KELAB_NO_NATIVE", "") in ("", "0"), "run without KELAB_NO_NATIVE"
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is not None:
        assert importlib.util.find_spec("kelab.sim.physics._native") is not None, (
            f"a C compiler ({cc}) is here but kelab/sim/physics/_native.c is not built: "
            "pip install -e . (or python setup.py build_ext --inplace) and read its errors"
        )
        assert NATIVE is not None
    else:
        assert NATIVE is None


def _addr(ptr: object) -> int:
    return int(pm_ffi.cast("uintptr_t", ptr))


def _env(task: str, n: int, kept: bool, threads: int = 1) -> gymnasium.vector.VectorEnv:
    env = gymnasium.make_vec(
        task,
        num_envs=n,
        vectorization_mode="vector_entry_point",
        layout="packed",
        num_threads=threads,
    )
    env.reset(seed=5)  # builds the shards
    if not kept:
        for shard in env.unwrapped.world._backend._shards:
            shard.kept = None
    return env


def _labels(shard: object) -> dict[str, list]:
    """Chipmunk's orders that a step reads, with pointers named by (copy, index)."""
    m = cp.mirror_ffi()
    sm = cp.space_mirror(shard.ptr)
    names = {}
    for cl, r in enumerate(shard.recipe):
        for j, s in enumerate(r.shape_ptrs):
            names[cp.address(s)] = ("shape", cl, j)
        for j, c in enumerate(shard.parts[cl][2]):
            names[cp.address(c)] = ("con", cl, j)
    con = pm_ffi.cast("cpArray *", sm.constraints)
    cons = [names[_addr(a)] for a in pm_ffi.unpack(con.arr, con.num)]
    arbs = []
    hs = m.cast("struct kl_hash_set *", sm.cached_arbiters)
    table = m.cast("uint64_t *", hs.table)
    for i in range(hs.size):
        b = table[i]
        while b:
            bin_ = m.cast("struct kl_hash_bin *", b)
            am = pm_ffi.cast("cpArbiter *", bin_.elt)
            ka, kb = _addr(am.a), _addr(am.b)
            arbs.append((names.get(ka, "static"), names.get(kb, "static"), int(am.state)))
            b = bin_.next
    active = pm_ffi.cast("cpArray *", sm.arbiters)
    pool = pm_ffi.cast("cpArray *", sm.pooled_arbiters)
    listed = [
        tuple(names.get(_addr(x), "static") for x in (a.a, a.b))
        for a in (pm_ffi.cast("cpArbiter *", p) for p in pm_ffi.unpack(active.arr, active.num))
    ]
    # per moving body: its fields (bytes) and its arbiter and constraint lists, in order
    bodies = []
    for r in shard.recipe:
        for bp in r.body_ptrs:
            bm = cp.mirror(bp, "struct kl_body *")
            arb, thread = bm.arbiter_list, []
            while arb:
                am = pm_ffi.cast("cpArbiter *", arb)
                thread.append(tuple(names.get(_addr(x), "static") for x in (am.a, am.b)))
                a_side = _addr(am.body_a) == cp.address(bp)
                arb = _addr(am.thread_a.next if a_side else am.thread_b.next)
            link, chain = bm.constraint_list, []
            while link:
                cm = m.cast("struct kl_constraint *", link)
                chain.append(names[link])
                a_side = int(m.cast("uintptr_t", cm.a)) == cp.address(bp)
                link = int(m.cast("uintptr_t", cm.next_a if a_side else cm.next_b))
            bodies.append((_values(m, bm, "struct kl_body"), thread, chain))
    # per constraint: every value field (no pointers) of its mirror, the impulse included
    values = []
    for cl, part in enumerate(shard.parts):
        for c, (_, args) in zip(part[2], shard.recipe[cl].inits, strict=True):
            struct = cp.CONSTRAINT_MIRRORS[cp.ctype_of(args[0])]
            values.append(_values(m, m.cast(struct, cp.address(c)), struct.rstrip(" *")))
    # the hash set's order follows the shapes' addresses (their pair hash), which differ
    # between two worlds: compare its content
    return {
        "constraints": cons,
        "cached": sorted(arbs),
        "active": listed,
        "counts": [active.num, pool.num, hs.entries, sm.shape_id_counter],
        "bodies": bodies,
        "constraint values": values,
    }


def _values(m: object, obj: object, ctype: str) -> bytes:
    """The bytes of every non-pointer field of a mirror struct (nested structs included)."""
    raw = bytes(m.buffer(obj, m.sizeof(ctype)))
    return b"".join(raw[at : at + size] for at, size in _value_spans(m, ctype))


#: Per mirror struct: (offset, size) of each field `_values` reads, in field order.
_SPANS: dict[str, list[tuple[int, int]]] = {}


def _value_spans(m: object, ctype: str) -> list[tuple[int, int]]:
    """Where a mirror struct's non-pointer fields lie (nested structs' fields in place):
    worked out once per struct, so `_values` reads each struct with one buffer copy."""
    if ctype not in _SPANS:
        spans = []
        for _, field in m.typeof(ctype).fields:
            t = field.type
            if t.kind == "struct":
                spans += [(field.offset + at, n) for at, n in _value_spans(m, t.cname)]
            elif t.kind == "primitive" and t.cname not in ("uintptr_t", "void *"):
                spans.append((field.offset, m.sizeof(t)))
        _SPANS[ctype] = spans
    return _SPANS[ctype]


@needs_c
@pytest.mark.parametrize(
    ("task", "n", "act_dim", "threads"),
    [
        ("kelab/Humanoid-v0", 16, 6, 1),
        ("kelab/BallToGoal-v0", 8, 2, 1),
        ("kelab/Humanoid-v0", 10, 6, 3),
    ],  # fmt: skip
)
def test_kept_resets_match_remove_and_readd_bit_for_bit(
    task: str, n: int, act_dim: int, threads: int
) -> None:
    a, b = _env(task, n, kept=False, threads=threads), _env(task, n, kept=True, threads=threads)
    assert all(s.kept is not None for s in b.unwrapped.world._backend._shards)
    rng = np.random.default_rng(5)
    resets = 0
    for t in range(120):
        act = rng.uniform(-1, 1, (n, act_dim)).astype(np.float32)
        ra, rb = a.step(act), b.step(act)
        resets += int((ra[2] | ra[3]).sum())
        for x, y in zip(ra[:4], rb[:4], strict=True):
            assert np.asarray(x).tobytes() == np.asarray(y).tobytes(), t
        if t % 7 == 3:  # extra resets, a few copies at once (some reset twice in a row)
            ids = np.sort(rng.choice(n, 4, replace=False))
            for env in (a, b):
                w = env.unwrapped.world
                w.set_body_states(ids, w.body_poses[ids], w.body_velocities[ids])
                w.reset_envs(ids[:2])
        if t == 50:  # every copy at once
            for env in (a, b):
                env.unwrapped.world.reset_envs()
        wa, wb = a.unwrapped.world, b.unwrapped.world
        assert wa.body_poses.tobytes() == wb.body_poses.tobytes(), t
        assert wa.body_velocities.tobytes() == wb.body_velocities.tobytes(), t
        for sa, sb in zip(wa._backend._shards, wb._backend._shards, strict=True):
            assert _labels(sa) == _labels(sb), t
    if task.endswith("Humanoid-v0"):
        assert resets > 10  # the random actions topple the robots: resets happened


@needs_c
def test_a_space_not_as_tracked_falls_back_to_the_rebuild_and_stays_exact() -> None:
    """A pending post-step callback makes the C reset decline; the rebuild runs instead."""
    a, b = _env("kelab/Humanoid-v0", 8, kept=False), _env("kelab/Humanoid-v0", 8, kept=True)
    shard = b.unwrapped.world._backend._shards[0]
    rng = np.random.default_rng(1)
    declined = 0
    for t in range(40):
        act = rng.uniform(-1, 1, (8, 6)).astype(np.float32)
        a.step(act)
        b.step(act)
        ids = np.sort(rng.choice(8, 3, replace=False))
        if t % 3 == 0:  # a post-step callback waiting: the space is not as tracked
            arr = pm_ffi.cast("cpArray *", cp.space_mirror(shard.ptr).post_step_callbacks)
            arr.num += 1
            assert not shard.kept.reset(ids.astype(np.int64), True)
            arr.num -= 1
            declined += 1
        for env in (a, b):
            env.unwrapped.world.reset_envs(ids)
        la, lb = _labels(a.unwrapped.world._backend._shards[0]), _labels(shard)
        assert la == lb, t
        assert a.unwrapped.world.body_poses.tobytes() == b.unwrapped.world.body_poses.tobytes()
    # and a rebuild that the C side did not see: the blocks are found again
    ids = np.array([1, 5], dtype=np.int64)
    saved, shard.kept = shard.kept, None
    for env in (a, b):
        env.unwrapped.world.reset_envs(ids)
    saved.resync()
    shard.kept = saved
    for t in range(10):
        act = rng.uniform(-1, 1, (8, 6)).astype(np.float32)
        a.step(act)
        b.step(act)
        for env in (a, b):
            env.unwrapped.world.reset_envs([2, 5])
        assert _labels(a.unwrapped.world._backend._shards[0]) == _labels(shard), t
    assert declined


@needs_c
def test_bad_tables_are_refused_with_an_error_not_a_crash() -> None:
    env = _env("kelab/BallToGoal-v0", 4, kept=True)
    kept = env.unwrapped.world._backend._shards[0].kept
    with pytest.raises(ValueError, match="ascending"):
        kept.reset(np.array([2, 1], dtype=np.int64), True)
    with pytest.raises(ValueError, match="ascending"):
        kept.reset(np.array([0, 4], dtype=np.int64), True)
    with pytest.raises(ValueError, match="ascending"):
        kept.reset(np.array([-1], dtype=np.int64), True)
    saved = kept._pose
    kept._pose = saved[:, :1].copy()
    with pytest.raises(ValueError, match="sizes disagree"):
        kept.reset(np.array([0], dtype=np.int64), True)
    kept._pose = saved
    for name, bad in (
        ("owner", lambda t: t.owner.__setitem__(-1, 1 << 40)),  # a copy's place out of range
        ("block", lambda t: t.block.__setitem__(0, -1)),
        ("_rows", lambda t: t._rows.__setitem__((0, 3), 1 << 30)),  # impulse past the struct
        ("_rows", lambda t: t._rows.__setitem__((0, slice(0, 2)), 1 << 62)),  # would overflow
    ):
        saved = getattr(kept, name).copy()
        bad(kept)
        with pytest.raises(ValueError, match="sizes disagree"):
            kept.reset(np.array([0], dtype=np.int64), True)
        setattr(kept, name, saved)
    assert kept.reset(np.array([], dtype=np.int64), True)
    with pytest.raises(ValueError, match="6 float64"):
        NATIVE.write_bodies(np.zeros(2, np.uint64), np.zeros(11))
    with pytest.raises(ValueError, match="configure"):
        NATIVE.configure(b"\0" * 8, b"\0" * 8, 1, 3, 4)
    offsets, functions = cp.native_layout()
    functions[2] = 0  # right sizes, one null function: refused whole, the layout kept
    with pytest.raises(ValueError, match="non-null"):
        NATIVE.configure(
            np.asarray(offsets, np.int64).tobytes(), np.asarray(functions, np.uint64).tobytes(),
            cp.HASH_COEF, cp.ARBITER_CACHED, cp.ARBITER_INVALIDATED,
        )  # fmt: skip
    states = np.zeros((1, 6))
    states[0, 1:3] = (1.5 * 2.0**20, 0.5)
    NATIVE.write_bodies(env.unwrapped.world._backend._body_addrs[:1, :1].copy(), states)
    guard.native_module.cache_clear()  # configure it again for the tests after this one
    assert guard.native_module() is NATIVE


def test_bodies_with_several_shapes_keep_the_rebuild() -> None:
    """The cart has three shapes: its re-add's mass accumulation is not repeated in place."""
    env = _env("kelab/CartPole-v0", 4, kept=True)
    assert all(s.kept is None for s in env.unwrapped.world._backend._shards)


def test_the_helper_is_off_with_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KELAB_NO_NATIVE", "1")
    guard.native_module.cache_clear()
    try:
        env = _env("kelab/Humanoid-v0", 4, kept=True)
        assert all(s.kept is None for s in env.unwrapped.world._backend._shards)
        env.unwrapped.world.reset_envs([1, 2])  # the rebuild path
    finally:
        monkeypatch.delenv("KELAB_NO_NATIVE")
        guard.native_module.cache_clear()


#: The C signatures _native.c casts each function it calls to.
NATIVE_SIGNATURES = {
    "cpBodySetVelocity": "void(*)(cpBody *, cpVect)",
    "cpBodySetAngularVelocity": "void(*)(cpBody *, double)",
    "cpBodySetAngle": "void(*)(cpBody *, double)",
    "cpBodySetPosition": "void(*)(cpBody *, cpVect)",
    "cpBodyGetPosition": "cpVect(*)(cpBody *)",
    "cpBodyUpdatePosition": "void(*)(cpBody *, double)",
    "cpShapeSetFriction": "void(*)(cpShape *, double)",
    "cpSpaceReindexShape": "void(*)(cpSpace *, cpShape *)",
    "cpArrayPush": "void(*)(cpArray *, void *)",
    "cpSpaceSetShapeIDCounter": "void(*)(cpSpace *, uintptr_t)",
    "cpBodyGetAngle": "double(*)(cpBody *)",
    "cpBodyGetVelocity": "cpVect(*)(cpBody *)",
    "cpBodyGetAngularVelocity": "double(*)(cpBody *)",
    "cpBodySetForce": "void(*)(cpBody *, cpVect)",
    "cpBodySetTorque": "void(*)(cpBody *, double)",
    "cpSpaceEachCachedArbiter": "void(*)(cpSpace *, void(*)(cpArbiter *, void *), void *)",
    "cpSpaceStep": "void(*)(cpSpace *, double)",
    "cpShapeSetMass": "void(*)(cpShape *, double)",
    "cpShapeSetElasticity": "void(*)(cpShape *, double)",
    "cpShapeGetBody": "cpBody *(*)(cpShape *)",
}


def test_the_c_helpers_functions_have_the_signatures_it_calls() -> None:
    assert tuple(NATIVE_SIGNATURES) == cp._NATIVE_FUNCTIONS
    for name, sig in NATIVE_SIGNATURES.items():
        got = pm_ffi.typeof(pm_ffi.addressof(pm_lib, name)).cname
        assert got.replace("struct ", "") == sig, name
    offsets, functions = cp.native_layout()
    assert len(offsets) == len(cp._NATIVE_FIELDS) + len(cp._NATIVE_SIZES)
    assert all(f > 0 for f in functions)
    # the pre-solve _native.c's Friction hands out is a collision handler's preSolveFunc
    handler = pm_ffi.typeof("cpCollisionHandler").fields
    assert dict(handler)["preSolveFunc"].type.cname == (
        "void(*)(struct cpArbiter *, struct cpSpace *, void *)"
    )


def test_mirrors_match_pymunk_and_the_space_getters() -> None:
    m = cp.mirror_ffi()
    space = pymunk.Space()
    space.iterations = 13
    space.collision_persistence = 1
    space.collision_slop = 0.25
    space.step(0.01)
    sm = cp.space_mirror(cp.space_ptr(space))
    assert (sm.iterations, sm.collision_persistence, sm.collision_slop, sm.curr_dt) == (
        13, 1, 0.25, 0.01)  # fmt: skip
    body = pymunk.Body(1.0, 1.0)
    circle = pymunk.Circle(body, 1.0)
    ground = pymunk.Segment(space.static_body, (-10, 0), (10, 0), 0.5)
    space.add(body, circle, ground)
    bm = cp.mirror(cp.body_ptr(body), "struct kl_body *")
    assert bm.space == cp.address(cp.space_ptr(space))
    assert bm.shape_list == cp.address(cp.shape_ptr(circle))
    dyn = pm_ffi.cast("cpArray *", sm.dynamic_bodies)
    assert (dyn.num, _addr(dyn.arr[0])) == (1, cp.address(cp.body_ptr(body)))
    # roused bodies: the array right after the static bodies' (both empty, both arrays)
    assert m.offsetof("struct kl_space", "roused_bodies") == m.offsetof(
        "struct kl_space", "static_bodies") + 8  # fmt: skip
    assert pm_ffi.cast("cpArray *", sm.roused_bodies).num == 0
    seen = []

    def begin(arbiter: pymunk.Arbiter, sp: pymunk.Space, data: dict) -> None:
        # Chipmunk's own post-step callbacks (pymunk keeps its callbacks in Python)
        pm_lib.cpSpaceAddPostStepCallback(cp.space_ptr(sp), pm_ffi.NULL, pm_ffi.NULL, pm_ffi.NULL)
        seen.append((sm.locked, pm_ffi.cast("cpArray *", sm.post_step_callbacks).num))

    space.on_collision(begin=begin)
    body.position = (0, 1.2)
    space.step(0.01)
    assert seen and seen[0][0] > 0 and seen[0][1] == 1  # locked in the step, one pending
    assert sm.locked == 0 and pm_ffi.cast("cpArray *", sm.post_step_callbacks).num == 0
    # the contact is cached, threaded on the body and in the last step's arbiters
    hs = m.cast("struct kl_hash_set *", sm.cached_arbiters)
    assert hs.entries == 1 and hs.size > 0
    arb = pm_ffi.cast("cpArbiter *", bm.arbiter_list)
    assert {_addr(arb.a), _addr(arb.b)} == {cp.address(cp.shape_ptr(s)) for s in (circle, ground)}
    assert pm_ffi.cast("cpArray *", sm.arbiters).num == 1
    table = m.cast("uint64_t *", hs.table)
    bins = [m.cast("struct kl_hash_bin *", table[i]) for i in range(hs.size) if table[i]]
    assert [b.elt for b in bins] == [bm.arbiter_list]
    pair = ((_addr(arb.a) * cp.HASH_COEF) ^ (_addr(arb.b) * cp.HASH_COEF)) & (2**64 - 1)
    assert bins[0].hash == pair and table[pair % hs.size] == cp.address(
        m.cast("void *", bins[0]))  # fmt: skip
    assert int(arb.state) != cp.ARBITER_CACHED  # touching: not a cached (separated) one


@needs_c
def test_read_rows_and_write_bodies_are_chipmunks_getters_and_setters_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    space, twin = pymunk.Space(), pymunk.Space()
    bodies, twins = [], []
    for k in range(40):
        for sp, own in ((space, bodies), (twin, twins)):
            body = pymunk.Body(1.0 + k, 2.0 + k)
            sp.add(body, pymunk.Circle(body, 0.3, (0.1 * k, -0.05)))  # an off-centre cog
            own.append(body)
    addrs = np.array([cp.address(cp.body_ptr(b)) for b in bodies], dtype=np.uint64)
    states = rng.normal(0.0, 1e3, (40, 6))
    states[::5, 2] = -0.0  # signed zeros
    states[1::5, 1] = -0.0
    states[2, :] = [1e-300, -1e300, 7.5, 0.0, -0.0, 5e-324]
    NATIVE.write_bodies(addrs, states)
    for b, s in zip(twins, states, strict=True):  # pymunk's setters, in the same order
        b.angle = s[0]
        b.position = (s[1], s[2])
        b.velocity = (s[3], s[4])
        b.angular_velocity = s[5]

    def state(b: pymunk.Body) -> bytes:
        p, v = b.position, b.velocity
        return np.array([b.angle, p.x, p.y, v.x, v.y, b.angular_velocity]).tobytes()

    assert [state(b) for b in bodies] == [state(b) for b in twins]
    space.step(0.01)  # move them: positions from the transform the step computes
    out = np.full((50, 6), np.nan)
    rows = rng.permutation(50)[:40].astype(np.int64)
    origins = rng.normal(0.0, 1e2, 40)
    NATIVE.read_rows(addrs, out, rows, origins)
    for b, r, o in zip(bodies, rows, origins, strict=True):
        p, v = b.position, b.velocity
        want = np.array([p.x - o, p.y, b.angle, v.x, v.y, b.angular_velocity])
        assert out[r].tobytes() == want.tobytes()
    with pytest.raises(ValueError, match="within out"):
        NATIVE.read_rows(addrs, out, np.full(40, 50, np.int64), origins)
    with pytest.raises(ValueError, match="one int64"):
        NATIVE.read_rows(addrs, out, rows[:3], origins)


@needs_c
def test_packed_reads_in_c_match_the_batch_read_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A World stepped, reset and read with the C helper and without it: the same states."""
    runs = []
    for off in (False, True):
        if off:
            monkeypatch.setenv("KELAB_NO_NATIVE", "1")
        guard.native_module.cache_clear()
        try:
            env = _env("kelab/Humanoid-v0", 12, kept=True)
            assert (env.unwrapped.world._backend._native is None) == off
            rng = np.random.default_rng(2)
            seen = []
            for t in range(60):
                out = env.step(rng.uniform(-1, 1, (12, 6)).astype(np.float32))
                seen.append(np.asarray(out[0]).tobytes())
                w = env.unwrapped.world
                seen.append(w.body_poses.tobytes() + w.body_velocities.tobytes())
                if t % 9 == 4:
                    w.reset_envs([3, 7])
                    seen.append(w.body_poses.tobytes())
            runs.append(seen)
        finally:
            monkeypatch.delenv("KELAB_NO_NATIVE", raising=False)
            guard.native_module.cache_clear()
    assert runs[0] == runs[1]


@needs_c
def test_direct_force_writes_leave_what_the_setters_leave_in_a_space_that_never_sleeps() -> None:
    """Fields written directly (``direct``) against Chipmunk's setters, over contacts."""
    rng = np.random.default_rng(4)
    worlds = []
    for direct in (False, True):
        space = pymunk.Space()
        space.gravity = (0.0, -9.81)
        space.add(pymunk.Segment(space.static_body, (-50, 0), (50, 0), 0.1))
        bodies = []
        for k in range(12):
            body = pymunk.Body(1.0, 0.5)
            body.position = (2.0 * k, 0.6)
            space.add(body, pymunk.Poly.create_box(body, (1.0, 1.0)))
            bodies.append(body)
        addrs = np.array([cp.address(cp.body_ptr(b)) for b in bodies], dtype=np.uint64)
        worlds.append((space, bodies, addrs, direct))
    forces = [rng.normal(0.0, 20.0, (12, 3)) for _ in range(50)]
    for f in forces:
        for space, _, addrs, direct in worlds:
            NATIVE.write_forces(addrs, np.ascontiguousarray(f), direct)
            space.step(0.01)
    m = cp.mirror_ffi()
    fields = ("f", "t", "p", "v", "a", "w", "idle_time")

    def state(body: pymunk.Body) -> list[bytes]:
        bm = cp.mirror(cp.body_ptr(body), "struct kl_body *")
        return [bytes(m.buffer(m.addressof(bm, name))) for name in fields]

    a, b = ([state(x) for x in w[1]] for w in worlds)
    assert a == b
    assert all(cp.mirror(cp.body_ptr(x), "struct kl_body *").idle_time == 0.0 for x in worlds[1][1])
    assert worlds[0][0].sleep_time_threshold == float("inf")


def _props_world(threads: int) -> ke.World:
    """Self-colliding one-shape props with springs, a limited revolute and a fixed joint."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    for k in range(4):
        pose = ke.Pose(-1.0 + 0.05 * k, 0.1 + 0.21 * k, 0.1 * k)
        b.add(ke.Prop(ke.Box(0.3, 0.2), initial_pose=pose), at=f"/World/Box{k}")
    b.add(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(0.5, 0.6)), at="/World/Ball")
    b.add(ke.Prop(ke.Circle(0.12), initial_pose=ke.Pose(0.55, 0.9)), at="/World/Ball2")
    b.add(ke.Prop(ke.Box(0.2, 0.2), initial_pose=ke.Pose(1.5, 0.5)), at="/World/Arm")
    s = b.build()
    spring = ke.SpringJoint("s1", "world", "Box3", rest_length=0.5, stiffness=20.0, damping=0.5)
    extra = (
        JointInstance("/J/s1", spring, None, "/World/Box3"),
        JointInstance(
            "/J/s2", ke.SpringJoint("s2", "Ball", "Box0", rest_length=0.3, stiffness=5.0),
            "/World/Ball", "/World/Box0",
        ),
        JointInstance(
            "/J/r", ke.RevoluteJoint("r", "world", "Arm", anchor=(1.5, 0.8), limits=(-0.5, 0.5)),
            None, "/World/Arm",
        ),
        JointInstance("/J/f", ke.FixedJoint("f", "Ball", "Ball2"), "/World/Ball", "/World/Ball2"),
    )  # fmt: skip
    scene = Scene(s.gravity, s.bodies, s.joints + extra, s.sensors, s.sites, s.cameras, s.robots)
    return ke.World(scene, num_envs=9, layout="packed", num_threads=threads, seed=1)


@needs_c
def test_self_colliding_props_with_springs_and_joints_reset_in_place_bit_for_bit() -> None:
    """Arbiters between two reset bodies of one copy, springs, limits, a fixed joint."""
    digests = []
    pairs = 0
    for kept in (False, True):
        w = _props_world(threads=2)
        shards = w._backend._shards
        assert all(sh.kept is not None for sh in shards)
        if not kept:
            for sh in shards:
                sh.kept = None
        rng = np.random.default_rng(3)
        seen = []
        snap = None
        for t in range(240):
            if t % 4 == 0:
                ids = rng.choice(9, 4, replace=False)
                f = rng.normal(0, 30, (4, len(w.body_names), 2))
                w.set_body_forces(f, rng.normal(0, 2, (4, len(w.body_names))), ids)
            w.step(1 / 120)
            seen.append(w.body_poses.tobytes() + w.body_velocities.tobytes())
            seen.append(np.asarray(w.contact_forces).tobytes())
            if t % 9 == 2:
                if kept:  # contacts between two moving bodies, about to be reset
                    pairs += sum(
                        "static" not in c[:2] for sh in shards for c in _labels(sh)["cached"]
                    )
                w.reset_envs(rng.choice(9, int(rng.integers(1, 5)), replace=False))
            if t % 23 == 7:
                ids = rng.choice(9, 2, replace=False)
                w.set_body_states(ids, w.body_poses[ids], w.body_velocities[ids])
            if t == 60:
                snap = w.snapshot()
            if t == 120:
                w.reset_envs()
            if t == 150:
                w.restore(snap)
        digests.append(seen)
    assert digests[0] == digests[1]
    # the props did touch one another (arbiters with both bodies in a copy were reset)
    assert pairs


@needs_c
def test_a_cached_arbiter_the_step_did_not_process_makes_the_reset_decline() -> None:
    """A sensor ground: Chipmunk caches its arbiters without threading them on the bodies."""
    counts = []
    for kept in (False, True):
        b = ke.SceneBuilder()
        b.add(ke.Terrain.plane(), at="/")
        b.add(ke.Prop(ke.Box(0.3, 0.2), initial_pose=ke.Pose(0.0, 0.3)), at="/World/Box")
        w = ke.World(b.build(), num_envs=4, layout="packed")
        sh = w._backend._shards[0]
        assert sh.kept is not None
        if not kept:
            sh.kept = None
        for body in sh.shared.values():
            for shape in body.shapes:
                shape.sensor = True  # the ground only senses
        for _ in range(30):
            w.step(1 / 60)
        if kept:
            assert not sh.kept.reset(np.array([1, 2], dtype=np.int64), True)
        w.reset_envs([1, 2])
        sm = cp.space_mirror(sh.ptr)
        hs = cp.mirror_ffi().cast("struct kl_hash_set *", sm.cached_arbiters)
        pool = pm_ffi.cast("cpArray *", sm.pooled_arbiters)
        counts.append((hs.entries, pool.num))
    assert counts[0] == counts[1]


@needs_c
def test_a_helper_built_for_another_table_format_is_not_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cp, "NATIVE_ABI", cp.NATIVE_ABI + 1)
    guard.native_module.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="table format"):
            assert guard.native_module() is None
    finally:
        monkeypatch.undo()
        guard.native_module.cache_clear()
    assert guard.native_module() is NATIVE


def test_the_comparison_sees_a_difference_in_a_body_or_a_constraint() -> None:
    """A negative control for ``_labels``: one bias velocity or one impulse apart."""
    a, b = _env("kelab/Humanoid-v0", 4, kept=False), _env("kelab/Humanoid-v0", 4, kept=False)
    sa, sb = a.unwrapped.world._backend._shards[0], b.unwrapped.world._backend._shards[0]
    assert _labels(sa) == _labels(sb)
    body = sb.recipe[2].body_ptrs[3]
    vx, vy, w = cp.body_bias(body)
    cp.set_body_bias(body, vx, vy, np.nextafter(w, 1.0))
    assert _labels(sa)["bodies"] != _labels(sb)["bodies"]
    cp.set_body_bias(body, vx, vy, w)
    assert _labels(sa) == _labels(sb)
    con, (_, args) = sb.parts[1][2][0], sb.recipe[1].inits[0]
    ctype = cp.ctype_of(args[0])
    saved = cp.constraint_impulse(con, ctype)
    cp.set_constraint_impulse(con, ctype, tuple(v + 1e-12 for v in saved))
    assert _labels(sa)["constraint values"] != _labels(sb)["constraint values"]


@needs_c
@pytest.mark.parametrize("kept", [True, False])
def test_resets_of_many_copies_run_per_shard_thread_and_match_one_thread(kept: bool) -> None:
    """A reset of >= PARALLEL_REBUILD copies rebuilds each shard in its own thread (the C
    reset or the Python rebuild alike): the same bits as one thread."""
    from kelab.sim.physics import _packed

    n = 24
    one, two = _env("kelab/Humanoid-v0", n, kept, 1), _env("kelab/Humanoid-v0", n, kept, 2)
    runs = []
    workers = two.unwrapped.world._backend._workers
    real_submit = workers.submit

    def submit(fn, count):  # a reset's job handed to the shard threads
        if getattr(fn, "func", None) is not None and fn.func.__name__ in (
            "_reset_shard",
            "_rebuild_shard",
        ):
            runs.append(count)
        return real_submit(fn, count)

    workers.submit = submit
    rng = np.random.default_rng(3)
    for t in range(40):
        act = rng.uniform(-1, 1, (n, 6)).astype(np.float32)
        ra, rb = one.step(act), two.step(act)
        for x, y in zip(ra[:4], rb[:4], strict=True):
            assert np.asarray(x).tobytes() == np.asarray(y).tobytes(), t
        if t % 5 == 2:
            ids = np.sort(rng.choice(n, _packed.PARALLEL_REBUILD + 4, replace=False))
            for env in (one, two):
                w = env.unwrapped.world
                w.set_body_states(ids, w.body_poses[ids], w.body_velocities[ids])
        wa, wb = one.unwrapped.world, two.unwrapped.world
        assert wa.body_poses.tobytes() == wb.body_poses.tobytes(), t
        assert wa.body_velocities.tobytes() == wb.body_velocities.tobytes(), t
    assert runs, "no reset ran in the shard threads"
    one.close()
    two.close()


@needs_c
@pytest.mark.parametrize("threads", [1, 2])
def test_state_writes_in_the_in_place_reset_are_the_separate_calls_bits(
    threads: int, monkeypatch
) -> None:
    """set_body_states with the in-place reset writes and reads the states in the same C
    call (reset's ``then``): the same bits as the Python rebuild followed by the C write
    and read, and as the backend's separate rebuild, write_states and read."""
    from kelab.sim.physics._packed import PackedBackend

    def run(mode: str) -> list[bytes]:
        with monkeypatch.context() as m:
            if mode == "separate":
                m.setattr(PackedBackend, "reset_states", separate_reset_states)
            w = _props_world(threads)
            if mode != "kept":
                for sh in w._backend._shards:
                    sh.kept = None
            rng = np.random.default_rng(5)
            seen = []
            for t in range(150):
                f = rng.normal(0, 20, (9, len(w.body_names), 2))
                w.set_body_forces(f, rng.normal(0, 1, (9, len(w.body_names))))
                w.step(1 / 120)
                if t % 6 == 5:  # few and many copies, sorted and not, moved and spinning
                    ids = rng.choice(9, int(rng.integers(1, 10)), replace=False)
                    if t % 12 == 5:
                        ids.sort()
                    noise = rng.normal(0, 0.02, (ids.size, len(w.body_names), 3))
                    poses = w.body_poses[ids] + noise
                    w.set_body_states(ids, poses, rng.normal(0, 1, poses.shape))
                    seen.append(w.body_poses.tobytes() + w.body_velocities.tobytes())
                seen.append(w.body_poses.tobytes() + w.body_velocities.tobytes())
                seen.append(np.asarray(w.contact_forces).tobytes())
            seen.append(w.snapshot().to_bytes())
            w.close()
            return seen

    kept, rebuilt, apart = run("kept"), run("rebuilt"), run("separate")
    assert kept == rebuilt
    assert kept == apart


@needs_c
def test_a_state_write_that_does_not_fit_is_refused_before_the_reset() -> None:
    from kelab.sim.physics._shard import StateWrite

    w = _props_world(threads=1)
    for _ in range(30):
        w.step(1 / 120)
    shard = w._backend._shards[0]
    before = w.snapshot().to_bytes()
    locals_ = np.array([2, 5], dtype=np.int64)
    poses = np.ascontiguousarray(w.body_poses[locals_])
    good = StateWrite(poses, np.zeros_like(poses), *shard._state_tables)
    nb = len(w.body_names)
    bad = [
        good._replace(vels=np.zeros((2, nb - 1, 3))),  # not the poses' shape
        good._replace(moving=good.moving + nb),  # past the bodies
        good._replace(rows=good.rows + w._backend.raw.shape[0] * nb),  # past out
        good._replace(origins=good.origins[:-1]),  # not one per body
    ]
    for write in bad:
        with pytest.raises(ValueError, match="then's tables disagree"):
            shard.kept.reset(locals_, False, write)
    with pytest.raises(TypeError, match="then must be a tuple"):
        shard.kept.reset(locals_, False, [1])
    assert w.snapshot().to_bytes() == before  # nothing reset, written or read
    w.close()
