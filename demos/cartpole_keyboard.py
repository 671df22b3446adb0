"""Cartpole under keyboard control: fixed-step rate, frame rate and interpolation.

Left / Right move the cart (the keys are read inside ``fixed_update``, at 50 Hz, however
fast frames are drawn): a balance controller keeps the pole up and the keys move the
point it balances around, so a press walks the cart instead of throwing the pole over.
B turns the balance assist off (the keys then push the cart with a gentle 6 N); R
resets; I toggles interpolation so you can see the 50 Hz physics stutter against a
60 Hz (or faster) display; Enter pauses, Space steps. While paused, Left / Right step
back / forward in time instead (Shift: a second, Home: the oldest step kept; F2's
Settings panel has a timeline slider): resume and the rewound run is redone until a key
changes it. The small chart at the bottom right shows the interpolation alpha of the
last frames.

    python demos/cartpole_keyboard.py
    python demos/cartpole_keyboard.py --headless --frames 180 --out cartpole.png
"""

from __future__ import annotations

import numpy as np
from demo_common import app_options, key, parse_args, run, world_options

import kelab as ke

PUSH = 6.0  # newtons, a held key with the assist off
TARGET_SPEED = 0.8  # m/s the balance point moves while a key is held
TRACK = 2.2  # the balance point stays within +-TRACK metres
# state feedback (cart 1 kg, pole 0.1 kg, 1 m): force = gains @ (x - target, v, theta, omega)
GAINS = np.array([1.0, 2.0, -30.0, -6.0])
MAX_FORCE = 15.0
CHART_W, CHART_H = 240, 44  # the alpha chart, pixels


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
        self.hinge = self.robot.find_joints("cart_to_pole")
        self.interpolate = True
        self.assist = True
        self.target = 0.0
        self.pushes = 0
        self.alpha_history: list[float] = []

    def fixed_update(self, ts: float) -> None:
        inp = self.input
        if inp.key_pressed("r"):
            self.world.reset_envs()
            self.target = 0.0
        if inp.key_pressed("b"):
            self.assist = not self.assist
        push = inp.axis("left", "right")
        if inp.key_pressed("left") or inp.key_pressed("right"):
            self.pushes += 1
        if not self.assist:
            force = PUSH * push
        else:
            self.target = float(np.clip(self.target + TARGET_SPEED * push * ts, -TRACK, TRACK))
            pos, vel = self.world.joint_positions[0], self.world.joint_velocities[0]
            s, h = self.slider[0], self.hinge[0]
            state = np.array([pos[s] - self.target, vel[s], pos[h], vel[h]])
            force = float(np.clip(GAINS @ state, -MAX_FORCE, MAX_FORCE))
        self.robot.set_joint_effort_target(np.full((1, 1), force), self.slider)

    def state_dict(self) -> dict:  # what a rewind puts back (docs/app.md, "Time travel")
        return {"target": self.target, "assist": self.assist, "pushes": self.pushes}

    def load_state_dict(self, state: dict) -> None:
        self.target, self.assist, self.pushes = state["target"], state["assist"], state["pushes"]

    def pre_update(self) -> None:
        if self.input.key_pressed("i"):
            self.interpolate = not self.interpolate

    def render(self, canvas, alpha: float) -> None:
        if not self.interpolate:  # redraw the raw physics state over the interpolated one
            canvas.clear(self.live.background)
            canvas.draw_world(self.world, 1.0)
        self.alpha_history = (self.alpha_history + [alpha])[-120:]
        stats = self.stats
        w, h = self.camera.size
        lines = [
            f"fixed step {self.timeline.runner('Robot').hz_float:.0f} Hz   "
            f"measured {stats.runner_rates.get('Robot', 0.0):5.1f} steps/s",
            f"frames {stats.fps:5.1f} fps   steps this frame {stats.steps_per_frame}",
            f"interpolation {'on' if self.interpolate else 'OFF'}   alpha {alpha:4.2f}   "
            f"balance assist {'on' if self.assist else 'OFF'}",
            "left/right: move (paused: rewind)   b: assist   r: reset   i: interp.   enter: pause",
        ]
        for i, text in enumerate(lines):
            y = self.overlays.top + 10 + 22 * i  # below the window's menu bar
            canvas.text((12, y), text, (225, 230, 238), 16, screen_space=True)
        self._alpha_chart(canvas, w, h)

    def _alpha_chart(self, canvas, w: int, h: int) -> None:
        """Interpolation alpha per frame (0 at the baseline, 1 at the top line)."""
        x0, y1 = w - CHART_W - 12, h - 12
        y0 = y1 - CHART_H
        canvas.screen_rect((x0 - 6, y0 - 22, x0 + CHART_W + 6, y1 + 6), (16, 18, 24))
        canvas.text(
            (x0, y0 - 18),
            "interpolation alpha, last 120 frames",
            (200, 205, 215),
            13,
            screen_space=True,
        )
        bar_w = CHART_W / 120
        for i, a in enumerate(self.alpha_history):
            if a > 0:
                bx = x0 + 14 + i * (CHART_W - 14) / 120
                canvas.screen_rect(
                    (bx, y1 - CHART_H * a, bx + max(bar_w - 0.5, 1.0), y1), (90, 170, 230)
                )
        canvas.text((x0, y0 - 2), "1", (150, 155, 165), 12, screen_space=True)
        canvas.text((x0, y1 - 12), "0", (150, 155, 165), 12, screen_space=True)


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
