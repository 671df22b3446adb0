"""The guard of Chipmunk's mirrored structs: checked at run time before anything uses them.

The C helper (``_native.c``: packed resets in place, body reads and writes) and the warm
starts over a rebase (_warm.py) read and write Chipmunk's fields at byte offsets that
_chipmunk.py computes from its mirrors of Chipmunk's structs. Those mirrors were verified
against some pymunk versions (``_chipmunk.PYMUNK_VERSIONS``, also pyproject.toml's
bound); a pymunk installed past that bound, or built with other struct layouts, would
have them write into the wrong fields.

So before the helper is configured or a layout offers warm rebases, :func:`structs_hold`
checks once per process: pymunk's version, then a self-test (:func:`self_test`) on
probes of its own, which sets every field the helper and the warm starts use through
pymunk's public API and reads it through the mirrors; only once a field's reads agree is
it written through the mirror and read back through pymunk's getters, and pointer fields
are followed only after the fields before them were found in place. On any mismatch one
``RuntimeWarning`` says what differs, and the callers take pymunk's public path: no C
helper (pymunk.batch and Chipmunk's own remove and add calls, the same results, slower)
and cold rebases (``World.warm_rebases`` False). Nothing is written through an offset
that may be wrong.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Callable
from functools import cache

import numpy as np
import pymunk

from kelab.sim.physics import _chipmunk as cp

#: The self-test's probe step (s); a power of two, so every expected value is exact.
_DT = 2.0**-6


def version_verified(version: str) -> bool:
    """Whether a pymunk ``version`` string (``"7.3.1"``) lies in ``PYMUNK_VERSIONS``."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        return False
    low, high = cp.PYMUNK_VERSIONS
    return low <= (int(match[1]), int(match[2])) < high


@cache
def structs_hold() -> bool:
    """Whether the mirrored structs hold for the pymunk loaded (checked once, warned once).

    False (after one ``RuntimeWarning`` saying why) where pymunk's version is not one
    verified or :func:`self_test` finds a field elsewhere: the callers then take
    pymunk's public path (see the module docstring).
    """
    if not version_verified(pymunk.version):
        low, high = (".".join(map(str, v)) for v in cp.PYMUNK_VERSIONS)
        found = f"pymunk {pymunk.version} is not in [{low}, {high}), the versions verified"
    else:
        found = self_test()
    if found is None:
        return True
    warnings.warn(
        f"kelab: Chipmunk's structs do not hold as kelab/sim/physics/_chipmunk.py mirrors "
        f"them ({found}); using pymunk's public path: no C helper (slower packed steps and "
        "resets) and cold rebases, the same results otherwise",
        RuntimeWarning,
        stacklevel=3,
    )
    return False


@cache
def native_module() -> object | None:
    """The configured C helper of the packed layout, or None where it is not built or off.

    ``kelab/sim/physics/_native.c``: packed resets in place, a shard's body reads and
    force and state writes. ``KELAB_NO_NATIVE=1`` turns it off, and so does a pymunk
    whose structs do not hold (:func:`structs_hold`, warned), a build for another table
    format or one that fails its own self-test (warned): the World then reads and writes
    through pymunk.batch and rebuilds copies with Chipmunk's remove and add calls (the
    same results, slower).
    """
    if os.environ.get("KELAB_NO_NATIVE", "") not in ("", "0"):
        return None
    try:
        from kelab.sim.physics import _native  # type: ignore[attr-defined]
    except ImportError:  # built without a C compiler: the rebuild path
        return None
    if not structs_hold():  # warned: nothing is written through the mirrors' offsets
        return None
    if getattr(_native, "ABI", None) != cp.NATIVE_ABI:
        return _decline(
            f"it was built for table format {getattr(_native, 'ABI', None)}, this kelab "
            f"needs {cp.NATIVE_ABI}"
        )
    try:
        offsets, functions = cp.native_layout()
    except TypeError as err:  # a pymunk whose structs changed: the pymunk path
        return _decline(f"it does not fit this pymunk's structs ({err})")
    _native.configure(
        np.asarray(offsets, dtype=np.int64).tobytes(),
        np.asarray(functions, dtype=np.uint64).tobytes(),
        cp.HASH_COEF,
        cp.ARBITER_CACHED,
        cp.ARBITER_INVALIDATED,
    )
    found = helper_self_test(_native)
    if found is not None:
        return _decline(f"it failed its self-test: {found}")
    return _native


