import math

import pytest

import kelab as ke


def test_reference_tasks_rates():
    humanoid = ke.SimulationTimingConfig(sim_dt=1 / 120, decimation=2)
    assert humanoid.physics_hz == pytest.approx(120.0)
    assert humanoid.step_dt == pytest.approx(1 / 60)
    assert humanoid.control_hz == pytest.approx(60.0)
    assert humanoid.step_hz == humanoid.control_hz
    pi = ke.SimulationTimingConfig(sim_dt=1 / 1000, decimation=20)
    assert pi.physics_hz == pytest.approx(1000.0)
    assert pi.control_hz == pytest.approx(50.0)
    assert pi.step_dt == pytest.approx(0.02)


@pytest.mark.parametrize(
    ("dt", "dec", "length", "expected"),
    [
        (1 / 60, 1, 5.0, 300),
        (1 / 120, 2, 5.0, 300),
        (1 / 1000, 20, 20.0, 1000),
        (0.1, 1, 0.3, 3),
        (1 / 30, 1, 1.0, 30),
        (0.02, 1, 0.05, 3),  # a real fraction rounds up
        (1 / 120, 2, 3.0, 180),
    ],
)
def test_max_episode_length_has_no_float_surprises(dt, dec, length, expected):
    cfg = ke.SimulationTimingConfig(sim_dt=dt, decimation=dec, episode_length_s=length)
    assert cfg.max_episode_length == expected


def test_no_time_limit():
    assert ke.SimulationTimingConfig(sim_dt=0.01).max_episode_length is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"sim_dt": 0.0}, "sim_dt"),
        ({"sim_dt": -0.01}, "sim_dt"),
        ({"sim_dt": math.nan}, "sim_dt"),
        ({"sim_dt": math.inf}, "sim_dt"),
        ({"sim_dt": "0.01"}, "sim_dt"),
        ({"sim_dt": 0.01, "decimation": 0}, "decimation"),
        ({"sim_dt": 0.01, "decimation": 2.0}, "decimation"),
        ({"sim_dt": 0.01, "decimation": True}, "decimation"),
        ({"sim_dt": 0.01, "episode_length_s": 0.0}, "episode_length_s"),
        ({"sim_dt": 0.01, "episode_length_s": math.nan}, "episode_length_s"),
    ],
)
def test_bad_timing_values_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        ke.SimulationTimingConfig(**kwargs)


def test_timing_config_is_frozen():
    cfg = ke.SimulationTimingConfig(sim_dt=0.01)
    with pytest.raises(AttributeError):
        cfg.sim_dt = 0.02


@pytest.mark.parametrize("name", ["paced", "PACED", "Paced", " headless_fast ", "offscreen_FAST"])
def test_run_mode_from_string_any_case(name):
    cfg = ke.SimulationRunConfig(mode=name)
    assert cfg.mode.name == name.strip().upper()


def test_run_config_properties():
    paced = ke.SimulationRunConfig(mode=ke.RunMode.PACED)
    assert paced.render_mode == "human" and paced.renders and paced.waits_for_wall_clock
    off = ke.SimulationRunConfig(mode="offscreen_fast")
    assert off.render_mode == "rgb_array" and off.renders and not off.waits_for_wall_clock
    head = ke.SimulationRunConfig()
    assert head.mode is ke.RunMode.HEADLESS_FAST
    assert head.render_mode is None and not head.renders and not head.waits_for_wall_clock
    assert not any(c.catches_up for c in (paced, off, head))


@pytest.mark.parametrize("bad", ["fast", "", 3, None, "PACED_FAST"])
def test_bad_run_mode_lists_valid_modes(bad):
    with pytest.raises(ValueError, match="HEADLESS_FAST, OFFSCREEN_FAST, PACED"):
        ke.SimulationRunConfig(mode=bad)


def test_from_render_mode():
    assert ke.SimulationRunConfig.from_render_mode(None).mode is ke.RunMode.HEADLESS_FAST
    assert ke.SimulationRunConfig.from_render_mode("human").mode is ke.RunMode.PACED
    assert ke.SimulationRunConfig.from_render_mode("rgb_array").mode is ke.RunMode.OFFSCREEN_FAST
    for bad in ("ansi", "Human", "", 0):
        with pytest.raises(ValueError, match="render_mode"):
            ke.SimulationRunConfig.from_render_mode(bad)


def test_time_modes():
    assert {m.name for m in ke.TimeMode} == {"GAME_REALTIME", "SIM_REALTIME", "SIM_HIGH_PERF"}


def test_numpy_scalars_are_accepted_and_stored_as_python_numbers():
    import numpy as np

    timing = ke.SimulationTimingConfig(
        sim_dt=np.float32(0.5), decimation=np.int64(2), episode_length_s=np.int32(3)
    )
    assert (timing.sim_dt, timing.decimation, timing.episode_length_s) == (0.5, 2, 3.0)
    assert [type(v) for v in (timing.sim_dt, timing.decimation, timing.episode_length_s)] == [
        float,
        int,
        float,
    ]
    with pytest.raises(ValueError, match=r"decimation must be an int in \[1, 10000\], got True"):
        ke.SimulationTimingConfig(sim_dt=0.01, decimation=True)
