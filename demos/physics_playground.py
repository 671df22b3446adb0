"""Physics playground: drag bodies with the mouse, click on empty space to spawn more.

Left-drag a body to pull it with a spring; left-click on empty space (or the ground)
drops a ball there, right-click drops a crate. Enter: play/pause, Space: pause / single
step, F1: HUD, F9: record a video.

    python demos/physics_playground.py
    python demos/physics_playground.py --headless --frames 240 --out playground.png

Spawning: a World is compiled from an immutable Scene, so the scene holds a pool of
balls and crates parked on a shelf far off-screen; a click moves the next one to the
cursor with ``World.set_body_states`` (which rebuilds only that copy).

Physics runs on its own 240 Hz runner: at the App's default 50 Hz a crate falling at
~10 m/s moves 0.2 m per step, lands up to 0.18 m deep in the ground, and pymunk pushes it
out over ~0.5 s, which the frames show faithfully (it is the state, not the drawing).
"""

from __future__ import annotations

import numpy as np
from demo_common import app_options, click, move, parse_args, release, run, world_options

import kelab as ke

POOL = 12  # spawnable balls and crates each
PHYSICS_HZ = 240  # small steps: falling bodies land on the ground, not 0.18 m into it
SHELF_X = 100.0  # the pool waits here, off-screen


def build_scene() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    wall = ke.Material(static_friction=0.6, dynamic_friction=0.5, restitution=0.2)
    for name, x in (("left_wall", -4.6), ("right_wall", 4.6)):
        b.add(
            ke.Prop(
                ke.Box(0.2, 6.0),
                body_type="static",
                material=wall,
                initial_pose=ke.Pose(x, 3.0),
                render=ke.RenderHint(color=(90, 100, 110)),
            ),
            at=f"/World/{name}",
        )
    b.add(
        ke.Prop(ke.Box(40.0, 0.2), body_type="static", initial_pose=ke.Pose(SHELF_X, -0.1)),
        at="/World/shelf",
    )
    colors = [(230, 120, 60), (90, 170, 230), (120, 200, 120), (220, 200, 90)]
    for i in range(6):  # a small stack to knock over
        b.add(
            ke.Prop(
                ke.Box(0.5, 0.5),
                mass=1.0,
                initial_pose=ke.Pose(1.5, 0.25 + 0.5 * i),
                render=ke.RenderHint(color=colors[i % 4]),
            ),
            at=f"/World/stack{i}",
        )
    b.add(
        ke.Prop(
            ke.Circle(0.35),
            mass=2.0,
            material=ke.Material(restitution=0.6),
            initial_pose=ke.Pose(-2.0, 2.0),
            render=ke.RenderHint(color=(200, 80, 160)),
        ),
        at="/World/big_ball",
    )
    for i in range(POOL):
        b.add(
            ke.Prop(
                ke.Circle(0.18),
                mass=0.5,
                material=ke.Material(restitution=0.5),
                initial_pose=ke.Pose(SHELF_X - 15 + i, 0.18),
                render=ke.RenderHint(color=colors[i % 4]),
            ),
            at=f"/Pool/ball{i}",
        )
        b.add(
            ke.Prop(
                ke.Box(0.35, 0.35),
                mass=0.8,
                initial_pose=ke.Pose(SHELF_X + 1 + i, 0.175),
                render=ke.RenderHint(color=colors[(i + 2) % 4]),
            ),
            at=f"/Pool/crate{i}",
        )
    b.camera("main", center=(0.0, 2.6), zoom=95.0)
    return b.build()


class Playground(ke.App):
    def setup(self) -> None:
        names = self.world.body_names
        self.pools = {
            "ball": [names.index(f"/Pool/ball{i}") for i in range(POOL)],
            "crate": [names.index(f"/Pool/crate{i}") for i in range(POOL)],
        }
        self.next = {"ball": 0, "crate": 0}
        self.spawns: list[tuple[str, tuple[float, float]]] = []
        self.spawned = 0

    def state_dict(self) -> dict:  # what a rewind puts back (docs/app.md, "Time travel")
        return {"next": dict(self.next), "spawned": self.spawned}

    def load_state_dict(self, state: dict) -> None:
        self.next, self.spawned = dict(state["next"]), state["spawned"]

    def pre_update(self) -> None:
        inp = self.input
        if inp.mouse_world is None:
            return
        if inp.frame_mouse_pressed("left") and self.dragged is None:
            self.spawns.append(("ball", inp.mouse_world))
        if inp.frame_mouse_pressed("right"):
            self.spawns.append(("crate", inp.mouse_world))

    def fixed_update(self, ts: float) -> None:
        if not self.spawns:
            return
        poses = self.world.body_poses[:1]
        vels = self.world.body_velocities[:1]
        for kind, (x, y) in self.spawns:
            pool = self.pools[kind]
            index = pool[self.next[kind] % len(pool)]
            self.next[kind] += 1
            poses[0, index] = (x, y, 0.0)
            vels[0, index] = 0.0
            self.spawned += 1
        self.spawns.clear()
        self.world.set_body_states([0], poses, vels)

    def render(self, canvas, alpha: float) -> None:
        help_text = "drag: left button on a body   spawn: click empty space (right: crate)"
        x0 = 70  # right of the left wall, above the scene (the ground band stays clear)
        top = self.overlays.top  # below the window's menu bar
        canvas.text((x0, top + 8), help_text, (200, 205, 215), 15, screen_space=True)
        spawned = f"spawned {self.spawned}"
        canvas.text((x0, top + 30), spawned, (230, 230, 230), 18, screen_space=True)
        if self.dragged is not None:
            status, color = f"dragging {self.dragged.path}", (250, 210, 80)
        elif self.hovered is not None:
            status, color = f"hover {self.hovered.path}", (200, 205, 215)
        else:
            status = ""
        if status:
            canvas.text((x0, top + 54), status, color, 15, screen_space=True)


def script(app: ke.App, frame: int) -> None:
    """Headless: spawn a few bodies, then drag the big ball up and to the right."""
    spawn_at = {10: (-3.0, 4.5), 25: (-2.5, 5.0), 40: (-3.5, 5.5), 55: (0.0, 5.0)}
    if frame in spawn_at:
        click(app, spawn_at[frame], button=1 if frame != 55 else 3)
    if frame - 1 in spawn_at:
        release(app, spawn_at[frame - 1], button=1 if frame != 56 else 3)
    if frame == 90:
        pose = app.world.body_poses[0, app.world.body_names.index("/World/big_ball")]
        click(app, (float(pose[0]), float(pose[1])))
    if 91 <= frame <= 150:
        t = (frame - 91) / 59
        move(app, (-2.0 + 3.0 * t, 1.0 + 2.5 * np.sin(np.pi * t)))


def main() -> None:
    args = parse_args("KELab physics playground", default_frames=200)
    world = ke.World(build_scene(), **world_options(args))
    timeline = ke.Timeline()
    timeline.add_runner("Physics", PHYSICS_HZ)
    app = Playground(
        title="KELab physics playground",
        world=world,
        timeline=timeline,
        runner="Physics",
        max_steps_per_frame=16,
        **app_options(args),
    )
    run(app, args, script if args.headless else None)


if __name__ == "__main__":
    main()