def _decline(why: str) -> None:
    warnings.warn(
        f"kelab: the C helper kelab/sim/physics/_native is not used ({why}); using the "
        "slower pymunk path (rebuild it: pip install -e . or python setup.py build_ext "
        "--inplace)",
        RuntimeWarning,
        stacklevel=3,
    )


# -- the self-test ------------------------------------------------------------------------

#: One check: what is read, what it reads, what pymunk has.
Check = tuple[str, object, object]


def _differ(*checks: Check) -> str | None:
    """The first check whose reading differs from pymunk's, said; None where all agree."""
    for what, got, want in checks:
        if got != want:
            return f"{what} reads {got!r} where pymunk has {want!r}"
    return None


def _first(*stages: Callable[[], str | None]) -> str | None:
    """The first finding of ``stages``, run in order (each relies on those before it)."""
    for stage in stages:
        found = stage()
        if found is not None:
            return found
    return None


def self_test() -> str | None:
    """Check every mirrored field the C helper and the warm starts use; None: all hold.

    Else what differs, the first finding. See the module docstring: reads before writes,
    pointers followed only after the fields before them were found.
    """
    space = pymunk.Space()
    space.iterations, space.gravity, space.damping = 7, (0.5, -9.75), 0.875
    space.idle_speed_threshold, space.sleep_time_threshold = 0.125, 3.5
    space.collision_slop, space.collision_bias, space.collision_persistence = 0.0625, 0.25, 2
    ground = pymunk.Segment(space.static_body, (-5.0, 0.0), (5.0, 0.0), 0.0)
    body = pymunk.Body(2.0, 3.0)
    body.center_of_gravity = (0.125, -0.25)
    body.position, body.angle = (0.5, 0.4), 0.375
    body.velocity, body.angular_velocity = (0.75, -1.25), 1.5
    body.force, body.torque = (2.5, -3.5), 4.5
    space.add(ground, body, pymunk.Circle(body, 0.5))
    b = cp.mirror(cp.body_ptr(body), "struct kl_body *")
    sp = cp.mirror(cp.space_ptr(space), "struct kl_space *")
    t = b.transform
    return _first(
        lambda: _differ(
            ("cpBody m, i", (b.m, b.i), (body.mass, body.moment)),
            ("cpBody cog", (b.cog.x, b.cog.y), tuple(body.center_of_gravity)),
            # the centre of gravity in the world: set with the position at angle 0
            ("cpBody p", (b.p.x, b.p.y), (0.125 + 0.5, -0.25 + 0.4)),
            ("cpBody v", (b.v.x, b.v.y), tuple(body.velocity)),
            ("cpBody f", (b.f.x, b.f.y), tuple(body.force)),
            ("cpBody a, w, t", (b.a, b.w, b.t), (0.375, 1.5, 4.5)),
            ("cpBody transform", (t.a + t.tx, t.b + t.ty), tuple(body.local_to_world((1, 0)))),
            ("cpSpace iterations", sp.iterations, 7),
            ("cpSpace gravity", (sp.gravity.x, sp.gravity.y), (0.5, -9.75)),
            ("cpSpace damping", sp.damping, 0.875),
            (
                "cpSpace thresholds",
                (sp.idle_speed_threshold, sp.sleep_time_threshold),
                (0.125, 3.5),
            ),
            (
                "cpSpace collision_slop, collision_bias",
                (sp.collision_slop, sp.collision_bias),
                (0.0625, 0.25),
            ),
            ("cpSpace collision_persistence", sp.collision_persistence, 2),
            ("cpSpace locked", sp.locked, 0),
        ),
        lambda: _space_ends(space),
        lambda: _contact(space, body, sp, b),
        _constraints,
        lambda: _body_writes(body, b),
    )


