"""World throughput: 1024 cartpoles vs a hand-written pymunk.batch loop.

Run: python benchmarks/world_throughput.py [--envs 1024] [--steps 200] [--rounds 3]
Prints a markdown table (also kept in benchmarks/README.md under "## world_throughput").

    python benchmarks/world_throughput.py --interleaved [--chunks 60]

builds one packed World and one bare loop and times them in alternating chunks of 20
control steps in one process (CPU time): per-chunk ratios move far less with other
processes' load than whole runs in separate processes (benchmarks/README.md, "packed
World vs bare").
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import time
from collections.abc import Callable

import numpy as np
import pymunk
import pymunk.batch as pb

import kelab as ke
from kelab.sim.scene.assets import Asset
from kelab.sim.scene.assets import cartpole as cp

DT = 1 / 120
DECIMATION = 2


def start_clock() -> float:
    """Collect garbage, then read the clock: every timed loop starts with a clean heap.

    Building a World or a bare Space leaves cyclic garbage (pymunk objects); without this
    the collector may run inside the next timed loop and bill one side for the other's
    garbage (measured: one World run 35 % slower right after a bare-loop build).
    """
    gc.collect()
    return time.perf_counter()


def scene() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Robot(Asset.from_registry("kelab/robot/cartpole:v1")), at="/World/Robot")
    return b.build()


def policy(x: np.ndarray, theta: np.ndarray, v: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.clip(-(10.0 * theta + 2.0 * w) - 0.5 * x - v, -100.0, 100.0)


def bare_loop(n: int, steps: int, wheels: bool = True) -> float:
    """The same cartpoles in ONE pymunk.Space, copies 4 m apart, batch read/write.

    Its spatial hash has the World's cell size for this scene (2 m; 1 m steps 1.5 %
    slower here) and ``8 n + 64`` cells.

    ``wheels=True`` builds the asset's cart exactly (box + two wheel circles, mass shared
    by area, as the World does); ``wheels=False`` is the older reference without wheels.
    """
    run = bare_runner(n, wheels)
    t0 = start_clock()
    run(steps)
    return n * steps / (time.perf_counter() - t0)


def bare_runner(n: int, wheels: bool = True) -> Callable[[int], None]:
    """Build :func:`bare_loop`'s space; return ``run(steps)``, its timed loop."""
    space = pymunk.Space()
    space.gravity = (0.0, -9.81)
    space.use_spatial_hash(2.0, 8 * n + 64)  # the cell size the World picks for it
    for i in range(n):
        o = 4.0 * i
        cart = pymunk.Body()
        shapes = [pymunk.Poly.create_box(cart, (cp.CART_WIDTH, cp.CART_HEIGHT))]
        if wheels:
            wx = cp.CART_WIDTH / 2 - cp.WHEEL_RADIUS - 0.02
            for x in (-wx, wx):
                shapes.append(pymunk.Circle(cart, cp.WHEEL_RADIUS, (x, -cp.CART_HEIGHT / 2)))
        areas = [s.area for s in shapes]
        for s in shapes:
            s.mass = cp.CART_MASS * s.area / sum(areas)
        cart.position = (o, cp.CART_Y)
        pole = pymunk.Body()
        ps = pymunk.Poly.create_box(pole, (cp.POLE_WIDTH, cp.POLE_LENGTH))
        ps.mass = cp.POLE_MASS
        pole.position = (o, cp.PIVOT_Y + cp.POLE_LENGTH / 2)
        f = pymunk.ShapeFilter(group=i + 1)
        for s in (*shapes, ps):
            s.filter = f
        joints = [
            pymunk.GrooveJoint(
                space.static_body, cart, (o - 3.0, cp.CART_Y), (o + 3.0, cp.CART_Y), (0, 0)
            ),
            pymunk.GearJoint(space.static_body, cart, 0.0, 1.0),
            pymunk.PivotJoint(cart, pole, (0.0, cp.CART_HEIGHT / 2), (0.0, -cp.POLE_LENGTH / 2)),
        ]
        for j in joints:
            j.collide_bodies = False
        space.add(cart, *shapes, pole, ps, *joints)
    origin = 4.0 * np.arange(n)
    rb = pb.Buffer()
    forces = np.zeros((2 * n + 1) * 3 + 2)
    fview = forces[: 6 * n].reshape(n, 2, 3)
    wb = pb.Buffer()
    wb.set_float_buf(forces)
    read = (
        pb.BodyFields.POSITION
        | pb.BodyFields.ANGLE
        | pb.BodyFields.VELOCITY
        | pb.BodyFields.ANGULAR_VELOCITY
    )
    write = pb.BodyFields.FORCE | pb.BodyFields.TORQUE

    def run(steps: int) -> None:
        for _ in range(steps):
            rb.clear()
            pb.get_space_bodies(space, read, rb)
            s = np.frombuffer(rb.float_buf(), dtype=np.float64)[: 12 * n].reshape(n, 2, 6)
            u = policy(s[:, 0, 0] - origin, s[:, 1, 2], s[:, 0, 3], s[:, 1, 5])
            fview[:, 0, 0] = u
            for _ in range(DECIMATION):
                pb.set_space_bodies(space, write, wb)
                space.step(DT)

    return run


