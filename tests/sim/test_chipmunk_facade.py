"""What kelab/sim/physics/_chipmunk.py relies on in pymunk's private internals, checked loudly.

If one of these fails after a pymunk upgrade, pymunk changed something kelab.sim drives
directly: fix kelab/sim/physics/_chipmunk.py (and only it), then widen the bound in
pyproject.toml and ``_chipmunk.PYMUNK_VERSIONS``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pymunk
import pymunk.batch as pbatch
import pytest
from pymunk._chipmunk_cffi import ffi, lib

from kelab.sim.physics import _chipmunk as cp

ROOT = Path(__file__).resolve().parents[2]


def _c(ctype: object) -> str:
    """A C type's name without the ``struct``/``enum`` tags cffi writes."""
    t = ctype if isinstance(ctype, ffi.CType) else ffi.typeof(ctype)
    return t.cname.replace("struct ", "").replace("enum ", "")


#: Every C function the facade binds, with the C signature it was written against.
SIGNATURES = {
    "body_set_position": "void(*)(cpBody *, cpVect)",
    "body_set_angle": "void(*)(cpBody *, double)",
    "body_set_velocity": "void(*)(cpBody *, cpVect)",
    "body_set_angular_velocity": "void(*)(cpBody *, double)",
    "body_set_force": "void(*)(cpBody *, cpVect)",
    "body_set_torque": "void(*)(cpBody *, double)",
    "body_update_position": "void(*)(cpBody *, double)",
    "body_get_velocity": "cpVect(*)(cpBody *)",
    "body_get_angular_velocity": "double(*)(cpBody *)",
    "shape_set_friction": "void(*)(cpShape *, double)",
    "shape_set_elasticity": "void(*)(cpShape *, double)",
    "space_step": "void(*)(cpSpace *, double)",
    "space_add_body": "cpBody *(*)(cpSpace *, cpBody *)",
    "space_remove_body": "void(*)(cpSpace *, cpBody *)",
    "space_add_shape": "cpShape *(*)(cpSpace *, cpShape *)",
    "space_remove_shape": "void(*)(cpSpace *, cpShape *)",
    "space_add_constraint": "cpConstraint *(*)(cpSpace *, cpConstraint *)",
    "space_remove_constraint": "void(*)(cpSpace *, cpConstraint *)",
    "space_set_shape_id_counter": "void(*)(cpSpace *, uintptr_t)",
    "space_each_body": "void(*)(cpSpace *, void(*)(cpBody *, void *), void *)",
    "space_each_cached_arbiter": "void(*)(cpSpace *, void(*)(cpArbiter *, void *), void *)",
    "pivot_joint_new": "cpConstraint *(*)(cpBody *, cpBody *, cpVect, cpVect)",
    "gear_joint_new": "cpConstraint *(*)(cpBody *, cpBody *, double, double)",
    "groove_joint_new": "cpConstraint *(*)(cpBody *, cpBody *, cpVect, cpVect, cpVect)",
    "damped_spring_new": (
        "cpConstraint *(*)(cpBody *, cpBody *, cpVect, cpVect, double, double, double)"
    ),
    "rotary_limit_joint_new": "cpConstraint *(*)(cpBody *, cpBody *, double, double)",
    "constraint_set_collide_bodies": "void(*)(cpConstraint *, unsigned char)",
    "constraint_get_space": "cpSpace *(*)(cpConstraint *)",
    "constraint_free": "void(*)(cpConstraint *)",
    "constraint_set_error_bias": "void(*)(cpConstraint *, double)",
    "constraint_get_error_bias": "double(*)(cpConstraint *)",
    "float_array_new": "pmFloatArray *(*)(int)",
    "float_array_free": "void(*)(pmFloatArray *)",
    "int_array_new": "pmIntArray *(*)(int)",
    "int_array_free": "void(*)(pmIntArray *)",
}

