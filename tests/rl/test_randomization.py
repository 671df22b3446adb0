"""A task's declared domain randomization (issue #41 item 2): checked where declared,
drawn from each copy's own Generator, exact through snapshots, reported per episode."""

from __future__ import annotations

import re

import numpy as np
import pytest

import kelab as ke
from kelab.cli.preview import run_preview
from kelab.tasks.cartpole import CartPoleTask

POLE = "/World/Robot/pole"


class Robust(CartPoleTask):
    """CartPole with every kind of term."""

    randomization = (
        ke.Randomize("mass_scale", 0.5, 2.0, bodies=(POLE,)),
        ke.Randomize("friction_scale", 0.5, 2.0, distribution="log_uniform"),
        ke.Randomize("gravity", (-0.5, -1.0), (0.5, 1.0), when="startup"),
        ke.Randomize("actuator_strength", 0.7, 1.3, distribution="normal"),
        ke.Randomize(
            "push", (-0.4, 0.0), (0.4, 0.0), when="interval", interval_s=(0.2, 0.5), bodies=(POLE,)
        ),  # fmt: skip
        ke.Randomize("push", (-0.2, 0.0), (0.2, 0.0), bodies=("/World/Robot/*",)),
        ke.Randomize("sensor_noise_scale", 0.5, 2.0),
    )


