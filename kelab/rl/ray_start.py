"""Starting or joining Ray for a RayLearningEnv, and waiting for its workers to be placed.

Kept apart from :mod:`kelab.rl.ray_env` (the env's stepping and faults): what happens
before the first worker answers. ``ray`` is passed in (an optional dependency).

Whether to wait for workers Ray cannot place yet: a cluster that can grow (an autoscaler
may add nodes, or an operator may join one) is waited for up to ``start_timeout_s``; this
process's own local Ray (``ray.init()`` without an address, here or by the env) has no
autoscaler and no other machine joins it, so workers that do not fit its CPUs are refused
at once (:func:`check_room`). The rule: a Ray is this process's own when its GCS server is
a child process of this one (:func:`owns_local_ray`); every other Ray can grow.
"""

from __future__ import annotations

import math
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from kelab.errors import UserError

__all__ = ["check_room", "owns_local_ray", "probe_address", "start_ray", "wait_for_workers"]

PROBE_TIMEOUT_S = 10.0
"""How long a ``host:port`` address may take to accept a connection before it is refused."""
PLACEMENT_NOTICE_S = 10.0
"""After this long without every worker placed, say so on stderr (the wait goes on)."""


def probe_address(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Refuse a ``host:port`` Ray address that nothing answers on.

    ``ray.init`` retries an unreachable head for minutes, printing only its own
    connection warnings; a TCP connection tells at once. ``"auto"``, ``"local"`` and
    ``ray://`` addresses are left to Ray (each fails fast or says why).

    Raises:
        ConnectionError: When no connection is accepted within ``timeout_s``.
    """
    if address in ("auto", "local") or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return  # not host:port: Ray says what it makes of it
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            return
    except OSError as err:
        raise ConnectionError(
            f"RayLearningEnv: address must be a reachable Ray head (host:port of its GCS, "
            f"'auto' or 'ray://host:10001'), got {address!r}: {err.strerror or err}; start "
            "one with `ray start --head` there, or pass address=None for a local Ray"
        ) from None


def start_ray(
    ray: ModuleType,
    address: str | None,
    num_workers: int,
    cpus_per_worker: float,
    ray_init: Mapping[str, Any] | None,
) -> bool:
    """Start a local Ray (``address=None``) or join a cluster, unless Ray already runs.

    A local Ray gets ``num_cpus = max(os.cpu_count(), workers x cpus_per_worker)`` (so
    the workers always fit) and no dashboard; ``ray_init`` keys override those and are
    passed to ``ray.init`` either way.

    Returns:
        True when this call started (or joined) Ray: the env shuts it down on close.
    """
    if ray.is_initialized():
        return False
    options = dict(ray_init or {})
    if address is None:
        cpus = max(os.cpu_count() or 1, math.ceil(num_workers * cpus_per_worker))
        ray.init(**{"num_cpus": cpus, "include_dashboard": False, **options})
    else:
        probe_address(address)
        ray.init(**{"address": address, **options})
    return True


def wait_for_workers(
    ray: ModuleType, refs: Sequence[Any], timeout_s: float, needs: str
) -> list[int]:
    """Wait until every ref is ready or ``timeout_s`` passed; the indices still waiting.

    After :data:`PLACEMENT_NOTICE_S` without all of them, one line on stderr says what is
    awaited (``needs``), so a cluster short of CPUs is not a silent wait.
    """
    first = min(PLACEMENT_NOTICE_S, timeout_s)
    _, waiting = ray.wait(list(refs), num_returns=len(refs), timeout=first)
    if waiting and timeout_s > first:
        late = [k for k, r in enumerate(refs) if r in waiting]
        print(
            f"kelab: waiting for Ray to start workers {late} ({needs}; up to {timeout_s:g} s "
            "in all: start_timeout_s)",
            file=sys.stderr,
            flush=True,
        )
        _, waiting = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s - first)
    return [k for k, r in enumerate(refs) if r in waiting]


def owns_local_ray() -> bool:
    """Whether the Ray this process uses is its own local one (``ray.init()`` started it).

    Ray started locally by ``ray.init()`` runs its GCS server as a child process of the
    caller; a Ray joined by address (``ray start --head`` elsewhere, a cluster with an
    autoscaler) does not. Reads ``/proc`` (Linux); elsewhere False (unknown: the caller
    then keeps waiting, as for a cluster that can grow).
    """
    me = str(os.getpid()).encode()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # the process ended meanwhile
            continue
        head, _, tail = stat.rpartition(b")")  # "pid (comm) state ppid ..."
        fields = tail.split()
        if len(fields) > 1 and fields[1] == me and head.endswith(b"(gcs_server"):
            return True
    return False


def check_room(ray: ModuleType, num_workers: int, cpus_per_worker: float, can_grow: bool) -> None:
    """Refuse workers a Ray that cannot grow could never place (see the module docstring).

    Each alive node holds ``floor(node CPUs / cpus_per_worker)`` workers; when a Ray that
    cannot grow holds fewer than ``num_workers`` in all, waiting would never end. A Ray
    that can grow, or one whose CPUs are only busy now (other actors may end), is left
    to :func:`wait_for_workers`.

    Raises:
        UserError: Naming the CPUs needed, the Ray's CPUs and free CPUs, and what to do.
    """
    if can_grow:
        return
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpus = [float(n.get("Resources", {}).get("CPU", 0.0)) for n in nodes]
    fit = sum(math.floor(c / cpus_per_worker + 1e-9) for c in cpus)
    if fit >= num_workers:
        return
    total = float(ray.cluster_resources().get("CPU", 0.0))
    free = float(ray.available_resources().get("CPU", 0.0))
    need = num_workers * cpus_per_worker
    most = max(cpus, default=0.0)
    hint = (
        f"lower num_workers or cpus_per_worker (cpus_per_worker="
        f"{math.floor(100 * most / num_workers) / 100:g} fits)"
        if len(cpus) == 1 and most >= num_workers / 100
        else "lower num_workers or cpus_per_worker"
    )
    raise UserError(
        f"RayLearningEnv: num_workers x cpus_per_worker must fit this process's local Ray "
        f"({total:g} CPUs, {free:g} free; it has no autoscaler and cannot grow), got "
        f"{num_workers} x {cpus_per_worker:g} = {need:g} CPUs; {hint}, start Ray with more "
        f"CPUs (ray.init(num_cpus={math.ceil(need)}), or ray_init={{'num_cpus': "
        f"{math.ceil(need)}}} when this env starts it), or join a cluster with address=..."
    )
