import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kelab as ke
from kelab.sim.sensors import SensorConfig, SensorPipeline
from kelab.sim.snapshot import rng_state, set_rng_state

DOCS = Path(__file__).resolve().parents[2] / "docs"


def rngs_for(seeds):
    return [np.random.default_rng(s) for s in seeds]


def ramp(n_envs, width, k):
    """Ideal signal at update k (1-based): distinct per copy and channel."""
    return k + 1000.0 * np.arange(n_envs)[:, None] + 0.25 * np.arange(width)[None, :]


def run(pipe, steps, start=1, n_envs=None, width=None):
    n_envs = n_envs or pipe.num_envs
    width = width or pipe.width
    out = []
    for k in range(start, start + steps):
        pipe.update(ramp(n_envs, width, k))
        out.append(pipe.read())
    return np.array(out)


# ---------------------------------------------------------------- public API / config
def test_public_names():
    assert ke.SensorPipeline is SensorPipeline
    assert ke.SensorConfig is SensorConfig


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"sample_interval": 0}, "sample_interval"),
        ({"cutoff_hz": -1.0}, "cutoff_hz"),
        ({"cutoff_hz": math.inf}, "cutoff_hz"),
        ({"noise": -0.1}, "noise"),
        ({"delay": math.nan}, "delay"),
    ],
)
def test_config_validation_names_field(kwargs, field):
    with pytest.raises(ValueError, match=f"SensorConfig.{field}"):
        SensorConfig(**kwargs)


def test_steps_are_rounded_from_seconds():
    cfg = SensorConfig(sample_interval=1 / 120, delay=0.016, cutoff_hz=20)
    p = SensorPipeline(cfg, 2, 3, 1 / 240, None)
    assert (p.sample_steps, p.delay_steps) == (2, 4)  # 0.016*240 = 3.84 -> 4
    assert p.alpha == pytest.approx(1 - math.exp(-2 * math.pi * 20 * 2 / 240), rel=1e-12)
    tiny = SensorPipeline(SensorConfig(sample_interval=1e-6), 1, 1, 0.01, None)
    assert tiny.sample_steps == 1  # never below one step
    off = SensorPipeline(SensorConfig(), 1, 1, 0.01, None)
    assert (off.sample_steps, off.delay_steps, off.alpha) == (1, 0, 1.0)


# ---------------------------------------------------------------- delay and hold
@settings(max_examples=30, deadline=None)
@given(delay_steps=st.integers(0, 7), n_envs=st.integers(1, 4), width=st.integers(1, 3))
def test_delay_is_exact_in_steps_and_oldest_sample_before_fill(delay_steps, n_envs, width):
    dt = 1 / 100
    p = SensorPipeline(SensorConfig(delay=delay_steps * dt), n_envs, width, dt, None)
    assert p.delay_steps == delay_steps
    out = run(p, 20)
    for n in range(1, 21):  # after n updates: the value of update n - D, or the oldest (1)
        np.testing.assert_array_equal(out[n - 1], ramp(n_envs, width, max(1, n - delay_steps)))


def test_read_before_any_update_is_zero_and_read_is_a_copy():
    p = SensorPipeline(SensorConfig(delay=0.03), 2, 2, 0.01, None)
    np.testing.assert_array_equal(p.read(), np.zeros((2, 2)))
    p.update(np.ones((2, 2), dtype=np.float32))
    r = p.read()
    assert r.dtype == np.float64 and r.shape == (2, 2)
    r[:] = 99.0
    np.testing.assert_array_equal(p.read(), np.ones((2, 2)))
    p0 = SensorPipeline(SensorConfig(), 1, 1, 0.01, None)  # no delay: other read path
    p0.update(np.ones((1, 1)))
    r0 = p0.read()
    r0[:] = 5.0
    assert p0.read()[0, 0] == 1.0