def world_loop(n: int, steps: int, threads: int, layout: str) -> float:
    w = ke.World(scene(), num_envs=n, num_threads=threads, layout=layout)
    run = world_runner(w)
    t0 = start_clock()
    run(steps)
    rate = n * steps / (time.perf_counter() - t0)
    w.close()
    return rate


def world_runner(w: ke.World) -> Callable[[int], None]:
    """``run(steps)``: :func:`world_loop`'s timed loop on World ``w``."""
    n = w.num_envs
    efforts = np.zeros((n, 2))

    def run(steps: int) -> None:
        for _ in range(steps):
            q = w.joint_positions
            qd = w.joint_velocities
            efforts[:, 0] = policy(q[:, 0], q[:, 1], qd[:, 0], qd[:, 1])
            w.set_joint_efforts(efforts)
            for _ in range(DECIMATION):
                w.step(DT)

    return run


def interleaved(n: int, chunks: int, chunk: int = 20) -> None:
    """Print a packed World's and the bare loop's CPU time per control step, interleaved.

    Both are built once; ``chunks`` alternating runs of ``chunk`` control steps each are
    timed by this process's CPU time with the collector off (collected every 10 pairs).
    The median of the per-pair ratios is the figure to quote: a pair runs within ~0.1 s,
    so a slow spell of the machine hits both sides of it.
    """
    w = ke.World(scene(), num_envs=n, layout="packed")
    world, bare = world_runner(w), bare_runner(n)
    world(5)
    bare(5)
    wt, bt = [], []
    gc.collect()
    gc.disable()
    try:
        for k in range(chunks):
            t0 = time.process_time()
            world(chunk)
            t1 = time.process_time()
            bare(chunk)
            t2 = time.process_time()
            wt.append((t1 - t0) / chunk)
            bt.append((t2 - t1) / chunk)
            if k % 10 == 9:
                gc.collect()
    finally:
        gc.enable()
    w.close()
    a, b = np.array(wt) * 1e6, np.array(bt) * 1e6
    print(
        f"{n} cartpoles, {chunks} pairs of {chunk} control steps, CPU time per control step: "
        f"packed World min {a.min():.0f} us, median {np.median(a):.0f} us; bare loop min "
        f"{b.min():.0f} us, median {np.median(b):.0f} us; World vs bare: median of the "
        f"pairs {np.median(b / a):.3f}x, of the minima {b.min() / a.min():.3f}x "
        f"(load average {' '.join(f'{x:.2f}' for x in os.getloadavg())})"
    )


def snapshot_cost(n: int, control_steps: int, layout: str) -> tuple[float, float, int]:
    w = ke.World(scene(), num_envs=n, layout=layout)
    for _ in range(control_steps):
        w.set_joint_efforts(np.tile([30.0, 0.0], (n, 1)))
        for _ in range(DECIMATION):
            w.step(DT)
    t0 = start_clock()
    snap = w.snapshot()
    t1 = time.perf_counter()
    w.restore(snap)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, len(snap.to_bytes())


