"""A manual loop: your own ``while`` drives the App one ``renderFrameOnce()`` at a time.

Use this when another system owns the main loop (a notebook, a GUI toolkit, a test).
``renderFrameOnce()`` runs one whole frame: input, the fixed steps that are due, and
drawing. Between frames the loop may do anything except run inside a fixed step. Here
the loop makes the camera follow the balls and, every 2 s of simulated time, kicks them
back towards their places (`Kicker`), so they hop about in view for as long as it runs.

    python demos/manual_loop.py
    python demos/manual_loop.py --headless --frames 200 --out manual.png
"""

from __future__ import annotations

import numpy as np
from demo_common import app_options, parse_args, world_options

import kelab as ke

BALL_RADIUS = 0.25


def build_scene(balls: int = 5) -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    colors = [(230, 120, 60), (90, 170, 230), (120, 200, 120), (220, 200, 90), (200, 80, 160)]
    for i in range(balls):
        b.add(
            ke.Prop(
                ke.Circle(BALL_RADIUS),
                mass=1.0,
                material=ke.Material(restitution=0.7),
                initial_pose=ke.Pose(-2.0 + i, 0.6 + 0.5 * i),
                render=ke.RenderHint(color=colors[i % len(colors)]),
            ),
            at=f"/World/Ball{i}",
        )
    b.camera("main", center=(0.0, 1.5), zoom=110.0)
    return b.build()


class Manual(ke.App):
    def state_dict(self) -> dict:  # no state of its own: a rewind needs nothing more
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def render(self, canvas, alpha: float) -> None:
        canvas.text(
            (12, self.overlays.top + 10),  # below the window's menu bar
            f"manual loop: frame {self.frame_count}   sim {self.sim_time:6.2f} s",
            (225, 230, 238),
            18,
            screen_space=True,
        )


class Kicker:
    """What the loop does between frames: follow the balls, kick them every 2 s.

    Each kick throws every ball up (a hop of about 0.6 m) and sends it, spinning as if
    rolling, back towards where it started by the next kick, give or take a little
    random speed: the balls hop about their places for as long as the loop runs and stay
    in view (kicks that only added random speed scattered them off the screen within
    seconds).

    Args:
        world: The World the App steps.
        seed: Seeds the kicks' Generator.
    """

    PERIOD_S = 2.0
    HOP_SPEED = 3.5  # m/s up: a hop of about 0.6 m
    SPREAD = 0.2  # m/s: the random part of each kick

    def __init__(self, world: ke.World, seed: int = 7) -> None:
        self.world = world
        self.rng = np.random.default_rng(seed)
        self.next_kick = 1.0
        self.home = world.body_poses[0, :, 0].copy()  # each ball's starting x

    def __call__(self, app: ke.App) -> None:
        """Run between two frames: move the camera, kick when a kick is due."""
        world = self.world
        poses = world.body_poses[0]
        cam = app.camera
        cam.center = (0.9 * cam.center[0] + 0.1 * float(poses[1:, 0].mean()), cam.center[1])
        if app.sim_time < self.next_kick:
            return
        self.next_kick += self.PERIOD_S
        vels = world.body_velocities[:1]
        balls = len(poses) - 1  # body 0 is the ground
        noise = self.rng.normal(0.0, self.SPREAD, size=(balls, 2))
        # back home within one kick period, plus noise; up at HOP_SPEED, plus noise
        vels[0, 1:, 0] = (self.home[1:] - poses[1:, 0]) / self.PERIOD_S + noise[:, 0]
        vels[0, 1:, 1] = self.HOP_SPEED + noise[:, 1]
        vels[0, 1:, 2] = -vels[0, 1:, 0] / BALL_RADIUS  # spin to roll on where it lands
        world.set_body_states([0], world.body_poses[:1], vels)


def main() -> None:
    args = parse_args("KELab manual loop driven by renderFrameOnce()", default_frames=200)
    world = ke.World(build_scene(), **world_options(args))
    app = Manual(title="KELab manual loop", world=world, **app_options(args))
    between_frames = Kicker(world)
    try:
        while args.frames is None or app.frame_count < args.frames:
            if args.headless:
                args.frame_clock.advance()
            if not app.renderFrameOnce():  # one frame: input, fixed steps, drawing
                break
            between_frames(app)  # between frames: anything but pacing or nested frames
    finally:
        app.close()
    if args.out:
        print(f"wrote {app.write_pixels_png(args.out)}")


if __name__ == "__main__":
    main()
