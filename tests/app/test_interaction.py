"""Picking and dragging with synthetic mouse events, and the drag's determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from app_helpers import FakeClock, ball_scene, cartpole_scene, make_app

import kelab as ke


def test_pick_body_shapes_layers_and_copies():
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(name="ground"), at="/", per_environment=False)
    b.add(
        ke.Prop(ke.Box(1.0, 0.2), initial_pose=ke.Pose(0.0, 1.0, math.pi / 2)),
        at="/Post",
    )
    b.add(
        ke.Prop(
            ke.Circle(0.3),
            initial_pose=ke.Pose(0.0, 1.4),
            render=ke.RenderHint(color=(0, 255, 0), layer=2),
        ),
        at="/Top",
    )
    b.add(
        ke.Prop(ke.Segment((-0.5, 0.0), (0.5, 0.0), radius=0.02), initial_pose=ke.Pose(3, 1)),
        at="/Bar",
    )
    world = ke.World(b.build(), num_envs=2, env_spacing=10.0)
    # the rotated box is tall and thin: (0.3, 1.0) is outside, (0.05, 0.6) inside
    assert ke.pick_body(world, (0.3, 1.0)) is None
    post = ke.pick_body(world, (0.05, 0.6))
    assert post.path == "/Post" and post.env_id == 0 and post.dynamic
    assert post.local_point == pytest.approx((-0.4, -0.05))
    assert ke.pick_body(world, (0.0, 1.3)).path == "/Top"  # layer 2 is drawn on top
    assert ke.pick_body(world, (10.05, 0.6)).env_id == 1  # copy 1 sits 10 m to the right
    assert ke.pick_body(world, (3.4, 1.01)).path == "/Bar"
    assert ke.pick_body(world, (3.4, 1.05)) is None
    assert ke.pick_body(world, (3.4, 1.05), tolerance=0.05).path == "/Bar"
    ground = ke.pick_body(world, (12.0, -0.2))  # terrain is shared: drawn and picked once
    assert ground is None or ground.env_id == 0
    ground = ke.pick_body(world, (1.0, -0.2))
    assert ground.path == "/ground" and not ground.dynamic


class Picker(ke.App):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.events: list[tuple[str, str]] = []
        self.targets: list[tuple[float, float]] = []

    def on_pick(self, body):
        self.events.append(("pick", body.path))

    def on_pick_hover(self, body):
        self.events.append(("hover", body.path))

    def on_drag_begin(self, body):
        self.events.append(("begin", body.path))

    def on_drag_update(self, body, target):
        self.targets.append(target)

    def on_drag_end(self, body):
        self.events.append(("end", body.path))


def screen(app: ke.App, point) -> tuple[int, int]:
    x, y = app.camera.world_to_screen(point)
    return (int(round(x)), int(round(y)))


def run(app: ke.App, clock: FakeClock, frames: int, dt: float = 0.02) -> None:
    for _ in range(frames):
        clock.advance(dt)
        app.renderFrameOnce()


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_hover_pick_drag_and_release(fake_clock: FakeClock, layout: str):
    world = ke.World(ball_scene(2), num_envs=2, env_spacing=6.0, layout=layout)
    reference = ke.World(ball_scene(2), num_envs=2, env_spacing=6.0, layout=layout)
    app = make_app(fake_clock, Picker, world=world, size=(400, 300))
    app.renderFrameOnce()
    ball = tuple(world.body_poses[0, 1, :2])
    app.inject_event(ke.InputEvent("mouse_move", pos=screen(app, ball)))
    run(app, fake_clock, 2)
    assert app.events == [("hover", "/World/Ball0")] * 2 and app.hovered.path == "/World/Ball0"
    app.inject_event(ke.InputEvent("mouse_down", button=1, pos=screen(app, ball)))
    run(app, fake_clock, 1)
    assert app.events[-2:] == [("pick", "/World/Ball0"), ("begin", "/World/Ball0")]
    assert app.dragged.path == "/World/Ball0" and app.hovered is None
    target = (ball[0], 1.5)
    app.inject_event(ke.InputEvent("mouse_move", pos=screen(app, target)))
    run(app, fake_clock, 40)
    assert app.targets[-1] == pytest.approx(target, abs=0.01)
    assert world.body_poses[0, 1, 1] > 1.0  # pulled up from 0.2 m toward 1.5 m
    pixels = app.read_rgb_pixels()
    assert (np.abs(pixels.astype(int) - (250, 210, 80)).sum(-1) < 30).any()  # the drag line
    app.inject_event(ke.InputEvent("mouse_up", button=1, pos=screen(app, target)))
    run(app, fake_clock, 1)
    assert app.dragged is None
    assert app.events[-2:] == [("end", "/World/Ball0"), ("hover", "/World/Ball0")]
    # the undragged copy is bit-identical to an undisturbed run
    for _ in range(world.step_count):
        reference.step(0.02)
    assert np.array_equal(world.body_poses[1], reference.body_poses[1])
    assert np.array_equal(world.body_velocities[1], reference.body_velocities[1])
    assert not np.array_equal(world.body_poses[0], reference.body_poses[0])
    # so is the dragged copy's untouched ball (it never met the dragged one), and the
    # release left no force behind
    ball1 = world.body_names.index("/World/Ball1")
    assert np.array_equal(world.body_poses[0, ball1], reference.body_poses[0, ball1])
    assert not world.external_forces.any()
    app.close()


def test_click_on_static_body_picks_without_drag(fake_clock: FakeClock):
    world = ke.World(ball_scene())
    app = make_app(fake_clock, Picker, world=world, size=(400, 300))
    app.renderFrameOnce()
    app.inject_event(ke.InputEvent("mouse_down", button=1, pos=screen(app, (0.5, -0.2))))
    run(app, fake_clock, 1)
    assert ("pick", "/ground") in app.events and app.dragged is None
    app.close()


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_reset_during_drag_ends_it(fake_clock: FakeClock, layout: str):
    world = ke.World(ball_scene(), layout=layout)

    class Resetter(Picker):
        def fixed_update(self, ts):
            if self.dragged is not None and world.step_count == 10:
                world.reset_envs([0])

    app = make_app(fake_clock, Resetter, world=world, size=(400, 300))
    app.renderFrameOnce()
    ball = tuple(world.body_poses[0, 1, :2])
    app.inject_event(ke.InputEvent("mouse_down", button=1, pos=screen(app, ball)))
    run(app, fake_clock, 15)
    assert ("end", "/World/Ball0") in app.events and app.dragged is None
    assert not world.external_forces.any()
    app.close()


def test_interaction_off_and_drag_needs_dynamic_body(fake_clock: FakeClock):
    world = ke.World(ball_scene())
    app = make_app(fake_clock, Picker, world=world, size=(400, 300), interaction=False)
    app.renderFrameOnce()
    ball = tuple(world.body_poses[0, 1, :2])
    app.inject_event(ke.InputEvent("mouse_down", button=1, pos=screen(app, ball)))
    run(app, fake_clock, 2)
    assert app.events == [] and app.dragged is None
    app.close()
    ground = ke.pick_body(world, (0.0, -0.5))
    with pytest.raises(ValueError, match="only dynamic bodies"):
        ke.app.DragSpring(world, ground)
    drag = ke.app.DragSpring(world, ke.pick_body(world, tuple(world.body_poses[0, 1, :2])))
    bad = (("frequency_hz", 0.0), ("damping_ratio", -1.0), ("max_acceleration", math.inf))
    for name, value in bad:
        with pytest.raises(ValueError, match=name):
            ke.app.DragSpring(world, drag.picked, **{name: value})
    with pytest.raises(ValueError, match="tolerance"):
        ke.pick_body(world, (0.0, 0.0), tolerance=-1.0)


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_pick_body_asks_the_world_in_both_layouts(layout: str):
    world = ke.World(cartpole_scene(), num_envs=3, env_spacing=5.0, layout=layout)
    pole = world.body_names.index("/World/Robot/pole")
    origins = world.env_origins
    x, y, a = world.body_poses[2, pole]
    point = (x + origins[2, 0] - 0.2 * math.sin(a), y + 0.2 * math.cos(a))
    hit = ke.pick_body(world, point)
    assert (hit.path, hit.index, hit.env_id, hit.dynamic) == ("/World/Robot/pole", pole, 2, True)
    assert world.body_at((point[0] - origins[2, 0], point[1]), env_id=2) == pole
    assert hit.local_point == pytest.approx((0.0, 0.2), abs=1e-9)
    assert ke.pick_body(world, point, env_ids=[0, 1]) is None or (
        ke.pick_body(world, point, env_ids=[0, 1]).env_id != 2
    )
    ground = ke.pick_body(world, (origins[1, 0] + 1.7, -0.3))
    assert ground.path == "/ground" and not ground.dynamic and ground.env_id == 0
    assert ke.pick_body(world, (origins[1, 0], 30.0)) is None


def _drag_steps(world, drag, target, steps, dt=0.02):
    drag.set_target(target)
    for _ in range(steps):
        drag.apply(dt)
        world.step(dt)


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_drag_is_a_world_force_exact_in_snapshots(layout: str):
    """The drag lives in the World's replay log: snapshots during/after it restore exactly."""
    scene = ball_scene(2)
    world = ke.World(scene, num_envs=3, env_spacing=6.0, layout=layout)
    reference = ke.World(scene, num_envs=3, env_spacing=6.0, layout=layout)
    b0 = world.body_names.index("/World/Ball0")
    b1 = world.body_names.index("/World/Ball1")
    start = world.body_poses[1, b0, :2] + world.env_origins[1]
    drag = ke.app.DragSpring(world, ke.pick_body(world, tuple(start)))
    assert (drag.picked.env_id, drag.picked.index) == (1, b0)
    _drag_steps(world, drag, (start[0], 1.5), 40)
    assert abs(drag.anchor_world()[1] - 1.5) < 0.05  # the grab point followed the target
    assert drag.alive and world.external_forces[1, b0].any()
    drag.apply(0.02)
    during = world.snapshot()  # a force is held right now
    for _ in range(5):
        world.step(0.02)
    drag.remove()
    assert not drag.alive and not world.external_forces.any()
    for _ in range(10):
        world.step(0.02)
    after = world.snapshot()
    for _ in range(30):
        world.step(0.02)
    for _ in range(world.step_count):
        reference.step(0.02)
    for env in (0, 2):  # other copies: bit-identical to an undisturbed run
        assert np.array_equal(world.body_poses[env], reference.body_poses[env])
        assert np.array_equal(world.body_velocities[env], reference.body_velocities[env])
    assert np.array_equal(world.body_poses[1, b1], reference.body_poses[1, b1])
    assert not np.array_equal(world.body_poses[1, b0], reference.body_poses[1, b0])
    final = world.body_poses
    release = np.zeros((1, len(world.body_names), 2))

    def replay_from_during(w):
        w.restore(during)
        for _ in range(5):
            w.step(0.02)
        w.set_body_forces(release, env_ids=[1])
        for _ in range(40):
            w.step(0.02)

    for target in (ke.World(scene, num_envs=3, env_spacing=6.0, layout=layout), world):
        replay_from_during(target)
        assert np.array_equal(target.body_poses, final)
        target.restore(after)
        for _ in range(30):
            target.step(0.02)
        assert np.array_equal(target.body_poses, final)


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_drag_pole_tip_is_stable_and_follows(layout: str):
    """Grabbed at the tip (a quarter of the mass felt there), stiff, at 50 Hz: no blow-up."""
    world = ke.World(cartpole_scene(), num_envs=2, layout=layout)
    pole = world.body_names.index("/World/Robot/pole")
    x, y, a = world.body_poses[1, pole]
    tip = (x + world.env_origins[1, 0] - 0.45 * math.sin(a), y + 0.45 * math.cos(a))
    picked = ke.pick_body(world, tip)
    assert picked.index == pole
    drag = ke.app.DragSpring(world, picked, frequency_hz=10.0)
    target = (tip[0] + 0.3, tip[1] - 0.1)
    _drag_steps(world, drag, target, 150)
    assert np.isfinite(world.body_velocities).all()
    assert np.abs(world.body_velocities[1]).max() < 0.5  # settled, not oscillating
    grab = np.array(drag.anchor_world())
    assert np.hypot(*(grab - target)) < 0.15


def test_app_layer_uses_only_the_public_world_api():
    import re
    from pathlib import Path

    root = Path(ke.app.__file__).parent
    for path in root.glob("*.py"):
        src = path.read_text()
        hit = re.search(r"world\._[A-Za-z]", src)
        assert hit is None, f"{path.name} reads a private World attribute: {hit.group(0)}"


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_drag_uses_the_dragged_copys_mass(layout: str):
    """Per-copy masses (#41): the spring is scaled by the picked copy's body, not copy 0's."""
    world = ke.World(ball_scene(), num_envs=2, env_spacing=6.0, layout=layout)
    ball = world.body_names.index("/World/Ball0")
    masses = world.body_masses
    masses[1, ball] *= 4.0
    world.set_body_masses(masses[1:], env_ids=[1])
    drags = []
    for env in (0, 1):
        start = world.body_poses[env, ball, :2] + world.env_origins[env]
        drag = ke.app.DragSpring(world, ke.pick_body(world, tuple(start)))
        assert drag.picked.env_id == env
        drags.append(drag)
    assert drags[1].mass == 4.0 * drags[0].mass
    assert drags[1].moment == pytest.approx(4.0 * drags[0].moment, rel=1e-15)