def _space_ends(space: pymunk.Space) -> str | None:
    """Where Chipmunk's own pointers into a ``cpSpace`` put its later fields.

    Its global collision handler (the mirror's ``global_type_a``) and, past
    ``postStepCallbacks`` and the ``staticBody`` pointer, the static body it embeds.
    """
    ptr, offsetof = cp.space_ptr(space), cp.mirror_ffi().offsetof
    at = cp.address(ptr)
    handler = cp.address(cp.space_global_handler(ptr)) - at
    static = cp.address(cp.space_get_static_body(ptr)) - at
    return _differ(
        ("cpSpace globalHandler's offset", offsetof("struct kl_space", "global_type_a"), handler),
        (
            "cpSpace _staticBody's offset",
            offsetof("struct kl_space", "post_step_callbacks") + 16,
            static,
        ),
    )


def _contact(space: pymunk.Space, body: pymunk.Body, sp: object, b: object) -> str | None:
    """One step with the circle sunk into the ground, held by a joint.

    Then the space's arrays and cached-arbiter set, the body's arbiter list and bias
    velocities, and the state of the pair's arbiter once separated.
    """
    joint = pymunk.PivotJoint(space.static_body, body, (0.5, 0.45))
    space.add(joint)
    body.position, body.angle, body.center_of_gravity = (0.5, 0.45), 0.0, (0.0, 0.0)
    inside: list[tuple[int, int]] = []

    def post_solve(arbiter: pymunk.Arbiter, space: pymunk.Space, data: object) -> None:
        if not inside:  # the space is locked here; a post-step callback is queued
            ptr = cp.space_ptr(space)
            cp.space_add_post_step_callback(ptr, cp.NULL, ptr, cp.NULL)
            inside.append((sp.locked, cp.array_items(sp.post_step_callbacks)[0]))

    space.on_collision(post_solve=post_solve)
    space.step(_DT)
    arbs: list[int] = []
    body.each_arbiter(lambda arb: arbs.append(cp.arbiter_address(arb)))
    if len(arbs) != 1:
        return f"the self-test's probe touches {len(arbs)} shapes, not 1"
    arb = arbs[0]
    body_at, joint_at = cp.address(cp.body_ptr(body)), cp.address(cp.constraint_ptr(joint))
    found = _differ(
        ("cpSpace locked, post_step_callbacks (in a callback)", inside, [(1, 1)]),
        ("cpSpace curr_dt", sp.curr_dt, space.current_time_step),
    )
    if found is not None:  # the pointers below are followed only past this point
        return found
    cached = cp.mirror(sp.cached_arbiters, "struct kl_hash_set *")
    arrays = (  # one pointer followed at a time, in struct order
        ("dynamic_bodies", lambda: cp.array_items(sp.dynamic_bodies), (1, [body_at])),
        ("roused_bodies", lambda: cp.array_items(sp.roused_bodies)[0], 0),
        ("constraints", lambda: cp.array_items(sp.constraints), (1, [joint_at])),
        ("arbiters", lambda: cp.array_items(sp.arbiters), (1, [arb])),
        ("cached_arbiters entries", lambda: cached.entries, 1),
        ("post_step_callbacks", lambda: cp.array_items(sp.post_step_callbacks)[0], 0),
    )
    for name, read, want in arrays:
        found = _differ((f"cpSpace {name}", read(), want))
        if found is not None:
            return found
    return _first(
        lambda: _differ(("cpBody arbiter_list", b.arbiter_list, arb)),
        lambda: _differ(("the cached arbiter's hash set bin", _bin_of(cached, arb), arb)),
        lambda: _bias(body, b),
        lambda: _separated(space, body, joint, arb),
    )


