"""Play a policy inside a ``ke.App``: the policy acts in ``fixed_update``; pause, step, drag.

The App draws and picks in the env's World, but does not step it: each fixed step of the
App's Robot runner (at the env's control rate) is one ``env.step(policy(obs))``, which
runs the physics ``decimation`` times. A body dragged with the mouse is pulled by the
App's drag spring (a held external force), so the policy has to recover from the push.

An episode the task ends early (a fall) is not restarted at once: for
:data:`FALL_HOLD_S` the physics goes on with the joints limp, so the fall is seen to land,
and the status line says how the episode ended. (The env restarts a finished copy within
its step, so the App snapshots the World before each step, ~0.7 ms for one copy; after a
fall it goes on from there, then puts back the new episode's start the env had made.)

Time travel (docs/app.md, "Time travel") works here too: the App's keyframes hold the
World and its ``state_dict`` the env's own state (episode counters, task state,
Generators), so Left / Home / the panel's slider rewind the env and a fall's hold
exactly (a seek restores the World twice: once for the App, once inside
``env.restore``); drag the robot there and the policy goes on from the push (a branch),
or resume untouched and the recorded episode comes back bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from kelab.app.app import App
    from kelab.render.canvas import Canvas
    from kelab.rl.direct import DirectRLEnv
    from kelab.sim.snapshot import Snapshot

__all__ = ["FALL_HOLD_S", "play_in_app", "policy_app"]

FALL_HOLD_S = 1.0
"""Seconds of simulated time an early-ended episode goes on (joints limp) before its reset."""
BANNER_S = 2.0
"""Seconds of simulated time the status line shows how the last episode ended."""

EpisodeCallback = Callable[[int, dict[str, Any]], None]


def _has_state(obj: object) -> bool:
    """Whether a policy keeps state of its own (``state_dict`` / ``load_state_dict``)."""
    return hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict")


def _plain(value: Any) -> Any:
    """A snapshot's read-only meta as plain dicts and lists (deep-copyable)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _timeless(info: dict[str, Any]) -> dict[str, Any]:
    """An episode's info without its wall-clock time (``info["episode"]["t"]``)."""
    out = dict(info)
    if isinstance(out.get("episode"), dict):
        out["episode"] = {k: v for k, v in out["episode"].items() if k != "t"}
    return out


def _env_part(snap: Snapshot) -> dict[str, Any]:
    """An env snapshot without its World: the counters, task state and Generators."""
    arrays = {k: np.array(v) for k, v in snap.arrays.items() if not k.startswith("world/")}
    return {"arrays": arrays, "meta": _plain({k: v for k, v in snap.meta.items() if k != "world"})}


