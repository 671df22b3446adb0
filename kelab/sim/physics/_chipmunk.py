"""The one door to pymunk's private internals: Chipmunk's C API through pymunk's cffi.

kelab.sim drives Chipmunk directly where pymunk's public API is too slow or cannot do
what the World needs (exact resets, batched reads into numpy, constraints without
Python wrappers). Everything it uses that pymunk does not publish is named here, and
only here: the cffi ``lib``/``ffi`` of ``pymunk._chipmunk_cffi``, the ``_space``/
``_body``/``_shape`` pointers of pymunk's objects, ``Space._removed_shapes``, and the
``pmFloatArray``/``pmBatchedData`` structs of ``pymunk.batch``.

The C functions are bound to module names directly (no Python wrapper, so hot loops
cost what calling ``lib`` did). ``pyproject.toml`` bounds pymunk to the versions this
was checked against; ``tests/sim/test_chipmunk_facade.py`` checks every name, C
signature and struct field used here, and the behaviour of each function, so a pymunk
upgrade that changes any of them fails loudly there rather than deep in a step.

The mirrored struct layouts (below) are also checked at run time, once, before anything
is written through them: ``_guard.py`` checks pymunk's version against
:data:`PYMUNK_VERSIONS` and runs a self-test through the names here, and only then
configures the C helper or lets a rebase carry warm starts.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import pymunk
from cffi import FFI
from pymunk._chipmunk_cffi import ffi as _ffi
from pymunk._chipmunk_cffi import lib as _lib

#: The pymunk versions this module was checked against: ``[low, high)``.
PYMUNK_VERSIONS = ((7, 0), (7, 4))

#: The null pointer (``cpConstraintGetSpace`` of a constraint outside any space).
NULL = _ffi.NULL


# -- pointers of pymunk's objects ------------------------------------------------------


def space_ptr(space: pymunk.Space) -> object:
    """The ``cpSpace *`` of a pymunk Space."""
    return space._space


def body_ptr(body: pymunk.Body) -> object:
    """The ``cpBody *`` of a pymunk Body."""
    return body._body


def shape_ptr(shape: pymunk.Shape) -> object:
    """The ``cpShape *`` of a pymunk Shape."""
    return shape._shape


def clear_removed_shapes(space: pymunk.Space) -> None:
    """Drop the shapes pymunk keeps referenced after ``Space.remove`` until its next step.

    pymunk clears this set itself in ``Space.step``; a space that is retired without
    stepping again would keep the shapes alive (and they are reused elsewhere).
    """
    getattr(space, "_removed_shapes", {}).clear()


# -- bodies ------------------------------------------------------------------------------

body_set_position = _lib.cpBodySetPosition  # (cpBody *, cpVect)
body_set_angle = _lib.cpBodySetAngle  # (cpBody *, cpFloat)
body_set_velocity = _lib.cpBodySetVelocity  # (cpBody *, cpVect)
body_set_angular_velocity = _lib.cpBodySetAngularVelocity  # (cpBody *, cpFloat)
body_set_force = _lib.cpBodySetForce  # (cpBody *, cpVect)
body_set_torque = _lib.cpBodySetTorque  # (cpBody *, cpFloat)
body_update_position = _lib.cpBodyUpdatePosition  # (cpBody *, cpFloat dt)
body_get_velocity = _lib.cpBodyGetVelocity  # (cpBody *) -> cpVect
body_get_angular_velocity = _lib.cpBodyGetAngularVelocity  # (cpBody *) -> cpFloat
body_get_mass = _lib.cpBodyGetMass  # (cpBody *) -> cpFloat
body_get_moment = _lib.cpBodyGetMoment  # (cpBody *) -> cpFloat

# -- shapes ------------------------------------------------------------------------------

shape_set_friction = _lib.cpShapeSetFriction  # (cpShape *, cpFloat)
shape_set_elasticity = _lib.cpShapeSetElasticity  # (cpShape *, cpFloat)
shape_set_mass = _lib.cpShapeSetMass  # (cpShape *, cpFloat): its body's mass data again

# -- spaces ------------------------------------------------------------------------------

space_step = _lib.cpSpaceStep  # (cpSpace *, cpFloat dt)
space_set_gravity = _lib.cpSpaceSetGravity  # (cpSpace *, cpVect)
space_add_body = _lib.cpSpaceAddBody  # (cpSpace *, cpBody *)
space_remove_body = _lib.cpSpaceRemoveBody  # (cpSpace *, cpBody *)
space_add_shape = _lib.cpSpaceAddShape  # (cpSpace *, cpShape *)
space_remove_shape = _lib.cpSpaceRemoveShape  # (cpSpace *, cpShape *)
space_add_constraint = _lib.cpSpaceAddConstraint  # (cpSpace *, cpConstraint *)
space_remove_constraint = _lib.cpSpaceRemoveConstraint  # (cpSpace *, cpConstraint *)
space_set_shape_id_counter = _lib.cpSpaceSetShapeIDCounter  # (cpSpace *, cpHashValue)
space_each_body = _lib.cpSpaceEachBody  # (cpSpace *, iterator, void *data)
space_each_cached_arbiter = _lib.cpSpaceEachCachedArbiter  # (cpSpace *, iterator, void *)

# -- constraints -------------------------------------------------------------------------

pivot_joint_new = _lib.cpPivotJointNew2  # (a, b, anchor_a, anchor_b)
gear_joint_new = _lib.cpGearJointNew  # (a, b, phase, ratio)
groove_joint_new = _lib.cpGrooveJointNew  # (a, b, groove_a, groove_b, anchor_b)
damped_spring_new = _lib.cpDampedSpringNew  # (a, b, anchor_a, anchor_b, rest, k, damping)
rotary_limit_joint_new = _lib.cpRotaryLimitJointNew  # (a, b, min, max)
constraint_set_collide_bodies = _lib.cpConstraintSetCollideBodies  # (cpConstraint *, bool)
constraint_get_space = _lib.cpConstraintGetSpace  # (cpConstraint *) -> cpSpace *
constraint_free = _lib.cpConstraintFree  # (cpConstraint *)
constraint_set_error_bias = _lib.cpConstraintSetErrorBias  # (cpConstraint *, cpFloat)
constraint_get_error_bias = _lib.cpConstraintGetErrorBias  # (cpConstraint *) -> cpFloat

#: Each constructor above -> (its Init function, the C type Init takes): a constructor
#: allocates, then runs Init with the same arguments.
CONSTRAINT_INITS: dict[object, tuple[object, str]] = {
    pivot_joint_new: (_lib.cpPivotJointInit, "cpPivotJoint *"),
    gear_joint_new: (_lib.cpGearJointInit, "cpGearJoint *"),
    groove_joint_new: (_lib.cpGrooveJointInit, "cpGrooveJoint *"),
    damped_spring_new: (_lib.cpDampedSpringInit, "cpDampedSpring *"),
    rotary_limit_joint_new: (_lib.cpRotaryLimitJointInit, "cpRotaryLimitJoint *"),
}


def constraint_reinit_call(ctor: object, constraint: object, args: tuple) -> tuple[object, tuple]:
    """The Init call that re-initialises ``constraint`` (made by ``ctor(*args)``) in place.

    Raises:
        KeyError: If ``ctor`` is not one of the constructors above.
    """
    init, ctype = CONSTRAINT_INITS[ctor]
    return init, (_ffi.cast(ctype, constraint), *args)


def managed(ptr: object, free: object) -> object:
    """``ptr`` with ``free(ptr)`` called when it is garbage collected (``ffi.gc``)."""
    return _ffi.gc(ptr, free)


# -- batched reads and writes (pymunk.batch's C side) ------------------------------------

#: Batch iterators: read body fields, write body fields, read arbiter fields.
BODY_GET_ITER = _ffi.addressof(_lib, "pmSpaceBodyGetIteratorFuncBatched")
BODY_SET_ITER = _ffi.addressof(_lib, "pmSpaceBodySetIteratorFuncBatched")
ARBITER_ITER = _ffi.addressof(_lib, "pmSpaceArbiterIteratorFuncBatched")

float_array_new = _lib.pmFloatArrayNew  # (int capacity) -> pmFloatArray *
float_array_free = _lib.pmFloatArrayFree  # (pmFloatArray *)
int_array_new = _lib.pmIntArrayNew  # (int capacity) -> pmIntArray *
int_array_free = _lib.pmIntArrayFree  # (pmIntArray *)


def float_array_view(address: int, capacity: int) -> object:
    """A ``pmFloatArray`` over ``capacity`` float64s at ``address`` (memory it does not own).

    pymunk's push grows (reallocates) an array when ``num`` reaches ``max - 1``: give it
    two floats more than will be written.
    """
    fa = _ffi.new("pmFloatArray *")
    fa.arr = _ffi.cast("cpFloat *", address)
    fa.max = capacity
    fa.num = 0
    return fa


def batched_data(fields: int, floats: object, ints: object) -> object:
    """A ``pmBatchedData`` for the batch iterators: field bits and the arrays to use."""
    d = _ffi.new("pmBatchedData *")
    d.fields = fields
    d.floatArray = floats
    d.intArray = ints
    return d


def float_buffer(array: object) -> object:
    """The filled part of a ``pmFloatArray`` as a cffi buffer (float64)."""
    return _ffi.buffer(array.arr, _ffi.sizeof("cpFloat") * array.num)


def int_buffer(array: object) -> object:
    """The filled part of a ``pmIntArray`` as a cffi buffer (uintptr_t)."""
    return _ffi.buffer(array.arr, _ffi.sizeof("uintptr_t") * array.num)


# -- warm starts: what Chipmunk's solver carries from one step to the next -----------------
#
# pymunk publishes ``cpArbiter`` and ``cpContact`` (their fields are read through its ffi),
# not ``cpBody`` or the constraint structs. Their layouts, as Chipmunk 7 (pymunk's Munk2D)
# declares them in chipmunk_structs.h, are mirrored below in a separate cffi instance that
# only computes field offsets: up to the last field used, same types, same order.
# tests/sim/test_chipmunk_facade.py checks each mirror against pymunk's own getters.

_MIRROR_CDEF = """
typedef struct { double x, y; } kl_vect;
typedef struct { double a, b, c, d; } kl_mat2x2;
typedef struct { double a, b, c, d, tx, ty; } kl_transform;
struct kl_body {
    void *velocity_func; void *position_func;
    double m, m_inv, i, i_inv;
    kl_vect cog, p, v, f;
    double a, w, t;
    kl_transform transform;
    void *user_data;
    kl_vect v_bias;
    double w_bias;
    uintptr_t space, shape_list, arbiter_list, constraint_list;
    uintptr_t sleeping_root, sleeping_next; double idle_time;
};
struct kl_constraint {
    void *klass; void *space; void *a; void *b; void *next_a; void *next_b;
    double max_force, error_bias, max_bias;
    unsigned char collide_bodies;
    void *pre_solve; void *post_solve; void *user_data;
};
struct kl_pivot_joint {
    struct kl_constraint constraint;
    kl_vect anchor_a, anchor_b, r1, r2; kl_mat2x2 k; kl_vect j_acc; kl_vect bias;
};
struct kl_groove_joint {
    struct kl_constraint constraint;
    kl_vect grv_n, grv_a, grv_b, anchor_b, grv_tn; double clamp;
    kl_vect r1, r2; kl_mat2x2 k; kl_vect j_acc; kl_vect bias;
};
struct kl_gear_joint {
    struct kl_constraint constraint;
    double phase, ratio, ratio_inv, i_sum, bias, j_acc;
};
struct kl_rotary_limit_joint {
    struct kl_constraint constraint;
    double min, max, i_sum, bias, j_acc;
};
struct kl_damped_spring {
    struct kl_constraint constraint;
    kl_vect anchor_a, anchor_b; double rest_length, stiffness, damping; void *force_func;
    double target_vrn, v_coef; kl_vect r1, r2; double n_mass; kl_vect n; double j_acc;
};
struct kl_hash_bin { uintptr_t elt; uintptr_t hash; uintptr_t next; };
struct kl_hash_set {
    unsigned int entries, size; void *eql; void *default_value;
    uintptr_t table; uintptr_t pooled_bins;
};
struct kl_space {
    int iterations; kl_vect gravity; double damping;
    double idle_speed_threshold, sleep_time_threshold;
    double collision_slop, collision_bias; unsigned int collision_persistence;
    void *user_data; unsigned int stamp; double curr_dt;
    uintptr_t dynamic_bodies, static_bodies, roused_bodies, sleeping_components;
    uintptr_t shape_id_counter; void *static_shapes; void *dynamic_shapes;
    uintptr_t constraints, arbiters; void *contact_buffers_head;
    uintptr_t cached_arbiters, pooled_arbiters, allocated_buffers;
    int locked;
    void *collision_handlers;
    uintptr_t global_type_a, global_type_b;
    void *global_begin, *global_pre_solve, *global_post_solve, *global_separate;
    void *global_data;
    unsigned char skip_post_step;
    uintptr_t post_step_callbacks;
};
"""

#: Per constraint C type (as in :data:`CONSTRAINT_INITS`): its mirror struct and how many
#: floats its warm-start impulse ``jAcc`` holds (a damped spring's is never applied again:
#: Chipmunk's ``applyCachedImpulse`` of springs does nothing, so it carries none).
WARM_IMPULSES: dict[str, tuple[str | None, int]] = {
    "cpPivotJoint *": ("struct kl_pivot_joint *", 2),
    "cpGrooveJoint *": ("struct kl_groove_joint *", 2),
    "cpGearJoint *": ("struct kl_gear_joint *", 1),
    "cpRotaryLimitJoint *": ("struct kl_rotary_limit_joint *", 1),
    "cpDampedSpring *": (None, 0),
}


#: Per constraint C type: its mirror struct with the impulse ``j_acc`` (the packed resets
#: that keep constraints in their space, :mod:`kelab.sim.physics._reset`).
CONSTRAINT_MIRRORS: dict[str, str] = {
    "cpPivotJoint *": "struct kl_pivot_joint *",
    "cpGrooveJoint *": "struct kl_groove_joint *",
    "cpGearJoint *": "struct kl_gear_joint *",
    "cpRotaryLimitJoint *": "struct kl_rotary_limit_joint *",
    "cpDampedSpring *": "struct kl_damped_spring *",
}


def ctype_of(ptr: object) -> str:
    """The C type of a pointer of pymunk's ffi (``"cpPivotJoint *"``, ...)."""
    return _ffi.typeof(ptr).cname.removeprefix("struct ")