def _bin_of(cached: object, arb: int) -> int:
    """The arbiter in the hash set bin where ``_native.c`` looks for ``arb`` (0: none)."""
    a = cp.arbiter_at(arb)
    wrap = (1 << 64) - 1
    key = ((cp.address(a.a) * cp.HASH_COEF) & wrap) ^ ((cp.address(a.b) * cp.HASH_COEF) & wrap)
    m = cp.mirror_ffi()
    node = m.cast("struct kl_hash_bin **", cached.table)[key % cached.size]
    for _ in range(64):  # a chain of a few bins
        if node == m.NULL:
            return 0
        if node.elt == arb:
            return arb
        node = m.cast("struct kl_hash_bin *", node.next)
    return 0


def _bias(body: pymunk.Body, b: object) -> str | None:
    """The bias velocities the solve left (the circle was sunk).

    A position update moves the body by them, then clears them.
    """
    vx, vy, w = b.v_bias.x, b.v_bias.y, b.w_bias
    if not vy > 0.0:
        return f"cpBody v_bias reads ({vx!r}, {vy!r}) after a solve that pushed the body up"
    x, y, a = body.position.x, body.position.y, body.angle
    body.velocity, body.angular_velocity = (0.0, 0.0), 0.0
    cp.body_update_position(cp.body_ptr(body), _DT)
    moved = (body.position.x, body.position.y, body.angle)
    return _differ(
        ("cpBody v_bias, w_bias (moved by)", moved, (x + vx * _DT, y + vy * _DT, a + w * _DT)),
        ("cpBody v_bias, w_bias (after)", (b.v_bias.x, b.v_bias.y, b.w_bias), (0.0, 0.0, 0.0)),
    )


def _separated(space: pymunk.Space, body: pymunk.Body, joint: object, arb: int) -> str | None:
    """Lifted off the ground, the pair's arbiter is cached with the state ``_native.c`` tests.

    (``collision_persistence`` 2 keeps it a step.)
    """
    space.remove(joint)
    body.position = (0.5, 3.0)
    space.step(_DT)
    return _differ(("cpArbiter state (separated)", cp.arbiter_at(arb).state, cp.ARBITER_CACHED))


def _constraints() -> str | None:
    """Each mirrored joint type, loaded by a step: its fields, then its impulse ``j_acc``.

    The impulse is read against pymunk's, then written and read back.
    """
    for ctype, make, fields in _JOINTS:
        space = pymunk.Space()
        body = pymunk.Body(2.0, 3.0)
        body.position, body.angular_velocity = (0.0, 5.0), 30.0  # something to hold back
        joint = make(space.static_body, body)
        joint.max_force, joint.error_bias, joint.max_bias = 1e9, 0.5, 20.0
        space.add(body, joint)
        space.step(_DT)
        m = cp.mirror(cp.constraint_ptr(joint), cp.CONSTRAINT_MIRRORS[ctype])
        h = m.constraint
        found = _differ(
            (
                f"{ctype} head",
                (h.max_force, h.error_bias, h.max_bias, h.collide_bodies),
                (1e9, 0.5, 20.0, 1),
            ),
            *(
                (f"{ctype} {mine}", _value(getattr(m, mine)), _value(getattr(joint, theirs)))
                for mine, theirs in fields
            ),
        ) or _impulse(ctype, m, joint)
        space.remove(body, joint)
        if found is not None:
            return found
    return None


def _value(v: object) -> object:
    """A float, or a vector's (x, y)."""
    return (v.x, v.y) if hasattr(v, "x") else v


