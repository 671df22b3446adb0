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
"""

from __future__ import annotations

import pymunk
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

# -- shapes ------------------------------------------------------------------------------

shape_set_friction = _lib.cpShapeSetFriction  # (cpShape *, cpFloat)
shape_set_elasticity = _lib.cpShapeSetElasticity  # (cpShape *, cpFloat)

# -- spaces ------------------------------------------------------------------------------

space_step = _lib.cpSpaceStep  # (cpSpace *, cpFloat dt)
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
