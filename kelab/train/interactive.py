"""Play a policy inside a ``ke.App``: the policy acts in ``fixed_update``; pause, step, drag.

The App draws and picks in the env's World, but does not step it: each fixed step of the
App's Robot runner (at the env's control rate) is one ``env.step(policy(obs))``, which
runs the physics ``decimation`` times. A body dragged with the mouse is pulled by the
App's drag spring (a held external force), so the policy has to recover from the push.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from kelab.app.app import App
    from kelab.render.canvas import Canvas
    from kelab.rl.direct import DirectRLEnv

__all__ = ["play_in_app", "policy_app"]


def _app_class() -> type[App]:
    from kelab.app.app import App
    from kelab.render.scenery import PALETTE

    class PolicyApp(App):
        """An App whose fixed step is one env step with the policy's action."""

        def __init__(
            self,
            env: DirectRLEnv,
            act: Callable[[np.ndarray], np.ndarray],
            episodes: int,
            seed: int,
            **kwargs: Any,
        ) -> None:
            from kelab.timing.timeline import Timeline

            timeline = Timeline(default_runners=False)
            timeline.add_runner("Robot", env.timing.control_hz)
            timeline.add_runner("Capture", 30)
            task = env.unwrapped.task
            kwargs.setdefault("size", tuple(int(v) for v in task.render_size))
            kwargs.setdefault("title", f"KELab - {type(task).__name__} (policy)")
            if kwargs.get("config") is None:  # the sky of `kelab play`'s window
                kwargs.setdefault("background", PALETTE["sky_bottom"])
            super().__init__(
                world=env.unwrapped.world,
                timeline=timeline,
                **kwargs,
            )
            for binding in self.timeline.bindings:  # the env steps the physics itself
                if binding.name == "world.step":
                    binding.enabled = False
            # dark text on a light backdrop, light text on a dark one
            r, g, b = self.background
            light = 0.299 * r + 0.587 * g + 0.114 * b >= 128
            self._text_color = PALETTE["text"] if light else (236, 240, 244)
            self.env = env
            self.act = act
            self.episodes_wanted = episodes
            self.results: list[dict[str, Any]] = []
            self.env_steps = 0
            self.obs, _ = env.reset(seed=seed)

        def fixed_update(self, ts: float) -> None:
            """One env step with the policy's action; a finished episode restarts."""
            if len(self.results) >= self.episodes_wanted:
                self.request_close()
                return
            obs, _, terminated, truncated, info = self.env.step(self.act(self.obs))
            self.env_steps += 1
            if terminated or truncated:
                self.results.append(dict(info))
                if len(self.results) >= self.episodes_wanted:
                    self.request_close()
                obs, _ = self.env.reset()
            self.obs = obs

        def pre_render(self) -> None:
            """Follow the robot with the camera at the task's zoom."""
            task = self.env.unwrapped.task
            center = task.camera_center()
            if center is None:
                poses = self.world.body_poses
                center = (float(poses[0, -1, 0]), 1.0)
            self.camera.center = center
            self.camera.zoom = float(task.render_zoom)

        def render(self, canvas: Canvas, alpha: float) -> None:
            """The task's markers, and a status line."""
            task = self.env.unwrapped.task
            world = self.world
            ids = np.array([0])
            task.draw(canvas, ids, world.env_origins[ids])
            state = "paused (Space: step, Enter: play)" if self.paused else "Space: pause"
            canvas.text(
                (8, 6),
                f"episode {len(self.results) + 1}  step {self.env_steps}  {state}  "
                "drag the robot with the mouse",
                self._text_color,
                size=14,
                screen_space=True,
            )

    return PolicyApp


def policy_app(
    env: DirectRLEnv,
    act: Callable[[np.ndarray], np.ndarray],
    episodes: int = 1,
    seed: int = 0,
    **app_kwargs: Any,
) -> App:
    """Build (not start) the ``ke.App`` that plays ``act`` in ``env``.

    Args:
        env: A DirectRLEnv with ``render_mode=None`` (the App draws its World).
        act: Observation -> action.
        episodes: The App asks to close after this many finished episodes.
        seed: Seed of the first reset.
        **app_kwargs: Passed to ``ke.App`` (``headless``, ``backend``, ``clock``...).

    Returns:
        The App (``app.results`` lists the finished episodes' infos, ``app.env_steps``
        counts env steps).
    """
    return _app_class()(env, act, episodes, seed, **app_kwargs)


def play_in_app(
    env: DirectRLEnv,
    act: Callable[[np.ndarray], np.ndarray],
    episodes: int,
    seed: int,
    max_frames: int | None = None,
    **app_kwargs: Any,
) -> dict[str, Any]:
    """Run the policy in an App window until it closes or ``episodes`` episodes ended.

    Returns:
        ``{"episodes", "returns", "lengths", "ended_by", "successes", "steps", "video"}``.
    """
    app = policy_app(env, act, episodes, seed, **app_kwargs)
    app.start(max_frames=max_frames)
    res = app.results
    return {
        "episodes": len(res),
        "returns": [float(r["episode_return"]) for r in res],
        "lengths": [int(r["episode_length"]) for r in res],
        "ended_by": [str(r["ended_by"]) for r in res],
        "successes": [r.get("is_success") for r in res],
        "steps": app.env_steps,
        "video": None,
        "app": app,
    }