def _app_class() -> type[App]:
    from kelab.app.app import App
    from kelab.app.overlays import fit_lines
    from kelab.render.scenery import PALETTE

    class PolicyApp(App):
        """An App whose fixed step is one env step with the policy's action."""

        def __init__(
            self,
            env: DirectRLEnv,
            act: Callable[[np.ndarray], np.ndarray],
            episodes: int | None,
            seed: int,
            on_episode: EpisodeCallback | None = None,
            **kwargs: Any,
        ) -> None:
            from kelab.timing.timeline import Timeline

            timeline = Timeline(default_runners=False)
            timeline.add_runner("Robot", env.unwrapped.timing.control_hz)
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
            r, g, b = self.live.background
            light = 0.299 * r + 0.587 * g + 0.114 * b >= 128
            self._text_color = PALETTE["text"] if light else (236, 240, 244)
            self.env = env
            self.act = act
            self.episodes_wanted = episodes
            self.on_episode = on_episode
            self.results: list[dict[str, Any]] = []
            self.env_steps = 0
            self.episode_steps = 0  # env steps of the running episode
            timing = env.unwrapped.timing
            self._sim_dt, self._decimation = timing.sim_dt, timing.decimation
            self._control_hz = timing.control_hz
            self._hold = 0  # fixed steps left of a fall's limp continuation
            self._resume: Snapshot | None = None  # the new episode's start, during a hold
            self._banner: tuple[str, int] | None = None  # (text, shown until this env step)
            self.obs, _ = env.reset(seed=seed)

        @property
        def done(self) -> bool:
            """``episodes_wanted`` episodes ended (never, for None)."""
            wanted = self.episodes_wanted
            return wanted is not None and len(self.results) >= wanted

        def state_dict(self) -> dict[str, Any]:
            """Everything a rewind puts back (the App's time travel, docs/app.md).

            The env's own part of its snapshot (episode counters, task state and
            Generators; not the World, which the App's keyframes hold), the last
            observation, the counters, the finished episodes' infos (without their
            wall-clock ``episode.t``, which no replay repeats), a fall's hold and the
            policy's own ``state_dict()`` if it has one.
            """
            resume = self._resume
            policy = getattr(self.act, "__self__", self.act)
            return {
                "env": _env_part(self.env.unwrapped.snapshot()),
                "obs": np.array(self.obs, copy=True),
                "counts": (self.env_steps, self.episode_steps, self._hold),
                "results": [_timeless(r) for r in self.results],
                "resume": None if resume is None else resume.to_bytes(),
                "banner": self._banner,
                "policy": policy.state_dict() if _has_state(policy) else None,
            }

        def load_state_dict(self, state: dict[str, Any]) -> None:
            """Return to a `state_dict` (time travel: seek, rewind before a fall)."""
            from kelab.sim.snapshot import Snapshot

            env = self.env.unwrapped
            now = env.snapshot()  # the World as the App's keyframe put it back
            arrays = {k: v for k, v in now.arrays.items() if k.startswith("world/")}
            meta = {"world": now.meta["world"], **state["env"]["meta"]}
            arrays.update(state["env"]["arrays"])
            env.restore(Snapshot(now.fingerprint, now.step_count, now.sim_time, arrays, meta))
            self.obs = np.array(state["obs"], copy=True)
            self.env_steps, self.episode_steps, self._hold = state["counts"]
            self.results = [_timeless(r) for r in state["results"]]
            resume = state["resume"]
            self._resume = None if resume is None else Snapshot.from_bytes(resume)
            self._banner = state["banner"]
            policy = getattr(self.act, "__self__", self.act)
            if state["policy"] is not None and _has_state(policy):
                policy.load_state_dict(state["policy"])

        def fixed_update(self, ts: float) -> None:
            """One env step with the policy's action; a finished episode restarts.

            An early ending (``terminated``) first goes on limp for :data:`FALL_HOLD_S`.
            """
            if self._hold:
                self._limp_step()
                return
            if self.done:
                self.request_close()
                return
            before = self.world.snapshot()  # where a fall goes on from (see the module doc)
            obs, _, terminated, truncated, info = self.env.step(self.act(self.obs))
            self.env_steps += 1
            self.episode_steps += 1
            self.obs = obs
            if not (terminated or truncated):
                return
            self.results.append(dict(info))
            n = len(self.results)
            if self.on_episode is not None and not self.time_travel.replaying:
                self.on_episode(n, dict(info))  # (a seek's re-run does not report again)
            text = f"episode {n}: {info.get('ended_by')}, return {info['episode_return']:.1f}"
            self._banner = (text, self.env_steps + round(BANNER_S * self._control_hz))
            if terminated and not self.done:
                self._resume = self.world.snapshot()  # the env's restart of the copy
                self.world.restore(before)
                self._hold = max(1, round(FALL_HOLD_S * self._control_hz))
                return
            self._restart()

        def _limp_step(self) -> None:
            """One control period of physics with zero joint efforts (the fall lands)."""
            world = self.world
            world.set_joint_efforts(np.zeros((world.num_envs, len(world.joint_names))))
            world.step(self._sim_dt, steps=self._decimation)
            self._hold -= 1
            if not self._hold:
                self._restart()

        def _restart(self) -> None:
            if self._resume is not None:  # the World as the env left it: the new episode
                self.world.restore(self._resume)
                self._resume = None
            if self.done:
                self.request_close()
                return
            self.obs, _ = self.env.reset()
            self.episode_steps = 0

        def _free_width(self) -> int:
            """The pixels left of the open Settings panel (the window's width if closed)."""
            width = int(self.camera.size[0])
            rects = self.panel_window.rects(self.camera.size)
            return max(1, min([width, *(r[0] for r in rects if r[0] > 0)]))

        def pre_render(self) -> None:
            """Follow the robot with the camera at the task's zoom.

            With the Settings panel open the robot is centred in the room left of it.
            """
            task = self.env.unwrapped.task
            center = task.camera_center()
            if center is None:
                poses = self.world.body_poses
                center = (float(poses[0, -1, 0]), 1.0)
            zoom = float(task.render_zoom)
            shift = (self.camera.size[0] - self._free_width()) / 2 / zoom
            self.camera.center = (float(center[0]) + shift, float(center[1]))
            self.camera.zoom = zoom

        def render(self, canvas: Canvas, alpha: float) -> None:
            """The task's markers, and a status line."""
            task = self.env.unwrapped.task
            world = self.world
            ids = np.array([0])
            task.draw(canvas, ids, world.env_origins[ids])
            n = len(self.results) + (0 if self._hold else 1)
            t = self.episode_steps / self._control_hz
            limit = self.env.unwrapped.max_episode_length
            status = f"episode {n}  {t:.2f} s  step {self.episode_steps}/{limit}"
            if self._banner is not None and self.env_steps <= self._banner[1]:
                status += "    " + self._banner[0] + ("  (restarting)" if self._hold else "")
            paused = "paused (Space: step, Enter: play, Left / Home: rewind)"
            state = paused if self.paused else "Space: pause"
            # below the menu bar, wrapped to the room left of the open Settings panel
            lines, size = fit_lines(
                canvas,
                [status, f"{state}  drag the robot with the mouse"],
                14,
                self._free_width() - 16,
            )
            top = self.overlays.top + 6
            for row, line in enumerate(lines):
                pos = (8, top + (size + 4) * row)
                canvas.text(pos, line, self._text_color, size=size, screen_space=True)

    return PolicyApp


