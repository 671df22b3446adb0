"""The robots' PD joint controllers as an engine system (``robot_controllers``, #27.4)."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from app_helpers import FakeClock, ball_scene, make_app
from test_panel_clicks import _click, _frames

import kelab as ke
from kelab.app.panel import load_settings
from kelab.timing.timeline import Phase

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sim"))
from test_controller_updates import _arm_scene, _targets  # noqa: E402

SHOTS = os.environ.get("KELAB_SHOTS")
FRAMES = 150


class Arm(ke.App):
    """Sets new PD targets every fixed step (Robot runner, 50 Hz) and hashes the states."""

    def setup(self) -> None:
        self.t = 0
        self.hash = hashlib.sha256()
        self.held: list[np.ndarray] = []

    def fixed_update(self, ts: float) -> None:
        self.world.set_joint_position_targets(_targets(self.t, self.world.num_envs))
        self.t += 1

    def state_dict(self) -> dict:
        return {"t": self.t}

    def load_state_dict(self, state: dict) -> None:
        self.t = state["t"]

    def late_update(self, ts: float) -> None:
        self.hash.update(self.world.body_poses.tobytes())
        self.hash.update(self.world.body_velocities.tobytes())
        self.held.append(self.world.controller_efforts)


def _app(tmp_path, **kw) -> Arm:
    kw.setdefault("time_mode", ke.TimeMode.SIM_HIGH_PERF)
    kw.setdefault("settings", tmp_path / "s.kelab.json")
    kw.setdefault("world", ke.World(_arm_scene(), num_envs=2))
    app = make_app(FakeClock(), Arm, **kw)
    app.renderFrameOnce()  # setup runs
    return app


def _plain_world_hash(steps: int) -> str:
    """The same targets and steps without an App: every_step PD, as before #27.4."""
    world = ke.World(_arm_scene(), num_envs=2)
    h = hashlib.sha256()
    for t in range(steps):
        world.set_joint_position_targets(_targets(t, 2))
        world.step(0.02)
        h.update(world.body_poses.tobytes())
        h.update(world.body_velocities.tobytes())
    return h.hexdigest()


def test_bound_to_physics_runner_by_default_and_bit_identical(tmp_path):
    app = _app(tmp_path)
    b = app.systems["robot_controllers"].binding
    assert (b.runner, b.phase, b.priority) == ("Robot", Phase.CONTROL, 100)
    rows = [r.name for r in app.panel.time_manager_rows()]
    assert rows == ["drag_spring", "robot_controllers", "world.step", "sync_point"]
    assert [r.id for r in app.panel.subsystem_rows()][:2] == ["drag_spring", "robot_controllers"]
    for _ in range(FRAMES - 1):
        app.renderFrameOnce()
    assert app.world.controller_updates == "every_step"
    assert app.world.step_count == FRAMES
    assert app.hash.hexdigest() == _plain_world_hash(FRAMES)
    assert app.systems["robot_controllers"].cost.calls == FRAMES
    app.close()


def test_another_runner_at_physics_rate_is_held_and_still_exact(tmp_path):
    app = _app(tmp_path)
    app.timeline.add_runner("Control", 50)
    assert app.panel.set_binding("robot_controllers", runner="Control")
    for _ in range(FRAMES - 1):
        app.renderFrameOnce()
    assert app.world.controller_updates == "held"
    # the tick runs before world.step (CONTROL before PHYSICS), after the targets
    # (priority 100 > the scripts'): the held torque is what every_step computes
    assert app.hash.hexdigest() == _plain_world_hash(FRAMES)
    app.close()


