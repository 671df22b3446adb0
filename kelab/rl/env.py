"""LearningEnv: many copies of a task in lockstep, as a Gymnasium vector environment.

One ``LearningEnv`` drives all ``num_envs`` copies of a :class:`~kelab.rl.task.Task`;
every observation, reward and flag has one row per copy. Finished copies restart in the
same step (``AutoresetMode.SAME_STEP``). See docs/rl.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from kelab._validate import check_bool, is_int
from kelab.rl._contract import check_reset_seed, reset_ids
from kelab.rl._core import (
    CoreBackedEnv,
    EnvCore,
    Presenter,
    observation_bounds,
    resolve_run_config,
    resolve_timing,
)
from kelab.rl.success import SuccessRule
from kelab.rl.task import Task, validate_task_class
from kelab.sim.snapshot import Snapshot
from kelab.timing.config import RunMode, SimulationRunConfig, SimulationTimingConfig
from kelab.timing.pacer import SimulationPacer

__all__ = ["LearningEnv", "vector_info"]


def vector_info(ends: dict[str, Any], num_envs: int) -> dict[str, Any]:
    """Turn the core's description of finished episodes into a Gymnasium vector info.

    Every key has a ``_key`` bool mask (true for the copies that ended this step).

    Args:
        ends: What ``EnvCore.step`` returned for the finished episodes ({} if none).
        num_envs: Number of copies.

    Returns:
        The info dict (empty when no episode ended).
    """
    if not ends:
        return {}
    mask = ends["mask"]
    ids = ends["ids"]
    final_obs = np.zeros_like(ends["final_obs"])
    final_obs[ids] = ends["final_obs"][ids]
    returns = np.where(mask, ends["episode_return"], 0.0)
    lengths = np.where(mask, ends["episode_length"], 0)
    episode: dict[str, Any] = {
        # Gymnasium's RecordEpisodeStatistics layout (CleanRL, SB3 read it as is)
        "episode": {
            "r": returns.astype(np.float32),
            "l": lengths.astype(np.int32),
            "t": np.where(mask, ends["episode_wall_s"], 0.0).astype(np.float32),
        },
        "_episode": mask.copy(),
        "ended_by": ends["ended_by"],
        "_ended_by": mask.copy(),
        "episode_return": returns,
        "_episode_return": mask.copy(),
        "episode_length": lengths,
        "_episode_length": mask.copy(),
    }
    if "is_success" in ends:
        episode["is_success"] = ends["is_success"] & mask
        episode["_is_success"] = mask.copy()
        checks: dict[str, Any] = {}
        for name, value in ends["checks"].items():
            checks[name] = value & mask
            checks[f"_{name}"] = mask.copy()
        episode["checks"] = checks
        episode["_checks"] = mask.copy()
    info: dict[str, Any] = {
        "final_obs": final_obs,
        "_final_obs": mask.copy(),
        "final_info": {
            k: (dict(v) if isinstance(v, dict) else v.copy()) for k, v in episode.items()
        },
        "_final_info": mask.copy(),
    }
    info.update(episode)
    return info


class LearningEnv(CoreBackedEnv, gymnasium.vector.VectorEnv):
    """Runs ``num_envs`` copies of a task side by side in one process.

    ``step(actions)`` takes ``(num_envs, action_dim)`` actions in [-1, 1] (clipped) and
    returns ``(obs, rewards, terminated, truncated, info)``: float32
    ``(num_envs, observation_dim)``, float32 ``(num_envs,)`` and bool ``(num_envs,)``.
    A copy whose episode ended is reset in the same step, so ``obs`` is already the new
    episode's first observation; ``info`` then carries, masked by ``info["_<key>"]``:
    ``final_obs``, ``final_info``, ``ended_by`` (the first true condition name in
    ``get_dones()`` order, ``"time limit"`` or ``"cut short by the task"``),
    ``episode_return``, ``episode_length`` and, with a success rule, ``is_success`` and
    ``checks``.

    Args:
        task: The task (a new instance per environment).
        num_envs: Copies run side by side (>= 1).
        dt: Physics time step in seconds; None uses the task's ``sim_dt`` (overrides
            ``timing``'s).
        physics_steps_per_action: Physics steps per env step; None uses the task's
            ``decimation`` (overrides ``timing``'s).
        env_spacing: Metres between copy origins (``"packed"`` rounds it up to a power of
            two; physics never mixes copies).
        headless: No window. None (default) follows ``render_mode`` (a window only for
            ``"human"``); an explicit True with ``"human"`` is an error.
        seed: Seed of every per-copy random Generator (int >= 0).
        render_mode: None, ``"rgb_array"`` or ``"human"``.
        run_config: Explicit run mode; must match ``render_mode``.
        device: Only ``"cpu"``.
        timing: Physics step, decimation and episode length, as ``DirectRLEnv`` takes
            them; None uses the task's ``sim_dt``, ``decimation`` and ``episode_length_s``
            (an explicit timing with ``episode_length_s=None`` keeps the task's).
        success: Success rule (``@ke.success``) judging finished episodes; None uses
            ``task.success_rule``.
        pacer: Pacer for PACED mode (inject one with a fake clock in tests).
        layout: How copies map onto pymunk spaces (docs/world.md, "Layouts").
            ``"packed"`` (default): one space per thread shard, several times faster for
            many copies; same seed and actions give bit-identical results, snapshots
            and resets are exact, but a copy is not bit-identical to a lone copy in
            contact-rich scenes. ``"isolated"``: one space per copy, each copy
            bit-identical to ``DirectRLEnv`` / a lone copy.
        num_threads: Threads stepping the copies (results are bit-identical for every
            value; packed layout only gains from more than one).
        copy_offset: Global index of this env's copy 0 (int >= 0, default 0): copy ``i``
            is seeded as copy ``copy_offset + i`` of one env with the same seed, so envs
            of copies ``[a, b)`` together reproduce that env (``ke.RayLearningEnv``'s
            workers; docs/scale.md). Reset seeds follow the same rule.

    Raises:
        ValueError: For a device other than "cpu", a bad render mode/run config pair, an
            unknown layout, or out-of-range arguments.

    Example:
        >>> import numpy as np
        >>> import kelab as ke
        >>> from kelab.tasks.cartpole import CartPoleTask
        >>> env = ke.LearningEnv(CartPoleTask(), num_envs=4, seed=1)
        >>> obs, info = env.reset()
        >>> obs, rew, term, trunc, info = env.step(np.zeros((4, 1), np.float32))
        >>> obs.shape, rew.dtype, term.dtype
        ((4, 4), dtype('float32'), dtype('bool'))
        >>> env.close()
    """

    metadata: dict[str, Any] = {
        "render_modes": ["human", "rgb_array"],
        "render_fps": 60,
        "autoreset_mode": AutoresetMode.SAME_STEP,
    }

    def __init__(
        self,
        task: Task,
        num_envs: int = 1,
        dt: float | None = None,
        physics_steps_per_action: int | None = None,
        env_spacing: float = 4.0,
        headless: bool | None = None,
        seed: int = 0,
        render_mode: str | None = None,
        run_config: SimulationRunConfig | None = None,
        device: str = "cpu",
        *,
        timing: SimulationTimingConfig | None = None,
        success: SuccessRule | None = None,
        pacer: SimulationPacer | None = None,
        layout: str = "packed",
        num_threads: int = 1,
        copy_offset: int = 0,
    ) -> None:
        if device != "cpu":
            raise ValueError(
                f"device must be 'cpu' (KELab simulates on the CPU with pymunk), got {device!r}"
            )
        if headless is not None:
            headless = check_bool(
                headless, "headless", fix="or leave it out (None) to follow render_mode"
            )
        config = resolve_run_config(render_mode, run_config)
        if headless is None:
            headless = config.mode is not RunMode.PACED
        elif config.mode is RunMode.PACED and headless:
            raise ValueError(
                "render_mode='human' opens a window, but headless=True; leave headless out "
                "(it follows render_mode) to watch the copies, or use render_mode='rgb_array' "
                "for offscreen frames"
            )
        validate_task_class(task)
        timing = resolve_timing(task, timing, dt, physics_steps_per_action)
        self._core = EnvCore(
            task,
            num_envs=num_envs,
            timing=timing,
            env_spacing=env_spacing,
            seed=seed,
            success_rule=success,
            env=self,
            layout=layout,
            num_threads=num_threads,
            copy_offset=copy_offset,
        )
        core = self._core
        self.num_envs = core.num_envs
        self.task = task
        self.world = core.world
        self.timing: SimulationTimingConfig = core.timing
        self.run_config = config
        self.render_mode = render_mode
        self.headless = headless
        self.device = device
        self.seed_value = seed
        self.metadata = {**type(self).metadata, "render_fps": self.timing.control_hz}
        low, high = observation_bounds(task, core.obs_dim)
        self.single_observation_space = gymnasium.spaces.Box(low, high, (core.obs_dim,), np.float32)
        self.single_action_space = gymnasium.spaces.Box(-1.0, 1.0, (core.act_dim,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._presenter = Presenter(config, core, f"KELab - {type(task).__name__}", pacer)

    # ------------------------------------------------------------------ properties
    @property
    def step_dt(self) -> float:
        """Simulated seconds per env step (``dt * physics_steps_per_action``)."""
        return self.timing.step_dt

    @property
    def episode_length_buf(self) -> np.ndarray:
        """Steps taken in each copy's current episode (int64 ``(num_envs,)``)."""
        return self._core.episode_length_buf

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self,
        *,
        seed: int | Sequence[int] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new episode in every copy, or only in some (``options``).

        Args:
            seed: None continues every copy's random stream; an int re-seeds all copies
                (copy ``i`` from ``(seed, i)``); a list gives one seed per copy. With a
                partial reset only the reset copies are re-seeded, exactly as a full
                reset would re-seed them.
            options: None, or a dict; ``{"env_ids": [i, ...]}`` (distinct ints in
                ``[0, num_envs)``) or Gymnasium's ``{"reset_mask": bool array
                (num_envs,)}`` reset only those copies (the others go on untouched, and
                their observations are returned as they are). Other keys are ignored.

        Returns:
            ``(obs, {})``.

        Raises:
            ValueError: For options that are not a dict, env_ids / reset_mask that are
                not valid copies (floats, strings, repeats, out of range, no copy), or a
                seed that is not None, an int >= 0 or one per copy; nothing changes then.
            RuntimeError: For a partial reset before the first reset or after a failed
                step (only a full reset puts every copy back in step).
        """
        ids = reset_ids(options, self.num_envs)
        seed = check_reset_seed(seed, self.num_envs)
        if is_int(seed):
            super().reset(seed=seed)
        if ids is not None:
            obs = self._core.reset_some(ids, seed)
            self._presenter.after_reset()
            return obs, {}
        obs = self._core.reset(seed)
        self._presenter.after_reset()
        return obs, {}

    def observations(self) -> np.ndarray:
        """Every copy's observation now, as ``reset()`` and ``step()`` return them.

        Calls the task's ``get_observations()`` (checked as in a step) and changes nothing
        else; what a partial reset returns for the copies it leaves alone.
        ``ke.RayLearningEnv``'s partial reset asks it of the workers none of whose
        copies are reset, so their tasks are called exactly as in one LearningEnv.

        Raises:
            TaskError: When the task returns invalid observations.
        """
        return self._core.observe()

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Advance every copy by one env step (see the class docstring).

        Raises:
            ValueError: For actions of the wrong shape or with NaN/inf.
            TaskError: When the task returns invalid dones, rewards or observations.
        """
        obs, rewards, terminated, truncated, ends = self._core.step(actions)
        info = vector_info(ends, self.num_envs)
        self._presenter.after_step()
        return obs, rewards, terminated, truncated, info

    def render(self) -> np.ndarray | None:
        """``rgb_array``: draw the copies in view and return ``(H, W, 3)`` uint8.

        ``human`` renders automatically after each reset and step (this returns None);
        with no render mode there is nothing to render (None).
        """
        return self._presenter.render()

    def close_extras(self, **kwargs: Any) -> None:
        """Close the window and release the world."""
        self._presenter.close()
        self._core.close()

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> Snapshot:
        """Record the world, the task's counters and state, and every random Generator.

        ``env.restore(snap)`` followed by the same actions reproduces the same results
        bit for bit, so a snapshot answers "what would another action have done?".
        """
        return self._core.snapshot()

    def restore(self, snap: Snapshot) -> None:
        """Return to the moment ``snap`` was taken (see :meth:`snapshot`).

        Raises:
            ValueError: For a snapshot of another scene or not from ``env.snapshot()``.
        """
        self._core.restore(snap)

    def __repr__(self) -> str:
        return (
            f"LearningEnv({type(self.task).__name__}, num_envs={self.num_envs}, "
            f"layout={self.world.layout!r})"
        )