#: Init functions: the same arguments as their constructor, after the struct pointer.
INIT_SIGNATURES = {
    "pivot_joint_new": "cpPivotJoint *(*)(cpPivotJoint *, cpBody *, cpBody *, cpVect, cpVect)",
    "gear_joint_new": "cpGearJoint *(*)(cpGearJoint *, cpBody *, cpBody *, double, double)",
    "groove_joint_new": (
        "cpGrooveJoint *(*)(cpGrooveJoint *, cpBody *, cpBody *, cpVect, cpVect, cpVect)"
    ),
    "damped_spring_new": (
        "cpDampedSpring *(*)(cpDampedSpring *, cpBody *, cpBody *, cpVect, cpVect, double, "
        "double, double)"
    ),
    "rotary_limit_joint_new": (
        "cpRotaryLimitJoint *(*)(cpRotaryLimitJoint *, cpBody *, cpBody *, double, double)"
    ),
}

#: Struct fields the facade reads or writes.
STRUCTS = {
    "pmFloatArray": {"num": "int", "max": "int", "arr": "double *"},
    "pmIntArray": {"num": "int", "max": "int", "arr": "uintptr_t *"},
    "pmBatchedData": {
        "fields": "pmBatchableBodyFields",
        "floatArray": "pmFloatArray *",
        "intArray": "pmIntArray *",
    },
}


def test_pymunk_version_is_within_the_checked_bound() -> None:
    low, high = cp.PYMUNK_VERSIONS
    version = tuple(int(x) for x in pymunk.version.split(".")[:2])
    assert low <= version < high, (
        f"pymunk {pymunk.version} is outside {low}..{high} that kelab/sim/physics/_chipmunk.py was "
        "checked against"
    )
    text = (ROOT / "pyproject.toml").read_text()
    bound = re.search(r'"pymunk>=([\d.]+),<([\d.]+)"', text)
    assert bound is not None, "pyproject.toml must bound pymunk from above"
    # the lower bound may name a patch release of the lowest minor one (7.0.1: #42)
    lowest = tuple(int(x) for x in bound.group(1).split(".")[:2])
    assert lowest == low and bound.group(2) == ".".join(map(str, high)), (
        "pyproject.toml's pymunk bound must equal _chipmunk.PYMUNK_VERSIONS"
    )


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_c_function_signature(name: str) -> None:
    assert _c(getattr(cp, name)) == SIGNATURES[name]


@pytest.mark.parametrize("ctor", sorted(INIT_SIGNATURES))
def test_constraint_init_signature(ctor: str) -> None:
    init, ctype = cp.CONSTRAINT_INITS[getattr(cp, ctor)]
    assert _c(init) == INIT_SIGNATURES[ctor]
    assert ffi.typeof(init).args[0] == ffi.typeof(ctype)


@pytest.mark.parametrize("struct", sorted(STRUCTS))
def test_struct_fields(struct: str) -> None:
    fields = dict(ffi.typeof(struct).fields)
    for name, ctype in STRUCTS[struct].items():
        assert name in fields, f"{struct}.{name} is gone"
        assert _c(fields[name].type) == ctype


def test_batch_iterators_are_function_pointers() -> None:
    for it in (cp.BODY_GET_ITER, cp.BODY_SET_ITER, cp.ARBITER_ITER):
        assert ffi.typeof(it).kind == "function"
    assert cp.NULL == ffi.NULL


def _scene() -> tuple[pymunk.Space, pymunk.Body, pymunk.Shape, pymunk.Body]:
    space = pymunk.Space()
    space.gravity = (0.0, -10.0)
    body = pymunk.Body()
    shape = pymunk.Circle(body, 0.5)
    shape.mass = 2.0
    ground = pymunk.Segment(space.static_body, (-10.0, 0.0), (10.0, 0.0), 0.0)
    space.add(body, shape, ground)
    other = pymunk.Body()
    other_shape = pymunk.Poly.create_box(other, (0.2, 0.2))
    other_shape.mass = 1.0
    other.position = (3.0, 3.0)
    space.add(other, other_shape)
    return space, body, shape, other


