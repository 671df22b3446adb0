"""How much memory a World of ``num_envs`` copies needs, against what it may take (internal).

:func:`check_world_memory` runs before the World allocates anything per copy: it
estimates the bytes from the scene (bodies, shapes and joints per copy times a measured
cost each, plus one pymunk space per copy in the isolated layout) and refuses, in one
line, a World that would not fit under the tightest of the process's limits: its
address-space limit (``RLIMIT_AS``, less what is mapped already), the memory limits of
its cgroup and every cgroup above it (less what each uses, not counting page cache the
kernel can drop) and the system's ``MemAvailable``. Past them a World
died in ``np.arange`` (7.45 GiB for ``num_envs=10**9``) or segfaulted in ``Space()``.
"""

from __future__ import annotations

import resource
from pathlib import Path

from kelab.errors import UserError
from kelab.sim.physics._compile import Layout
from kelab.sim.scene.scene import Scene

#: Share of the memory left that a World may be estimated to take (the rest is left for
#: buffers that grow while stepping, and for everything else).
MEMORY_SHARE = 0.8

# Bytes per copy, measured with pymunk 7.3 on CPython 3.12 (growth of the process's
# mapped memory over a World of 4000 copies after 20 steps, for a ball, a ball on a
# plane, the cartpole, the biped and the Pi robot, fitted per object; within 5 %):
#: The World's own per-copy rows, its Generator and Python lists.
COPY_BYTES = 3_500
#: One body (pymunk Body and cpBody, batch rows).
BODY_BYTES = 2_500
#: One shape (pymunk Shape and cpShape, spatial index entry).
SHAPE_BYTES = 1_200
#: One joint (its constraints, with or without Python wrappers).
JOINT_BYTES = 2_500
#: One pymunk Space (isolated layout): the cpSpace, its hash sets and index.
SPACE_BYTES = 137_000
#: The contact buffers and arbiter pools a space allocates at its first contacts
#: (isolated layout: each copy's space; Chipmunk allocates them in 32 kB blocks).
CONTACT_BYTES = 166_000
#: One spatial hash cell pointer per moving shape and shard (packed: 4 cells per shape).
CELL_BYTES = 32


class WorldMemoryError(UserError, MemoryError):
    """A World that would not fit in the memory this process may use.

    Raised before anything per copy is allocated; both a `kelab.errors.UserError` (a
    ``ValueError``: a bad ``num_envs``) and a ``MemoryError``.
    """


def per_copy_bytes(
    layout: str, bodies: int, shapes: int, joints: int, moving_shapes: int, shards: int
) -> int:
    """Estimated bytes of one copy (see the measured costs above).

    Args:
        layout: ``"isolated"`` or ``"packed"``.
        bodies: Bodies per copy (all of them: the isolated layout builds its statics too).
        shapes: Their shapes.
        joints: Joints per copy.
        moving_shapes: Shapes of moving bodies per copy (the packed hash's cells).
        shards: Thread shards (each packed shard's hash has cells for every copy).
    """
    objects = COPY_BYTES + bodies * BODY_BYTES + shapes * SHAPE_BYTES + joints * JOINT_BYTES
    if layout == "isolated":
        return objects + SPACE_BYTES + CONTACT_BYTES
    return objects + CELL_BYTES * moving_shapes * shards


def estimate(scene: Scene, layout: Layout, name: str, shards: int) -> int:
    """Estimated bytes per copy of ``scene`` in layout ``name`` (:func:`per_copy_bytes`)."""
    shapes = [len(b.spec.shapes) for b in scene.bodies]
    moving = sum(k for k, d in zip(shapes, layout.dynamic.tolist(), strict=True) if d)
    return per_copy_bytes(name, len(shapes), sum(shapes), len(layout.joint_paths), moving, shards)


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" (cgroup v2): no limit


def _reclaimable(stat_path: Path, key: str) -> int:
    """The ``key`` line of a cgroup's ``memory.stat`` (page cache it may drop), 0 if absent."""
    try:
        for line in stat_path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value) if value.strip().isdigit() else 0
    except OSError:
        pass
    return 0