def mirror_ffi() -> FFI:
    """The cffi instance of the mirror structs (casts, buffers, offsets)."""
    return _mirror()


# -- the packed resets' C helper (kelab/sim/physics/_native.c) --------------------------------

#: The fields ``_native.c`` reads and writes, in the order of its offsets enum: (struct,
#: field path, its size in C). ``cpArbiter`` and ``cpArray`` are pymunk's own declarations,
#: the ``kl_`` structs the mirrors above.
_NATIVE_FIELDS: tuple[tuple[str, tuple[str, ...], int], ...] = (
    ("struct kl_body", ("arbiter_list",), 8),
    ("cpArbiter", ("a",), 8),
    ("cpArbiter", ("b",), 8),
    ("cpArbiter", ("body_a",), 8),
    ("cpArbiter", ("body_b",), 8),
    ("cpArbiter", ("thread_a", "next"), 8),
    ("cpArbiter", ("thread_a", "prev"), 8),
    ("cpArbiter", ("thread_b", "next"), 8),
    ("cpArbiter", ("thread_b", "prev"), 8),
    ("cpArbiter", ("state",), 4),
    ("struct kl_space", ("constraints",), 8),
    ("struct kl_space", ("arbiters",), 8),
    ("struct kl_space", ("cached_arbiters",), 8),
    ("struct kl_space", ("pooled_arbiters",), 8),
    ("struct kl_space", ("locked",), 4),
    ("struct kl_space", ("post_step_callbacks",), 8),
    ("struct kl_space", ("roused_bodies",), 8),
    ("cpArray", ("num",), 4),
    ("cpArray", ("arr",), 8),
    ("struct kl_hash_set", ("entries",), 4),
    ("struct kl_hash_set", ("size",), 4),
    ("struct kl_hash_set", ("table",), 8),
    ("struct kl_hash_set", ("pooled_bins",), 8),
    ("struct kl_hash_bin", ("elt",), 8),
    ("struct kl_hash_bin", ("next",), 8),
    ("struct kl_body", ("v",), 16),
    ("struct kl_body", ("a",), 8),
    ("struct kl_body", ("w",), 8),
    ("struct kl_body", ("transform",), 48),
    ("struct kl_body", ("f",), 16),
    ("struct kl_body", ("t",), 8),
    # the friction model (kelab/sim/physics/_friction.py)
    ("struct kl_body", ("p",), 16),
    ("struct kl_body", ("cog",), 16),
    ("cpArbiter", ("e",), 8),
    ("cpArbiter", ("u",), 8),
    ("cpArbiter", ("count",), 4),
    ("cpArbiter", ("contacts",), 8),
    ("cpArbiter", ("n",), 16),
    ("cpArbiter", ("swapped",), 1),
    ("struct cpContact", ("r1",), 16),
    ("struct cpContact", ("r2",), 16),
)
#: Struct sizes ``_native.c`` takes after the offsets: the stride of an arbiter's contacts.
_NATIVE_SIZES = ("struct cpContact",)
#: The Chipmunk functions ``_native.c`` calls, in the order of its functions enum.
_NATIVE_FUNCTIONS = (
    "cpBodySetVelocity", "cpBodySetAngularVelocity", "cpBodySetAngle", "cpBodySetPosition",
    "cpBodyGetPosition", "cpBodyUpdatePosition", "cpShapeSetFriction",
    "cpSpaceReindexShape", "cpArrayPush", "cpSpaceSetShapeIDCounter",
    "cpBodyGetAngle", "cpBodyGetVelocity", "cpBodyGetAngularVelocity",
    "cpBodySetForce", "cpBodySetTorque", "cpSpaceEachCachedArbiter", "cpSpaceStep",
    "cpShapeSetMass", "cpShapeSetElasticity", "cpShapeGetBody",
)  # fmt: skip
#: The format of the tables ``_native.c`` reads and of its entry points (its ``ABI``): a
#: build for another is not used.
NATIVE_ABI = 14
#: ``cpArbiter.state`` values (``enum cpArbiterState``): cached, invalidated.
ARBITER_CACHED = _lib.CP_ARBITER_STATE_CACHED
ARBITER_INVALIDATED = _lib.CP_ARBITER_STATE_INVALIDATED
#: ``CP_HASH_COEF``: a pair's hash is ``a * coef ^ b * coef`` (64-bit wrap).
HASH_COEF = 3344921057


