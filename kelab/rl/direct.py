"""DirectRLEnv: one copy of a task as a plain ``gymnasium.Env``, with run modes.

The same step engine as :class:`~kelab.rl.env.LearningEnv`, over a single copy:
unbatched observations, a float reward and bool flags. The run mode (HEADLESS_FAST,
OFFSCREEN_FAST, PACED) follows ``render_mode`` unless an explicit ``run_config`` is given.
See docs/rl.md.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from kelab._validate import check_seed
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
from kelab.timing.config import SimulationRunConfig, SimulationTimingConfig
from kelab.timing.pacer import SimulationPacer

__all__ = ["DirectRLEnv", "single_info"]


def single_info(ends: dict[str, Any]) -> dict[str, Any]:
    """Describe copy 0's finished episode as a plain info dict ({} if it did not end).

    Args:
        ends: What ``EnvCore.step`` returned for the finished episodes.

    Returns:
        ``{"ended_by", "episode_return", "episode_length"}`` plus ``"is_success"`` and
        ``"checks"`` when a success rule judged it.
    """
    if not ends or not ends["mask"][0]:
        return {}
    info: dict[str, Any] = {
        # Gymnasium's RecordEpisodeStatistics layout
        "episode": {
            "r": float(ends["episode_return"][0]),
            "l": int(ends["episode_length"][0]),
            "t": float(ends["episode_wall_s"][0]),
        },
        "ended_by": ends["ended_by"][0],
        "episode_return": float(ends["episode_return"][0]),
        "episode_length": int(ends["episode_length"][0]),
    }
    if "is_success" in ends:
        info["is_success"] = bool(ends["is_success"][0])
        info["checks"] = {name: bool(v[0]) for name, v in ends["checks"].items()}
    return info


class DirectRLEnv(CoreBackedEnv, gymnasium.Env):
    """One copy of a task as a ``gymnasium.Env``.

    ``step(action)`` takes an ``(action_dim,)`` action in [-1, 1] (clipped) and returns
    ``(obs, reward, terminated, truncated, info)`` with obs float32
    ``(observation_dim,)``, a float reward and bool flags. On the step an episode ends,
    ``obs`` is that episode's final observation and ``info`` has ``ended_by``,
    ``episode_return``, ``episode_length`` (and ``is_success``/``checks`` with a success
    rule); the next ``reset()`` starts the new episode.

    Run modes: render_mode None -> HEADLESS_FAST (never renders), ``"human"`` -> PACED
    (draws in a window after each reset and step, then waits until ``step_dt`` of wall
    time has passed, never catching up), ``"rgb_array"`` -> OFFSCREEN_FAST (``render()``
    returns an ``(H, W, 3)`` uint8 frame, never waits). ``metadata["render_fps"]`` is the
    control rate.

    Args:
        task: The task (a new instance per environment).
        render_mode: None, ``"human"`` or ``"rgb_array"``.
        run_config: Explicit run mode; must come with the render mode it requires.
        timing: Physics step, decimation and episode length; None uses the task's
            ``sim_dt``, ``decimation`` and ``episode_length_s`` (an explicit timing with
            ``episode_length_s=None`` keeps the task's).
        dt: Overrides the physics step (of the task's or ``timing``'s), as in LearningEnv.
        physics_steps_per_action: Overrides the decimation, as in LearningEnv.
        seed: Seed of the copy's random Generators; None means 0.
        success: Success rule; None uses ``task.success_rule``.
        pacer: Pacer for PACED mode (inject one with a fake clock in tests).
        layout: ``"isolated"`` (default: the one copy has its own pymunk space at the
            origin, full precision, bit-identical to copy ``i`` of an isolated
            LearningEnv) or ``"packed"`` (the copy sits far from the origin as in a packed
            LearningEnv: x resolved to 2.3e-10 m; one copy gains no speed from it).

    Raises:
        ValueError: For a bad render mode/run config pair (naming the required render
            mode) or an unknown layout.

    Example:
        >>> import kelab as ke
        >>> from kelab.tasks.cartpole import CartPoleTask
        >>> env = ke.DirectRLEnv(CartPoleTask(), seed=3)
        >>> obs, info = env.reset()
        >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> obs.shape, type(reward), env.metadata["render_fps"]
        ((4,), <class 'float'>, 60.0)
        >>> env.close()
    """

    metadata: dict[str, Any] = {"render_modes": ["human", "rgb_array"], "render_fps": 60}

    def __init__(
        self,
        task: Task,
        *,
        render_mode: str | None = None,
        run_config: SimulationRunConfig | None = None,
        timing: SimulationTimingConfig | None = None,
        dt: float | None = None,
        physics_steps_per_action: int | None = None,
        seed: int | None = None,
        success: SuccessRule | None = None,
        pacer: SimulationPacer | None = None,
        layout: str = "isolated",
    ) -> None:
        validate_task_class(task)
        config = resolve_run_config(render_mode, run_config)
        timing = resolve_timing(task, timing, dt, physics_steps_per_action)
        spacing = 4.0 if layout == "packed" else 0.0  # packed needs a window > 0
        seed = 0 if seed is None else seed
        self._core = EnvCore(
            task,
            num_envs=1,
            timing=timing,
            env_spacing=spacing,
            seed=seed,
            success_rule=success,
            env=self,
            layout=layout,
        )
        core = self._core
        self.task = task
        self.world = core.world
        self.timing = timing
        self.run_config = config
        self.render_mode = render_mode
        self.metadata = {**type(self).metadata, "render_fps": timing.control_hz}
        low, high = observation_bounds(task, core.obs_dim)
        self.observation_space = gymnasium.spaces.Box(low, high, (core.obs_dim,), np.float32)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (core.act_dim,), np.float32)
        self._presenter = Presenter(config, core, f"KELab - {type(task).__name__}", pacer)
        if self._presenter.draws:  # show how each episode ended, not the restart
            core.on_episode_end = self._presenter.episode_ended
        self._pending: np.ndarray | None = None  # first obs of an episode begun in step()

    # ------------------------------------------------------------------ properties
    @property
    def step_dt(self) -> float:
        """Simulated seconds per env step."""
        return self.timing.step_dt

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new episode.

        After an episode ended in ``step()``, the copy has already been reset (same step
        order as LearningEnv); ``reset()`` without a seed returns that new episode's first
        observation. With a seed (or mid-episode) the copy is reset again.

        Args:
            seed: Re-seed the copy's random Generators.
            options: Unused (accepted for Gymnasium compatibility).

        Returns:
            ``(obs, {})``.
        """
        super().reset(seed=None if seed is None else check_seed(seed))
        if seed is None and self._pending is not None:
            obs = self._pending
        else:
            obs = self._core.reset(seed)
        self._pending = None
        self._presenter.after_reset()
        return obs[0].copy(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Advance one env step (see the class docstring).

        Raises:
            ValueError: For an action of the wrong shape or with NaN/inf.
            TaskError: When the task returns invalid dones, rewards or observations.
        """
        a = self._core.check_actions(action, single=True)  # (1, action_dim)
        self._presenter.before_step()
        obs, rewards, terminated, truncated, ends = self._core.step(a)
        info = single_info(ends)
        if info:
            self._pending = obs
            out = ends["final_obs"][0].copy()
        else:
            self._pending = None
            out = obs[0].copy()
        self._presenter.after_step()
        return out, float(rewards[0]), bool(terminated[0]), bool(truncated[0]), info

    def render(self) -> np.ndarray | None:
        """``rgb_array``: return the current frame ``(H, W, 3)`` uint8, without waiting.

        ``human`` renders automatically after each reset and step (None here); with no
        render mode there is nothing to render (None).
        """
        return self._presenter.render()

    def close(self) -> None:
        """Close the window and release the world (calling it twice is fine)."""
        self._presenter.close()
        self._core.close()

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> Snapshot:
        """Record world, task counters and state and every Generator (see LearningEnv)."""
        snap = self._core.snapshot()
        return snap

    def restore(self, snap: Snapshot) -> None:
        """Return to the moment ``snap`` was taken."""
        self._core.restore(snap)
        self._pending = None
        self._presenter.before_step()  # a kept last frame is no longer current