def test_pointers_and_body_setters() -> None:
    space, body, shape, _ = _scene()
    assert cp.space_ptr(space) == space._space
    assert cp.shape_ptr(shape) == shape._shape
    ptr = cp.body_ptr(body)
    assert ptr == body._body
    cp.body_set_position(ptr, (1.0, 2.0))
    cp.body_set_angle(ptr, 0.25)
    cp.body_set_velocity(ptr, (3.0, -4.0))
    cp.body_set_angular_velocity(ptr, 5.0)
    cp.body_set_force(ptr, (6.0, 7.0))
    cp.body_set_torque(ptr, 8.0)
    assert tuple(body.position) == (1.0, 2.0) and body.angle == 0.25
    assert tuple(body.velocity) == (3.0, -4.0) and body.angular_velocity == 5.0
    assert tuple(body.force) == (6.0, 7.0) and body.torque == 8.0
    cp.body_update_position(ptr, 0.5)  # moves by v * dt (the centre of gravity is at 0)
    assert tuple(body.position) == (2.5, 0.0) and body.angle == 2.75


def test_shape_setters_and_space_calls() -> None:
    space, body, shape, _ = _scene()
    cp.shape_set_friction(cp.shape_ptr(shape), 0.3)
    cp.shape_set_elasticity(cp.shape_ptr(shape), 0.4)
    assert shape.friction == 0.3 and shape.elasticity == 0.4
    body.position = (0.0, 5.0)
    cp.space_step(cp.space_ptr(space), 0.1)
    assert body.velocity.y == pytest.approx(-1.0)  # one step of gravity
    cp.space_remove_shape(cp.space_ptr(space), cp.shape_ptr(shape))
    assert body.mass == 0.0  # Chipmunk drops a body's mass with its last shape
    cp.space_add_shape(cp.space_ptr(space), cp.shape_ptr(shape))
    assert body.mass == 2.0
    cp.space_set_shape_id_counter(cp.space_ptr(space), 1000)
    extra = pymunk.Circle(body, 0.1)
    space.add(extra)
    assert lib.cpShapeGetHashID(extra._shape) == 1000  # the next shape added gets it
    # per-copy parameters (World.set_body_masses, set_gravity): mass data, space gravity
    cp.shape_set_mass(cp.shape_ptr(shape), 3.0)
    ptr = cp.body_ptr(body)
    assert cp.body_get_mass(ptr) == body.mass == 3.0
    assert cp.body_get_moment(ptr) == body.moment == pytest.approx(3.0 * 0.5**2 / 2)
    cp.space_set_gravity(cp.space_ptr(space), (1.0, -2.0))
    assert tuple(space.gravity) == (1.0, -2.0)


def test_removed_shapes_are_cleared() -> None:
    space, body, shape, _ = _scene()
    space.remove(shape)
    assert shape in space._removed_shapes
    cp.clear_removed_shapes(space)
    assert len(space._removed_shapes) == 0


def test_constraints_made_added_reinitialised_and_freed() -> None:
    space, body, _, other = _scene()
    a, b = cp.body_ptr(body), cp.body_ptr(other)
    sp = cp.space_ptr(space)
    calls = [
        (cp.pivot_joint_new, (a, b, (0.0, 0.0), (0.0, 0.0))),
        (cp.gear_joint_new, (a, b, 0.0, 1.0)),
        (cp.groove_joint_new, (a, b, (-1.0, 0.0), (1.0, 0.0), (0.0, 0.0))),
        (cp.damped_spring_new, (a, b, (0.0, 0.0), (0.0, 0.0), 1.0, 10.0, 1.0)),
        (cp.rotary_limit_joint_new, (a, b, -0.5, 0.5)),
    ]
    for ctor, args in calls:
        c = ctor(*args)
        cp.constraint_set_collide_bodies(c, 0)
        assert cp.constraint_get_space(c) == cp.NULL
        cp.space_add_constraint(sp, c)
        assert cp.constraint_get_space(c) == sp
        for _ in range(3):
            cp.space_step(sp, 0.01)
        cp.space_remove_constraint(sp, c)
        assert cp.constraint_get_space(c) == cp.NULL
        init, args2 = cp.constraint_reinit_call(ctor, c, args)
        assert init(*args2) == args2[0]  # Init returns its struct, in place
        cp.constraint_free(c)
    freed = []
    m = cp.managed(cp.gear_joint_new(a, b, 0.0, 1.0), lambda p: freed.append(p))
    del m
    import gc

    gc.collect()
    assert len(freed) == 1
    with pytest.raises(KeyError):
        cp.constraint_reinit_call(cp.space_step, None, ())