def _ancestors(root: Path, rel: str) -> list[Path]:
    """``root / rel`` and every group above it up to ``root``, never outside ``root``."""
    parts: list[str] = []
    for part in rel.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return [root.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]


def _cgroup_left(
    root: Path = Path("/sys/fs/cgroup"), proc_cgroup: Path = Path("/proc/self/cgroup")
) -> int | None:
    """Bytes the process's memory cgroups may still grow by (v2 or v1), None if unlimited.

    The tightest headroom over the process's own group and every group above it (their
    limits apply to it too), each one's limit less its usage; the inactive page cache in
    that usage (``inactive_file``, v1 ``total_inactive_file``) does not count, since the
    kernel reclaims it before refusing memory.

    Args:
        root: The cgroup hierarchy's mount point.
        proc_cgroup: The process's ``/proc/self/cgroup``.
    """
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    candidates = []
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, rel = fields
        if controllers == "":  # v2
            for base in _ancestors(root, rel):
                candidates.append(
                    (base / "memory.max", base / "memory.current", base, "inactive_file")
                )
        elif "memory" in controllers.split(","):  # v1
            for base in _ancestors(root / "memory", rel):
                candidates.append(
                    (
                        base / "memory.limit_in_bytes",
                        base / "memory.usage_in_bytes",
                        base,
                        "total_inactive_file",
                    )
                )
    left = None
    for limit_path, usage_path, base, cache_key in candidates:
        limit = _read_int(limit_path)
        if limit is None or limit >= 2**60:  # v1 writes "unlimited" as ~2**63
            continue
        usage = _read_int(usage_path) or 0
        used = max(usage - _reclaimable(base / "memory.stat", cache_key), 0)
        room = max(limit - used, 0)
        left = room if left is None else min(left, room)
    return left


def _address_space_left() -> int | None:
    """Bytes the address-space limit (``RLIMIT_AS``) leaves, None if unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        mapped = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        mapped = 0
    return max(soft - mapped, 0)


def _mem_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_left() -> tuple[int, str] | None:
    """The tightest memory limit of this process, in bytes, and what it is; None: unknown.

    Of: the address-space limit less the memory mapped, the cgroup limit less its usage,
    and ``MemAvailable``.
    """
    found = [
        (left, name)
        for left, name in (
            (_address_space_left(), "left under the address-space limit (ulimit -v)"),
            (_cgroup_left(), "left under the cgroup memory limit"),
            (_mem_available(), "available (MemAvailable)"),
        )
        if left is not None
    ]
    return min(found) if found else None


def _size(n: float) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 1e3:.0f} kB"


def check_world_memory(
    num_envs: int, layout: str, per_copy: int, left: tuple[int, str] | None
) -> None:
    """Refuse ``num_envs`` copies of ``per_copy`` bytes that would not fit in ``left``.

    Args:
        num_envs: Copies asked for.
        layout: ``"isolated"`` or ``"packed"`` (for the message).
        per_copy: Estimated bytes of a copy (:func:`per_copy_bytes`).
        left: :func:`memory_left`'s answer; None (unknown) accepts everything.

    Raises:
        WorldMemoryError: Naming num_envs, the estimate, the limit and the fix.
    """
    if left is None:
        return
    room, what = left
    need = per_copy * num_envs
    allowed = int(room * MEMORY_SHARE)
    if need <= allowed:
        return
    most = allowed // per_copy
    fix = (
        "use layout='packed' (far less memory per copy) or fewer copies"
        if layout == "isolated"
        else "use fewer copies"
    )
    raise WorldMemoryError(
        f"World: num_envs must be at most {most} for layout={layout!r} in this process, got "
        f"num_envs={num_envs}: ~{per_copy / 1e3:.0f} kB per copy (estimated from the scene), "
        f"~{_size(need)} in all, and {_size(room)} is {what}, of which up to "
        f"{MEMORY_SHARE:.0%} may be used; {fix}"
    )