def _run(env: ke.LearningEnv, steps: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        obs, rew, term, trunc, info = env.step(rng.uniform(-1, 1, (env.num_envs, 1)))
        drawn = info.get("randomization", {})
        w = env.world
        values = [np.ravel(v) for v in drawn.values()]
        params = [w.body_masses.ravel(), w.gravity.ravel(), w.body_friction.ravel()]
        out.append(np.concatenate([obs.ravel(), rew, term, trunc, *values, *params]))
    return out


@pytest.mark.parametrize("layout", ["isolated", "packed"])
def test_deterministic_per_seed_and_exact_through_snapshots(layout: str) -> None:
    runs = []
    for threads in (1, 2):
        env = ke.LearningEnv(Robust(), num_envs=6, seed=4, layout=layout, num_threads=threads)
        env.reset(seed=4)
        head = _run(env, 60, seed=1)
        snap = env.snapshot()
        assert "env/randomization/timers" in snap.arrays
        tail = _run(env, 80, seed=2)
        env.restore(snap)
        again = _run(env, 80, seed=2)
        assert all(np.array_equal(a, b) for a, b in zip(tail, again, strict=True))
        runs.append(head + tail)
        env.close()
    assert all(np.array_equal(a, b) for a, b in zip(runs[0], runs[1], strict=True))
    other = ke.LearningEnv(Robust(), num_envs=6, seed=5, layout=layout)
    other.reset(seed=5)
    assert not np.array_equal(_run(other, 1, seed=1)[0], runs[0][0])
    other.close()


def test_values_follow_the_seed_and_are_the_worlds() -> None:
    env = ke.LearningEnv(Robust(), num_envs=3, seed=0)
    env.reset(seed=7)
    w = env.world
    first = (w.body_masses, w.gravity, w.actuator_strength, w.body_friction)
    pole = w.body_names.index(POLE)
    r = env.randomizer
    assert r is not None and r.labels[0] == f"mass_scale {POLE}"
    assert np.allclose(w.body_masses[:, pole] / r.values[:, 0], w.body_masses[0, pole] /
                       r.values[0, 0])  # fmt: skip
    g = r.values[:, r.labels.index("gravity dx") : r.labels.index("gravity dy") + 1]
    assert np.array_equal(w.gravity, np.array([0.0, -9.81]) + g)
    _run(env, 30, seed=3)
    env.reset(seed=7)  # re-seeded: the startup gravity is drawn again, the same
    assert np.array_equal(env.world.gravity, first[1])
    assert np.array_equal(env.world.body_masses, first[0])
    fresh = ke.LearningEnv(Robust(), num_envs=3, seed=99)
    fresh.reset(seed=7)  # the values depend on the reset's seed only
    assert np.array_equal(fresh.world.gravity, first[1])
    env.reset()  # no seed: the reset terms draw on, the startup ones stay
    assert np.array_equal(env.world.gravity, first[1])
    assert not np.array_equal(env.world.body_masses, first[0])
    env.close()
    fresh.close()


def test_episode_records_pushes_and_evaluation_report() -> None:
    env = ke.LearningEnv(Robust(), num_envs=4, seed=0)
    report = ke.evaluate(env, lambda obs: np.zeros((4, 1)), episodes=8, seed=3)
    assert len(report.randomization) == 8
    first = report.randomization[0]
    assert f"mass_scale {POLE}" in first and "push#1 count" in first
    assert all(0.5 <= r[f"mass_scale {POLE}"] <= 2.0 for r in report.randomization)
    assert "randomized (min .. max, mean)" in report.table()
    assert report.to_dict()["randomization"][0] == first
    # Robust's two push terms each have their own record (#41: one label hid the other):
    # push#1 kicks every 0.2-0.5 s, push#2 once at every episode start
    assert all(r["push#2 count"] == 1 for r in report.randomization)
    assert all(abs(r["push#2 vx"]) <= 0.2 and r["push#2 vy"] == 0 for r in report.randomization)
    counts = [r["push#1 count"] for r in report.randomization]
    assert min(counts) >= 0 and max(counts) >= 2  # an episode of more than 1 s: several
    for r in report.randomization:  # the last kick of the episode; 0 before any came
        assert (abs(r["push#1 vx"]) <= 0.4) if r["push#1 count"] else r["push#1 vx"] == 0
    env.close()


def test_a_push_record_holds_the_count_and_the_last_kick() -> None:
    class Kicked(CartPoleTask):  # a kick every env step, drawn from a range
        randomization = (
            ke.Randomize(
                "push", (-0.1, 0.0), (0.1, 0.0), when="interval", interval_s=(0.02, 0.02),
                bodies=(POLE,),
            ),
        )  # fmt: skip

    env = ke.LearningEnv(Kicked(), num_envs=2, seed=0)
    env.reset(seed=0)
    r = env.randomizer
    assert r is not None and r.labels == ("push count", "push vx", "push vy")
    pole = env.world.body_names.index(POLE)
    steps = round(0.02 / env.step_dt)
    for n in range(1, 4):
        for _ in range(steps - 1):
            env.step(np.zeros((2, 1)))
        before = env.world.body_velocities[:, pole, 0]
        r.tick()  # what the next step would do first: its kick (white box: no physics)
        kick = env.world.body_velocities[:, pole, 0] - before
        assert r.values[:, 0].tolist() == [float(n)] * 2
        assert np.allclose(r.values[:, 1], kick) and (r.values[:, 2] == 0).all()
    env.close()


def test_a_task_without_randomization_reports_none() -> None:
    env = ke.LearningEnv(CartPoleTask(), num_envs=2, seed=0)
    env.reset(seed=0)
    assert env.randomizer is None
    snap = env.snapshot()
    assert not any(k.startswith("env/randomization") for k in snap.arrays)
    report = ke.evaluate(env, lambda obs: np.zeros((2, 1)), episodes=2, seed=0)
    assert report.randomization == ({}, {}) and "randomized" not in report.table()
    env.close()


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(what="mass", low=0.5, high=2.0), "Randomize.what must be one of"),
        (dict(what="mass_scale", low=2.0, high=0.5), "low must be <= high"),
        (dict(what="mass_scale", low=-1.0, high=0.5), "[0, 100]"),
        (dict(what="gravity", low=0.5, high=2.0), "must be 2 numbers"),
        (dict(what="gravity", low=(0, float("nan")), high=(1, 1)), "finite numbers"),
        (dict(what="gravity", low=(0, -3e4), high=(0, 0)), "within ±20000 m/s^2"),
        (dict(what="mass_scale", low=0.5, high=2.0, distribution="beta"), "distribution"),
        (dict(what="mass_scale", low=0.0, high=2.0, distribution="log_uniform"), "low must be > 0"),
        (dict(what="mass_scale", low=0.5, high=2.0, when="sometimes"), "when must be"),
        (dict(what="push", low=(0, 0), high=(1, 1), when="startup"), "'reset' or 'interval'"),
        (dict(what="push", low=(0, 0), high=(1, 1), when="interval"), "interval_s must be"),
        (dict(what="push", low=(0, 0), high=(1, 1), when="interval", interval_s=(2, 1)), "0 <"),
        (dict(what="mass_scale", low=1, high=1, interval_s=(1, 2)), "is for when='interval'"),
        (dict(what="mass_scale", low=1, high=1, bodies="/World/*"), "tuple of paths"),
        (dict(what="gravity", low=(0, 0), high=(0, 0), bodies=("/a",)), "('/a',); leave it"),
        (dict(what="mass_scale", low=1, high=1, joints=("/a",)), "for 'actuator_strength'"),
        # what a new user wrote (#41): the field, the value and the fix in every message
        (dict(what="mass_scale", low=(0.5, 0.6), high=2.0), "e.g. Randomize('mass_scale', 0.8"),
        (dict(what="mass_scale", low=float("nan"), high=2.0), "got nan; give real numbers"),
        (dict(what="mass_scale", low=2.0, high=0.5), "first: Randomize('mass_scale', 0.5, 2.0)"),
        (dict(what="gravity", low=(1, -1), high=(0, 1)), "Randomize('gravity', (0.0, -1.0), (1"),
        (
            dict(what="push", low=(0, 0), high=(1, 1), when="interval", interval_s=(2, 1)),
            "interval_s=(1.0, 2.0)",
        ),
        (
            dict(what="push", low=(0, 0), high=(1, 1), when="interval", interval_s=(0, 1)),
            "positive",
        ),
        (dict(what=["mass_scale"], low=1, high=1), "got ['mass_scale']; pick the one"),
        (dict(what="actuator_strength", low=1, high=1, bodies=("/a",)), "with joints="),
    ],
)
def test_terms_are_checked_where_declared(kwargs: dict, words: str) -> None:
    with pytest.raises(ke.UserError) as err:
        ke.Randomize(**kwargs)
    text = str(err.value)
    assert words in text and "\n" not in text, text
    # "X must be Y, got Z; do W": the field, what it must be, the value and the fix
    assert re.fullmatch(r"Randomize\S* .*must .+, got .+; \S.+", text), text