def test_a_25_hz_controller_holds_its_torque_between_physics_steps(tmp_path):
    app = _app(tmp_path)
    app.timeline.add_runner("Control", 25)
    assert app.panel.set_binding("robot_controllers", runner="Control")
    for _ in range(40):
        app.renderFrameOnce()
    assert app.world.controller_updates == "held"
    # step 1 (t = 0.02 s, before the rebinding's first tick) switched the World to
    # "held" with one update; from step 2 (t = 0.04 s) on the ticks come at t = 0.04 k,
    # and each torque is held for two 50 Hz physics steps
    held = np.array(app.held[2:40])
    np.testing.assert_array_equal(held[1::2], held[0::2])
    assert (held[2::2] != held[0:-2:2]).any()
    assert app.systems["robot_controllers"].cost.calls == 1 + 20  # t = 0 on Robot, then 25 Hz
    assert app.hash.hexdigest() != _plain_world_hash(41)  # a slower controller differs
    # back on physics' runner: every_step again
    assert app.panel.set_binding("robot_controllers", runner="Robot")
    app.renderFrameOnce()
    assert app.world.controller_updates == "every_step"
    # turned off: held, and nothing updates the torque
    assert app.panel.set_binding("robot_controllers", enabled=False)
    app.renderFrameOnce()
    frozen = app.world.controller_efforts
    for _ in range(5):
        app.renderFrameOnce()
    assert app.world.controller_updates == "held"
    np.testing.assert_array_equal(app.world.controller_efforts, frozen)
    app.close()


def test_time_travel_in_held_mode_is_exact(tmp_path):
    app = _app(tmp_path)
    app.timeline.add_runner("Control", 25)
    assert app.panel.set_binding("robot_controllers", runner="Control")
    for _ in range(60):
        app.renderFrameOnce()
    poses = app.world.body_poses
    app.seek(33)
    app.seek(app.history[-1])
    np.testing.assert_array_equal(app.world.body_poses, poses)
    assert app.world.controller_updates == "held"
    app.close()


def test_settings_round_trip_and_bad_inputs(tmp_path):
    path = tmp_path / "s.kelab.json"
    app = _app(tmp_path, settings=path)
    assert app.panel.add_runner("Control", 25)
    assert app.panel.set_binding("robot_controllers", runner="Control", priority=7)
    assert not app.panel.set_binding("robot_controllers", runner="Nope")
    assert "Nope" in app.panel.message
    assert not app.panel.set_binding("robot_controllers", priority="high")
    assert not app.panel.set_binding("robot_controllers", enabled="yes")
    assert app.systems["robot_controllers"].binding.runner == "Control"
    app.panel.save()
    app.close()
    saved = load_settings(path).bindings["robot_controllers"]
    assert (saved.runner, saved.phase, saved.priority) == ("Control", Phase.CONTROL, 7)
    again = _app(tmp_path, settings=path)
    b = again.systems["robot_controllers"].binding
    assert (b.runner, b.priority) == ("Control", 7)
    again.renderFrameOnce()
    assert again.world.controller_updates == "held"
    again.close()


def test_no_pd_actuator_no_system(tmp_path):
    app = make_app(FakeClock(), world=ke.World(ball_scene(2)), settings=tmp_path / "s.json")
    assert "robot_controllers" not in app.systems
    app.renderFrameOnce()
    assert app.world.controller_updates == "every_step"
    app.close()


def test_subsystems_page_rebinds_the_controllers_by_real_clicks(tmp_path, real_window):
    clock = FakeClock()
    path = tmp_path / "s.kelab.json"
    app = make_app(
        clock,
        Arm,
        backend="gl",
        headless=False,
        world=ke.World(_arm_scene(), num_envs=2),
        size=(960, 540),
        settings=path,
        time_mode=ke.TimeMode.SIM_REALTIME,
    )
    app.timeline.add_runner("Control", 25)
    _frames(app, clock)
    _click(app, clock, app.menu.title_rect("Edit"))
    _click(app, clock, app.menu.item_rect("Settings"))
    ui = app.panel_window.host.ui
    _click(app, clock, ui.tabs["Subsystems"])
    assert app.panel.page == "Subsystems"
    assert "Robot controllers (PD)" in ui.rows["Subsystems"]
    _click(app, clock, ui.combo_rects["robot_controllers.runner"])
    _click(app, clock, ui.combo_item_rects["Control"])
    assert app.systems["robot_controllers"].binding.runner == "Control"
    _frames(app, clock, 4)
    assert app.world.controller_updates == "held"
    assert ui.overflow == []
    if SHOTS:
        app.write_pixels_png(os.path.join(SHOTS, "panel_subsystems.png"))
    app.panel.save()
    app.close()
    assert load_settings(path).bindings["robot_controllers"].runner == "Control"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
