"""The body of a RayLearningEnv worker: one LearningEnv of its share of the copies.

:class:`EnvWorker` is what ``RayLearningEnv`` turns into a Ray actor: its methods are the
calls the driver makes through Ray (describe, reset, step, snapshot...) and
:meth:`EnvWorker.serve`, the loop that steps through a same-machine
:class:`~kelab.rl.ray_channel.StepChannel` instead of one Ray call per step.
:func:`split_copies` says which copies each worker holds.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np

from kelab.rl.config import EnvConfig
from kelab.rl.ray_channel import STEP, StepReply, WorkerChannel, compact_ends
from kelab.rl.success import SuccessRule
from kelab.rl.task import Task
from kelab.sim.snapshot import Snapshot
from kelab.timing.config import SimulationTimingConfig

if TYPE_CHECKING:
    from kelab.rl.env import LearningEnv

__all__ = [
    "EnvWorker",
    "FreshWorkerError",
    "WorkerDescription",
    "batch_scheduling",
    "node_id",
    "split_copies",
    "worker_config",
]


@dataclass(frozen=True)
class WorkerDescription:
    """What :meth:`EnvWorker.describe` tells the driver about a worker and its env."""

    single_observation_space: gymnasium.spaces.Box
    """The worker's ``LearningEnv.single_observation_space``."""
    single_action_space: gymnasium.spaces.Box
    """The worker's ``LearningEnv.single_action_space``."""
    metadata: dict[str, Any]
    """The worker's env metadata (``render_fps`` is the control rate)."""
    max_episode_length: int
    """Env steps in an episode that reaches its time limit."""
    step_dt: float
    """Simulated seconds per env step."""
    timing: SimulationTimingConfig
    """The complete timing the worker's env runs at."""
    layout: str
    """The worker's World layout."""
    fingerprint: str
    """The scene's fingerprint."""
    has_rule: bool
    """Whether the worker's env judges finished episodes with a success rule."""
    host: str
    """Host name and address of the node the worker runs on (for messages)."""
    pid: int
    """The worker's process id."""
    node_id: str
    """The Ray node the worker runs on (``""`` outside Ray)."""


def split_copies(num_envs: int, num_workers: int) -> list[tuple[int, int]]:
    """Split copies ``[0, num_envs)`` into ``num_workers`` consecutive ranges.

    The first ``num_envs % num_workers`` workers hold one copy more than the others.

    Args:
        num_envs: Copies in all (>= 1).
        num_workers: Workers (1 <= num_workers <= num_envs).

    Returns:
        ``[(first, end), ...]``, one half-open range per worker.

    Example:
        >>> split_copies(10, 3)
        [(0, 4), (4, 7), (7, 10)]
    """
    base, extra = divmod(num_envs, num_workers)
    ranges, first = [], 0
    for k in range(num_workers):
        end = first + base + (1 if k < extra else 0)
        ranges.append((first, end))
        first = end
    return ranges


def worker_config(config: EnvConfig, copies: tuple[int, int]) -> EnvConfig:
    """The `EnvConfig` of the worker holding copies ``[first, end)`` of an env's ``config``.

    The same settings, with ``num_envs = end - first`` and ``copy_offset`` moved on by
    ``first``: the worker's copy ``j`` draws the streams of the env's copy ``first + j``
    (of global copy ``config.copy_offset + first + j``), so the workers together are
    bit-identical to one ``LearningEnv(task, config=config)``.

    Args:
        config: The whole env's config.
        copies: ``(first, end)``: the worker's half-open range of the env's copies.

    Returns:
        The worker's config.

    Example:
        >>> import kelab as ke
        >>> cfg = worker_config(ke.EnvConfig(num_envs=10, seed=3), (4, 7))
        >>> cfg.num_envs, cfg.copy_offset, cfg.seed
        (3, 4, 3)
    """
    first, end = copies
    return dataclasses.replace(config, num_envs=end - first, copy_offset=config.copy_offset + first)