def test_the_task_attribute_and_its_names_are_checked_when_the_env_is_made() -> None:
    class Wrong(CartPoleTask):
        randomization = ({"what": "mass_scale"},)

    with pytest.raises(ke.TaskError, match="must be a tuple of ke.Randomize"):
        ke.LearningEnv(Wrong(), num_envs=1)

    class Nowhere(CartPoleTask):
        randomization = (ke.Randomize("mass_scale", 1.0, 2.0, bodies=("/World/Arm/*",)),)

    with pytest.raises(ke.TaskError, match=r"'/World/Arm/\*' must match a body"):
        ke.LearningEnv(Nowhere(), num_envs=1)


@pytest.mark.parametrize(
    ("term", "words"),
    [  # each refused by the World only at one end of its range, for some draws
        (ke.Randomize("gravity", (0.0, 0.0), (2e4, 2e4)), "high end (20000.0, 20000.0)"),
        (ke.Randomize("gravity", (0.0, -1e4), (0.0, 0.0)), "low end (0.0, -10000.0)"),
        (ke.Randomize("mass_scale", 1e-9, 2.0, bodies=(POLE,)), "mass of '/World/Robot/pole'"),
        (ke.Randomize("mass_scale", 0.0, 2.0, when="startup"), "low end 0.0"),
        (ke.Randomize("push", (0.0, 0.0), (2e7, 0.0), bodies=(POLE,)), "within ±1e+07"),
    ],
)
def test_a_range_the_world_refuses_fails_when_the_env_is_made(
    term: ke.Randomize, words: str
) -> None:
    class Wrong(CartPoleTask):
        randomization = (ke.Randomize("sensor_noise_scale", 0.5, 2.0), term)

    with pytest.raises(ke.TaskError) as err:  # before any reset or step
        ke.LearningEnv(Wrong(), num_envs=3, seed=0)
    text = str(err.value)
    assert text.startswith(f"randomization[1] ({term.what} ") and words in text, text
    assert "; narrow the range" in text and "\n" not in text


