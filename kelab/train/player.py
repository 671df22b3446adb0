"""``ke.RLPlayer``: run a checkpoint without training it: act, evaluate, watch, record.

``play()`` steps a :class:`~kelab.rl.direct.DirectRLEnv` with the checkpoint's
deterministic actions: PACED in a window for ``render_mode="human"`` (waits when ahead,
never catches up), OFFSCREEN_FAST for ``"rgb_array"`` (as fast as it runs; ``video=``
writes the frames through a :class:`~kelab.app.recorders.VideoRecorder`).
``interactive=True`` plays inside a :class:`~kelab.App` window instead: the policy acts
in ``fixed_update`` and you can pause (Space), step, and drag the robot with the mouse to
push it. See docs/training.md.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kelab._validate import check_int, check_seed
from kelab.train._deps import require_training_extra

require_training_extra()

from kelab.train.checkpoint import (  # noqa: E402
    Checkpoint,
    CheckpointError,
    load_checkpoint,
)
from kelab.train.policy import CheckpointPolicy  # noqa: E402

if TYPE_CHECKING:
    from kelab.rl.direct import DirectRLEnv
    from kelab.rl.env import LearningEnv
    from kelab.rl.ray_env import RayLearningEnv
    from kelab.rl.task import Task

__all__ = ["RLPlayer", "task_from_checkpoint"]

_CLASS_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w]*$")


def task_from_checkpoint(checkpoint: Checkpoint) -> Task:
    """A new instance of the task class a checkpoint names (``"module:Class"``).

    Raises:
        CheckpointError: When the class path is malformed, does not import or is not a
            ke.Task subclass.
    """
    path = checkpoint.meta["task"].get("class")
    if not isinstance(path, str) or not _CLASS_PATH.match(path):
        raise CheckpointError(
            f"{checkpoint.path}: task.class must be 'module:TaskClass', got {path!r}"
        )
    from kelab.tasks.registry import task_class

    try:
        cls = task_class(path)
    except ValueError as err:
        raise CheckpointError(f"{checkpoint.path}: {err} (or pass env= with the task)") from None
    return cls()


def _require_direct_env(env: object) -> None:
    from kelab.rl.direct import DirectRLEnv

    if isinstance(env, DirectRLEnv):
        return
    if isinstance(getattr(env, "unwrapped", None), DirectRLEnv):
        raise ValueError(
            f"RLPlayer env must be a DirectRLEnv, got {type(env).__name__} (a gymnasium "
            "wrapper); pass env.unwrapped, the DirectRLEnv inside it"
        )
    raise ValueError(
        f"RLPlayer env must be a DirectRLEnv, got {type(env).__name__}; use "
        "ke.evaluate(env, player.policy, ...) for a LearningEnv (make the player "
        "without env=)"
    )


class RLPlayer:
    """Runs a trained checkpoint: ``act``, ``policy`` (for ``ke.evaluate``), ``play``.

    Args:
        checkpoint: A spec (``RUN_DIR:best``, ``RUN_DIR:latest``, a checkpoint .json) or a
            loaded :class:`~kelab.train.checkpoint.Checkpoint`.
        env: The env ``play()`` steps: a DirectRLEnv (its render mode is used as is); any
            other env is refused. None builds the checkpoint's task in a DirectRLEnv with
            ``render_mode``, at the timing it was trained at. For a LearningEnv make the
            player without ``env`` and run ``ke.evaluate(env, player.policy, ...)``
            (``act`` and ``policy`` take a batch of observations from any env).
        render_mode: ``"human"`` (PACED window), ``"rgb_array"`` (offscreen, for video) or
            None; used only when ``env`` is None.
        seed: Seed of the env built when ``env`` is None (an int >= 0).

    Raises:
        ValueError: When the checkpoint's ``observation_dim`` / ``action_dim`` differ from
            the env's (naming both), ``env`` is not a DirectRLEnv, ``checkpoint`` names the
            ``.safetensors`` weights file instead of the checkpoint's ``.json``, the
            checkpoint cannot be loaded (CheckpointError), or ``seed`` is not an int >= 0.
    """

    def __init__(
        self,
        checkpoint: str | os.PathLike[str] | Checkpoint,
        env: DirectRLEnv | None = None,
        render_mode: str | None = "human",
        *,
        seed: int = 0,
    ) -> None:
        self.seed = check_seed(seed)
        if env is not None:
            _require_direct_env(env)
        self.checkpoint = (
            checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
        )
        self._policy = CheckpointPolicy(self.checkpoint)
        self.render_mode = render_mode
        self._env = env
        self._own_env = False
        if env is not None:
            self.check_env(env)

    # ------------------------------------------------------------------ the policy
    @property
    def observation_dim(self) -> int:
        """Observation size of the checkpoint."""
        return self.checkpoint.observation_dim

    @property
    def action_dim(self) -> int:
        """Action size of the checkpoint."""
        return self.checkpoint.action_dim

    def act(self, obs: npt.ArrayLike) -> np.ndarray:
        """Deterministic actions: ``(N, obs_dim) -> (N, act_dim)`` or one obs -> one action."""
        return self._policy(obs)

    @property
    def policy(self) -> Callable[[np.ndarray], np.ndarray]:
        """``obs -> actions``, usable as ``ke.evaluate(env, player.policy, ...)``."""
        return self._policy

    # ------------------------------------------------------------------ the env
    def check_env(self, env: LearningEnv | DirectRLEnv | RayLearningEnv) -> None:
        """Refuse an env whose task does not fit the checkpoint.

        Raises:
            ValueError: When the observation or action sizes differ (naming both sides).
        """
        base = getattr(env, "unwrapped", env)
        space = getattr(base, "single_observation_space", None) or base.observation_space
        act_space = getattr(base, "single_action_space", None) or base.action_space
        obs_dim, act_dim = int(space.shape[-1]), int(act_space.shape[-1])
        if (obs_dim, act_dim) != (self.observation_dim, self.action_dim):
            task_meta = self.checkpoint.meta.get("task")
            trained = (
                task_meta.get("id") or task_meta.get("class")
                if isinstance(task_meta, dict)
                else None
            )
            raise ValueError(
                f"checkpoint {self.checkpoint.path}{f' (trained on {trained})' if trained else ''} "
                f"has observation_dim={self.observation_dim}, "
                f"action_dim={self.action_dim}, but the env's task {type(base.task).__name__} "
                f"has observation_dim={obs_dim}, action_dim={act_dim}; use a checkpoint "
                "trained on this task"
            )
        task_meta = self.checkpoint.meta.get("task")
        recorded = task_meta.get("class") if isinstance(task_meta, dict) else None
        actual = f"{type(base.task).__module__}:{type(base.task).__qualname__}"
        differences = []
        if recorded and recorded != actual:
            differences.append(f"it was trained on the task {recorded}, the env's is {actual}")
        fingerprint = self.checkpoint.meta.get("scene_fingerprint")
        world = getattr(base, "world", None)
        if fingerprint and world is not None and world.fingerprint != fingerprint:
            differences.append(
                "the env's scene (its robots' bodies, joints, actuators or materials) differs "
                f"from the one it was trained in (scene fingerprint {world.fingerprint[:12]} "
                f"against {str(fingerprint)[:12]})"
            )
        if differences:
            warnings.warn(
                f"checkpoint {self.checkpoint.path}: {'; '.join(differences)}; the policy may "
                "behave differently",
                stacklevel=3,
            )

    def make_env(self, render_mode: str | None = None, seed: int | None = None) -> DirectRLEnv:
        """A DirectRLEnv of the checkpoint's task at its training timing."""
        from kelab.rl.direct import DirectRLEnv
        from kelab.timing.config import SimulationTimingConfig

        task = task_from_checkpoint(self.checkpoint)
        timing_meta = self.checkpoint.meta.get("timing") or {}
        timing = None
        try:
            if timing_meta:
                timing = SimulationTimingConfig(
                    sim_dt=float(timing_meta["sim_dt"]),
                    decimation=int(timing_meta["decimation"]),
                    episode_length_s=timing_meta.get("episode_length_s"),
                )
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"{self.checkpoint.path}: bad timing ({err})") from None
        env = DirectRLEnv(
            task, render_mode=render_mode, timing=timing, seed=self.seed if seed is None else seed
        )
        self.check_env(env)
        return env

    @property
    def env(self) -> DirectRLEnv:
        """The env ``play()`` steps (built on first use when none was given)."""
        if self._env is None:
            self._env = self.make_env(self.render_mode)
            self._own_env = True
        return self._env

    # ------------------------------------------------------------------ playing
    def play(
        self,
        episodes: int | None = 1,
        video: str | os.PathLike[str] | None = None,
        *,
        interactive: bool = False,
        seed: int | None = None,
        max_frames: int | None = None,
        on_episode: Callable[[int, dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Play ``episodes`` episodes with the deterministic policy and report them.

        Args:
            episodes: Episodes to play (>= 1); None (interactive only): until the window
                is closed.
            video: An ``.mp4`` or ``.gif`` to write (needs ``render_mode="rgb_array"``).
            interactive: Play inside a ``ke.App`` window (pause, step, drag) until it is
                closed or ``episodes`` episodes ended. An episode the task ends early
                goes on limp for a second (the fall lands) before the next one starts.
            seed: Seed of the first reset (None: the player's seed).
            max_frames: Interactive only: stop after this many App frames (tests).
            on_episode: Interactive only: called with ``(n, info)`` as each episode ends.

        Returns:
            ``{"episodes", "returns", "lengths", "ended_by", "successes", "steps",
            "video"}`` (``successes`` holds None without a success rule).

        Raises:
            ValueError: For a bad ``episodes`` or ``seed``, or ``video`` without ``rgb_array``.
        """
        if episodes is None and not interactive:
            raise ValueError(
                "episodes=None (play until the window is closed) needs interactive=True; "
                "give a number of episodes"
            )
        if episodes is not None:
            episodes = check_int(episodes, "episodes", low=1)
        seed = self.seed if seed is None else check_seed(seed)
        if interactive:
            return self._play_interactive(episodes, seed, max_frames, on_episode)
        env = self.env
        if video is not None and env.render_mode != "rgb_array":
            raise ValueError(
                f"video= needs render_mode='rgb_array' (frames drawn offscreen), got "
                f"render_mode={env.render_mode!r}; create RLPlayer(..., render_mode='rgb_array')"
            )
        recorder, timeline, frame = None, None, [None]
        if video is not None:
            from kelab.app.recorders import VideoRecorder
            from kelab.timing.timeline import Timeline

            timeline = Timeline(default_runners=False)
            timeline.add_runner("Policy", env.timing.control_hz)
            recorder = VideoRecorder(video, runner="Policy")
            recorder.attach(timeline, frame_source=lambda: frame[0])
        result = _Results()
        try:
            obs, _ = env.reset(seed=seed)
            if recorder is not None:
                frame[0] = env.render()
                timeline.step()
            while result.count < episodes and not env.window_closed:
                obs, _, terminated, truncated, info = env.step(self.act(obs))
                result.steps += 1
                if recorder is not None:
                    frame[0] = env.render()
                    timeline.step()
                if terminated or truncated:
                    result.add(info)
                    if result.count < episodes:
                        obs, _ = env.reset()
        finally:
            if recorder is not None:
                recorder.close()
        out = result.as_dict()
        out["video"] = None if video is None else str(Path(video))
        return out

    def _play_interactive(
        self,
        episodes: int | None,
        seed: int,
        max_frames: int | None,
        on_episode: Callable[[int, dict[str, Any]], None] | None,
    ) -> dict:
        from kelab.train.interactive import play_in_app

        env = self._env if self._env is not None else self.make_env(None, seed)
        own = self._env is None
        try:
            return play_in_app(env, self.act, episodes, seed, max_frames, on_episode)
        finally:
            if own:
                env.close()

    def close(self) -> None:
        """Close the env the player built (an env passed in stays open)."""
        if self._own_env and self._env is not None:
            self._env.close()
            self._env = None
            self._own_env = False

    def __enter__(self) -> RLPlayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Results:
    """Finished episodes of a playback."""

    def __init__(self) -> None:
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.ended_by: list[str] = []
        self.successes: list[bool | None] = []
        self.steps = 0

    @property
    def count(self) -> int:
        return len(self.returns)

    def add(self, info: dict[str, Any]) -> None:
        self.returns.append(float(info["episode_return"]))
        self.lengths.append(int(info["episode_length"]))
        self.ended_by.append(str(info["ended_by"]))
        self.successes.append(info.get("is_success"))

    def as_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.count,
            "returns": self.returns,
            "lengths": self.lengths,
            "ended_by": self.ended_by,
            "successes": self.successes,
            "steps": self.steps,
        }