def native_layout() -> tuple[list[int], list[int]]:
    """The byte offsets (then the sizes) and function addresses ``configure`` takes.

    Raises:
        TypeError: If a field's size is not the one ``_native.c`` reads (a pymunk whose
            structs changed).
    """
    m = _mirror()
    offsets = []
    for struct, path, size in _NATIVE_FIELDS:
        ffi = m if struct.startswith("struct kl_") else _ffi
        ctype = ffi.typeof(struct)
        for name in path:
            field = dict(ctype.fields)[name]
            ctype = field.type
        if ffi.sizeof(ctype) != size:
            raise TypeError(f"{struct}.{'.'.join(path)} is {ffi.sizeof(ctype)} bytes, not {size}")
        offsets.append(ffi.offsetof(struct, *path))
    offsets += [_ffi.sizeof(struct) for struct in _NATIVE_SIZES]
    functions = [int(_ffi.cast("uintptr_t", _ffi.addressof(_lib, f))) for f in _NATIVE_FUNCTIONS]
    return offsets, functions


# -- collision handlers whose pre-solve is a C function (the friction model) -------------

#: The type of a collision handler's ``preSolveFunc``.
_PRE_SOLVE = "void(*)(cpArbiter *, cpSpace *, void *)"


def set_pre_solve(space: object, type_a: int, type_b: int, function: int, data: int) -> None:
    """Make a C function the pre-solve of a ``cpSpace *``'s handler of two collision types.

    ``function`` and ``data`` are addresses (the C helper's ``Friction.handler()``):
    Chipmunk calls ``function(arbiter, space, data)`` for each arbiter of those types in
    every step, inside ``cpSpaceStep``, where pymunk's own ``pre_solve`` would call into
    Python. The handler is created as ``Space.on_collision`` creates it (pymunk does not
    know of it: its other callbacks stay Chipmunk's do-nothing ones).
    """
    handler = _lib.cpSpaceAddCollisionHandler(space, type_a, type_b)
    handler.preSolveFunc = _ffi.cast(_PRE_SOLVE, function)
    handler.userData = _ffi.cast("void *", data)