def test_error_bias_is_read_and_written_and_reset_by_init() -> None:
    space, body, _, other = _scene()
    a, b = cp.body_ptr(body), cp.body_ptr(other)
    args = (a, b, (0.0, 0.0), (0.0, 0.0))
    c = cp.pivot_joint_new(*args)
    assert cp.constraint_get_error_bias(c) == pytest.approx(0.9**60, rel=1e-5)  # 10 % / (1/60 s)
    cp.constraint_set_error_bias(c, 1e-6)
    assert cp.constraint_get_error_bias(c) == 1e-6
    init, args2 = cp.constraint_reinit_call(cp.pivot_joint_new, c, args)
    init(*args2)  # Init puts the default back: rebuilds must set a joint's own bias again
    assert cp.constraint_get_error_bias(c) == pytest.approx(0.9**60, rel=1e-5)
    cp.constraint_free(c)


def test_batched_body_read_and_write_match_pymunk_batch() -> None:
    space, body, _, other = _scene()
    body.position, body.velocity, body.angular_velocity = (1.0, 2.0), (0.5, -0.5), 0.25
    fields = pbatch.BodyFields.POSITION
    expected = pbatch.Buffer()
    pbatch.get_space_bodies(space, fields, expected)
    want = np.frombuffer(expected.float_buf(), dtype=np.float64)
    assert want.size >= 4  # both bodies (and any static body the space visits)
    arr = np.zeros(64)  # room to spare: a full array would be grown (reallocated)
    fa = cp.float_array_view(arr.ctypes.data, arr.size)
    data = cp.batched_data(fields.value, fa, cp.int_array_new(0))
    cp.space_each_body(cp.space_ptr(space), cp.BODY_GET_ITER, data)
    assert fa.num == want.size
    assert np.array_equal(arr[: want.size], want)
    # and back: forces written with the set iterator
    force = np.zeros(64)
    force[:4] = (1.0, 2.0, 3.0, 4.0)  # the dynamic bodies come first
    fa2 = cp.float_array_view(force.ctypes.data, force.size)
    set_data = cp.batched_data(pbatch.BodyFields.FORCE.value, fa2, cp.int_array_new(0))
    cp.space_each_body(cp.space_ptr(space), cp.BODY_SET_ITER, set_data)
    forces = sorted([tuple(body.force), tuple(other.force)])
    assert forces == [(1.0, 2.0), (3.0, 4.0)]


def test_arbiter_iteration_and_buffers() -> None:
    space, body, _, _ = _scene()
    body.position = (0.0, 0.45)  # resting on the ground: one arbiter
    space.step(0.01)
    floats, ints = cp.float_array_new(0), cp.int_array_new(0)
    fields = pbatch.ArbiterFields.BODY_A_ID | pbatch.ArbiterFields.TOTAL_IMPULSE
    data = cp.batched_data(fields.value, floats, ints)
    cp.space_each_cached_arbiter(cp.space_ptr(space), cp.ARBITER_ITER, data)
    fl = np.frombuffer(cp.float_buffer(floats), dtype=np.float64)
    it = np.frombuffer(cp.int_buffer(ints), dtype=np.uint64)
    assert fl.size == 2 and it.size == 1
    assert fl[1] > 0  # the ground pushes up
    cp.float_array_free(floats)
    cp.int_array_free(ints)


# -- warm starts: the mirrored struct layouts against pymunk's own getters ----------------