@settings(max_examples=25, deadline=None)
@given(sample_steps=st.integers(1, 5), delay_steps=st.integers(0, 4))
def test_sample_and_hold_holds(sample_steps, delay_steps):
    dt = 0.01
    cfg = SensorConfig(sample_interval=sample_steps * dt, delay=delay_steps * dt)
    p = SensorPipeline(cfg, 2, 1, dt, None)
    out = run(p, 25)
    for n in range(1, 26):
        m = max(1, n - delay_steps)  # the update whose held value is reported
        last_sample = ((m - 1) // sample_steps) * sample_steps + 1
        np.testing.assert_array_equal(out[n - 1], ramp(2, 1, last_sample))


# ---------------------------------------------------------------- low-pass
@pytest.mark.parametrize(
    "fc, dt, sample_steps", [(5.0, 1e-3, 1), (2.0, 1 / 240, 1), (5.0, 1e-3, 4)]
)
def test_low_pass_attenuates_sine_at_cutoff_to_0707(fc, dt, sample_steps):
    cfg = SensorConfig(cutoff_hz=fc, sample_interval=sample_steps * dt)
    p = SensorPipeline(cfg, 1, 1, dt, None)
    steps = int(round(6 / fc / dt))  # six periods
    k = np.arange(1, steps + 1)
    ideal = np.sin(2 * np.pi * fc * k * dt)
    out = np.empty(steps)
    for i in range(steps):
        p.update(ideal[i].reshape(1, 1))
        out[i] = p.read()[0, 0]
    steady = out[steps // 2 :]  # after three periods (tau = 1/(2*pi*fc) is short)
    amplitude = (steady.max() - steady.min()) / 2
    assert amplitude == pytest.approx(1 / math.sqrt(2), rel=0.02)


def test_low_pass_passes_dc_and_starts_at_first_sample():
    p = SensorPipeline(SensorConfig(cutoff_hz=1.0), 1, 2, 0.01, None)
    for _ in range(5):
        p.update(np.array([[3.0, -2.0]]))
        np.testing.assert_array_equal(p.read(), [[3.0, -2.0]])  # no transient from zero


# ---------------------------------------------------------------- noise
def test_noise_has_configured_std():
    n_envs, width, steps, std = 64, 4, 400, 0.05
    p = SensorPipeline(SensorConfig(noise=std), n_envs, width, 0.01, rngs_for(range(n_envs)))
    ideal = np.full((n_envs, width), 2.0)
    samples = np.empty((steps, n_envs, width))
    for i in range(steps):
        p.update(ideal)
        samples[i] = p.read()
    err = samples - 2.0
    assert err.std() == pytest.approx(std, rel=0.02)  # 102400 samples: ~0.2% sd
    assert abs(err.mean()) < 4 * std / math.sqrt(err.size)


def test_noise_per_copy_depends_only_on_own_seed():
    cfg = SensorConfig(noise=0.1, cutoff_hz=10.0, delay=0.02)

    def noise_of(seeds, steps=30):
        p = SensorPipeline(cfg, len(seeds), 3, 0.01, rngs_for(seeds))
        out = []
        for _ in range(steps):  # zero ideal: the output is exactly the (delayed) noise
            p.update(np.zeros((len(seeds), 3)))
            out.append(p.read())
        return np.array(out)

    a = noise_of([11, 22, 33])
    b = noise_of([11, 22, 33])
    c = noise_of([99, 22, 77])
    np.testing.assert_array_equal(a, b)  # same seeds: same noise, bit for bit
    np.testing.assert_array_equal(a[:, 1], c[:, 1])  # copy 1: only its own seed matters
    assert not np.array_equal(a[:, 0], c[:, 0])
    assert not np.array_equal(a[:, 0], a[:, 2])  # copies differ from each other
    same_seed_everywhere = noise_of([5, 5, 5])  # independent streams, not shared
    np.testing.assert_array_equal(same_seed_everywhere[:, 0], same_seed_everywhere[:, 2])


def test_noise_is_drawn_only_at_sample_instants():
    dt, width = 0.01, 2
    rngs = rngs_for([3])
    p = SensorPipeline(SensorConfig(noise=1.0, sample_interval=3 * dt), 1, width, dt, rngs)
    out = run(p, 7)
    # held: steps 1-3 share one noisy sample, 4-6 another
    assert np.array_equal(out[0] - ramp(1, width, 1), out[2] - ramp(1, width, 1))
    reference = np.random.default_rng(3)
    expected = [reference.standard_normal(width) for _ in range(3)]  # samples at 1, 4, 7
    np.testing.assert_array_equal(out[6], ramp(1, width, 7) + expected[2][None, :])
    assert rng_state(rngs[0]) == rng_state(reference)  # exactly 3 draws consumed


def test_zero_noise_draws_nothing():
    rngs = rngs_for([1, 2])
    before = [rng_state(g) for g in rngs]
    p = SensorPipeline(SensorConfig(noise=0.0), 2, 1, 0.01, rngs)
    run(p, 10)
    assert [rng_state(g) for g in rngs] == before


def test_rngs_are_held_by_reference():
    rngs = rngs_for([1, 2])
    p = SensorPipeline(SensorConfig(noise=1.0), 2, 1, 0.01, rngs)
    rngs[0] = np.random.default_rng(42)  # the World re-seeds copy 0
    p.update(np.zeros((2, 1)))
    assert p.read()[0, 0] == np.random.default_rng(42).standard_normal()


# ---------------------------------------------------------------- reset
def full_config():
    return SensorConfig(sample_interval=0.02, cutoff_hz=8.0, noise=0.1, delay=0.03)


def test_reset_some_copies_leaves_others_bit_identical():
    seeds = [1, 2, 3, 4]
    a = SensorPipeline(full_config(), 4, 2, 0.01, rngs_for(seeds))
    b = SensorPipeline(full_config(), 4, 2, 0.01, rngs_for(seeds))
    run(a, 7)
    run(b, 7)
    a.reset([2, 0])
    a_state, b_state = a.get_state(), b.get_state()
    for key in ("phase", "ready", "fill", "filter", "held", "ring"):  # untouched rows
        np.testing.assert_array_equal(a_state[key][[1, 3]], b_state[key][[1, 3]])
    np.testing.assert_array_equal(a_state["head"], b_state["head"])
    np.testing.assert_array_equal(a.read()[[0, 2]], 0.0)  # reset, not primed: zeros
    out_a, out_b = run(a, 12, start=8), run(b, 12, start=8)
    np.testing.assert_array_equal(out_a[:, [1, 3]], out_b[:, [1, 3]])
    assert not np.array_equal(out_a[:, 0], out_b[:, 0])


def test_reset_restarts_hold_phase_and_fill_per_copy():
    dt = 0.01
    p = SensorPipeline(SensorConfig(sample_interval=2 * dt, delay=dt), 2, 1, dt, None)
    run(p, 3)  # both sampled at 1, 3
    p.reset(np.array([False, True]))  # mask form
    p.update(ramp(2, 1, 4))  # copy 1 samples now (first update after reset); copy 0 holds 3
    np.testing.assert_array_equal(p.read()[:, 0], [ramp(2, 1, 3)[0, 0], ramp(2, 1, 4)[1, 0]])
    p.update(ramp(2, 1, 5))  # copy 0 samples at 5, copy 1 holds 4; delay 1 step
    np.testing.assert_array_equal(p.read()[:, 0], [ramp(2, 1, 3)[0, 0], ramp(2, 1, 4)[1, 0]])
    p.update(ramp(2, 1, 6))
    np.testing.assert_array_equal(p.read()[:, 0], [ramp(2, 1, 5)[0, 0], ramp(2, 1, 4)[1, 0]])


def test_reset_with_ideal_primes_copies():
    p = SensorPipeline(SensorConfig(cutoff_hz=1.0, delay=0.05), 3, 2, 0.01, None)
    run(p, 4)
    prime = np.array([[7.0, 8.0], [9.0, 10.0]])
    p.reset([2, 1], ideal=prime)
    np.testing.assert_array_equal(p.read()[[2, 1]], prime)  # row k is for env_ids[k]
    for _ in range(5):  # constant input equal to the primed value stays exactly there
        p.update(np.vstack([np.zeros((1, 2)), prime[::-1]]))
        np.testing.assert_array_equal(p.read()[[2, 1]], prime)


def test_reset_validation():
    p = SensorPipeline(SensorConfig(), 3, 2, 0.01, None)
    with pytest.raises(ValueError, match=r"\[0, 3\).*\[0, 3\]"):
        p.reset([0, 3])
    with pytest.raises(ValueError, match=r"expected shape \(1, 2\).*got \(3, 2\)"):
        p.reset([1], ideal=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="bool mask"):
        p.reset(np.array([True, False]))
    with pytest.raises(ValueError, match="integers"):
        p.reset([0.5])
    p.reset([])  # nothing to do


# ---------------------------------------------------------------- state
@settings(max_examples=20, deadline=None)
@given(
    sample_steps=st.integers(1, 4),
    delay_steps=st.integers(0, 5),
    cutoff=st.one_of(st.none(), st.floats(0.5, 50)),
    warmup=st.integers(0, 12),
    reset_mask=st.lists(st.booleans(), min_size=3, max_size=3),
)
def test_state_round_trip_continues_bit_identically(
    sample_steps, delay_steps, cutoff, warmup, reset_mask
):
    dt = 0.01
    cfg = SensorConfig(sample_steps * dt, cutoff, 0.2, delay_steps * dt)
    rngs = rngs_for([5, 6, 7])
    p = SensorPipeline(cfg, 3, 2, dt, rngs)
    run(p, warmup)
    p.reset(np.array(reset_mask))
    run(p, 2, start=warmup + 1)
    state = p.get_state()
    saved_rngs = [rng_state(g) for g in rngs]
    first = run(p, 15, start=100)
    # restore into the same pipeline (Generators rewound in place) ...
    p.set_state(state)
    for g, s in zip(rngs, saved_rngs, strict=True):
        set_rng_state(g, s)
    np.testing.assert_array_equal(run(p, 15, start=100), first)
    # ... and into a fresh one
    fresh_rngs = [ke.rng_from_state(s) for s in saved_rngs]
    q = SensorPipeline(cfg, 3, 2, dt, fresh_rngs)
    q.set_state(state)
    np.testing.assert_array_equal(run(q, 15, start=100), first)


def test_get_state_is_a_copy_and_set_state_validates():
    p = SensorPipeline(full_config(), 2, 2, 0.01, rngs_for([1, 2]))
    run(p, 3)
    s = p.get_state()
    assert set(s) == {"phase", "filter", "ready", "held", "ring", "head", "fill"}
    assert s["ring"].shape == (2, p.delay_steps + 1, 2)
    s["ring"][:] = 123.0
    assert not np.any(p.get_state()["ring"] == 123.0)
    good = p.get_state()
    with pytest.raises(ValueError, match=r"missing \['ring'\]"):
        p.set_state({k: v for k, v in good.items() if k != "ring"})
    with pytest.raises(ValueError, match=r"'filter' must have shape \(2, 2\), got \(3, 2\)"):
        p.set_state({**good, "filter": np.zeros((3, 2))})
    with pytest.raises(ValueError, match="'fill' must have dtype int64, got float64"):
        p.set_state({**good, "fill": good["fill"].astype(float)})
    with pytest.raises(ValueError, match=r"'head' values must lie in \[0, 4\)"):
        p.set_state({**good, "head": np.array(9)})
    np.testing.assert_array_equal(p.get_state()["ring"], good["ring"])  # failed sets change nothing


# ---------------------------------------------------------------- validation
def test_update_shape_error_names_expected_and_seen():
    p = SensorPipeline(SensorConfig(), 4, 3, 0.01, None)
    with pytest.raises(ValueError, match=r"expected shape \(4, 3\).*got \(3,\)"):
        p.update(np.zeros(3))
    with pytest.raises(ValueError, match="real numeric"):
        p.update(np.full((4, 3), "x"))


@pytest.mark.parametrize(
    "args, message",
    [
        ((SensorConfig(noise=0.1), 2, 1, 0.01, None), "needs rngs"),
        ((SensorConfig(noise=0.1), 2, 1, 0.01, rngs_for([1])), "expected 2, got 1"),
        ((SensorConfig(noise=0.1), 2, 1, 0.01, [np.random.default_rng(1), 3]), r"rngs\[1\]"),
        ((SensorConfig(), 0, 1, 0.01, None), "num_envs"),
        ((SensorConfig(), 1, 0, 0.01, None), "width"),
        ((SensorConfig(), 1, 1, 0.0, None), "dt"),
        (({"noise": 1}, 1, 1, 0.01, None), "SensorConfig"),
    ],
)
def test_constructor_validation(args, message):
    with pytest.raises(ValueError, match=message):
        SensorPipeline(*args)


# ---------------------------------------------------------------- docs
def test_docs_example_runs():
    text = (DOCS / "sensors.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/sensors.md", "exec"), {})


# ------------------------------------------------- noise per value (#39): a joint sensor's
# position and velocity each with its own std


def _joint_world(noise: object) -> ke.World:
    b = ke.SceneBuilder()
    robot = ke.Robot(ke.Asset.from_registry("kelab/robot/cartpole:v1"))
    b.add(robot, at="/World/Robot")
    b.joint_sensor("pole", "/World/Robot/cart_to_pole", sensor=SensorConfig(noise=noise))
    return ke.World(b.build(), num_envs=3, seed=5)


def _run(world: ke.World, steps: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """The sensor's readings and the true joint state, step by step."""
    read, true = [], []
    for _ in range(steps):
        world.step(1 / 120)
        read.append(world.read_sensor("pole"))
        k = world.joint_names.index("/World/Robot/cart_to_pole")
        true.append(np.stack([world.joint_positions[:, k], world.joint_velocities[:, k]], 1))
    return np.array(read), np.array(true)


def test_a_joint_sensor_takes_separate_noise_for_position_and_velocity():
    clean_read, true = _run(_joint_world(0.0))
    assert np.array_equal(clean_read, true)
    unit_read, _ = _run(_joint_world(1.0))  # the same draws, at std 1
    draws = unit_read - true
    read, _ = _run(_joint_world((0.001, 0.5)))
    np.testing.assert_allclose(read - true, draws * [0.001, 0.5], rtol=1e-9, atol=1e-12)
    # a zero std leaves that value exact (the draws still happen: the same stream)
    exact_pos, _ = _run(_joint_world((0.0, 0.5)))
    assert np.array_equal(exact_pos[..., 0], true[..., 0])
    np.testing.assert_allclose(exact_pos[..., 1] - true[..., 1], draws[..., 1] * 0.5, rtol=1e-9)


def test_one_noise_for_all_values_is_unchanged():
    a, _ = _run(_joint_world(0.05))
    b, _ = _run(_joint_world((0.05, 0.05)))
    assert np.array_equal(a, b)  # the same bits as a std per value that are all equal
    assert SensorConfig(noise=0.05).noise == 0.05 and SensorConfig(noise=[0, 1]).noise == (0.0, 1.0)


def test_per_value_noise_is_checked_in_one_line():
    with pytest.raises(
        ValueError,
        match=r"sensor 'pole': SensorConfig.noise must be one "
        r"number or 2 \(one per value: position, velocity\)",
    ):
        _joint_world((0.1, 0.2, 0.3))
    for bad, field in (((), "SensorConfig.noise"), ((0.1, -1.0), r"SensorConfig.noise\[1\]"),
                       ((0.1, "x"), r"SensorConfig.noise\[1\]"),
                       (np.zeros((2, 2)), "SensorConfig.noise")):  # fmt: skip
        with pytest.raises(ValueError, match=f"^{field} must be") as err:
            SensorConfig(noise=bad)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="config.noise must be one number or 3"):
        SensorPipeline(SensorConfig(noise=(0.1, 0.2)), num_envs=1, width=3, dt=0.01, rngs=None)


def test_per_value_noise_is_scene_data():
    scene = _joint_world((0.001, 0.5)).scene
    again = ke.Scene.from_dict(scene.to_dict())
    assert again == scene and again.sensors[0].config.noise == (0.001, 0.5)
    assert _joint_world(0.5).scene.fingerprint != scene.fingerprint
