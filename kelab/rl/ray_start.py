"""Starting or joining Ray for a RayLearningEnv, and waiting for its workers to be placed.

Kept apart from :mod:`kelab.rl.ray_env` (the env's stepping and faults): what happens
before the first worker answers. ``ray`` is passed in (an optional dependency).
"""

from __future__ import annotations

import math
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

__all__ = ["probe_address", "start_ray", "wait_for_workers"]

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