def batch_scheduling() -> bool:
    """Mark the calling thread a batch job for the OS scheduler (Linux ``SCHED_BATCH``).

    A worker's stepping thread is CPU-bound and never interactive. Under the default
    policy, each worker the driver wakes for a step could preempt the driver before it
    had woken the next one (the OS favours a thread that has just slept), so the workers
    started a step up to ~0.5 ms apart, and the driver sent its last command ~1 ms late;
    a batch thread does not preempt on waking, so every worker starts within ~50 us.
    Its share of the CPU is unchanged. Threads it starts afterwards inherit the policy.
    Needs no privilege. Only a thread under the default policy is changed: one its
    operator started otherwise (``chrt --idle`` to use spare cycles, a real-time policy)
    keeps it; a no-op (False) there and where the OS has no such policy.

    Returns:
        True when the thread is now a batch thread.
    """
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None:
        return False
    try:
        now = os.sched_getscheduler(0)
        if now == policy:
            return True
        if now != os.SCHED_OTHER:  # the operator's choice
            return False
        os.sched_setscheduler(0, policy, os.sched_param(0))
    except OSError:  # a sandbox that forbids it: stay as we were
        return False
    return True


def node_id() -> str:
    """The Ray node this process runs on ("" outside Ray)."""
    try:
        import ray

        if not ray.is_initialized():  # get_runtime_context() would start a local Ray
            return ""
        return ray.get_runtime_context().get_node_id() or ""
    except Exception:  # noqa: BLE001 - no node: no same-machine channel
        return ""


class FreshWorkerError(RuntimeError):
    """A call that needs the worker's copies in step reached a freshly built actor.

    Ray restarts a dead actor (``restart=True``) by building it again; when that happens
    before the driver's next call, the call reaches copies that were never reset. The
    driver's pool treats this error as the death it is (a restart it had not seen).
    """


