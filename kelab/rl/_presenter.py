"""Presenter: renders and paces an environment according to its run mode (internal).

The step engine (`kelab.rl._core.EnvCore`) never draws; ``LearningEnv`` and
``DirectRLEnv`` call their Presenter after resets and steps. It reads only the core's
public state (task, world, timing, robots, episode counters).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kelab.timing.config import RunMode, SimulationRunConfig
from kelab.timing.pacer import SimulationPacer

if TYPE_CHECKING:
    from kelab.render.renderer import Renderer
    from kelab.render.scenery import Ground
    from kelab.rl._core import EnvCore

__all__ = ["Presenter"]


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
        gx, gy = world.gravity[0]  # copy 0's own (randomized gravity), as its step
        canvas.text(
            (8, 6),
            f"{type(task).__name__}   episode time {step * core.timing.step_dt:6.2f} s   "
            f"step {step}/{core.max_episode_length}   gravity ({gx:g}, {gy:g})",
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
