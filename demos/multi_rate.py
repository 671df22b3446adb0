"""Multi-rate time runners: Robot 50 Hz and Capture 30 Hz on one timeline, with recorders.

The strip at the bottom shows the last 200 ms of boundaries: Robot (top row) every 20 ms,
Capture (bottom row) every 33.3 ms, and the shared steps (every 100 ms, red) where both
fire in one phase-interleaved step. The Robot runner balances the pole with a linear-quadratic
regulator (`balance_force`): it stays up, the cart mid-track, for as long as the demo runs
(drag the pole or the cart to knock it). A DataRecorder (CSV) and a VideoRecorder (MP4) run on
the Capture runner in the ACQUISITION phase, so they record the state the controller is
about to react to; the execution order table is printed at start, and the Settings panel
(F2) opens on its Execution Order page.

    python demos/multi_rate.py
    python demos/multi_rate.py --headless --frames 150 --out multi_rate.png --record-dir out
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from demo_common import app_options, parse_args, run, world_options

import kelab as ke

WINDOW_S = 0.2  # seconds of timeline shown
STRIP_PX = 100  # height of the timeline strip at the bottom (below the ground line)
FORCE_LIMIT = 100.0  # the cartpole's slider actuator limit (N)


def lqr_gains(dt: float) -> np.ndarray:
    """State-feedback gains ``K`` (force = ``-K @ (x, x_dot, theta, theta_dot)``) for the cartpole.

    The cartpole (``kelab/robot/cartpole:v1``: cart 1 kg, pole 0.1 kg and 1 m, angle CCW
    from upright) linearised about upright, held constant over each control period ``dt``
    (the controller runner's step), and the discrete Riccati equation iterated to its fixed
    point: a linear-quadratic regulator that keeps the pole up and brings the cart back to
    the middle of the track.

    Args:
        dt: The control period in seconds (the runner that calls the controller).

    Returns:
        The gains, shape ``(4,)``.
    """
    cart_m, pole_m, half, g = 1.0, 0.1, 0.5, 9.81
    inertia = pole_m * (2 * half) ** 2 / 12.0 + pole_m * half**2  # about the hinge
    # (M + m) x'' - m l th'' = F ;  I th'' - m l x'' = m g l th   (th CCW: tips towards -x)
    mass = np.array([[cart_m + pole_m, -pole_m * half], [-pole_m * half, inertia]])
    stiff = np.linalg.solve(mass, np.array([[0.0, 0.0], [0.0, pole_m * g * half]]))
    push = np.linalg.solve(mass, np.array([1.0, 0.0]))
    a = np.zeros((4, 4))
    a[0, 1] = a[2, 3] = 1.0
    a[1, [0, 2]], a[3, [0, 2]] = stiff[0], stiff[1]
    b = np.array([0.0, push[0], 0.0, push[1]])
    # zero-order hold: exp([[A, B], [0, 0]] dt) by a Taylor series (the block is small)
    m = np.zeros((5, 5))
    m[:4, :4], m[:4, 4] = a * dt, b * dt
    term, expm = np.eye(5), np.eye(5)
    for k in range(1, 30):
        term = term @ m / k
        expm = expm + term
    ad, bd = expm[:4, :4], expm[:4, 4:]
    q, r = np.diag([1.0, 0.1, 10.0, 0.1]), np.array([[0.01]])
    p = q.copy()
    for _ in range(5000):
        k_gain = np.linalg.solve(r + bd.T @ p @ bd, bd.T @ p @ ad)
        p_next = q + ad.T @ p @ (ad - bd @ k_gain)
        if np.allclose(p_next, p, rtol=1e-12, atol=1e-12):
            break
        p = p_next
    return k_gain[0]


_GAINS: dict[float, np.ndarray] = {}


def balance_force(q: np.ndarray, qd: np.ndarray, dt: float) -> float:
    """The balance controller: the cart force (N) for one control period.

    Args:
        q: Joint positions ``(cart x, pole angle)`` of one copy.
        qd: Joint velocities ``(cart x_dot, pole theta_dot)``.
        dt: The control period in seconds.

    Returns:
        The force, within the actuator's ±100 N.
    """
    gains = _GAINS.get(dt)
    if gains is None:
        gains = _GAINS[dt] = lqr_gains(dt)
    state = np.array([q[0], qd[0], q[1], qd[1]])
    return float(np.clip(-gains @ state, -FORCE_LIMIT, FORCE_LIMIT))


def build_scene() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    b.add(ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    b.add(
        ke.Prop(
            ke.Circle(0.2),
            mass=0.5,
            material=ke.Material(restitution=0.8),
            initial_pose=ke.Pose(1.6, 2.5),
            render=ke.RenderHint(color=(230, 120, 60)),
        ),
        at="/World/Ball",
    )
    # the ground sits at 380 px of 540, above the 100 px timeline strip at the bottom
    b.camera("main", center=(0.5, 0.92), zoom=120.0)
    return b.build()


class MultiRate(ke.App):
    def setup(self) -> None:
        self.boundaries: dict[str, list[float]] = {"Robot": [], "Capture": []}
        for name in self.boundaries:
            self.timeline.bind(
                lambda ts, n=name: self.boundaries[n].append(self.timeline.time_s),
                runner=name,
                phase=ke.Phase.ACQUISITION,
                priority=-1000,
                name=f"mark_{name}",
            )
        robot = self.world.robot("/World/Robot")
        self.robot, self.slider = robot, robot.find_joints("slider_to_cart")
        print(self.execution_order())

    def state_dict(self) -> dict:  # what a rewind puts back (docs/app.md, "Time travel")
        return {"boundaries": {k: list(v) for k, v in self.boundaries.items()}}

    def load_state_dict(self, state: dict) -> None:
        for name, times in state["boundaries"].items():
            self.boundaries[name][:] = times  # the lists the marks append to

    def fixed_update(self, ts: float) -> None:
        # the balance controller, on the Robot runner (50 Hz): state feedback u = -K s
        force = balance_force(self.world.joint_positions[0], self.world.joint_velocities[0], ts)
        self.robot.set_joint_effort_target(np.full((1, 1), force), self.slider)

    def late_update(self, ts: float) -> None:
        now = self.timeline.time_s  # keep the boundary lists short (also when not drawn)
        for name in self.boundaries:
            self.boundaries[name] = [t for t in self.boundaries[name] if t >= now - 2 * WINDOW_S]

    def render(self, canvas, alpha: float) -> None:
        cam = self.camera
        w, h = cam.size
        now = self.timeline.time_s
        label_w = max(canvas.text_size(name, 14)[0] for name in self.boundaries)
        left, right = 12 + label_w + 12, w - 24
        rows = {"Robot": h - 66, "Capture": h - 30}
        top = h - STRIP_PX

        def x_of(t: float) -> float:
            return left + (t - (now - WINDOW_S)) / WINDOW_S * (right - left)

        def world(p):
            return cam.screen_to_world(p)

        canvas.screen_rect((0, top, w, h), (16, 18, 24))
        robot_t = {round(t * 3000) for t in self.boundaries["Robot"] if t >= now - WINDOW_S}
        for name, y in rows.items():
            canvas.line(world((left, y)), world((right, y)), (80, 85, 95))
            canvas.text((12, y - 8), name, (200, 200, 210), 14, screen_space=True)
            color = (90, 170, 230) if name == "Robot" else (120, 200, 120)
            for t in self.boundaries[name]:
                if t < now - WINDOW_S:
                    continue
                x = x_of(t)
                shared = name == "Capture" and round(t * 3000) in robot_t
                if shared:
                    canvas.line(
                        world((x, rows["Robot"] - 14)),
                        world((x, y + 14)),
                        (245, 80, 61),
                        width=3.0 / cam.zoom,
                    )
                canvas.circle(world((x, y)), 5.0 / cam.zoom, (245, 80, 61) if shared else color)
        # the legend and the recorders' counts are overlays: each takes a free corner (or
        # stacks), clear of the Settings panel and the strip; the HUD then keeps clear too
        self.overlays.add((0, top, w, h))
        legend = [f"t = {now:7.3f} s   red: shared step"]
        counts = [
            f"{rec.path.name}: {getattr(rec, 'rows', getattr(rec, 'frames', 0))}"
            for rec in self.recorders
        ]
        for lines in (legend, counts):
            if lines:
                self._overlay_text(canvas, lines)

    def _overlay_text(self, canvas, lines: list[str]) -> None:
        size, pad = 16, 4
        width = max(canvas.text_size(s, size)[0] for s in lines) + 2 * pad
        x0, y0, _, _ = self.overlays.place(canvas, (width, 20 * len(lines) + pad))
        for i, text in enumerate(lines):
            pos = (x0 + pad, y0 + pad + 20 * i)
            canvas.text(pos, text, (220, 225, 235), size, screen_space=True)


def main() -> None:
    args = parse_args("KELab multi-rate time runners", default_frames=150, records=True)
    world = ke.World(build_scene(), **world_options(args))
    # the Settings panel (F2) opens on the Execution Order page (needs kelab[panel])
    panel = importlib.util.find_spec("imgui_bundle") is not None
    app = MultiRate(title="KELab multi-rate runners", world=world, panel=panel, **app_options(args))
    app.panel.set_page("Execution Order")
    out = Path(args.record_dir)
    app.add_recorder(
        ke.DataRecorder(out / "multi_rate.csv", bodies=["/World/Robot/cart", "/World/Robot/pole"])
    )
    app.add_recorder(ke.VideoRecorder(out / "multi_rate.mp4"))
    run(app, args)
    print(f"recorded {out / 'multi_rate.csv'} and {out / 'multi_rate.mp4'}")


if __name__ == "__main__":
    main()