def reset_cost(
    asset: str, layout: str, n: int = 256, k: int = 32, reps: int = 20
) -> tuple[float, float]:
    """Microseconds per reset copy, on a plane: ``set_body_states`` of ``k`` of ``n``
    copies (mean of ``reps``), and ``reset_envs`` of all ``n`` (best of 3)."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry(asset)), at="/World/Robot")
    w = ke.World(b.build(), num_envs=n, layout=layout)
    for _ in range(5):
        w.step(DT)
    poses, vels = w.body_poses, w.body_velocities
    rng = np.random.default_rng(0)
    spent = 0.0
    for _ in range(reps):
        ids = np.sort(rng.choice(n, k, replace=False))
        t0 = time.perf_counter()
        w.set_body_states(ids, poses[ids], vels[ids])
        spent += time.perf_counter() - t0
        w.step(DT)
    full = []
    for _ in range(3):
        t0 = start_clock()
        w.reset_envs()
        full.append(time.perf_counter() - t0)
        w.step(DT)
    w.close()
    return spent / (reps * k) * 1e6, min(full) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every loop; best kept")
    ap.add_argument(
        "--interleaved",
        action="store_true",
        help="only the packed World against the bare loop, in alternating chunks (one process)",
    )
    ap.add_argument("--chunks", type=int, default=60, help="--interleaved: pairs of chunks")
    args = ap.parse_args()
    n, steps = args.envs, args.steps
    if args.interleaved:
        interleaved(n, args.chunks)
        return
    # rounds interleave every loop, so that a slow spell of a shared machine hits all of
    # them; each row is its best round
    configs = [(layout, k) for layout in ("isolated", "packed") for k in (1, 2)]
    runs: dict[object, list[float]] = {}
    for _ in range(args.rounds):
        runs.setdefault("bare", []).append(bare_loop(n, steps))
        runs.setdefault("old", []).append(bare_loop(n, steps, wheels=False))
        for layout, k in configs:
            runs.setdefault((layout, k), []).append(world_loop(n, steps, k, layout))
    bare, old = max(runs["bare"]), max(runs["old"])
    rates = {c: max(runs[c]) for c in configs}
    print(
        f"{n} cartpoles, dt 1/120, {DECIMATION} physics steps per control step; "
        f"env-steps/s = copies x control steps / s ({platform.processor() or 'cpu'}, "
        f"{os.cpu_count()} cores, pymunk {pymunk.version})\n"
    )
    print("| loop | env-steps/s | vs bare loop |")
    print("|---|---:|---:|")
    print(f"| bare pymunk.Space + pymunk.batch (1 thread) | {bare:,.0f} | 1.00x |")
    print(
        f"| same, cart without its two wheels (older reference) | {old:,.0f} | {old / bare:.2f}x |"
    )
    for (layout, k), rate in rates.items():
        print(
            f"| ke.World, layout={layout!r}, num_threads={k} | {rate:,.0f} | {rate / bare:.2f}x |"
        )
    print()
    print("| snapshot/restore after 120 control steps | snapshot | restore | bytes |")
    print("|---|---:|---:|---:|")
    for layout in ("isolated", "packed"):
        for k in (1, n):
            s, r, size = snapshot_cost(k, 120, layout)
            print(f"| {layout}, {k} copies | {s * 1e3:.2f} ms | {r * 1e3:.1f} ms | {size:,} |")
    print()
    print(
        "| reset, us per copy, 256 copies on a plane | set_body_states of 32, isolated | "
        "packed | reset_envs of all 256, isolated | packed |"
    )
    print("|---|---:|---:|---:|---:|")
    for name in ("cartpole", "biped"):
        asset = f"kelab/robot/{name}:v1"
        got = {lay: [reset_cost(asset, lay) for _ in range(3)] for lay in ("isolated", "packed")}
        some = {lay: min(r[0] for r in runs) for lay, runs in got.items()}
        every = {lay: min(r[1] for r in runs) for lay, runs in got.items()}
        print(
            f"| {name} | {some['isolated']:.0f} | {some['packed']:.0f} | "
            f"{every['isolated']:.0f} | {every['packed']:.0f} |"
        )


if __name__ == "__main__":
    main()