def _impulse(ctype: str, m: object, joint: pymunk.Constraint) -> str | None:
    """``j_acc`` is what pymunk reports as the joint's impulse; written, it is reported."""
    vector = not isinstance(m.j_acc, float)

    def reported(j: object) -> float:  # each joint type's getImpulse
        if vector:
            return math.sqrt(j.x * j.x + j.y * j.y)  # type: ignore[attr-defined]
        return j if ctype == "cpDampedSpring *" else abs(j)  # type: ignore[return-value]

    if not joint.impulse != 0.0:
        return f"the self-test's {ctype} carries no impulse after a step"
    found = _differ((f"{ctype} j_acc", reported(m.j_acc), joint.impulse))
    if found is None:
        if vector:
            m.j_acc.x, m.j_acc.y = 3.0, 4.0
        else:
            m.j_acc = -2.5
        want = 5.0 if vector else (-2.5 if ctype == "cpDampedSpring *" else 2.5)
        found = _differ((f"{ctype} j_acc (written)", joint.impulse, want))
    return found


#: How the self-test makes a joint (between the ground and a body).
Make = Callable[[pymunk.Body, pymunk.Body], pymunk.Constraint]
#: Per mirrored joint type: how to make one, and its mirror fields with pymunk's names.
_JOINTS: tuple[tuple[str, Make, tuple[tuple[str, str], ...]], ...] = (
    ("cpPivotJoint *", lambda a, b: pymunk.PivotJoint(a, b, (0.25, 5.5), (0.0, 0.5)),
     (("anchor_a", "anchor_a"), ("anchor_b", "anchor_b"))),
    ("cpGrooveJoint *", lambda a, b: pymunk.GrooveJoint(a, b, (-1, 5.5), (1, 5.25), (0, 0.5)),
     (("grv_a", "groove_a"), ("grv_b", "groove_b"), ("anchor_b", "anchor_b"))),
    ("cpGearJoint *", lambda a, b: pymunk.GearJoint(a, b, 0.25, 1.5),
     (("phase", "phase"), ("ratio", "ratio"))),
    ("cpRotaryLimitJoint *", lambda a, b: pymunk.RotaryLimitJoint(a, b, -0.125, 0.0625),
     (("min", "min"), ("max", "max"))),
    ("cpDampedSpring *", lambda a, b: pymunk.DampedSpring(a, b, (0, 6), (0.5, 0), 0.75, 40, 1.5),
     (("anchor_a", "anchor_a"), ("anchor_b", "anchor_b"), ("rest_length", "rest_length"),
      ("stiffness", "stiffness"), ("damping", "damping"))),
)  # fmt: skip


def _body_writes(body: pymunk.Body, b: object) -> str | None:
    """Write a body's fields through the mirror (each one read above), then read pymunk's."""
    b.v.x, b.v.y, b.w = -0.5, 0.25, -2.0
    b.f.x, b.f.y, b.t = 1.0, 2.0, 3.0
    b.a = 0.625
    return _differ(
        ("cpBody v (written)", tuple(body.velocity), (-0.5, 0.25)),
        (
            "cpBody w, a, t (written)",
            (body.angular_velocity, body.angle, body.torque),
            (-2.0, 0.625, 3.0),
        ),
        ("cpBody f (written)", tuple(body.force), (1.0, 2.0)),
    )


def helper_self_test(module: object) -> str | None:
    """The configured C helper reads and writes a probe body as pymunk's getters see it."""
    body = pymunk.Body(2.0, 3.0)
    body.position, body.angle = (1.5, -0.5), 0.25
    body.velocity, body.angular_velocity = (0.75, 0.5), -1.0
    out = np.zeros((1, 6))
    addrs = np.array([cp.address(cp.body_ptr(body))], dtype=np.uint64)
    module.read_rows(addrs, out, np.zeros(1, np.int64), np.array([1.0]))
    want = (body.position.x - 1.0, body.position.y, 0.25, 0.75, 0.5, -1.0)
    found = _differ(("read_rows", tuple(out[0].tolist()), want))
    if found is None:
        module.write_forces(addrs, np.array([1.25, -2.0, 0.5]), True)
        found = _differ(("write_forces", (*body.force, body.torque), (1.25, -2.0, 0.5)))
    if found is None:
        module.write_bodies(addrs, np.array([0.5, 2.0, 3.0, -0.25, 0.125, 0.375]))
        got = (body.angle, *body.position, *body.velocity, body.angular_velocity)
        found = _differ(("write_bodies", got, (0.5, 2.0, 3.0, -0.25, 0.125, 0.375)))
    if found is None:
        module.write_velocities(addrs, np.array([-0.5, 1.25, 2.0]))
        got = (*body.velocity, body.angular_velocity)
        found = _differ(("write_velocities", got, (-0.5, 1.25, 2.0)))
    return found or _shapes_probe(module) or _rows_probe(module) or _friction_probe(module)


