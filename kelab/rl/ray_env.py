"""RayLearningEnv: the copies of a LearningEnv split across Ray actors (processes, machines).

``RayLearningEnv(task, num_envs, num_workers, seed)`` (or ``RayLearningEnv(task,
num_workers=k, config=ke.EnvConfig(...))``) is a Gymnasium ``VectorEnv`` with exactly
:class:`~kelab.rl.env.LearningEnv`'s contract and settings. Its copies live in
``num_workers`` plain Ray actors, worker ``k`` holding a ``LearningEnv`` of copies
``[a_k, b_k)`` built with ``copy_offset=a_k``
(:func:`~kelab.rl.ray_worker.worker_config`), so every per-copy random stream comes from
the global copy index and the whole is bit-identical to one ``LearningEnv`` of the same
config (docs/scale.md says when). Each ``step`` sends every worker its rows of the
actions at once and joins their replies; the learner stays in the calling process. This
module keeps ``LearningEnv``'s contract (the joined arrays and info, the episode
counters, snapshots); :mod:`kelab.rl.ray_pool` the actors, their transport (shared
memory for workers on this machine, :mod:`kelab.rl.ray_channel`; Ray for the others) and
their faults. ``ray`` is an optional dependency (``pip install kelab[ray]``), imported
only when a ``RayLearningEnv`` is made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from kelab._validate import check_bool, check_int, check_positive, is_int, must
from kelab.errors import MissingExtraError, UserError
from kelab.rl._contract import (
    EpisodeBook,
    check_actions,
    check_reset_seed,
    check_success_rule,
    reset_ids,
)
from kelab.rl._env_snapshot import RAY_SNAPSHOT_KIND, check_counters
from kelab.rl.config import EnvConfig, EnvKeywords, env_config
from kelab.rl.episode_ends import vector_info
from kelab.rl.ray_channel import EndedRows, EndsJoin, StepReply
from kelab.rl.ray_pool import WorkerDiedError, WorkerPool
from kelab.rl.ray_start import check_room, owns_local_ray, start_ray
from kelab.rl.ray_worker import split_copies
from kelab.rl.success import SuccessRule
from kelab.rl.task import Task, validate_task_class
from kelab.rl.terminations import CUT_SHORT
from kelab.sim.snapshot import Snapshot
from kelab.timing.config import SimulationTimingConfig

if TYPE_CHECKING:  # ray is optional: imported when an env is made
    from ray import ObjectRef
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

__all__ = [
    "RayLearningEnv",
    "WorkerDiedError",
    "split_copies",
]

SNAPSHOT_KIND = RAY_SNAPSHOT_KIND
"""``meta["kind"]`` of a RayLearningEnv snapshot (each worker's snapshot bytes inside)."""

_SNAPSHOT_META = ("kind", "task", "num_envs", "ranges", "restarts", "started")
_RESTART_STREAM = 0xFA17  # spawn-key tag of the seeds of copies restarted after a fault


class RayLearningEnv(gymnasium.vector.VectorEnv):
    """``num_envs`` copies of a task in ``num_workers`` Ray actors, as one vector env.

    Same contract as :class:`~kelab.rl.env.LearningEnv`: float32 observations
    ``(num_envs, observation_dim)``, float32 rewards and bool flags ``(num_envs,)``,
    same-step autoreset, and for the copies that ended ``info`` with ``final_obs``,
    ``final_info``, ``ended_by``, ``episode_return``, ``episode_length`` and, with a
    success rule, ``is_success`` and ``checks`` (each masked by ``info["_<key>"]``).
    Worker ``k`` holds copies ``[a_k, b_k)`` (:func:`split_copies`). Every setting is
    one `EnvConfig`, as for ``LearningEnv`` (``config=``, or its fields and older aliases
    as keywords, folded by the same ``kelab.rl.config.env_config``); ``env.config`` holds
    the result. Results are bit-identical to ``LearningEnv(task, config=env.config)`` in
    the isolated layout (the default), and in the packed layout wherever packed copies
    are exact (docs/scale.md).

    A worker that dies raises :class:`WorkerDiedError` naming it, its copies and its host.
    With ``restart=True`` Ray restarts it instead; its copies start fresh episodes
    (seeded from ``seed``, the worker and the restart count), reported in that step as
    truncated, ``ended_by == "cut short by the task"``, reward 0 and ``final_obs`` the
    last observation received from them; the other copies go on unchanged.

    Args:
        task: The task (an unbound instance; each worker gets a copy).
        num_envs: ``EnvConfig.num_envs``: copies in all (>= 1; None keeps the config's).
        num_workers: Ray actors (1 <= num_workers <= num_envs; required).
        seed: ``EnvConfig.seed`` (None keeps the config's), as for ``LearningEnv``.
        address: None starts a local Ray (or uses the one this process already joined);
            ``"auto"`` or ``"ray://host:10001"`` / ``"host:6379"`` joins a cluster.
        restart: Restart dead workers (True) or raise :class:`WorkerDiedError` (False).
        cpus_per_worker: CPUs Ray reserves for each actor (> 0; fractions allowed).
        start_timeout_s: Seconds to wait for every worker to start (a worker Ray cannot
            place, for want of CPUs, is an error after this long; in this process's own
            local Ray, which cannot grow, workers that do not fit are refused at once).
        ray_init: Extra keyword arguments for ``ray.init`` (e.g. ``runtime_env``) when
            this env starts or joins Ray; they override the local Ray's defaults
            (``num_cpus``, ``include_dashboard``; :func:`kelab.rl.ray_start.start_ray`).
        shared_memory: Workers on this machine step through a shared-memory channel
            (kelab/rl/ray_channel.py; Linux) instead of one Ray call per step (True), or
            every step goes through Ray's object store (False). Same results either way.
        pin_workers: Pin worker ``k``'s process to the ``k``-th CPU it may use (mod their
            number). Off by default: it did not help on a shared 2-core machine, and it
            is wrong when other envs or jobs share the node's cores (docs/scale.md).
        config: The `EnvConfig` (None: the defaults). Its ``render_mode`` must be None:
            the workers are headless (render with a ``LearningEnv`` or ``DirectRLEnv``);
            its ``copy_offset`` places the whole env, as for ``LearningEnv``.
        success: Success rule (``@ke.success``) every worker judges with; None uses
            ``task.success_rule``.
        **settings: Any other `EnvConfig` field, overriding the config's (None keeps it),
            or an older alias: the same keywords as ``LearningEnv``'s, declared once as
            `kelab.rl.config.EnvKeywords` (``layout``, ``num_threads`` (threads in each
            worker), ``timing``, ``dt``...). ``render_mode`` may only be None and
            ``run_config`` only a HEADLESS_FAST one: no worker opens a window.

    Raises:
        UserError: For out-of-range arguments.
        MissingExtraError: An ImportError, when Ray is not installed (``pip install kelab[ray]``).
        ConnectionError: For a ``host:port`` address nothing answers on.
        UserError: When this process's own local Ray (no autoscaler) has too few CPUs
            for the workers: at once, naming the CPUs needed and free.
        TimeoutError: When a Ray that can grow (one joined by address) does not place
            every worker within ``start_timeout_s``.
        Exception: An error building a worker's ``LearningEnv`` (the task's ``build``, a
            bad keyword argument), as itself, with a note naming the worker.

    Example (starts Ray: seconds; docs/scale.md runs a complete one):
        >>> import numpy as np, kelab as ke  # doctest: +SKIP
        >>> from kelab.tasks.humanoid import HumanoidTask  # doctest: +SKIP
        >>> env = ke.RayLearningEnv(HumanoidTask(), 512, num_workers=2, seed=0)  # doctest: +SKIP
        >>> obs, _ = env.reset()  # doctest: +SKIP
        >>> obs, rew, term, trunc, info = env.step(np.zeros((512, 6), np.float32))  # doctest: +SKIP
        >>> env.close()  # doctest: +SKIP
    """

    metadata: dict[str, Any] = {
        "render_modes": [],
        "render_fps": 60,
        "autoreset_mode": AutoresetMode.SAME_STEP,
    }

    def __init__(
        self,
        task: Task,
        num_envs: int | None = None,
        num_workers: int | None = None,
        seed: int | None = None,
        address: str | None = None,
        restart: bool = False,
        *,
        cpus_per_worker: float = 1.0,
        start_timeout_s: float = 300.0,
        ray_init: Mapping[str, Any] | None = None,
        shared_memory: bool = True,
        pin_workers: bool = False,
        config: EnvConfig | None = None,
        success: SuccessRule | None = None,
        **settings: Unpack[EnvKeywords],
    ) -> None:
        self.closed = True  # until the workers exist (close() is then a no-op)
        self._owns_ray = False
        self._pool: WorkerPool | None = None
        self._restarts_closed = 0  # restarts once the pool is gone
        validate_task_class(task)
        if "env" in task.__dict__:
            raise UserError(
                f"RayLearningEnv: this {type(task).__name__} instance already runs in an "
                "environment; pass a new task object"
            )
        cfg = env_config(task, config, num_envs=num_envs, seed=seed, **settings)
        if cfg.render_mode is not None:
            raise UserError(
                f"RayLearningEnv: render_mode={cfg.render_mode!r} cannot be passed to the "
                "workers' LearningEnv: the workers are headless (render_mode must be None); "
                "render with a LearningEnv or DirectRLEnv"
            )
        num_envs = cfg.num_envs
        num_workers = check_int(
            num_workers, "RayLearningEnv: num_workers", low=1, fix="say how many Ray actors"
        )
        if num_workers > num_envs:
            raise UserError(
                must(
                    "RayLearningEnv: num_workers",
                    f"<= num_envs ({num_envs})",
                    num_workers,
                    "every worker needs at least one copy",
                )
            )
        if address is not None and (not isinstance(address, str) or not address):
            raise UserError(
                must(
                    "RayLearningEnv: address",
                    "None (local Ray), 'auto' or a cluster address such as 'ray://head:10001'",
                    address,
                )
            )
        restart = check_bool(restart, "RayLearningEnv: restart")
        cpus_per_worker = check_positive(cpus_per_worker, "RayLearningEnv: cpus_per_worker")
        shared_memory = check_bool(shared_memory, "RayLearningEnv: shared_memory")
        pin_workers = check_bool(pin_workers, "RayLearningEnv: pin_workers")
        start_timeout_s = check_positive(
            start_timeout_s, "RayLearningEnv: start_timeout_s", unit="seconds"
        )
        if ray_init is not None and not isinstance(ray_init, Mapping):
            raise UserError(must("RayLearningEnv: ray_init", "a dict or None", ray_init))
        rule = check_success_rule(success, "success")
        task_rule = check_success_rule(task.success_rule, f"{type(task).__name__}.success_rule")
        if task.observation_shape is not None:  # its channel carries float vectors
            raise UserError(
                f"RayLearningEnv runs tasks whose observations are vectors; "
                f"{type(task).__name__} observes images {task.observation_shape}: run it in "
                "a ke.LearningEnv"
            )

        try:
            import ray  # the optional dependency
        except ImportError as err:
            raise MissingExtraError(
                "RayLearningEnv needs Ray: pip install 'kelab[ray]' (on every machine of the "
                "cluster)"
            ) from err

        self._ray = ray
        self._owns_ray = start_ray(ray, address, num_workers, cpus_per_worker, ray_init)

        self.task = task
        self._config = cfg
        self.num_envs = num_envs
        self.num_workers = num_workers
        self.seed_value = cfg.seed
        self.address = address
        self.restart = restart
        self.render_mode = None
        self.device = "cpu"
        self.ranges = split_copies(num_envs, num_workers)
        self._pending: list[ObjectRef | None] | None = None  # the step in flight
        try:
            # this process's own local Ray cannot grow: refuse workers it can never place
            local = (address is None and self._owns_ray) or owns_local_ray()
            check_room(ray, num_workers, cpus_per_worker, can_grow=not local)
            self._pool = WorkerPool(
                ray,
                task,
                self.ranges,
                cfg,
                rule,
                restart=restart,
                cpus_per_worker=cpus_per_worker,
                start_timeout_s=start_timeout_s,
                # a driver connected through Ray Client (ray://) is not on the workers' node
                shared_memory=shared_memory and not str(address).startswith("ray://"),
                pin_workers=pin_workers,
            )
        except BaseException:
            self.close_extras()  # the pool closed its actors; the local Ray this env started
            raise
        self._pool.cut_short = self._cut_short
        self.closed = False
        d = self._pool.described[0]
        self.single_observation_space = d.single_observation_space
        self.single_action_space = d.single_action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        # the workers' metadata (render_fps = control rate...), without rendering
        self.metadata = {**d.metadata, "render_modes": []}
        self._max_episode_length = d.max_episode_length
        self._step_dt = d.step_dt
        self.timing: SimulationTimingConfig = d.timing
        self.layout: str = d.layout
        self.fingerprint: str = d.fingerprint
        self._act_dim = int(self.single_action_space.shape[0])
        self._success_rule: SuccessRule | None = rule if rule is not None else task_rule
        #: the episode counters and whether the env is in step, kept as LearningEnv keeps
        #: them (kelab/rl/_contract.py), from the workers' joined replies
        self._book = EpisodeBook(num_envs)
        self._obs: np.ndarray | None = None  # the last observation returned
        self._condition_names: tuple[str, ...] = ()

    # ------------------------------------------------------------------ properties
    @property
    def config(self) -> EnvConfig:
        """The validated `EnvConfig` this env was made with (its timing complete).

        ``LearningEnv(task, config=env.config)`` is the one-process env it matches.
        """
        return self._config

    @property
    def max_episode_length(self) -> int:
        """Env steps in an episode that reaches its time limit."""
        return self._max_episode_length

    @property
    def step_dt(self) -> float:
        """Simulated seconds per env step."""
        return self._step_dt

    @property
    def episode_length_buf(self) -> np.ndarray:
        """Steps taken in each copy's current episode (int64 ``(num_envs,)``)."""
        return self._book.episode_length_buf

    @property
    def success_rule(self) -> SuccessRule | None:
        """The rule judging finished episodes (set on every worker when assigned)."""
        return self._success_rule

    @success_rule.setter
    def success_rule(self, rule: SuccessRule | None) -> None:
        check_success_rule(rule)
        self._call_all("set_success_rule", [(rule,)] * self.num_workers)
        self._success_rule = rule
        # a restarted worker is built with the constructor's rule: it gets this one again
        self._live_pool().after_restart["set_success_rule"] = (rule,)

    @property
    def condition_names(self) -> tuple[str, ...]:
        """The task's termination condition names, in ``get_dones()`` order.

        As ``LearningEnv.condition_names`` (``()`` until the first step): read from the
        first ended episodes' rows, else asked of the workers (each ask ends their
        shared-memory loop: a Ray call).
        """
        if not self._condition_names:
            self._condition_names = next((n for n in self._call_all("condition_names") if n), ())
        return self._condition_names

    @property
    def workers(self) -> list[dict[str, Any]]:
        """Each worker's copies ``[first, end)``, host, process id and step transport.

        ``steps_through`` is ``"shared memory"`` (a worker on this machine) or ``"ray"``
        (Ray's object store: a worker on another machine, or ``shared_memory=False``).
        """
        pool = self._live_pool()
        return [
            {
                "worker": k,
                "copies": r,
                "host": h,
                "pid": p,
                "steps_through": "shared memory" if c is not None else "ray",
            }
            for k, (r, h, p, c) in enumerate(
                zip(self.ranges, pool.hosts, pool.pids, pool.channels, strict=True)
            )
        ]

    @property
    def restarts(self) -> int:
        """Worker restarts seen so far (``restart=True``)."""
        return self._restarts_closed if self._pool is None else self._pool.restarts

    def worker_cpu_seconds(self) -> list[float]:
        """CPU seconds each worker process has used so far (``time.process_time``).

        The difference over a run, divided by its steps, is a worker's compute per step:
        with the wall time per step it shows whether the workers or the round trip (or a
        busy machine) set the pace (benchmarks/scale_throughput.py uses it).
        """
        self._drain()
        return [float(x) for x in self._call_all("cpu_seconds")]

    # ------------------------------------------------------------------ plumbing
    def _live_pool(self) -> WorkerPool:
        if self.closed or self._pool is None:
            raise RuntimeError("this RayLearningEnv is closed; create a new one")
        return self._pool

    def _call_all(
        self, method: str, args: Sequence[tuple] | None = None, sets_state: bool = False
    ) -> list[Any]:
        """Call ``method`` on every worker at once (:meth:`WorkerPool.call_all`)."""
        pool = self._live_pool()
        if self._pending is not None:
            raise RuntimeError(f"a step is in flight: call step_wait() before {method}")
        return pool.call_all(method, args, sets_state=sets_state)

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self,
        *,
        seed: int | Sequence[int] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new episode in every copy, or only in some: ``LearningEnv.reset`` exactly.

        Args:
            seed: None continues every copy's random stream; an int re-seeds all copies
                (copy ``i`` from ``(seed, i)``, ``i`` the global index); a list gives one
                seed per copy. With a partial reset only the reset copies are re-seeded,
                exactly as a full reset would re-seed them.
            options: None, or a dict; ``{"env_ids": [i, ...]}`` (distinct ints in
                ``[0, num_envs)``) or ``{"reset_mask": bool array (num_envs,)}`` reset
                only those copies (in whichever workers hold them; the others go on
                untouched, and their observations are returned as they are).

        Returns:
            ``(obs, {})``.

        Raises:
            UserError: For bad options or seeds, in ``LearningEnv``'s words; nothing
                changes then.
            RuntimeError: For a partial reset before the first reset or after a failed
                step, or while the env is closed.
        """
        n = self.num_envs
        ids = reset_ids(options, n)
        seed = check_reset_seed(seed, n)
        self._live_pool()
        self._book.begin_reset(ids)  # refuses a partial reset out of step
        self._drain()
        if is_int(seed):
            super().reset(seed=seed)
        seeds = [seed[a:b] if isinstance(seed, list) else seed for a, b in self.ranges]
        if ids is None:
            parts = self._call_all("reset", [(s, None) for s in seeds], sets_state=True)
        else:  # each worker resets its own copies of ids (local indices); the others observe
            local = [(ids[(ids >= a) & (ids < b)] - a).tolist() for a, b in self.ranges]
            parts = self._call_all("reset", list(zip(seeds, local, strict=True)))
        self._book.reset_done()
        self._obs = np.concatenate(parts, axis=0)
        return self._obs, {}

    def step_async(self, actions: npt.ArrayLike) -> None:
        """Send every worker its rows of ``actions`` and return at once.

        The learner can work while the workers step; :meth:`step_wait` collects the step.
        ``step(a)`` is ``step_async(a)`` followed by ``step_wait()``.

        Raises:
            UserError: For actions of the wrong shape or with NaN/inf.
            RuntimeError: Before ``reset()``, or with a step already in flight.
        """
        if self.closed:
            raise RuntimeError("this RayLearningEnv is closed; create a new one")
        if self._pending is not None:
            raise RuntimeError("a step is in flight: call step_wait() before the next step")
        self._book.check_step()
        a = check_actions(actions, self.num_envs, self._act_dim)  # LearningEnv's check
        self._pending = self._live_pool().send(a)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Collect the step sent by :meth:`step_async` (see the class docstring).

        Raises:
            WorkerDiedError: A worker died and ``restart`` is False.
            TaskError: When the task returns invalid dones, rewards or observations.
        """
        if self._pending is None:
            raise RuntimeError("no step in flight: call step_async(actions) first")
        pending, self._pending = self._pending, None
        n = self.num_envs
        obs = np.empty((n, self.single_observation_space.shape[0]), dtype=np.float32)
        rewards = np.empty(n, dtype=np.float32)
        terminated = np.empty(n, dtype=bool)
        truncated = np.empty(n, dtype=bool)
        join = EndsJoin(n, obs.shape[1])

        def put(k: int, part: StepReply) -> None:  # one worker's results into the step's
            lo, hi = self.ranges[k]
            obs[lo:hi] = part.obs
            rewards[lo:hi] = part.rewards
            terminated[lo:hi] = part.terminated
            truncated[lo:hi] = part.truncated
            if part.ends:
                join.add(lo, part.ends)

        try:
            self._live_pool().collect(pending, put)
        except BaseException as exc:
            self._book.failed(exc)  # as LearningEnv: refuse to go on until reset()
            raise
        ends = join.ends()
        self._book.count(rewards)
        if ends is not None:
            self._book.restart(ends.ids)
            self._condition_names = self._condition_names or ends.names
        self._obs = obs
        info = vector_info(ends, n)
        return obs, rewards, terminated, truncated, info

    def step(
        self, actions: npt.ArrayLike
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Advance every copy by one env step, all workers at once (see the class docstring).

        Raises:
            UserError: For actions of the wrong shape or with NaN/inf.
            WorkerDiedError: A worker died and ``restart`` is False.
            TaskError: When the task returns invalid dones, rewards or observations.
        """
        self.step_async(actions)
        return self.step_wait()

    def _drain(self) -> None:
        """Wait for a step in flight (its results are dropped)."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._live_pool().drain(pending)

    def _cut_short(self, k: int) -> StepReply | None:
        """The reply of worker ``k``'s copies after Ray restarted it (None before a reset).

        Resets its copies (fresh episodes, seeded from the seed, the worker and the restart
        count) and reports their episodes cut short.
        """
        if self._obs is None:
            return None
        pool = self._live_pool()
        a, b = self.ranges[k]
        n = b - a
        seq = np.random.SeedSequence(self.seed_value, spawn_key=(_RESTART_STREAM, pool.restarts, k))
        seeds = [int(s) for s in seq.generate_state(n, dtype=np.uint32)]
        obs = pool.retry(k, "reset", (seeds, None))
        # the step never completed: the episode ends where the last reply left it
        judged = self._success_rule is not None
        ends = EndedRows(
            ids=np.arange(n),
            final_obs=self._obs[a:b].copy(),
            ended_by=(CUT_SHORT,) * n,
            counters=self._book.ended().rows(a, b),
            names=self._condition_names,
            is_success=np.zeros(n, dtype=bool) if judged else None,
            checks={} if judged else None,
        )
        return StepReply(
            obs,
            np.zeros(n, dtype=np.float32),
            np.zeros(n, dtype=bool),
            np.ones(n, dtype=bool),
            ends,
        )

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> Snapshot:
        """Every worker's snapshot, in one pickle-free :class:`~kelab.sim.snapshot.Snapshot`.

        ``arrays["worker/<k>"]`` holds worker ``k``'s ``Snapshot.to_bytes()`` (uint8);
        ``meta`` the copy ranges and the task. ``env.restore(snap)`` then the same actions
        reproduce the same results bit for bit.

        Raises:
            RuntimeError: While a restarted worker's fresh episodes are still to be
                reported by the next step (``restart=True``): step or reset first.
        """
        self._drain()
        blobs = self._call_all("snapshot")
        held = self._live_pool().held
        if held:
            restarted = sorted(held)
            raise RuntimeError(
                f"Ray workers {restarted} died and were restarted; their copies start fresh "
                "episodes, which the next step reports as cut short: call step() (or reset()) "
                "before snapshot()"
            )
        first = Snapshot.from_bytes(blobs[0])
        arrays = {
            f"worker/{k:04d}": np.frombuffer(blob, dtype=np.uint8) for k, blob in enumerate(blobs)
        }
        arrays["driver/episode_length_buf"] = self._book.episode_length_buf.copy()
        arrays["driver/returns"] = self._book.returns.copy()
        if self._obs is not None:
            arrays["driver/obs"] = self._obs
        meta = {
            "kind": SNAPSHOT_KIND,
            "task": type(self.task).__name__,
            "num_envs": self.num_envs,
            "ranges": [list(r) for r in self.ranges],
            "restarts": self.restarts,
            "started": self._book.started,
        }
        return Snapshot(self.fingerprint, first.step_count, first.sim_time, arrays, meta)

    def restore(self, snap: Snapshot) -> None:
        """Return every worker to the moment ``snap`` was taken (see :meth:`snapshot`).

        All or nothing: the driver's part and every worker's bytes are checked first, and
        if a worker still refuses its part, every worker is put back as it was.

        Raises:
            UserError: For a snapshot not from ``RayLearningEnv.snapshot()``, of another
                scene, taken with other copy ranges (num_envs / num_workers), with unknown
                or missing keys or entries that do not fit (naming the entry).
        """
        if not isinstance(snap, Snapshot) or snap.meta.get("kind") != SNAPSHOT_KIND:
            raise UserError(
                "restore() needs a snapshot from RayLearningEnv.snapshot(), got "
                f"{snap!r:.80}; a LearningEnv snapshot restores into a LearningEnv"
            )
        snap.check_fingerprint(self.fingerprint)
        blobs, lengths, returns, obs, started = self._check_snapshot(snap)
        self._drain()
        undo = self._call_all("snapshot")  # every worker as it is now
        try:
            self._call_all("restore", [(b,) for b in blobs], sets_state=True)
        except ValueError:  # a worker refused its part: put every worker back
            self._call_all("restore", [(b,) for b in undo], sets_state=True)
            raise
        self._book.episode_length_buf[:] = lengths
        self._book.returns[:] = returns
        self._obs = obs
        self._book.started = started
        self._book.failure = None

    def _check_snapshot(
        self, snap: Snapshot
    ) -> tuple[list[bytes], np.ndarray, np.ndarray, np.ndarray | None, bool]:
        """The driver's part of ``snap`` checked against this env, each worker's bytes read."""
        fix = "restore a snapshot this env's snapshot() made, unchanged"
        meta, arrays = snap.meta, snap.arrays
        workers = [f"worker/{k:04d}" for k in range(self.num_workers)]
        known = {*workers, "driver/episode_length_buf", "driver/returns", "driver/obs"}
        unknown = sorted(set(arrays) - known) + [
            f"meta {k}" for k in sorted(set(meta) - set(_SNAPSHOT_META))
        ]
        if unknown:
            raise UserError(
                f"a RayLearningEnv snapshot must hold only the arrays {sorted(known)} and the "
                f"meta keys {list(_SNAPSHOT_META)}, got unknown keys {unknown}; {fix}"
            )
        raw = meta.get("ranges")
        try:
            ranges = [(int(a), int(b)) for a, b in raw]  # type: ignore[union-attr]
        except (TypeError, ValueError):
            ranges = raw
        if ranges != self.ranges:
            raise UserError(
                f"snapshot copy ranges must match this env's {self.ranges}, got {ranges}; "
                "restore into a RayLearningEnv with the same num_envs and num_workers"
            )
        missing = [w for w in workers if w not in arrays]
        if missing:
            raise UserError(f"snapshot arrays {missing} must be present, got none; {fix}")
        blobs = []
        for w in workers:
            blob = arrays[w]
            if blob.dtype != np.uint8 or blob.ndim != 1:
                raise UserError(f"snapshot array {w!r} must be a worker's snapshot bytes; {fix}")
            blobs.append(blob.tobytes())
            Snapshot.from_bytes(blobs[-1])  # corrupt bytes: ValueError, before any worker
        lengths, returns = check_counters(arrays, "driver/", self.num_envs, self.max_episode_length)
        obs = arrays.get("driver/obs")
        shape = (self.num_envs, self.single_observation_space.shape[0])
        if obs is not None and (obs.dtype != np.float32 or obs.shape != shape):
            raise UserError(
                f"snapshot array 'driver/obs' must be float32 {shape}, got {obs.dtype} "
                f"{obs.shape}; {fix}"
            )
        started = meta.get("started", obs is not None)
        if not isinstance(started, bool):
            raise UserError(f"snapshot meta 'started' must be True or False, got {started!r}")
        return blobs, lengths, returns, None if obs is None else np.array(obs), started

    # ------------------------------------------------------------------ closing
    def close_extras(self, **kwargs: Any) -> None:
        """Stop the workers (and the local Ray this env started)."""
        ray = getattr(self, "_ray", None)
        pool, self._pool = getattr(self, "_pool", None), None
        if pool is not None:
            self._restarts_closed = pool.restarts
            pool.close()
        if self._owns_ray and ray is not None and ray.is_initialized():
            ray.shutdown()
        self._owns_ray = False

    def __repr__(self) -> str:
        return (
            f"RayLearningEnv({type(self.task).__name__}, num_envs={self.num_envs}, "
            f"num_workers={self.num_workers}, layout={getattr(self, 'layout', '?')!r})"
        )
