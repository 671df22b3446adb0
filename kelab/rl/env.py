"""LearningEnv: many copies of a task in lockstep, as a Gymnasium vector environment.

One ``LearningEnv`` drives all ``num_envs`` copies of a :class:`~kelab.rl.task.Task`;
every observation, reward and flag has one row per copy. Finished copies restart in the
same step (``AutoresetMode.SAME_STEP``). See docs/rl.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from kelab._validate import is_int
from kelab.rl._contract import check_reset_seed, reset_ids
from kelab.rl._core import EnvCore
from kelab.rl._env_base import CoreBackedEnv
from kelab.rl._presenter import Presenter
from kelab.rl._spaces import action_space, observation_space
from kelab.rl.config import EnvConfig, EnvKeywords, env_config
from kelab.rl.episode_ends import vector_info
from kelab.rl.success import SuccessRule
from kelab.rl.task import Task, validate_task_class
from kelab.sim.snapshot import Snapshot
from kelab.timing.config import SimulationTimingConfig
from kelab.timing.pacer import SimulationPacer

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11

__all__ = ["LearningEnv", "vector_info"]  # vector_info: kelab/rl/episode_ends.py

_OLDER_POSITIONAL = (
    "dt",
    "physics_steps_per_action",
    "env_spacing",
    "headless",
    "seed",
    "render_mode",
    "run_config",
    "device",
)
"""``LearningEnv``'s older positional parameters after ``num_envs``, in their order."""


def _older_positional(
    older: tuple[Any, ...], *, seed: int | None, device: str, settings: Mapping[str, Any]
) -> dict[str, Any]:
    """Name the arguments given by position after ``num_envs`` (the older signature).

    Raises:
        TypeError: For more of them than the older signature had, or one also given by
            keyword, as Python would for a function with that signature.
    """
    if len(older) > len(_OLDER_POSITIONAL):
        raise TypeError(
            f"LearningEnv takes at most {2 + len(_OLDER_POSITIONAL)} positional arguments "
            f"(task, num_envs, {', '.join(_OLDER_POSITIONAL)}), got {2 + len(older)}; pass "
            "the settings by keyword"
        )
    named = dict(zip(_OLDER_POSITIONAL, older, strict=False))
    given = set(settings) | {"seed"} if seed is not None else set(settings)
    if device != "cpu":
        given.add("device")
    twice = sorted(given & set(named))
    if twice:
        raise TypeError(f"LearningEnv got multiple values for argument {twice[0]!r}")
    warnings.warn(
        f"LearningEnv(task, num_envs, {', '.join(named)}): settings after num_envs given by "
        f"position are deprecated; pass them by keyword ({', '.join(f'{n}=...' for n in named)})",
        DeprecationWarning,
        stacklevel=3,
    )
    return named


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

    Every setting is one validated `EnvConfig` (``config=ke.EnvConfig(...)``, or its
    fields as keywords, which override the config's); ``env.config`` holds the result.

    Args:
        task: The task (a new instance per environment).
        num_envs: ``EnvConfig.num_envs`` (None keeps the config's; default 1).
        *older: Older positional form, deprecated: ``dt, physics_steps_per_action,
            env_spacing, headless, seed, render_mode, run_config, device`` after
            ``num_envs``, in that order (pass them by keyword).
        seed: ``EnvConfig.seed`` (None keeps the config's; default 0).
        config: The `EnvConfig`; None: the defaults.
        success: Success rule (``@ke.success``) judging finished episodes; None uses
            ``task.success_rule``.
        pacer: Pacer for PACED mode (inject one with a fake clock in tests).
        device: Only ``"cpu"``.
        **settings: Any other `EnvConfig` field, overriding the config's (None keeps it):
            ``render_mode`` (Gymnasium's keyword, what ``gymnasium.make_vec`` passes),
            ``layout``, ``num_threads``, ``timing``, ``env_spacing``, ``render_backend``,
            ``copy_offset``; or an older alias: ``dt`` / ``physics_steps_per_action``
            (override the timing's ``sim_dt`` / ``decimation``), ``run_config`` (must match
            ``render_mode``), ``headless`` (True refuses ``"human"``). Declared once, for
            every environment, as `kelab.rl.config.EnvKeywords`.

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
        num_envs: int | None = None,
        *older: Any,
        seed: int | None = None,
        config: EnvConfig | None = None,
        success: SuccessRule | None = None,
        pacer: SimulationPacer | None = None,
        device: str = "cpu",
        **settings: Unpack[EnvKeywords],
    ) -> None:
        if older:
            named = _older_positional(older, seed=seed, device=device, settings=settings)
            seed = named.pop("seed", seed)
            device = named.pop("device", device)
            settings = cast("EnvKeywords", {**settings, **named})
        if device != "cpu":
            raise ValueError(
                f"device must be 'cpu' (KELab simulates on the CPU with pymunk), got {device!r}"
            )
        validate_task_class(task)
        self._config = cfg = env_config(task, config, num_envs=num_envs, seed=seed, **settings)
        self._core = core = EnvCore(task, cfg, success_rule=success, env=self)
        self.num_envs = core.num_envs
        self.task = task
        self.world = core.world
        self.timing: SimulationTimingConfig = core.timing
        self.run_config = cfg.run_config
        self.render_mode = cfg.render_mode
        self.headless = cfg.headless
        self.device = device
        self.seed_value = cfg.seed
        self.metadata = {**type(self).metadata, "render_fps": self.timing.control_hz}
        self.single_observation_space = observation_space(task)
        self.single_action_space = action_space(task)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._presenter = Presenter(
            cfg.run_config, core, f"KELab - {type(task).__name__}", pacer, cfg.render_backend
        )

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
        """Close the window and release the world (what there is of them).

        A constructor that refused its arguments leaves a half-built env, which
        gymnasium 1.1's ``VectorEnv.__del__`` closes too.
        """
        for part in ("_presenter", "_core"):
            built = self.__dict__.get(part)
            if built is not None:
                built.close()

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
