"""KELab against Jax2D (Kinetix's JAX engine) on the same scenes, side by side.

    python -m venv /tmp/jax2d && /tmp/jax2d/bin/pip install jax2d chex   # its own venv
    python benchmarks/jax2d_compare.py --jax2d-python /tmp/jax2d/bin/python [--rounds 5]

Scenes (each copy alone in its world; env-steps = physics steps x copies):

- ``stack``: a floor and 5 stacked boxes (0.4 x 0.3 m, 1 kg), 256 copies. KELab packed,
  with equal coefficients (``Material(static_friction=0.5, dynamic_friction=0.5)``) and
  with the default material (``ke.Material()``: 0.6 / 0.5, the friction model); Jax2D with
  friction 0.5 (it has one coefficient per shape).
- ``arm``: a two-link arm on a fixed base (two 0.5 x 0.05 m links, revolute joints with
  motors), random motor commands, 1024 copies. KELab packed, effort actuators; Jax2D
  motor joints.

KELab runs in this Python, one thread. Jax2D runs in the given Python (its own venv: jax
and jax2d from PyPI, and chex, which jax2d 1.0.2 imports without declaring it),
jit-compiled and vmapped over the copies, ``--chunk`` steps per call through
``jax.lax.scan`` (one dispatch per chunk: Jax2D's best case on a CPU), with its smallest
static capacities (the scene's shapes and joints; 2 unused circles and a thruster: its
pair tables fail with fewer), float32 as it computes.
Both at dt = 1/120, 10 solver iterations. Each side is timed by its
process's CPU clock (JAX's CPU backend may use several threads: their CPU time counts)
and by wall clock; the table gives env-steps per second of each, the median of rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

DT = 1 / 120
JAX_SIDE = r"""
import json, sys, time
import jax, jax.numpy as jnp, numpy as np
from jax2d.engine import PhysicsEngine, create_empty_sim
from jax2d.scene import add_rectangle_to_scene, add_revolute_joint_to_scene
from jax2d.sim_state import SimParams, StaticSimParams
scene, n, chunk, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
dt = float(sys.argv[5])
add_box, add_joint, v = add_rectangle_to_scene, add_revolute_joint_to_scene, jnp.array
if scene == "stack":
    static = StaticSimParams(num_polygons=6, num_circles=2, num_joints=1, num_thrusters=1,
                             max_polygon_vertices=4, num_static_fixated_polys=1)
else:
    static = StaticSimParams(num_polygons=4, num_circles=2, num_joints=2, num_thrusters=1,
                             max_polygon_vertices=4, num_static_fixated_polys=1)
params = SimParams(dt=dt)
state = create_empty_sim(static, add_floor=True, add_walls_and_ceiling=False)
top = 2 * 0.2  # the floor's top (create_empty_sim's floor_offset 0.2)
if scene == "stack":
    for i in range(5):
        state, _ = add_box(state, static, v([2.5, top + 0.15 + 0.301 * i]), v([0.4, 0.3]),
                           density=1.0 / 0.12, friction=0.5)
else:
    state, (_, gb) = add_box(state, static, v([2.5, 2.0]), v([0.1, 0.1]), fixated=True)
    state, (_, g1) = add_box(state, static, v([2.75, 2.0]), v([0.5, 0.05]), density=40.0)
    state, (_, g2) = add_box(state, static, v([3.25, 2.0]), v([0.5, 0.05]), density=40.0)
    state, _ = add_joint(state, static, gb, g1, v([0.0, 0.0]), v([-0.25, 0.0]), motor_on=True)
    state, _ = add_joint(state, static, g1, g2, v([0.25, 0.0]), v([-0.25, 0.0]), motor_on=True)
engine = PhysicsEngine(static)
states = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), state)
width = static.num_joints + static.num_thrusters

def run(states, key):
    def body(carry, k):
        acts = jax.random.uniform(k, (n, width), minval=-1.0, maxval=1.0)
        if scene == "stack":
            acts = jnp.zeros((n, width))
        out, _ = jax.vmap(engine.step, in_axes=(0, None, 0))(carry, params, acts)
        return out, None
    out, _ = jax.lax.scan(body, states, jax.random.split(key, chunk))
    return out

run = jax.jit(run)
key = jax.random.PRNGKey(0)
states = run(states, key)
jax.block_until_ready(states)
cpu, wall = [], []
for r in range(rounds):
    key, sub = jax.random.split(key)
    c0, w0 = time.process_time(), time.perf_counter()
    states = run(states, sub)
    jax.block_until_ready(states)
    cpu.append(time.process_time() - c0)
    wall.append(time.perf_counter() - w0)
