"""The step engine both environments share (internal).

``EnvCore`` builds a task's World, binds the task, and runs the exact step order of
docs/rl.md on batched numpy; ``Presenter`` renders and paces according to the run mode.
``LearningEnv`` and ``DirectRLEnv`` are thin Gymnasium faces over these two.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kelab._validate import check_copies, check_int, check_number, check_seed, is_int
from kelab.rl._contract import (
    EpisodeBook,
    check_actions,
    check_reset_seed,
    check_success_rule,
    copies_text,
)
from kelab.rl._env_snapshot import RAY_SNAPSHOT_KIND, EnvRestorePlan, check_env_snapshot
from kelab.rl._seeding import pcg64_states
from kelab.rl.success import RuleContext, SuccessRule, judge
from kelab.rl.task import Task, TaskError, validate_task_class
from kelab.rl.terminations import (
    CUT_SHORT,
    TIME_LIMIT,
    TerminationValidator,
    describe_array,
)
from kelab.sim.builder import SceneBuilder
from kelab.sim.scene import Robot
from kelab.sim.snapshot import Snapshot, rng_state, set_rng_state
from kelab.sim.world import MAX_EPISODE_LOG_STEPS, MAX_LOG_STEPS, World
from kelab.timing.config import (
    MAX_DECIMATION,
    SIM_DT_RANGE,
    RunMode,
    SimulationRunConfig,
    SimulationTimingConfig,
)
from kelab.timing.pacer import SimulationPacer

if TYPE_CHECKING:
    from kelab.render.renderer import Renderer
    from kelab.render.scenery import Ground
    from kelab.rl.direct import DirectRLEnv
    from kelab.rl.env import LearningEnv

__all__ = ["RAY_SNAPSHOT_KIND", "EnvCore", "Presenter", "resolve_run_config", "resolve_timing"]

_TASK_STREAM = 0x5EED  # spawn-key tag of the task's per-copy Generators


def resolve_run_config(
    render_mode: str | None, run_config: SimulationRunConfig | None
) -> SimulationRunConfig:
    """Return the run config for a ``render_mode`` / ``run_config`` pair.

    Without a run config the mode follows ``render_mode`` (None -> HEADLESS_FAST,
    "human" -> PACED, "rgb_array" -> OFFSCREEN_FAST). An explicit run config must come
    with the render mode its mode requires.

    Raises:
        ValueError: For an unknown render mode, or a pair that does not match, saying which
            render mode the run config requires.
    """
    if run_config is None:
        return SimulationRunConfig.from_render_mode(render_mode)
    if not isinstance(run_config, SimulationRunConfig):
        raise ValueError(f"run_config must be a ke.SimulationRunConfig or None, got {run_config!r}")
    SimulationRunConfig.from_render_mode(render_mode)  # validates the render mode itself
    if run_config.render_mode != render_mode:
        raise ValueError(
            f"run_config mode {run_config.mode.name} requires render_mode="
            f"{run_config.render_mode!r}, got render_mode={render_mode!r}; pass render_mode="
            f"{run_config.render_mode!r} with it (or leave run_config=None to choose the mode "
            "from render_mode)"
        )
    return run_config


def resolve_timing(
    task: Task,
    timing: SimulationTimingConfig | None = None,
    dt: float | None = None,
    physics_steps_per_action: int | None = None,
) -> SimulationTimingConfig:
    """Return the timing an environment runs ``task`` at (both environments use this).

    Defaults are the task's own ``sim_dt``, ``decimation`` and ``episode_length_s``; an
    explicit ``timing`` replaces them (its ``episode_length_s=None`` keeps the task's), and
    ``dt`` / ``physics_steps_per_action`` override the physics step / decimation of either.

    Raises:
        ValueError: For a ``timing`` that is not a ``SimulationTimingConfig``, or a ``dt`` /
            ``physics_steps_per_action`` out of the config's ranges (named as passed).
    """
    if timing is None:
        timing = SimulationTimingConfig(
            sim_dt=task.sim_dt, decimation=task.decimation, episode_length_s=task.episode_length_s
        )
    elif not isinstance(timing, SimulationTimingConfig):
        raise ValueError(f"timing must be a ke.SimulationTimingConfig or None, got {timing!r}")
    elif timing.episode_length_s is None:
        timing = dataclasses.replace(timing, episode_length_s=task.episode_length_s)
    if dt is not None:  # checked under the caller's name, by the config's own rule
        lo, hi = SIM_DT_RANGE
        dt = check_number(
            dt, "dt", low=lo, high=hi, unit="seconds", fix="for 120 Hz physics pass dt=1/120"
        )
        timing = dataclasses.replace(timing, sim_dt=dt)
    if physics_steps_per_action is not None:
        steps = check_int(
            physics_steps_per_action,
            "physics_steps_per_action",
            low=1,
            high=MAX_DECIMATION,
            fix="it counts physics steps per environment step",
        )
        timing = dataclasses.replace(timing, decimation=steps)
    return timing


def observation_bounds(task: Task, obs_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``(low, high)`` float32 bounds of one copy's observation for its Box space.

    A task declares them with an ``observation_bounds = (low, high)`` class attribute
    (sequences of ``observation_dim`` numbers, ``-inf``/``inf`` where an entry has no real
    bound); without it every entry is unbounded.

    Raises:
        TaskError: For bounds of the wrong length, with NaN, or with low > high.
    """
    bounds = getattr(task, "observation_bounds", None)
    if bounds is None:
        return np.full(obs_dim, -np.inf, np.float32), np.full(obs_dim, np.inf, np.float32)
    name = type(task).__name__
    try:
        low, high = (np.asarray(b, dtype=np.float32).reshape(-1) for b in bounds)
    except (TypeError, ValueError):
        raise TaskError(
            f"{name}.observation_bounds must be (low, high), two sequences of numbers, got "
            f"{bounds!r}"
        ) from None
    if low.shape != (obs_dim,) or high.shape != (obs_dim,):
        raise TaskError(
            f"{name}.observation_bounds must hold observation_dim={obs_dim} numbers each, got "
            f"{low.size} and {high.size}"
        )
    if np.isnan(low).any() or np.isnan(high).any() or (low > high).any():
        raise TaskError(
            f"{name}.observation_bounds must have low <= high and no NaN (use -inf/inf for no "
            "bound)"
        )
    return low, high


def _seed_sequences(
    seed: int | Sequence[int], n: int, stream: tuple[int, ...], offset: int = 0
) -> list:
    # copy i's stream comes from its global index offset + i (RayLearningEnv's workers)
    if is_int(seed):
        base = check_seed(seed)
        return [
            np.random.SeedSequence(base, spawn_key=(*stream, i)) for i in range(offset, offset + n)
        ]
    seeds = list(seed)  # type: ignore[arg-type]
    if len(seeds) != n:
        raise ValueError(f"reset(seed=[...]) needs one seed per copy: {n}, got {len(seeds)}")
    return [np.random.SeedSequence(check_seed(s), spawn_key=(*stream, 0)) for s in seeds]


def _task_rng_sequences(seed: int | Sequence[int], n: int, offset: int = 0) -> list:
    return _seed_sequences(seed, n, (_TASK_STREAM,), offset)


def _world_rng_sequences(seed: int | Sequence[int], n: int, offset: int = 0) -> list:
    # the World seeds copy i from SeedSequence(seed).spawn(n)[i], i.e. spawn_key (i,)
    return _seed_sequences(seed, n, (), offset)


class EnvCore:
    """Builds the World of a task and runs the step order on ``num_envs`` copies.

    Args:
        task: The task (not yet bound to another environment).
        num_envs: Number of copies.
        timing: Physics step, decimation and episode length.
        env_spacing: Metres between copy origins (display only).
        seed: Seed of every per-copy Generator (world and task).
        success_rule: The rule judging finished episodes (None: the task's own, if any).
        env: The Gymnasium environment that owns this core (given to ``on_start``).
        layout: The World layout, ``"isolated"`` or ``"packed"`` (see docs/world.md).
        num_threads: Threads stepping the World's shards (results bit-identical).
        copy_offset: Global index of copy 0: copy ``i`` draws from the random streams of
            copy ``copy_offset + i`` of a larger env with the same seed (0: a lone env).
    """

    def __init__(
        self,
        task: Task,
        *,
        num_envs: int,
        timing: SimulationTimingConfig,
        env_spacing: float,
        seed: int,
        success_rule: SuccessRule | None,
        env: LearningEnv | DirectRLEnv,
        layout: str = "isolated",
        num_threads: int = 1,
        copy_offset: int = 0,
    ) -> None:
        validate_task_class(task)
        if "env" in task.__dict__:
            raise ValueError(
                f"this {type(task).__name__} instance already runs in another environment; "
                "create a new task object for each environment"
            )
        # World's own check (same words), made before the task builds its scene
        num_envs, seed, num_threads, layout = check_copies(num_envs, seed, num_threads, layout)
        env_spacing = check_number(env_spacing, "env_spacing", low=0.0, unit="metres")
        self.copy_offset = check_seed(copy_offset, "copy_offset")
        success_rule = check_success_rule(success_rule, "success")
        self.task = task
        self.num_envs = n = num_envs
        self.timing = timing
        self.obs_dim = int(task.observation_dim)
        self.act_dim = int(task.action_dim)
        self.max_episode_length = int(timing.max_episode_length)  # type: ignore[arg-type]
        self.success_rule = success_rule if success_rule is not None else task.success_rule

        builder = SceneBuilder()
        task.build(builder)
        self.scene = builder.build()
        self.world = World(
            self.scene,
            num_envs=n,
            env_spacing=env_spacing,
            seed=seed,
            num_threads=num_threads,
            layout=layout,
            # episodes up to MAX_EPISODE_LOG_STEPS physics steps are never rebased midway;
            # longer ones are, so the log stays bounded (issue #25.6)
            max_log_steps=min(
                MAX_EPISODE_LOG_STEPS,
                max(MAX_LOG_STEPS, (self.max_episode_length + 1) * timing.decimation),
            ),
        )
        self.robots = self._bind_robots()

        #: the episode counters and whether the env is in step (kelab/rl/_contract.py)
        self.book = EpisodeBook(n)
        self.episode_length_buf = self.book.episode_length_buf  # the task's reference too
        self.task_rngs = [
            np.random.default_rng(s) for s in _task_rng_sequences(seed, n, self.copy_offset)
        ]
        if self.copy_offset:  # the World seeded copies 0..n-1; give them their global streams
            for gen, seq in zip(
                self.world.rngs, _world_rng_sequences(seed, n, self.copy_offset), strict=True
            ):
                set_rng_state(gen, rng_state(np.random.default_rng(seq)))
        self.all_ids = np.arange(n, dtype=np.int64)
        self.validator = TerminationValidator(n)
        self.on_episode_end: Callable[[], None] | None = None
        """Called in a step where an episode ended, before its copy restarts: the World
        still shows the finished episode (DirectRLEnv draws its last frame there)."""
        task.__dict__.update(
            num_envs=n,
            episode_length_buf=self.episode_length_buf,
            max_episode_length=self.max_episode_length,
            step_dt=timing.step_dt,
            sim_dt=timing.sim_dt,
            decimation=timing.decimation,
            rngs=self.task_rngs,
            world=self.world,
            env=env,
            device="cpu",
        )
        task.on_start(env)

    # ------------------------------------------------------------------ set-up
    def _bind_robots(self) -> list[Robot]:
        """Bind every ke.Robot the task holds (attributes, or in lists/dicts) to its view."""
        found: list[Robot] = []

        def visit(value: Any) -> None:
            if isinstance(value, Robot):
                if value.path is not None and all(value is not r for r in found):
                    found.append(value)
            elif isinstance(value, (list, tuple)):
                for item in value:
                    if isinstance(item, Robot):
                        visit(item)
            elif isinstance(value, dict):
                for item in value.values():
                    if isinstance(item, Robot):
                        visit(item)

        for value in list(vars(self.task).values()):
            visit(value)
        for robot in found:
            robot._bind(self.world.robot(robot.path))  # type: ignore[arg-type]
        return found

    def reseed(self, seed: int | Sequence[int], ids: np.ndarray | None = None) -> None:
        """Re-seed the per-copy Generators (task and world) in place: every copy, or ``ids``.

        Copy ``i`` gets the same streams whether it is re-seeded alone or with all copies.
        """
        n, offset = self.num_envs, self.copy_offset
        sel = list(range(n)) if ids is None else ids.tolist()
        pcg = np.random.PCG64
        if is_int(seed) and all(
            type(g.bit_generator) is pcg for gens in (self.task_rngs, self.world.rngs) for g in gens
        ):  # numpy's own states, computed for all copies at once (kelab/rl/_seeding.py)
            base, at = check_seed(seed), [offset + i for i in sel]
            task = pcg64_states(base, (_TASK_STREAM,), at)
            world = pcg64_states(base, (), at)
            for i, ts, ws in zip(sel, task, world, strict=True):
                self.task_rngs[i].bit_generator.state = ts
                self.world.rngs[i].bit_generator.state = ws
            return
        task_seqs = _task_rng_sequences(seed, n, offset)
        world_seqs = _world_rng_sequences(seed, n, offset)
        for i in sel:
            set_rng_state(self.task_rngs[i], rng_state(np.random.default_rng(task_seqs[i])))
            set_rng_state(self.world.rngs[i], rng_state(np.random.default_rng(world_seqs[i])))

    @property
    def started(self) -> bool:
        """Whether every copy is in step (reset, and no step or reset raised since)."""
        return self.book.started

    # ------------------------------------------------------------------ checks
    def check_actions(self, actions: Any, single: bool = False) -> np.ndarray:
        """The task's own float32 copy of the actions, clipped to [-1, 1] (`check_actions`)."""
        return check_actions(actions, self.num_envs, self.act_dim, single)

    def _float_batch(self, value: Any, method: str, shape: tuple[int, ...]) -> np.ndarray:
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "fiub":
            raise TaskError(
                f"{type(self.task).__name__}.{method} must return a numpy float array of shape "
                f"{shape}, got {describe_array(value)}"
            )
        if value.shape != shape:
            raise TaskError(
                f"{type(self.task).__name__}.{method} must return shape {shape} (one row per "
                f"copy), got {value.shape}"
            )
        out = value.astype(np.float32)  # a new array: the task may reuse its buffer
        if not np.isfinite(out).all():  # one reduction; per-copy detail only on failure
            finite = np.isfinite(out)
            if finite.ndim > 1:
                finite = finite.all(axis=1)
            raise TaskError(
                f"{type(self.task).__name__}.{method} returned NaN or infinite values for "
                f"copies {copies_text(~finite)}"
            )
        return out

    def observe(self) -> np.ndarray:
        """Call get_observations() and check it."""
        obs = self.task.get_observations()
        return self._float_batch(obs, "get_observations()", (self.num_envs, self.obs_dim))

    # ------------------------------------------------------------------ the step order
    def reset(self, seed: int | Sequence[int] | None = None) -> np.ndarray:
        """Start a new episode in every copy: reset_idx(all), then get_observations().

        Args:
            seed: None continues every copy's streams; an int or one seed per copy
                re-seeds them (checked before anything changes: `check_reset_seed`).
        """
        seed = check_reset_seed(seed, self.num_envs)
        self.book.begin_reset(None)  # out of step until this reset completes
        if seed is not None:
            self.reseed(seed)
        self.world.reset_envs(None)
        self.task.reset_idx(self.all_ids.copy())
        obs = self.observe()
        self.book.reset_done()
        return obs

    def reset_some(self, ids: np.ndarray, seed: int | Sequence[int] | None = None) -> np.ndarray:
        """Start a new episode in the copies ``ids`` only; the others go on untouched.

        Args:
            ids: Sorted, distinct int64 copy indices (validated by the caller: `reset_ids`).
            seed: None continues the copies' streams; an int or one seed per copy re-seeds
                the listed copies exactly as a full ``reset(seed)`` would.

        Returns:
            Every copy's observation.

        Raises:
            RuntimeError: Before the first full reset, or after a failed step (the copies
                are out of step: only a full reset repairs that).
        """
        seed = check_reset_seed(seed, self.num_envs)
        self.book.begin_reset(ids)  # refused unless in step; a hook that raises: out of step
        if seed is not None:
            self.reseed(seed, ids)
        self.world.reset_envs(ids)
        self.task.reset_idx(ids.copy())
        obs = self.observe()
        self.book.reset_done()
        return obs

    def step(
        self, actions: npt.ArrayLike
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Run one environment step; finished copies restart in the same step.

        Returns:
            ``(obs, rewards, terminated, truncated, ends)``: ``ends`` is empty when no
            episode ended, else it describes the finished episodes (see ``_ends``).
        """
        self.book.check_step()
        acts = self.check_actions(actions)  # refused actions change nothing
        try:
            return self._advance(acts)
        except BaseException as exc:
            self.book.failed(exc)  # refuse to go on until reset() (or restore())
            raise

    def _advance(
        self, acts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The body of `step` after the actions were checked."""
        task, world, n = self.task, self.world, self.num_envs
        task.apply_actions(acts)
        dt = self.timing.sim_dt
        for _ in range(self.timing.decimation):
            world.step(dt)
        task.on_post_physics_step()
        names, conditions, task_truncated = self.validator(task.get_dones())
        rewards = self._float_batch(task.get_rewards(), "get_rewards()", (n,))
        obs = self.observe()
        self.book.count(rewards)
        time_up = self.episode_length_buf >= self.max_episode_length
        terminated = conditions.any(axis=0) if names else np.zeros(n, dtype=bool)
        truncated = task_truncated | time_up
        done = terminated | truncated
        ends: dict[str, Any] = {}
        if done.any():
            ends = self._ends(done, names, conditions, terminated, truncated, time_up, obs)
            ids = ends["ids"]
            if self.on_episode_end is not None:
                self.on_episode_end()
            task.reset_idx(ids.copy())
            self.book.restart(ids)
            obs = self.observe()
        return obs, rewards, terminated, truncated, ends

    def _ends(
        self,
        done: np.ndarray,
        names: tuple[str, ...],
        conditions: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        time_up: np.ndarray,
        final_obs: np.ndarray,
    ) -> dict[str, Any]:
        """Describe the episodes that ended (before their copies reset)."""
        ids = np.flatnonzero(done)
        # the reason per copy, vectorised: names[first true condition], else the limit kind
        labels = np.array([*names, TIME_LIMIT, CUT_SHORT, None], dtype=object)
        k = len(names)
        reason = np.where(time_up, k, k + 1)
        if names:
            reason = np.where(terminated, conditions.argmax(axis=0), reason)
        ended_by = labels[np.where(done, reason, k + 2)]
        ends: dict[str, Any] = {
            "ids": ids,
            "mask": done.copy(),
            "final_obs": final_obs,
            "ended_by": ended_by,
            **self.book.ended(),
            "names": names,
        }
        if self.success_rule is not None:
            ctx = RuleContext(self.num_envs, names, conditions, time_up, truncated)
            is_success, checks = judge(self.success_rule, self.task, ctx)
            ends["is_success"] = is_success
            ends["checks"] = checks
        return ends

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> Snapshot:
        """Record the world, the task's counters and state, and every Generator."""
        wsnap = self.world.snapshot()
        arrays = {f"world/{k}": v for k, v in wsnap.arrays.items()}
        arrays["env/episode_length_buf"] = self.episode_length_buf.copy()
        arrays["env/returns"] = self.book.returns.copy()
        for key, value in self.task.state_dict().items():
            arrays[f"task/{key}"] = value
        meta = {
            "world": wsnap.meta,
            "task_rngs": [rng_state(g) for g in self.task_rngs],
            "condition_names": None if self.validator.names is None else list(self.validator.names),
            "started": self.book.started,
        }
        return Snapshot(wsnap.fingerprint, wsnap.step_count, wsnap.sim_time, arrays, meta)

    def restore(self, snap: Snapshot) -> None:
        """Return to ``snap``; stepping on is bit-identical to stepping on from there.

        All or nothing: the whole snapshot is checked against this env first
        (`check_env_snapshot`; the World checks its own part), and a refused one leaves
        the env exactly as it was.

        Raises:
            ValueError: For anything but this env's snapshot, unknown or missing keys,
                and entries that do not fit (naming the entry).
        """
        plan = self._restore_plan(snap)
        undo = self.snapshot()  # put back if the task's load_state_dict raises
        self.world.restore(plan.world)  # all or nothing by itself
        try:
            self._apply(plan)
        except Exception as err:
            back = self._restore_plan(undo)
            self.world.restore(back.world)
            self._apply(back)
            raise ValueError(
                f"restore: {type(self.task).__name__}.load_state_dict() raised "
                f"{type(err).__name__}: {err}; the env is as it was before restore()"
            ) from err

    def _restore_plan(self, snap: object) -> EnvRestorePlan:
        return check_env_snapshot(
            snap,
            fingerprint=self.world.fingerprint,
            num_envs=self.num_envs,
            max_episode_length=self.max_episode_length,
            task=self.task,
            task_rngs=self.task_rngs,
        )

    def _apply(self, plan: EnvRestorePlan) -> None:
        """Set everything but the World from a checked snapshot (the task's state first)."""
        self.task.load_state_dict(dict(plan.task_state))
        self.episode_length_buf[:] = plan.episode_length_buf
        self.book.returns[:] = plan.returns
        for gen, state in zip(self.task_rngs, plan.task_rngs, strict=True):
            set_rng_state(gen, state)
        self.validator.names = plan.condition_names
        self.book.started = plan.started
        self.book.failure = None

    def close(self) -> None:
        """Release the world's threads."""
        self.world.close()


class Presenter:
    """Renders and paces an environment according to its run mode.

    PACED: draws in a window after each reset and step, then waits with the pacer until
    ``step_dt`` has elapsed (never catching up). OFFSCREEN_FAST: draws offscreen only when
    ``render()`` is called. HEADLESS_FAST: never draws.

    Args:
        run_config: The run mode.
        core: The environment core (world, task, timing).
        title: Window title.
        pacer: The pacer for PACED mode (None: a real-time ``SimulationPacer(step_dt)``).
        backend: Renderer backend, "pygame" or "gl".
    """

    def __init__(
        self,
        run_config: SimulationRunConfig,
        core: EnvCore,
        title: str,
        pacer: SimulationPacer | None = None,
        backend: str = "pygame",
    ) -> None:
        self.run_config = run_config
        self.mode = run_config.mode
        self.core = core
        self.title = title
        self.backend = backend
        self.renderer: Renderer | None = None
        self._ground: Ground | None = None
        self._final: np.ndarray | None = None  # OFFSCREEN_FAST: an ended episode's last frame
        self._rendering = False  # render() was called since the last reset
        self._error: BaseException | None = None  # raised by episode_ended, for after_step
        self.frames = 0
        if pacer is not None and not isinstance(pacer, SimulationPacer):
            raise ValueError(f"pacer must be a ke.SimulationPacer, got {pacer!r}")
        self.pacer = (
            (pacer or SimulationPacer(core.timing.step_dt)) if self.mode is RunMode.PACED else None
        )

    @property
    def draws(self) -> bool:
        """Whether this run mode ever draws (PACED and OFFSCREEN_FAST do)."""
        return self.mode is not RunMode.HEADLESS_FAST

    @property
    def window_closed(self) -> bool:
        """True once the user closed the PACED window."""
        return self.renderer is not None and self.renderer.should_close

    def before_step(self) -> None:
        """A step begins (or a snapshot is restored): a kept last frame is no longer current."""
        self._final = None

    def episode_ended(self) -> None:
        """The World still shows the episode that just ended (its copy restarts next).

        PACED draws it and waits one step, so the viewer sees how the episode ended;
        OFFSCREEN_FAST, when ``render()`` has been called since the last reset (a video
        is being recorded), draws it now and :meth:`render` returns it until the next
        step or reset (a video shows the fall, not the next episode's first state).
        Called in the middle of a step: an error here is kept and raised by
        :meth:`after_step`, once the step has finished (the env stays in step).
        """
        try:
            if self.mode is RunMode.PACED:
                self.draw()
                assert self.pacer is not None
                self.pacer.wait()
            elif self.mode is RunMode.OFFSCREEN_FAST and self._rendering:
                self.draw()
                assert self.renderer is not None
                self._final = self.renderer.read_rgb_pixels()
        except BaseException as exc:  # noqa: BLE001 - raised again by after_step
            self._error = exc

    def after_reset(self) -> None:
        """PACED: draw the first state and start the pacing schedule."""
        self._final, self._rendering, self._error = None, False, None
        if self.mode is RunMode.PACED:
            self.draw()
            assert self.pacer is not None
            self.pacer.reset()

    def after_step(self) -> None:
        """PACED: draw the latest state, then wait until ``step_dt`` has elapsed.

        Raises:
            BaseException: What drawing the ended episode's last frame raised, if it did.
        """
        error, self._error = self._error, None
        if error is not None:
            raise error
        if self.mode is RunMode.PACED:
            self.draw()
            assert self.pacer is not None
            self.pacer.wait()

    def render(self) -> np.ndarray | None:
        """OFFSCREEN_FAST: draw now and return ``(H, W, 3)`` uint8; otherwise None.

        After a step that ended the episode: that episode's last frame (drawn before its
        copy restarted), until the next step or reset.
        """
        if self.mode is RunMode.OFFSCREEN_FAST:
            self._rendering = True
            if self._final is not None:
                return self._final.copy()
            self.draw()
            return self.renderer.read_rgb_pixels()
        return None

    def draw(self) -> None:
        """Draw the world's current state (and the task's markers) into the frame.

        PACED mode without a display (``DISPLAY``/``WAYLAND_DISPLAY`` unset, e.g.
        Gymnasium's ``check_env`` on a server) warns once and draws offscreen instead.
        """
        from kelab.render.renderer import create_renderer, display_available
        from kelab.render.scenery import (
            PALETTE,
            draw_backdrop,
            draw_below_ground,
            draw_ground_marks,
            find_ground,
        )

        core, task, world = self.core, self.core.task, self.core.world
        if self.renderer is None:
            headless = self.mode is not RunMode.PACED
            if not headless and not display_available(self.backend):
                import warnings

                warnings.warn(
                    f"render_mode='human' but no display is available (DISPLAY and "
                    f"WAYLAND_DISPLAY are unset): {type(task).__name__} is drawn offscreen "
                    "with no window; run under a display or xvfb-run -a to see it",
                    RuntimeWarning,
                    stacklevel=2,
                )
                headless = True
            self.renderer = create_renderer(
                self.backend,
                size=tuple(task.render_size),
                title=self.title,
                headless=headless,
            )
            self._ground = find_ground(world.scene)
            self.renderer.canvas.outlines = True  # bodies get a darker edge
        r = self.renderer
        if r.closed:
            return
        center = task.camera_center()
        if center is None:  # follow the first robot along x
            x = 0.0
            if core.robots:
                x = float(core.robots[0].root_pose[0, 0])
            center = (x, 1.0)
        r.camera.center = center
        r.camera.zoom = float(task.render_zoom)
        origins = world.env_origins
        half = 0.5 * r.size[0] / r.camera.zoom + max(world.env_spacing, 1.0)
        ids = np.flatnonzero(np.abs(origins[:, 0] - center[0]) <= half)
        if ids.size == 0:
            ids = np.array([0])
        r.begin_frame()
        canvas = r.canvas
        draw_backdrop(canvas)
        canvas.draw_world(world, env_ids=ids)
        if self._ground is not None:
            draw_below_ground(canvas, self._ground)
            draw_ground_marks(canvas, self._ground.top)
        task.draw(canvas, ids, origins[ids])
        step = int(core.episode_length_buf[0])
        canvas.text(
            (8, 6),
            f"{type(task).__name__}   episode time {step * core.timing.step_dt:6.2f} s   "
            f"step {step}/{core.max_episode_length}",
            PALETTE["text"],
            size=14,
            screen_space=True,
        )
        r.end_frame()
        if not r.headless:
            r.poll_events()
        self.frames += 1

    def close(self) -> None:
        """Close the window or offscreen context."""
        if self.renderer is not None:
            self.renderer.close()
            self.renderer = None


class CoreBackedEnv:
    """The properties both environments (`DirectRLEnv`, `LearningEnv`) read from their core.

    Subclasses set ``_core`` (an `EnvCore`) and ``_presenter`` (a `Presenter`).
    """

    _core: EnvCore
    _presenter: Presenter

    @property
    def max_episode_length(self) -> int:
        """Env steps in an episode that reaches its time limit."""
        return self._core.max_episode_length

    @property
    def success_rule(self) -> SuccessRule | None:
        """The rule judging finished episodes (``info["is_success"]``), or None."""
        return self._core.success_rule

    @success_rule.setter
    def success_rule(self, rule: SuccessRule | None) -> None:
        self._core.success_rule = check_success_rule(rule)

    @property
    def condition_names(self) -> tuple[str, ...]:
        """The task's termination condition names, in ``get_dones()`` order.

        The task's first ``get_dones()`` fixes them: ``()`` until the first step.
        """
        return self._core.validator.names or ()

    @property
    def pacer(self) -> SimulationPacer | None:
        """The PACED pacer (None in other modes)."""
        return self._presenter.pacer

    @property
    def window_closed(self) -> bool:
        """True once the user closed the PACED window."""
        return self._presenter.window_closed