class EnvWorker:
    """The body of one Ray actor: ``LearningEnv(task, config=config, success=success)``.

    Args:
        task: The task (the actor's own copy).
        config: The worker's config (`worker_config`: its copies, its ``copy_offset``).
        success: The success rule, or None for the task's own.
        cpu: Pin the process to the ``cpu % n``-th of the ``n`` CPUs it may use (None:
            leave it to the OS).
    """

    def __init__(
        self,
        task: Task,
        config: EnvConfig,
        success: SuccessRule | None = None,
        cpu: int | None = None,
    ) -> None:
        from kelab.rl.env import LearningEnv

        batch_scheduling()  # before the env, whose threads (num_threads > 1) inherit it
        if cpu is not None and hasattr(os, "sched_setaffinity"):
            allowed = sorted(os.sched_getaffinity(0))
            os.sched_setaffinity(0, {allowed[cpu % len(allowed)]})
        # an error building the env is kept and raised by every call (describe() is the
        # driver's first): Ray then hands the driver the exception itself (its type, its
        # message), where an error raised here would kill the actor and reach the driver
        # as text. A restarted actor builds again, and may fail again: the same holds.
        self._env: LearningEnv | None = None
        self._build_error: Exception | None = None
        #: Set by a full reset or a restore: until then this actor's copies are not in
        #: step (a freshly built actor: the first one, or one Ray restarted).
        self._in_step = False
        try:
            self._env = LearningEnv(task, config=config, success=success)
        except Exception as err:  # noqa: BLE001 - raised by every call (env)
            self._build_error = err

    def _stepping_env(self, doing: str) -> LearningEnv:
        """The env, for a call that needs its copies in step.

        Raises:
            FreshWorkerError: This actor was built since the last full reset or restore
                (Ray restarted it, unseen by the driver).
        """
        env = self.env
        if not self._in_step:
            raise FreshWorkerError(
                f"{doing} reached a freshly built Ray worker (pid {os.getpid()}): Ray "
                "restarted it since its copies were last reset"
            )
        return env

    @property
    def env(self) -> LearningEnv:
        """The worker's LearningEnv.

        Raises:
            Exception: Whatever building it raised (the task's ``build``, a bad keyword
                argument...), as that exception.
        """
        if self._env is None:
            assert self._build_error is not None
            raise self._build_error
        return self._env

    def describe(self) -> WorkerDescription:
        """What the driver needs: spaces, metadata, timing, layout, host, pid, node.

        Raises:
            Exception: Whatever building the worker's LearningEnv raised, as itself.
        """
        env = self.env
        try:
            import ray

            address = ray.util.get_node_ip_address()
        except Exception:  # noqa: BLE001 - only for messages
            address = "?"
        return WorkerDescription(
            single_observation_space=env.single_observation_space,
            single_action_space=env.single_action_space,
            metadata=dict(env.metadata),
            max_episode_length=int(env.max_episode_length),
            step_dt=float(env.step_dt),
            timing=env.timing,
            layout=env.world.layout,
            fingerprint=env.world.fingerprint,
            has_rule=env.success_rule is not None,
            host=f"{socket.gethostname()} ({address})",
            pid=os.getpid(),
            node_id=node_id(),
        )

    def reset(self, seed: int | list[int] | None, env_ids: list[int] | None) -> np.ndarray:
        """``LearningEnv.reset``'s observations: of a full reset, or a partial one.

        Args:
            seed: The seed (this worker's part of a per-copy list), checked by the driver.
            env_ids: None resets every copy; a list resets those (local) copies only, and
                an empty one none: this worker's copies are then only observed, as one
                LearningEnv's partial reset observes the copies it leaves alone.
        """
        if env_ids is None:
            obs = self.env.reset(seed=seed)[0]
            self._in_step = True
            return obs
        env = self._stepping_env("a partial reset")
        if not env_ids:
            return env.observations()
        return env.reset(seed=seed, options={"env_ids": env_ids})[0]

    def step(self, actions: np.ndarray) -> StepReply:
        """One step through Ray: the arrays and the ended rows (:func:`compact_ends`)."""
        env = self._stepping_env("a step")
        obs, rewards, terminated, truncated, info = env.step(actions)
        ended = compact_ends(info, env.condition_names)
        return StepReply(obs, rewards, terminated, truncated, ended)

    def serve(self, address: str) -> None:
        """Step through a same-machine :class:`StepChannel` until the driver says stop.

        Each command: read the actions from shared memory, step, write the results there
        and reply with the ended rows. A step that raises ends the loop with that error
        (the driver reads it from this call's result, as for ``step``).

        Args:
            address: The channel's socket (``StepChannel.address``).
        """
        env = self._stepping_env("a step")
        batch_scheduling()  # the thread that steps (Ray may run calls on another thread)
        channel = WorkerChannel(
            address,
            env.num_envs,
            env.single_observation_space.shape[0],
            env.single_action_space.shape[0],
        )
        arrays = channel.arrays
        try:
            while channel.wait() == STEP:
                try:  # a copy: the task may keep the actions it was given
                    obs, rewards, terminated, truncated, info = env.step(arrays.actions.copy())
                except BaseException:
                    channel.failed()
                    raise
                arrays.obs[...] = obs
                arrays.rewards[...] = rewards
                arrays.terminated[...] = terminated
                arrays.truncated[...] = truncated
                channel.reply(compact_ends(info, env.condition_names))
        finally:
            channel.close()

    def snapshot(self) -> bytes:
        """The env's snapshot as bytes."""
        return self._stepping_env("a snapshot").snapshot().to_bytes()

    def restore(self, data: bytes) -> None:
        """Restore the env from :meth:`snapshot`'s bytes."""
        self.env.restore(Snapshot.from_bytes(data))
        self._in_step = True

    def set_success_rule(self, rule: SuccessRule | None) -> None:
        """Set the env's success rule."""
        self.env.success_rule = rule

    def condition_names(self) -> tuple[str, ...]:
        """The env's condition names (for evaluation)."""
        return self.env.condition_names

    def cpu_seconds(self) -> float:
        """CPU seconds this process has used."""
        return time.process_time()

    def close(self) -> None:
        """Close the env (if it was built)."""
        if self._env is not None:
            self._env.close()
