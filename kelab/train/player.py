"""``ke.RLPlayer``: run a checkpoint without training it: act, evaluate, watch, record.

``play()`` steps a :class:`~kelab.rl.direct.DirectRLEnv` with the checkpoint's
deterministic actions: PACED in a window for ``render_mode="human"`` (waits when ahead,
never catches up), OFFSCREEN_FAST for ``"rgb_array"`` (as fast as it runs; ``video=``
writes the frames through a :class:`~kelab.app.recorders.VideoRecorder`).
``interactive=True`` plays inside a :class:`~kelab.App` window instead: the policy acts
in ``fixed_update`` and you can pause (Space), step, and drag the robot with the mouse to
push it. The policy runs in numpy (:class:`~kelab.train.numpy_actor.NumpyActor`): playing
and evaluating need no torch, only ``pip install kelab``. See docs/training.md.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kelab._validate import check_int, check_seed, must
from kelab.errors import UserError
from kelab.train.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from kelab.train.numpy_actor import NumpyActor

if TYPE_CHECKING:
    import gymnasium as gym

    from kelab.rl.direct import DirectRLEnv
    from kelab.rl.env import LearningEnv
    from kelab.rl.ray_env import RayLearningEnv
    from kelab.rl.task import Task

__all__ = ["RLPlayer"]


def _class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _named_task(task: str | type[Task] | Task) -> Task:
    """The task the user named (never one a checkpoint names)."""
    from kelab.rl.task import Task

    if isinstance(task, Task):
        return task
    if isinstance(task, type) and issubclass(task, Task):
        return task()
    if isinstance(task, str):
        from kelab.tasks.registry import resolve_task, task_class

        return task_class(resolve_task(task)[1])()
    raise UserError(
        must(
            "RLPlayer task",
            "a built-in id ('CartPole-v0'), 'module:TaskClass', a ke.Task subclass or a ke.Task",
            task,
            "name the task the checkpoint was trained on",
        )
    )


def _builtin_task(checkpoint: Checkpoint) -> Task:
    """The built-in task a checkpoint was trained on, from KELab's own id -> class table.

    Nothing the checkpoint names is imported: only an id of :data:`kelab.tasks.TASK_IDS`
    is accepted, and the class comes from that table, not from the JSON.

    Raises:
        CheckpointError: For a checkpoint of any other task, saying to pass the task.
    """
    from kelab.tasks import TASK_IDS
    from kelab.tasks.registry import task_class

    task_meta = checkpoint.meta["task"]
    env_id = task_meta.get("id")
    if isinstance(env_id, str) and env_id in TASK_IDS:
        return task_class(TASK_IDS[env_id])()
    recorded = task_meta.get("class") or env_id
    if env_id is None and recorded in TASK_IDS.values():  # a built-in class, its id unrecorded
        return task_class(recorded)()
    raise CheckpointError(
        f"{checkpoint.path} was trained on task {recorded!r}, not a built-in one; KELab never "
        "imports code a checkpoint names: pass the task, RLPlayer(..., task='module:TaskClass') "
        "or `kelab play module:TaskClass --checkpoint ...`"
    )


def _trained_on(recorded: str, task_type: type) -> bool:
    """Whether ``task_type`` is the class ``recorded`` names, or a subclass of it.

    Compared by name (nothing is imported); a class trained from a script is recorded as
    ``__main__:Name`` and matches a class of that name in any module.
    """
    module, _, name = recorded.partition(":")
    for cls in task_type.__mro__:
        if _class_path(cls) == recorded or (module == "__main__" and cls.__qualname__ == name):
            return True
    return False


def _require_direct_env(env: object) -> None:
    from kelab.rl.direct import DirectRLEnv

    if isinstance(env, DirectRLEnv) or isinstance(getattr(env, "unwrapped", None), DirectRLEnv):
        return  # a DirectRLEnv, or gymnasium wrappers around one (gym.make("kelab/..."))
    raise UserError(
        f"RLPlayer env must be a DirectRLEnv (or gym.make('kelab/...'), wrapped or not), got "
        f"{type(env).__name__}; use "
        "ke.evaluate(env, player.policy, ...) for a LearningEnv (make the player "
        "without env=)"
    )


class RLPlayer:
    """Runs a trained checkpoint: ``act``, ``policy`` (for ``ke.evaluate``), ``play``.

    Args:
        checkpoint: A spec (``RUN_DIR:best``, ``RUN_DIR:latest``, a checkpoint .json) or a
            loaded :class:`~kelab.train.checkpoint.Checkpoint`.
        env: The env ``play()`` steps: a DirectRLEnv, or one from
            ``gym.make("kelab/CartPole-v0")`` with any gymnasium wrappers around it (its
            render mode is used as is; ``play()`` steps the wrappers); any other env is
            refused. None builds ``task`` in a DirectRLEnv with
            ``render_mode``, at the timing the checkpoint was trained at. For a LearningEnv
            make the player without ``env`` and run ``ke.evaluate(env, player.policy, ...)``
            (``act`` and ``policy`` take a batch of observations from any env).
        render_mode: ``"human"`` (PACED window), ``"rgb_array"`` (offscreen, for video) or
            None; used only when ``env`` is None.
        seed: Seed of the env built when ``env`` is None (an int >= 0).
        task: The task to build when ``env`` is None: a built-in id (``"CartPole-v0"``),
            ``"module:TaskClass"``, a ke.Task subclass or a ke.Task. None: the built-in
            task the checkpoint was trained on. Nothing a checkpoint names is ever imported,
            so a checkpoint of your own task needs ``task=``; the checkpoint's task and sizes
            must match it.

    Raises:
        UserError: When the checkpoint's ``observation_dim`` / ``action_dim`` differ from
            the env's (naming both), ``env`` is not a DirectRLEnv, ``checkpoint`` names the
            ``.safetensors`` weights file instead of the checkpoint's ``.json``, the
            checkpoint cannot be loaded (CheckpointError), ``seed`` is not an int >= 0, or
            both ``env`` and ``task`` are given.
    """

    def __init__(
        self,
        checkpoint: str | os.PathLike[str] | Checkpoint,
        env: DirectRLEnv | gym.Env | None = None,
        render_mode: str | None = "human",
        *,
        seed: int = 0,
        task: str | type[Task] | Task | None = None,
    ) -> None:
        self.seed = check_seed(seed)
        if env is not None and task is not None:
            raise UserError(
                "RLPlayer takes the task of the env it plays: pass env= or task=, not both"
            )
        if env is not None:
            _require_direct_env(env)
        self.checkpoint = (
            checkpoint
            if isinstance(checkpoint, Checkpoint)
            else load_checkpoint(checkpoint, arrays="numpy")
        )
        self._policy = NumpyActor(self.checkpoint)
        self.render_mode = render_mode
        self._task = None if task is None else _named_task(task)
        if self._task is not None:  # refused now, before any window opens
            self._check_task(self._task, self._task.observation_dim, self._task.action_dim)
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
            UserError: When the observation or action sizes differ (naming both sides).
        """
        base = getattr(env, "unwrapped", env)
        space = getattr(base, "single_observation_space", None) or base.observation_space
        act_space = getattr(base, "single_action_space", None) or base.action_space
        obs_dim = int(np.prod(space.shape))  # an image task's: its images' size
        self._check_task(base.task, obs_dim, int(act_space.shape[-1]))
        fingerprint = self.checkpoint.meta.get("scene_fingerprint")
        world = getattr(base, "world", None)
        scene_differs = bool(fingerprint and world is not None and world.fingerprint != fingerprint)
        self._warn_differences(
            base.task,
            "the env's scene (its robots' bodies, joints, actuators or materials) differs "
            f"from the one it was trained in (scene fingerprint {world.fingerprint[:12]} "
            f"against {str(fingerprint)[:12]})"
            if scene_differs
            else None,
        )

    def _check_task(self, task: Task, obs_dim: int, act_dim: int) -> None:
        """Refuse a task of other sizes, or of a class the checkpoint was not trained on."""
        if (obs_dim, act_dim) != (self.observation_dim, self.action_dim):
            task_meta = self.checkpoint.meta.get("task")
            trained = (
                task_meta.get("id") or task_meta.get("class")
                if isinstance(task_meta, dict)
                else None
            )
            raise UserError(
                f"checkpoint {self.checkpoint.path}{f' (trained on {trained})' if trained else ''} "
                f"has observation_dim={self.observation_dim}, "
                f"action_dim={self.action_dim}, but the env's task {type(task).__name__} "
                f"has observation_dim={obs_dim}, action_dim={act_dim}; use a checkpoint "
                "trained on this task"
            )
        recorded = self._recorded_class()
        if recorded and not _trained_on(recorded, type(task)):
            raise CheckpointError(
                f"checkpoint {self.checkpoint.path} was trained on task {recorded!r}, not on "
                f"{_class_path(type(task))}; play it with the task it was trained on (or a "
                "subclass of it), or train a policy for this task"
            )

    def _recorded_class(self) -> str | None:
        task_meta = self.checkpoint.meta.get("task")
        recorded = task_meta.get("class") if isinstance(task_meta, dict) else None
        return recorded if isinstance(recorded, str) and recorded else None

    def _warn_differences(self, task: Task, scene: str | None) -> None:
        """Warn (once, naming both) when the task is a subclass or the scene differs."""
        recorded, actual = self._recorded_class(), _class_path(type(task))
        differences = []
        if recorded and recorded != actual:
            differences.append(f"it was trained on the task {recorded}, the env's is {actual}")
        if scene is not None:
            differences.append(scene)
        if differences:
            warnings.warn(
                f"checkpoint {self.checkpoint.path}: {'; '.join(differences)}; the policy may "
                "behave differently",
                stacklevel=3,
            )

    def make_env(self, render_mode: str | None = None, seed: int | None = None) -> DirectRLEnv:
        """A DirectRLEnv of the player's task (see ``task``) at the checkpoint's timing.

        Raises:
            CheckpointError: When no task was named and the checkpoint's is not built in.
            UserError: When the task does not fit the checkpoint (see :meth:`check_env`).
        """
        from kelab.rl.direct import DirectRLEnv
        from kelab.timing.config import SimulationTimingConfig

        task = _builtin_task(self.checkpoint) if self._task is None else self._task
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
    def env(self) -> DirectRLEnv | gym.Env:
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
            UserError: For a bad ``episodes`` or ``seed``, or ``video`` without ``rgb_array``.
        """
        if episodes is None and not interactive:
            raise UserError(
                "episodes=None (play until the window is closed) needs interactive=True; "
                "give a number of episodes"
            )
        if episodes is not None:
            episodes = check_int(episodes, "episodes", low=1)
        seed = self.seed if seed is None else check_seed(seed)
        if interactive:
            return self._play_interactive(episodes, seed, max_frames, on_episode)
        env = self.env
        base = env.unwrapped  # the DirectRLEnv inside any gymnasium wrappers
        if video is not None and env.render_mode != "rgb_array":
            raise UserError(
                f"video= needs render_mode='rgb_array' (frames drawn offscreen), got "
                f"render_mode={env.render_mode!r}; create RLPlayer(..., render_mode='rgb_array')"
            )
        recorder, timeline, frame = None, None, [None]
        if video is not None:
            from kelab.app.recorders import VideoRecorder
            from kelab.timing.timeline import Timeline

            timeline = Timeline(default_runners=False)
            timeline.add_runner("Policy", base.timing.control_hz)
            recorder = VideoRecorder(video, runner="Policy")
            recorder.attach(timeline, frame_source=lambda: frame[0])
        result = _Results()
        try:
            obs, _ = env.reset(seed=seed)
            if recorder is not None:
                frame[0] = env.render()
                timeline.step()
            while result.count < episodes and not base.window_closed:
                obs, reward, terminated, truncated, info = env.step(self.act(obs))
                result.steps += 1
                result.tally(reward)
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

        env = self._env.unwrapped if self._env is not None else self.make_env(None, seed)
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
        self._return = 0.0  # the running episode's, for an ending a wrapper made
        self._length = 0

    @property
    def count(self) -> int:
        return len(self.returns)

    def tally(self, reward: float) -> None:
        self._return += float(reward)
        self._length += 1

    def add(self, info: dict[str, Any]) -> None:
        """An episode ended: the env's own account, or (a wrapper ended it) the tallies."""
        self.returns.append(float(info.get("episode_return", self._return)))
        self.lengths.append(int(info.get("episode_length", self._length)))
        self.ended_by.append(str(info.get("ended_by", "a gymnasium wrapper")))
        self.successes.append(info.get("is_success"))
        self._return, self._length = 0.0, 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.count,
            "returns": self.returns,
            "lengths": self.lengths,
            "ended_by": self.ended_by,
            "successes": self.successes,
            "steps": self.steps,
        }
