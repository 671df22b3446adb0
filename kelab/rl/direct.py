"""DirectRLEnv: one copy of a task as a plain ``gymnasium.Env``, with run modes.

The same step engine as :class:`~kelab.rl.env.LearningEnv`, over a single copy:
unbatched observations, a float reward and bool flags. The run mode (HEADLESS_FAST,
OFFSCREEN_FAST, PACED) follows ``render_mode`` unless an explicit ``run_config`` is given.
See docs/rl.md.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np

from kelab._validate import SEED_FIX, check_seed
from kelab.rl._core import EnvCore
from kelab.rl._env_base import CoreBackedEnv
from kelab.rl._presenter import Presenter
from kelab.rl._spaces import action_space, observation_space
from kelab.rl.config import EnvConfig, EnvKeywords, env_config
from kelab.rl.episode_ends import single_info
from kelab.rl.success import SuccessRule
from kelab.rl.task import Task, validate_task_class
from kelab.sim.snapshot import Snapshot
from kelab.timing.pacer import SimulationPacer

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

__all__ = ["DirectRLEnv", "single_info"]


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

    Every setting is one validated `EnvConfig` (``config=ke.EnvConfig(...)``, with
    ``num_envs=1``), or its fields as keywords, which override the config's.

    Args:
        task: The task (a new instance per environment).
        seed: ``EnvConfig.seed``; None keeps the config's (default 0).
        config: The `EnvConfig` (its ``num_envs`` must be 1); None: the defaults.
        success: Success rule; None uses ``task.success_rule``.
        pacer: Pacer for PACED mode (inject one with a fake clock in tests).
        **settings: Any other `EnvConfig` field but ``num_envs``, overriding the config's
            (None keeps it), or an older alias, as for ``LearningEnv``
            (`kelab.rl.config.EnvKeywords`): ``render_mode`` (None, ``"human"`` or
            ``"rgb_array"``; Gymnasium's keyword, what ``gymnasium.make`` passes),
            ``timing``, ``dt`` / ``physics_steps_per_action``, ``run_config``, and
            ``layout``: ``"isolated"`` (the default everywhere: the one copy has its own
            pymunk space at the origin, full precision, bit-identical to copy ``i`` of a
            default LearningEnv) or ``"packed"`` (the copy sits far from the origin as in
            a packed LearningEnv: x resolved to 2.3e-10 m; one copy gains no speed from it).

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
        seed: int | None = None,
        config: EnvConfig | None = None,
        success: SuccessRule | None = None,
        pacer: SimulationPacer | None = None,
        **settings: Unpack[EnvKeywords],
    ) -> None:
        validate_task_class(task)
        cfg = env_config(task, config, seed=seed, **settings)
        if cfg.num_envs != 1:
            raise ValueError(
                f"DirectRLEnv runs one copy: config.num_envs must be 1, got {cfg.num_envs}; "
                "use ke.LearningEnv for many copies"
            )
        if cfg.layout == "isolated":  # the one copy sits at the origin (spacing: display only)
            cfg = dataclasses.replace(cfg, env_spacing=0.0)
        self._config = cfg
        self._core = core = EnvCore(task, cfg, success_rule=success, env=self)
        self.task = task
        self.world = core.world
        self.timing = core.timing
        self.run_config = cfg.run_config
        self.render_mode = cfg.render_mode
        self.metadata = {**type(self).metadata, "render_fps": self.timing.control_hz}
        self.observation_space = observation_space(task)
        self.action_space = action_space(task)
        self._presenter = Presenter(
            cfg.run_config, core, f"KELab - {type(task).__name__}", pacer, cfg.render_backend
        )
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
        super().reset(seed=None if seed is None else check_seed(seed, fix=SEED_FIX))
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
        obs, rewards, terminated, truncated, ends = self._core.step_checked(a)
        info = single_info(ends)
        if ends is not None and info:
            self._pending = obs
            out = ends.final_obs[0].copy()
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