def policy_app(
    env: DirectRLEnv,
    act: Callable[[np.ndarray], np.ndarray],
    episodes: int | None = 1,
    seed: int = 0,
    on_episode: EpisodeCallback | None = None,
    **app_kwargs: Any,
) -> App:
    """Build (not start) the ``ke.App`` that plays ``act`` in ``env``.

    Args:
        env: A DirectRLEnv with ``render_mode=None`` (the App draws its World).
        act: Observation -> action.
        episodes: The App asks to close after this many finished episodes; None plays
            until the window is closed.
        seed: Seed of the first reset.
        on_episode: Called with ``(n, info)`` as each episode ends (n from 1).
        **app_kwargs: Passed to ``ke.App`` (``headless``, ``backend``, ``clock``...).

    Returns:
        The App (``app.results`` lists the finished episodes' infos, ``app.env_steps``
        counts env steps).
    """
    return _app_class()(env, act, episodes, seed, on_episode, **app_kwargs)


def play_in_app(
    env: DirectRLEnv,
    act: Callable[[np.ndarray], np.ndarray],
    episodes: int | None,
    seed: int,
    max_frames: int | None = None,
    on_episode: EpisodeCallback | None = None,
    **app_kwargs: Any,
) -> dict[str, Any]:
    """Run the policy in an App window until it closes or ``episodes`` episodes ended.

    ``episodes=None`` plays until the window is closed; ``on_episode(n, info)`` hears of
    each ending as it happens.

    Returns:
        ``{"episodes", "returns", "lengths", "ended_by", "successes", "steps", "video"}``.
    """
    app = policy_app(env, act, episodes, seed, on_episode, **app_kwargs)
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
