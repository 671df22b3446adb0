"""EnvCore: the step engine both environments share (internal).

``EnvCore`` builds a task's World from an `EnvConfig`, binds the task, and runs the exact
step order of docs/rl.md on batched numpy; what ended in a step is an `EpisodeEnds`
record (kelab/rl/episode_ends.py). Rendering and pacing are the Presenter's
(_presenter.py), seeding the seeding module's (_seeding.py), the config's resolution
config.py's. ``LearningEnv`` and ``DirectRLEnv`` are thin Gymnasium faces over these.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kelab.rl._contract import (
    EpisodeBook,
    check_actions,
    check_reset_seed,
    check_success_rule,
    copies_text,
)
from kelab.rl._env_snapshot import EnvRestorePlan, check_env_snapshot
from kelab.rl._seeding import place_world_streams, reseed, task_generators
from kelab.rl._spaces import image_batch
from kelab.rl.episode_ends import EpisodeEnds
from kelab.rl.errors import TaskError, describe_array
from kelab.rl.randomization import Randomizer, declared
from kelab.rl.success import RuleContext, SuccessRule, judge
from kelab.rl.task import Task, TaskEnv, validate_task_class
from kelab.rl.terminations import CUT_SHORT, TIME_LIMIT, TerminationValidator
from kelab.sim.scene import Robot
from kelab.sim.scene.builder import SceneBuilder
from kelab.sim.snapshot import Snapshot, rng_from_state, rng_state, set_rng_state
from kelab.sim.world import MAX_EPISODE_LOG_STEPS, MAX_LOG_STEPS, World

if TYPE_CHECKING:
    from kelab.rl.config import EnvConfig

__all__ = ["EnvCore"]


class EnvCore:
    """Builds the World of a task and runs the step order on ``num_envs`` copies.

    Args:
        task: The task (not yet bound to another environment).
        config: The environment's validated config, its ``timing`` complete
            (`kelab.rl.config.env_config`): copies, seed, layout, threads, spacing and
            ``copy_offset`` (copy ``i`` draws from the random streams of copy
            ``copy_offset + i`` of a larger env with the same seed).
        success_rule: The rule judging finished episodes (None: the task's own, if any).
        env: The Gymnasium environment that owns this core (given to ``on_start``).
    """

    def __init__(
        self,
        task: Task,
        config: EnvConfig,
        *,
        success_rule: SuccessRule | None,
        env: TaskEnv,
    ) -> None:
        validate_task_class(task)
        terms = declared(task)  # the domain randomization, refused before anything is built
        if "env" in task.__dict__:
            raise ValueError(
                f"this {type(task).__name__} instance already runs in another environment; "
                "create a new task object for each environment"
            )
        timing = config.timing
        if timing is None or timing.episode_length_s is None:
            raise ValueError("EnvCore needs a config whose timing is complete (env_config)")
        success_rule = check_success_rule(success_rule, "success")
        # the task's own, refused here rather than as a TypeError in an episode's last step
        task_rule = check_success_rule(task.success_rule, f"{type(task).__name__}.success_rule")
        n, seed = config.num_envs, config.seed
        self.copy_offset = config.copy_offset
        self.task = task
        self.num_envs = n
        self.timing = timing
        self.obs_dim = int(task.observation_dim)
        self.act_dim = int(task.action_dim)
        self.max_episode_length = int(timing.max_episode_length)  # type: ignore[arg-type]
        self.success_rule = success_rule if success_rule is not None else task_rule

        builder = SceneBuilder()
        task.build(builder)
        self.scene = builder.build()
        self.world = World(
            self.scene,
            num_envs=n,
            env_spacing=config.env_spacing,
            seed=seed,
            num_threads=config.num_threads,
            layout=config.layout,
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
        self.task_rngs = task_generators(seed, n, self.copy_offset)
        if self.copy_offset:  # the World seeded copies 0..n-1; give them their global streams
            place_world_streams(self.world.rngs, seed, self.copy_offset)
        self.all_ids = np.arange(n, dtype=np.int64)
        self.closed = False  # close() was called: reset, step and restore are refused
        self.validator = TerminationValidator(n)
        # what _ends names each reason by, kept while the condition names hold
        self._label_names: tuple[str, ...] | None = None
        self._labels = np.array([TIME_LIMIT, CUT_SHORT, None], dtype=object)
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
        #: The task's domain randomization bound to the World (None: it declares none).
        self.randomizer = (
            Randomizer(terms, self.world, self.task_rngs, timing.step_dt) if terms else None
        )

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
            robot.bind_view(self.world.robot(robot.path))  # type: ignore[arg-type]
        return found

    def reseed(self, seed: int | Sequence[int], ids: np.ndarray | None = None) -> None:
        """Re-seed the per-copy Generators (task and world) in place: every copy, or ``ids``.

        Copy ``i`` gets the same streams whether it is re-seeded alone or with all copies
        (kelab/rl/_seeding.py).
        """
        sel = None if ids is None else ids.tolist()
        reseed(self.task_rngs, self.world.rngs, seed, self.copy_offset, sel)
        if self.randomizer is not None:  # startup values follow the seed
            self.randomizer.reseeded(ids)

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
        # per-copy detail only on failure (a float32 sum would be one pass, but a sum of
        # finite values may overflow, with a RuntimeWarning); count_nonzero is .all()'s
        # answer without the ufunc reduction (#40: ~0.9 us of ~3.3 at 256 x 17)
        if np.count_nonzero(np.isfinite(out)) != out.size:
            finite = np.isfinite(out)
            if finite.ndim > 1:
                finite = finite.all(axis=1)
            raise TaskError(
                f"{type(self.task).__name__}.{method} returned NaN or infinite values for "
                f"copies {copies_text(~finite)}"
            )
        return out

    def observe(self) -> np.ndarray:
        """Call get_observations() and check it (an image task's: `image_batch`)."""
        obs = self.task.get_observations()
        if self.task.observation_shape is not None:
            return image_batch(self.task, obs, self.num_envs)
        return self._float_batch(obs, "get_observations()", (self.num_envs, self.obs_dim))

    # ------------------------------------------------------------------ the step order
    def reset(self, seed: int | Sequence[int] | None = None) -> np.ndarray:
        """Start a new episode in every copy: reset_idx(all), then get_observations().

        Args:
            seed: None continues every copy's streams; an int or one seed per copy
                re-seeds them (checked before anything changes: `check_reset_seed`).
        """
        self.check_open()
        seed = check_reset_seed(seed, self.num_envs)
        self.book.begin_reset(None)  # out of step until this reset completes
        if seed is not None:
            self.reseed(seed)
        self.world.reset_envs(None)
        self._reset_task(self.all_ids)
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
        self.check_open()
        seed = check_reset_seed(seed, self.num_envs)
        self.book.begin_reset(ids)  # refused unless in step; a hook that raises: out of step
        if seed is not None:
            self.reseed(seed, ids)
        self.world.reset_envs(ids)
        self._reset_task(ids)
        obs = self.observe()
        self.book.reset_done()
        return obs

    def step(
        self, actions: npt.ArrayLike
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, EpisodeEnds | None]:
        """Run one environment step; finished copies restart in the same step.

        Returns:
            ``(obs, rewards, terminated, truncated, ends)``: ``ends`` is None when no
            episode ended, else the `EpisodeEnds` of the finished episodes.
        """
        self.check_open()
        self.book.check_step()
        # refused actions change nothing
        return self._run(check_actions(actions, self.num_envs, self.act_dim))

    def step_checked(
        self, acts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, EpisodeEnds | None]:
        """`step` with actions ``check_actions`` returned (the env's own copy, not checked twice).

        Raises:
            RuntimeError: After :meth:`close`, before the first reset or after a failed step.
        """
        self.check_open()
        self.book.check_step()
        return self._run(acts)

    def _run(
        self, acts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, EpisodeEnds | None]:
        """`_advance`, marking the env out of step if it raises."""
        try:
            return self._advance(acts)
        except BaseException as exc:
            self.book.failed(exc)  # refuse to go on until reset() (or restore())
            raise

    def _advance(
        self, acts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, EpisodeEnds | None]:
        """The body of `step` after the actions were checked."""
        task, world, n = self.task, self.world, self.num_envs
        task.apply_actions(acts)
        if self.randomizer is not None:  # interval terms (pushes...) before the physics
            self.randomizer.tick()
        world.step(self.timing.sim_dt, steps=self.timing.decimation)
        task.on_post_physics_step()
        names, conditions, task_truncated = self.validator(task.get_dones())
        rewards = self._float_batch(task.get_rewards(), "get_rewards()", (n,))
        obs = self.observe()
        self.book.count(rewards)
        time_up = self.episode_length_buf >= self.max_episode_length
        if len(names) == 1:  # any(axis=0)'s values (one condition, the usual) in a copy
            terminated = conditions[0].copy()
        else:
            terminated = conditions.any(axis=0) if names else np.zeros(n, dtype=bool)
        truncated = task_truncated | time_up  # a new array (the task's may be its buffer)
        done = terminated | truncated
        ends = None
        ids = done.nonzero()[0]  # np.flatnonzero's; its size says what done.any() would
        if ids.size:
            ends = self._ends(ids, done, names, conditions, terminated, truncated, time_up, obs)
            if self.on_episode_end is not None:
                self.on_episode_end()
            self._reset_task(ids)
            self.book.restart(ids)
            obs = self.observe()
        return obs, rewards, terminated, truncated, ends

    def _reset_task(self, ids: np.ndarray) -> None:
        """The task's ``reset_idx`` of copies ``ids``, within the randomizer's draws."""
        if self.randomizer is not None:
            self.randomizer.begin(ids)  # startup and reset terms: the episode's World
        self.task.reset_idx(ids.copy())
        if self.randomizer is not None:
            self.randomizer.after_reset(ids)  # pushes that start the episode

    def _ends(
        self,
        ids: np.ndarray,
        done: np.ndarray,
        names: tuple[str, ...],
        conditions: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        time_up: np.ndarray,
        final_obs: np.ndarray,
    ) -> EpisodeEnds:
        """Describe the episodes that ended (the copies ``ids``, before they reset)."""
        # the reason per copy, vectorised: names[first true condition], else the limit kind
        if names != self._label_names:
            self._labels = np.array([*names, TIME_LIMIT, CUT_SHORT, None], dtype=object)
            self._label_names = names
        labels = self._labels
        k = len(names)
        reason = np.where(time_up, k, k + 1)
        if names:  # the first true condition (one condition: the only one)
            first = conditions.argmax(axis=0) if k > 1 else 0
            reason = np.where(terminated, first, reason)
        ended_by = labels[np.where(done, reason, k + 2)]
        counters = self.book.ended()
        is_success = checks = None
        if self.success_rule is not None:
            ctx = RuleContext(self.num_envs, names, conditions, time_up, truncated, terminated)
            is_success, checks = judge(self.success_rule, self.task, ctx)
        return EpisodeEnds(
            ids=ids,
            mask=done,  # _advance's own, used by nothing else
            final_obs=final_obs,
            ended_by=ended_by,
            counters=counters,
            names=names,
            is_success=is_success,
            checks=checks,
            randomization=None if self.randomizer is None else self.randomizer.episode(),
        )

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> Snapshot:
        """Record the world, the task's counters and state, and every Generator."""
        wsnap = self.world.snapshot()
        arrays = {f"world/{k}": v for k, v in wsnap.arrays.items()}
        arrays["env/episode_length_buf"] = self.episode_length_buf.copy()
        arrays["env/returns"] = self.book.returns.copy()
        if self.randomizer is not None:
            for key, value in self.randomizer.state_dict().items():
                arrays[f"env/randomization/{key}"] = value
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
            RuntimeError: After :meth:`close`.
        """
        self.check_open()
        plan = self._restore_plan(snap)
        back = self._restore_plan(self.snapshot())  # put back if load_state_dict raises
        had = set(vars(self.task))
        self.world.restore(plan.world)  # all or nothing by itself
        try:
            self._apply(plan)
        except Exception as err:
            for name in set(vars(self.task)) - had:  # made by the failed load: not before
                delattr(self.task, name)
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
            randomizer=self.randomizer,
        )

    def _apply(self, plan: EnvRestorePlan) -> None:
        """Set everything but the World from a checked snapshot (the task's state first)."""
        self.task.load_state_dict(dict(plan.task_state))
        self.episode_length_buf[:] = plan.episode_length_buf
        self.book.returns[:] = plan.returns
        if self.randomizer is not None and plan.randomization is not None:
            self.randomizer.load_state_dict(plan.randomization)
        for i, state in enumerate(plan.task_rngs):  # checked: none of these can fail
            saved = rng_from_state(state)
            if type(saved.bit_generator) is type(self.task_rngs[i].bit_generator):
                set_rng_state(self.task_rngs[i], state)  # in place: references stay valid
            else:  # the snapshot's copy ran a Generator of another kind (a user's)
                self.task_rngs[i] = saved
        self.validator.names = plan.condition_names
        self.book.started = plan.started
        self.book.failure = None

    def check_open(self) -> None:
        """Refuse to run once closed (before any task hook: nothing half-runs).

        Raises:
            RuntimeError: After :meth:`close`.
        """
        if self.closed:
            raise RuntimeError(
                "this environment is closed (close() released its World); create a new one"
            )

    def close(self) -> None:
        """Release the world's threads; reset, step and restore are refused from now on."""
        self.closed = True
        self.world.close()