@pytest.mark.parametrize(
    ("terms", "words"),
    [  # the later term's draws replaced the earlier's (#41): refused when the env is made
        (
            (
                ke.Randomize("mass_scale", 0.5, 2.0),
                ke.Randomize("mass_scale", 3, 4, bodies=(POLE,)),
            ),
            "randomization[1] (mass_scale U(3.0, 4.0) at reset on /World/Robot/pole) must act on "
            "different bodies, got both on /World/Robot/pole; combine them into one term",
        ),
        (
            (
                ke.Randomize("friction_scale", 0.5, 2.0, bodies=("/World/Robot/*",)),
                ke.Randomize("sensor_noise_scale", 0.5, 2.0),
                ke.Randomize("friction_scale", 0.9, 1.1, when="startup"),
            ),
            "randomization[0] (friction_scale U(0.5, 2.0) at reset on /World/Robot/cart, "
            "/World/Robot/pole) and randomization[2] (friction_scale U(0.9, 1.1) at startup",
        ),
        (
            (
                ke.Randomize("gravity", (0, -1), (0, 1)),
                ke.Randomize("gravity", (-1, 0), (1, 0), when="startup"),
            ),
            "must be one term (each copy has one gravity), got two gravity terms; combine",
        ),
        (
            (
                ke.Randomize("actuator_strength", 0.5, 1.0),
                ke.Randomize("actuator_strength", 0.9, 1.0, when="interval", interval_s=(1, 2)),
            ),
            "must act on different joints, got both on /World/Robot/slider_to_cart; combine",
        ),
        (
            (
                ke.Randomize("sensor_noise_scale", 0.5, 2.0),
                ke.Randomize("sensor_noise_scale", 1, 3),
            ),
            "got two sensor_noise_scale terms; combine them into one term",
        ),
    ],
)
def test_terms_that_set_the_same_parameter_are_refused(
    terms: tuple[ke.Randomize, ...], words: str
) -> None:
    class Twice(CartPoleTask):
        randomization = terms

    with pytest.raises(ke.TaskError) as err:
        ke.LearningEnv(Twice(), num_envs=2, seed=0)
    assert words in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_terms_on_different_bodies_and_pushes_compose() -> None:
    class Apart(CartPoleTask):
        randomization = (
            ke.Randomize("mass_scale", 2.0, 2.0, bodies=("/World/Robot/cart",)),
            ke.Randomize("mass_scale", 3.0, 3.0, bodies=(POLE,)),
            ke.Randomize("push", (0.5, 0.0), (0.5, 0.0), bodies=(POLE,)),
            ke.Randomize("push", (0.25, 0.0), (0.25, 0.0), bodies=(POLE,)),
        )

    env = ke.LearningEnv(Apart(), num_envs=2, seed=0)
    env.reset(seed=0)
    w = env.world
    assert w.body_masses[:, 1:].tolist() == [[2.0, 0.30000000000000004]] * 2
    pole = w.body_names.index(POLE)  # CartPole's episodes start at rest: both kicks added
    assert w.body_velocities[:, pole, 0].tolist() == [0.75, 0.75]
    env.close()


def test_a_draw_the_world_refuses_names_the_term() -> None:
    class Pushed(CartPoleTask):  # each kick alone is within the World's ±1e7 m/s, not both
        randomization = (
            ke.Randomize("push", (6e6, 0.0), (6e6, 0.0), bodies=(POLE,)),
            ke.Randomize("push", (6e6, 0.0), (6e6, 0.0), bodies=(POLE,)),
        )

    env = ke.LearningEnv(Pushed(), num_envs=2, seed=0)
    with pytest.raises(ke.TaskError) as err:
        env.reset(seed=0)
    text = str(err.value)
    assert text.startswith("randomization[1] (push U((6000000.0, 0.0), (6000000.0, 0.0)) at ")
    assert "on /World/Robot/pole)" in text and "World.set_body_velocities" in text
    assert "; narrow the range" in text and "\n" not in text
    env.close()


def test_the_world_checks_a_parameter_without_changing_it() -> None:
    env = ke.LearningEnv(CartPoleTask(), num_envs=2, seed=0)
    w = env.world
    before = (w.gravity, w.body_masses, w.body_friction, w.sensor_noise_scale)
    w.check_parameter("set_gravity", [[0.0, -1.0]], env_ids=[1])
    w.check_parameter("set_body_masses", w.body_masses * 2.0)
    slippery = w.body_friction
    slippery[:, 1:, 0:2] *= 0.5  # the moving bodies' (the ground's is every copy's)
    w.check_parameter("set_body_friction", slippery)
    w.check_parameter("set_sensor_noise_scale", [3.0, 4.0])
    for setter, values, words in [
        ("set_gravity", [[0.0, 2e4]], "World.set_gravity: gravity components must be within"),
        ("set_body_masses", w.body_masses * 0.0, "World.set_body_masses: the mass of"),
        ("set_body_friction", w.body_friction[:1], "World.set_body_friction: friction must"),
        ("set_sensor_noise_scale", [1e4, 1.0], "must be finite and in [0, 1000]"),
        ("set_magic", [1.0], "setter must be one of ('set_body_masses'"),
    ]:
        with pytest.raises(ke.UserError, match=re.escape(words)):
            w.check_parameter(setter, values, env_ids=None if setter != "set_gravity" else [1])
    after = (w.gravity, w.body_masses, w.body_friction, w.sensor_noise_scale)
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    env.close()


def test_preview_shows_the_values() -> None:
    lines: list[str] = []
    run_preview(
        "tests.rl.test_randomization:Robust",
        actions="random",
        seconds=6.0,
        render_mode=None,
        print_fn=lines.append,
    )
    assert any(line.startswith("randomized: mass_scale U(0.5, 2.0) at reset on") for line in lines)
    assert any(line.startswith("  randomized: mass_scale /World/Robot/pole") for line in lines)
