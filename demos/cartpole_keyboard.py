"""Cartpole under keyboard control: fixed-step rate, frame rate and interpolation.

Left / Right push the cart (the keys are read inside ``fixed_update``, at 50 Hz, however
fast frames are drawn); R resets; I toggles interpolation so you can see the 50 Hz
physics stutter against a 60 Hz (or faster) display; Enter pauses, Space steps.

    python demos/cartpole_keyboard.py
    python demos/cartpole_keyboard.py --headless --frames 180 --out cartpole.png
"""

from __future__ import annotations

import numpy as np
from demo_common import app_options, key, parse_args, run, world_options

import kelab as ke

FORCE = 30.0  # newtons


def build_scene() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    b.camera("main", center=(0.0, 1.0), zoom=130.0)
    return b.build()


class CartpoleKeys(ke.App):
    def setup(self) -> None:
        self.robot = self.world.robot("/World/Robot")
        self.slider = self.robot.find_joints("slider_to_cart")
        self.interpolate = True
        self.pushes = 0
        self.alpha_history: list[float] = []

    def fixed_update(self, ts: float) -> None:
        inp = self.input
        if inp.key_pressed("r"):
            self.world.reset_envs()
        push = inp.axis("left", "right")
        if inp.key_pressed("left") or inp.key_pressed("right"):
            self.pushes += 1
        self.robot.set_joint_effort_target(np.full((1, 1), FORCE * push), self.slider)

    def pre_update(self) -> None:
        if self.input.key_pressed("i"):
            self.interpolate = not self.interpolate

    def render(self, canvas, alpha: float) -> None:
        if not self.interpolate:  # redraw the raw physics state over the interpolated one
            canvas.clear(self.background)
            canvas.draw_world(self.world, 1.0)
        self.alpha_history = (self.alpha_history + [alpha])[-120:]
        stats = self.stats
        w, h = self.camera.size
        lines = [
            f"fixed step {self.timeline.runner('Robot').hz_float:.0f} Hz   "
            f"measured {stats.runner_rates.get('Robot', 0.0):5.1f} steps/s",
            f"frames {stats.fps:5.1f} fps   steps this frame {stats.steps_per_frame}",
            f"interpolation {'on' if self.interpolate else 'OFF'}   alpha {alpha:4.2f}",
            "left/right: push   r: reset   i: interpolation   enter: pause   space: step",
        ]
        for i, text in enumerate(lines):
            canvas.text((12, 10 + 22 * i), text, (225, 230, 238), 17, screen_space=True)
        # the alpha of the last frames as bars: a saw-tooth when 50 Hz meets 60 fps
        cam = self.camera
        base, bar_w = h - 20, max(2, (w - 24) // 120)
        for i, a in enumerate(self.alpha_history):
            x0, top = 12 + i * bar_w, base - 60 * a
            pts = [(x0, base), (x0 + bar_w - 1, base), (x0 + bar_w - 1, top), (x0, top)]
            if a > 0:
                canvas.polygon([cam.screen_to_world(p) for p in pts], (90, 170, 230))
        canvas.line(
            cam.screen_to_world((12, base - 60)),
            cam.screen_to_world((w - 12, base - 60)),
            (90, 95, 105),
        )


def script(app: ke.App, frame: int) -> None:
    """Headless: push right, then left, then right again."""
    plan = {
        5: ("right", True),
        45: ("right", False),
        60: ("left", True),
        110: ("left", False),
        120: ("right", True),
        150: ("right", False),
    }
    if frame in plan:
        key(app, *plan[frame])


def main() -> None:
    args = parse_args("KELab cartpole under keyboard control", default_frames=180)
    world = ke.World(build_scene(), **world_options(args))
    app = CartpoleKeys(title="KELab cartpole", world=world, show_hud=False, **app_options(args))
    run(app, args, script if args.headless else None)


if __name__ == "__main__":
    main()