def _shapes_probe(module: object) -> str | None:
    """The helper's shape setters (``write_shapes``) against pymunk's property setters.

    Two bodies of two shapes each in a space (Chipmunk adds up a body's mass from the
    shapes it holds there): pymunk's setters on one, the helper on the other, the same
    bodies after; and whether each mass write moved its body's position (at this pose the
    first one does, by a rounding, the second not), as seen through pymunk, both in
    ``moved`` and in the count each call returns (0 without ``moved``): the mass writer
    (_params.py) takes a count of 0 for "no copy moved", so a build of a ``write_shapes``
    that returns no count (an older source under the same table format) is declined.
    """
    space = pymunk.Space()
    made = []
    for _ in range(2):
        body = pymunk.Body()
        box = pymunk.Poly.create_box(body, (1.0, 0.5))
        ball = pymunk.Circle(body, 0.25, (0.5, 0.0))
        space.add(body, box, ball)
        box.mass = ball.mass = 1.0
        body.position, body.angle = (0.3, -0.7), 1.0
        made.append((body, box, ball))
    (b1, box1, ball1), (b2, box2, ball2) = made
    box1.mass, ball1.mass, box1.friction, ball1.elasticity = 1.5, 0.75, 0.625, 0.375
    addrs = np.array([cp.address(cp.shape_ptr(s)) for s in (box2, ball2)], dtype=np.uint64)
    moved, seen, counts = np.zeros(2, dtype=np.uint8), [], []
    for k, m in enumerate((1.5, 0.75)):
        before = tuple(b2.position)
        counts.append(module.write_shapes(0, addrs[k : k + 1], np.array([m]), moved[k : k + 1]))
        seen.append(int(tuple(b2.position) != before))
    counts.append(module.write_shapes(1, addrs[:1], np.array([0.625])))
    counts.append(module.write_shapes(2, addrs[1:], np.array([0.375])))
    return _differ(
        ("write_shapes (mass)", (b2.mass, b2.moment, *b2.center_of_gravity, *b2.position),
         (b1.mass, b1.moment, *b1.center_of_gravity, *b1.position)),
        ("write_shapes (moved)", moved.tolist(), seen),
        ("write_shapes (count moved)", counts, [*seen, 0, 0]),
        ("write_shapes (friction, elasticity)", (box2.friction, ball2.elasticity),
         (0.625, 0.375)),
    )  # fmt: skip


def _rows_probe(module: object) -> str | None:
    """The helper's ``write_rows`` (shapes from a table by row) and ``within`` (bounds).

    A table of two rows with a 0 (no shape) in each, its rows taken in reverse order:
    each shape gets the value of its row and column, the 0 columns none. ``within`` on
    rows in and out of bounds, with NaN and with a column that may not exceed another.
    A build without them (an older source under the same table format) is declined.
    """
    if not (hasattr(module, "write_rows") and hasattr(module, "within")):
        return "it has no write_rows or within (an older build of this table format)"
    body = pymunk.Body(1.0, 1.0)
    box, ball = pymunk.Poly.create_box(body, (1.0, 0.5)), pymunk.Circle(body, 0.25)
    grid = np.array(
        [[cp.address(cp.shape_ptr(box)), 0], [0, cp.address(cp.shape_ptr(ball))]], np.uint64
    )
    values = np.array([[9.0, 0.375], [0.625, 9.0]])
    count = module.write_rows(1, grid, np.array([1, 0], np.int64), values)
    low, high, above = np.zeros(2), np.full(2, 2.0), np.array([-1, 0], np.int64)
    seen = [
        module.within(np.array([[1.0, 0.5], [2.0, 2.0]]), low, high, above),
        module.within(np.array([[1.0, 1.5]]), low, high, above),
        module.within(np.array([[1.0, np.nan]]), low, high),
        module.within(np.array([[1.0, 2.5]]), low, high),
    ]
    return _differ(
        ("write_rows (friction)", (box.friction, ball.friction, count), (0.625, 0.375, 0)),
        ("within", seen, [True, False, False, False]),
    )