# -- what the run-time self-test of the mirrors reads (kelab/sim/physics/_guard.py) --------

space_global_handler = _lib.cpSpaceAddGlobalCollisionHandler  # (cpSpace *) -> handler *
space_get_static_body = _lib.cpSpaceGetStaticBody  # (cpSpace *) -> cpBody *
space_add_post_step_callback = _lib.cpSpaceAddPostStepCallback  # (space, func, key, data)


def constraint_ptr(constraint: pymunk.Constraint) -> object:
    """The ``cpConstraint *`` of a pymunk Constraint."""
    return constraint._constraint


def arbiter_address(arbiter: pymunk.Arbiter) -> int:
    """The address of a pymunk Arbiter's ``cpArbiter``."""
    return address(arbiter._arbiter)


def arbiter_at(addr: int) -> object:
    """The ``cpArbiter`` at an address (pymunk's declaration: ``a``, ``b``, ``state``...)."""
    return _ffi.cast("cpArbiter *", addr)


def array_items(addr: int, most: int = 16) -> tuple[int, list[int]]:
    """A ``cpArray *``'s count and (up to ``most`` of) its elements' addresses."""
    arr = _ffi.cast("cpArray *", addr)
    return arr.num, [address(arr.arr[i]) for i in range(min(arr.num, most))]