print("JAX2D " + json.dumps({"cpu": cpu, "wall": wall, "jax": jax.__version__}))
"""


def kelab_side(scene: str, n: int, chunk: int, rounds: int, material: object) -> dict:
    """KELab's env-steps per second on the scene (packed, one thread)."""
    import numpy as np

    import kelab as ke

    b = ke.SceneBuilder()
    if scene == "stack":
        b.add(ke.Terrain.plane(material=material), at="/")
        for i in range(5):
            box = ke.Prop(ke.Box(0.4, 0.3), mass=1.0, material=material,
                          initial_pose=ke.Pose(0.0, 0.15 + 0.301 * i))  # fmt: skip
            b.add(box, at=f"/World/Box{i}")
    else:
        arm = ke.RobotDescription(
            name="arm",
            bodies=(
                ke.BodySpec("base", (ke.Box(0.1, 0.1),), body_type="static"),
                ke.BodySpec("l1", (ke.Box(0.5, 0.05),), mass=1.0, initial_pose=ke.Pose(0.25, 0)),
                ke.BodySpec("l2", (ke.Box(0.5, 0.05),), mass=1.0, initial_pose=ke.Pose(0.75, 0)),
            ),
            joints=(
                ke.RevoluteJoint("j1", "base", "l1", anchor=(0.0, 0.0),
                                 actuator=ke.EffortActuator(5.0)),
                ke.RevoluteJoint("j2", "l1", "l2", anchor=(0.5, 0.0),
                                 actuator=ke.EffortActuator(5.0)),
            ),
        )  # fmt: skip
        b.add(ke.Robot(arm, initial_pose=ke.Pose(0.0, 2.0)), at="/World/Arm")
    w = ke.World(b.build(), num_envs=n, layout="packed")
    rng = np.random.default_rng(0)
    acts = [rng.uniform(-5, 5, (n, 2)) for _ in range(chunk)]
    arm = scene == "arm"
    for a in acts:  # warm
        if arm:
            w.set_joint_efforts(a)
        w.step(DT)
    cpu, wall = [], []
    for _ in range(rounds):
        c0, w0 = time.process_time(), time.perf_counter()
        for a in acts:
            if arm:
                w.set_joint_efforts(a)
            w.step(DT)
        w.joint_positions if arm else w.body_poses  # noqa: B018 - the read a learner makes
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    w.close()
    return {"cpu": cpu, "wall": wall}


def rate(n: int, chunk: int, seconds: list[float]) -> float:
    return n * chunk / statistics.median(seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jax2d-python", required=True, help="a Python with jax2d installed")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--chunk", type=int, default=60, help="physics steps per timed run")
    args = ap.parse_args()
    import kelab as ke

    rows = []
    for scene, n in (("stack", 256), ("arm", 1024)):
        got = subprocess.run(
            [args.jax2d_python, "-c", JAX_SIDE, scene, str(n), str(args.chunk), str(args.rounds),
             str(DT)],
            capture_output=True, text=True, check=False, cwd=Path(__file__).parent,
        )  # fmt: skip
        line = [x for x in got.stdout.splitlines() if x.startswith("JAX2D ")]
        if not line:
            raise SystemExit(f"the Jax2D side failed ({scene}):\n{got.stderr[-3000:]}")
        jx = json.loads(line[0][6:])
        sides = [("Jax2D " + jx["jax"].join(("(jax ", ")")), jx)]
        if scene == "stack":
            equal = ke.Material(static_friction=0.5, dynamic_friction=0.5)
            for name, mat in (("equal coefficients", equal), ("default material", ke.Material())):
                sides.append((f"KELab, {name}", kelab_side(scene, n, args.chunk, args.rounds, mat)))
        else:
            sides.append(("KELab", kelab_side(scene, n, args.chunk, args.rounds, None)))
        base = rate(n, args.chunk, jx["cpu"])
        for name, t in sides:
            cpu, wall = rate(n, args.chunk, t["cpu"]), rate(n, args.chunk, t["wall"])
            rows.append(f"| {scene} x{n} | {name} | {cpu:,.0f} | {wall:,.0f} | {cpu / base:.1f}x |")
    print(f"\ndt 1/120, {args.rounds} rounds of {args.chunk} steps; env-steps per second\n")
    print("| scene | engine | per CPU second | per wall second | CPU rate vs Jax2D |")
    print("|---|---|---:|---:|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    sys.exit(main())