def _friction_probe(module: object) -> str | None:
    """The helper's friction model (``Friction``) on a probe, against its rules by hand.

    A box sliding on a static ground: its regime turns to sliding, its shape gets the
    sliding value. A box riding along on it: their arbiter gets the static product (no
    relative motion); a ball sliding across it: the dynamic product; restitutions the
    larger of each pair.
    """
    space = pymunk.Space()
    space.gravity = (0.0, -10.0)
    ground = pymunk.Segment(space.static_body, (-50.0, 0.0), (50.0, 0.0), 0.0)
    box, rider, ball = pymunk.Body(), pymunk.Body(), pymunk.Body()
    shapes = [
        pymunk.Poly.create_box(box, (1.0, 0.5)),
        pymunk.Poly.create_box(rider, (0.5, 0.5)),
        pymunk.Circle(ball, 0.25),
    ]
    for s in shapes:
        s.mass, s.collision_type = 1.0, 1
    box.position, rider.position, ball.position = (0.0, 0.249), (-0.2, 0.748), (0.3, 0.748)
    box.velocity = rider.velocity = (2.0, 0.0)
    ball.velocity = (-1.0, 0.0)
    space.add(ground, box, rider, ball, *shapes)
    # rows: ground 0 (main static), box 1 (regime chosen), rider 2, ball 3; one copy
    codes = np.array([2, 1, 0, 0], dtype=np.int64)
    coef = np.zeros((8, 5))
    coef[:4] = [[1.0, 1.0, 0.0, 1.0, 1.0], [0.5, 0.25, 0.125, 0.75, 0.375],
                [0.625, 0.5, 0.25, 0.0, 0.0], [0.875, 0.375, 0.5, 0.0, 0.0]]  # fmt: skip
    stick = np.ones(4, dtype=bool)
    bodies = [space.static_body, box, rider, ball]
    keys = np.array([cp.address(cp.body_ptr(x)) for x in bodies], dtype=np.uint64)
    order = np.argsort(keys)
    starts = np.array([0, 0, 1, 1, 1], dtype=np.int64)
    model = module.Friction(
        keys[order], np.arange(4, dtype=np.int64)[order], coef, codes, np.zeros(8),
        np.zeros(1), stick, starts, np.array([cp.address(cp.shape_ptr(shapes[0]))], np.uint64),
        0.01, 0.02, 0.01 * 0.01, False,
    )  # fmt: skip
    function, data = model.handler()
    cp.set_pre_solve(cp.space_ptr(space), 1, 1, function, data)
    space.step(_DT)
    model.update(np.array([cp.address(cp.space_ptr(space))], np.uint64), np.zeros(1, np.int64))
    pairs = {}

    def seen(arb: object) -> None:
        a, b = cp.address(arb.body_a), cp.address(arb.body_b)
        pairs[frozenset((a, b))] = (arb.u, arb.e)

    cp.each_cached_arbiter(cp.space_ptr(space), seen)
    at = {x: cp.address(cp.body_ptr(x)) for x in (box, rider, ball)}
    return _differ(
        ("Friction.update (regime)", (bool(stick[1]), shapes[0].friction), (False, 0.375)),
        ("the pre-solve (riding)", pairs.get(frozenset((at[box], at[rider]))), (0.5 * 0.625, 0.25)),
        ("the pre-solve (sliding)", pairs.get(frozenset((at[box], at[ball]))), (0.25 * 0.375, 0.5)),
    )