def space_mirror(space: object) -> object:
    """A ``cpSpace *`` seen as the ``struct kl_space`` mirror (tests read its fields)."""
    return mirror(space, "struct kl_space *")


def constraint_addresses(space: object) -> np.ndarray:
    """The ``cpConstraint *`` of a ``cpSpace *``'s constraint array, in its order (uint64)."""
    arr = _ffi.cast("cpArray *", mirror(space, "struct kl_space *").constraints)
    return np.frombuffer(_ffi.buffer(arr.arr, 8 * arr.num), dtype=np.uint64).copy()


def separate_callbacks(space: pymunk.Space) -> bool:
    """Whether any collision handler of a pymunk Space has a ``separate`` callback."""
    return any(h.separate is not None for h in getattr(space, "_handlers", {}).values())


@cache
def _mirror() -> FFI:
    m = FFI()
    m.cdef(_MIRROR_CDEF)
    return m


def address(ptr: object) -> int:
    """The address a cffi pointer holds, as an int (a key that names the C object)."""
    return int(_ffi.cast("uintptr_t", ptr))


def mirror(ptr: object, struct: str) -> object:
    """``ptr`` seen as one of the mirror structs above (``"struct kl_body *"``, ...)."""
    return _mirror().cast(struct, address(ptr))


def body_bias(body: object) -> tuple[float, float, float]:
    """A ``cpBody *``'s bias velocities ``(v_bias.x, v_bias.y, w_bias)``.

    They hold the last step's position correction, which the next position update adds.
    """
    b = mirror(body, "struct kl_body *")
    return (b.v_bias.x, b.v_bias.y, b.w_bias)


