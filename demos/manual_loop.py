"""A manual loop: your own ``while`` drives the App one ``renderFrameOnce()`` at a time.

Use this when another system owns the main loop (a notebook, a GUI toolkit, a test).
``renderFrameOnce()`` runs one whole frame: input, the fixed steps that are due, and
drawing. Between frames the loop may do anything except run inside a fixed step. Here
the loop makes the camera follow the balls and, every 2 s of simulated time, kicks them.

    python demos/manual_loop.py
    python demos/manual_loop.py --headless --frames 200 --out manual.png
"""

from __future__ import annotations

import numpy as np
from demo_common import app_options, parse_args, world_options

import kelab as ke


def build_scene(balls: int = 5) -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    colors = [(230, 120, 60), (90, 170, 230), (120, 200, 120), (220, 200, 90), (200, 80, 160)]
    for i in range(balls):
        b.add(
            ke.Prop(
                ke.Circle(0.25),
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
    def render(self, canvas, alpha: float) -> None:
        canvas.text(
            (12, 10),
            f"manual loop: frame {self.frame_count}   sim {self.sim_time:6.2f} s",
            (225, 230, 238),
            18,
            screen_space=True,
        )


def main() -> None:
    args = parse_args("KELab manual loop driven by renderFrameOnce()", default_frames=200)
    world = ke.World(build_scene(), **world_options(args))
    app = Manual(title="KELab manual loop", world=world, **app_options(args))
    rng = np.random.default_rng(7)
    next_kick = 1.0
    try:
        while args.frames is None or app.frame_count < args.frames:
            if args.headless:
                args.frame_clock.advance()
            if not app.renderFrameOnce():  # one frame: input, fixed steps, drawing
                break
            # between frames: anything but pacing or nested frames
            poses = world.body_poses[0]
            cam = app.camera
            cam.center = (0.9 * cam.center[0] + 0.1 * float(poses[:, 0].mean()), cam.center[1])
            if app.sim_time >= next_kick:
                next_kick += 2.0
                vels = world.body_velocities[:1]
                vels[0, 1:, :2] += rng.normal(0.0, 2.5, size=(len(poses) - 1, 2)) + (0.0, 4.0)
                world.set_body_states([0], world.body_poses[:1], vels)
    finally:
        app.close()
    if args.out:
        print(f"wrote {app.write_pixels_png(args.out)}")


if __name__ == "__main__":
    main()