def test_body_mirror_reads_what_pymunk_reads_and_bias_moves_the_next_update() -> None:
    space, body, _, _ = _scene()
    body.position, body.angle = (1.5, -2.0), 0.3
    body.velocity, body.angular_velocity = (0.25, -0.5), 2.0
    m = cp.mirror(cp.body_ptr(body), "struct kl_body *")
    assert (m.m, m.i) == (body.mass, body.moment)
    assert (m.p.x, m.p.y, m.a) == (1.5, -2.0, 0.3)  # its centre of gravity is at its origin
    assert (m.v.x, m.v.y, m.w) == (0.25, -0.5, 2.0)
    assert cp.body_bias(cp.body_ptr(body)) == (0.0, 0.0, 0.0)
    cp.set_body_bias(cp.body_ptr(body), 1.0, 2.0, 3.0)
    assert cp.body_bias(cp.body_ptr(body)) == (1.0, 2.0, 3.0)
    body.velocity, body.angular_velocity = (0.0, 0.0), 0.0
    cp.body_update_position(cp.body_ptr(body), 0.5)  # moves by (v + v_bias) dt, clears bias
    assert tuple(body.position) == (2.0, -1.0) and body.angle == pytest.approx(1.8)
    assert cp.body_bias(cp.body_ptr(body)) == (0.0, 0.0, 0.0)
    body.velocity = (0.5, 0.75)
    v = cp.body_get_velocity(cp.body_ptr(body))
    assert (v.x, v.y, cp.body_get_angular_velocity(cp.body_ptr(body))) == (0.5, 0.75, 0.0)


@pytest.mark.parametrize("ctor", sorted(INIT_SIGNATURES))
def test_constraint_mirrors_hold_the_impulse_pymunk_reports(ctor: str) -> None:
    space, body, _, other = _scene()
    ground = space.static_body
    args = {
        "pivot_joint_new": ((0.0, 1.0), (0.0, 0.0)),
        "gear_joint_new": (0.0, 1.0),
        "groove_joint_new": ((-1.0, 1.0), (1.0, 1.0), (0.0, 0.0)),
        "damped_spring_new": ((0.0, 1.0), (0.0, 0.0), 0.5, 50.0, 1.0),
        "rotary_limit_joint_new": (-0.1, 0.1),
    }[ctor]
    body.position = (0.0, 5.0)  # in the air: nothing but the joint acts on it
    body.angular_velocity = 30.0  # something for every joint to hold back
    con = getattr(cp, ctor)(cp.body_ptr(ground), cp.body_ptr(body), *args)
    cp.space_add_constraint(cp.space_ptr(space), con)
    space.step(0.01)  # one step: the joint stops the spin (a limit lets go after it)
    ctype = cp.CONSTRAINT_INITS[getattr(cp, ctor)][1]
    struct, size = cp.WARM_IMPULSES[ctype]
    reported = lib.cpConstraintGetImpulse(con)
    if struct is not None:  # the shared head first: its fields are pymunk's too
        head = cp.mirror(con, struct).constraint
        assert head.max_force == lib.cpConstraintGetMaxForce(con)
        assert head.error_bias == lib.cpConstraintGetErrorBias(con)
        assert head.max_bias == lib.cpConstraintGetMaxBias(con)
    j = cp.constraint_impulse(con, ctype)
    assert len(j) == size
    if size:
        assert reported > 0 and float(np.hypot(*j) if size == 2 else abs(j[0])) == reported
        cp.set_constraint_impulse(con, ctype, tuple(2.0 * v for v in j))
        assert lib.cpConstraintGetImpulse(con) == pytest.approx(2.0 * reported)
    cp.space_remove_constraint(cp.space_ptr(space), con)
    cp.constraint_free(con)


def test_cached_arbiters_are_visited_and_their_contacts_written() -> None:
    space, body, shape, _ = _scene()
    body.position = (0.0, 0.45)  # resting on the ground: one arbiter
    space.step(0.01)
    seen = []

    def visit(arb: object) -> None:
        assert {cp.address(arb.a), cp.address(arb.b)} >= {cp.address(cp.shape_ptr(shape))}
        seen.append((arb.count, arb.contacts[0].jnAcc))
        arb.contacts[0].jnAcc = 7.0

    cp.each_cached_arbiter(cp.space_ptr(space), visit)
    assert len(seen) == 1 and seen[0][0] == 1 and seen[0][1] > 0
    cp.each_cached_arbiter(cp.space_ptr(space), lambda arb: seen.append(arb.contacts[0].jnAcc))
    assert seen[-1] == 7.0

    def boom(arb: object) -> None:
        raise RuntimeError("from a visit")

    with pytest.raises(RuntimeError, match="from a visit"):  # raised after C returns
        cp.each_cached_arbiter(cp.space_ptr(space), boom)