def set_body_bias(body: object, vx: float, vy: float, w: float) -> None:
    """Write a ``cpBody *``'s bias velocities (see :func:`body_bias`)."""
    b = mirror(body, "struct kl_body *")
    b.v_bias.x, b.v_bias.y, b.w_bias = vx, vy, w


def constraint_impulse(con: object, ctype: str) -> tuple[float, ...]:
    """A constraint's accumulated impulse ``jAcc`` (its warm start).

    ``ctype``: its C type, a key of :data:`WARM_IMPULSES`.
    """
    struct, size = WARM_IMPULSES[ctype]
    if struct is None:
        return ()
    c = mirror(con, struct)
    return (c.j_acc.x, c.j_acc.y) if size == 2 else (c.j_acc,)


def set_constraint_impulse(con: object, ctype: str, values: tuple[float, ...]) -> None:
    """Write a constraint's accumulated impulse (see :func:`constraint_impulse`)."""
    struct, size = WARM_IMPULSES[ctype]
    if struct is None:
        return
    c = mirror(con, struct)
    if size == 2:
        c.j_acc.x, c.j_acc.y = values
    else:
        c.j_acc = values[0]


@_ffi.callback("void(cpArbiter *, void *)")
def _visit_arbiter(arb: object, data: object) -> None:
    _ffi.from_handle(data)(arb)


def each_cached_arbiter(space: object, visit: Callable[[object], None]) -> None:
    """Call ``visit(arbiter)`` with each cached ``cpArbiter *`` of a ``cpSpace *``.

    The arbiter's fields (``a``, ``b``: its ``cpShape *``; ``count``; ``contacts[i]``
    with ``hash``, ``jnAcc``, ``jtAcc``) are read and written through pymunk's ffi. An
    exception in ``visit`` stops nothing in C: it is raised after the iteration.
    """
    errors: list[BaseException] = []

    def guarded(arb: object) -> None:
        if errors:
            return
        try:
            visit(arb)
        except BaseException as exc:  # re-raised below, outside C
            errors.append(exc)

    handle = _ffi.new_handle(guarded)
    _lib.cpSpaceEachCachedArbiter(space, _visit_arbiter, handle)
    if errors:
        raise errors[0]
