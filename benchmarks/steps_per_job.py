"""What ``World.step(dt, steps=k)`` saves against ``k`` calls of ``World.step(dt)``.

    PYTHONPATH=. python benchmarks/steps_per_job.py [--rounds 30] [--chunk 20]
        [--threads 1] [--wall] [--only humanoid]

Each case builds one World (or env) and times alternating chunks of ``--chunk`` calls by
this process's CPU clock (all its threads; steadier than wall time on a loaded machine):
one chunk stepping ``steps=k`` (one job per shard thread: ``World.steps_in_one_job``), the
next with its ``step`` patched to loop over single calls (the same bits:
tests/sim/test_world_steps.py), and so on. One object for both sides: two Worlds built
side by side differ by more than what is measured (the second one built ran 10-15 %
slower, both sides looping). The table gives microseconds per physics step (each side's
median chunk), the median of the rounds' differences (a round's two chunks run back to
back) and its share of the looping side. Cases:

- ``cartpole x96``: a bare packed World (effort actuators), ``k = 4``;
- ``biped x256``: a bare packed World (effort actuators, contacts), ``k = 4``;
- ``Humanoid-v0 x256 env``: the env with random actions (decimation 2), per physics step
  of its env steps (the task's and the env's Python included).

``--threads 2``: the looping side also hands the shard threads a job every step; by CPU
clock that shows only as the hand-overs' own CPU, not as the waits (``--wall`` times by
wall clock, which counts them, and the machine's other load too).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from collections.abc import Callable

import gymnasium
import numpy as np

import kelab as ke
from kelab.sim import world as world_module

DT = 1 / 120


def _loop(world: ke.World, looping: bool) -> None:
    """Make ``world.step(dt, steps=k)`` run as ``k`` calls of ``World.step(dt)``, or not."""

    def step(dt: float, steps: int = 1) -> None:
        for _ in range(steps):
            world_module.World.step(world, dt)

    if looping:
        world.step = step  # type: ignore[method-assign]
    else:
        vars(world).pop("step", None)


Case = tuple[Callable[[], None], ke.World, int]
"""A call to time, the World it steps and the physics steps of a call."""


def _bare(asset: str, n: int, threads: int, k: int) -> Case:
    """A packed World of ``asset`` driven by sine efforts; a call is ``step(DT, steps=k)``."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/", per_environment=False)
    pose = ke.Pose() if "cartpole" in asset else ke.Pose(0.0, 1.0)
    b.add(ke.Robot(ke.Asset.from_registry(asset), initial_pose=pose), at="/World/Robot")
    w = ke.World(b.build(), num_envs=n, layout="packed", num_threads=threads)
    nj = len(w.joint_names)
    phase = np.arange(n * nj).reshape(n, nj)
    t = [0]

    def call() -> None:
        w.set_joint_efforts(5.0 * np.sin(0.05 * t[0] + phase))
        w.step(DT, steps=k)
        t[0] += 1

    return call, w, k


def _humanoid(threads: int) -> Case:
    """Humanoid-v0 x256 with random actions; a call is one env step."""
    env = gymnasium.make_vec(
        "kelab/Humanoid-v0", num_envs=256, vectorization_mode="vector_entry_point",
        layout="packed", num_threads=threads,
    )  # fmt: skip
    env.reset(seed=4)
    rng = np.random.default_rng(7)
    shape = env.action_space.shape

    def call() -> None:
        env.step(rng.uniform(-1, 1, shape).astype(np.float32))

    return call, env.unwrapped.world, env.unwrapped.config.timing.decimation


def measure(
    name: str, case: Case, rounds: int, chunk: int, clock: Callable[[], float] = time.process_time
) -> str:
    """One table row: us per physics step (median chunk) looping, in jobs, the saving."""
    call, world, k = case
    assert world.steps_in_one_job, "each case measures the one-job path"
    for _ in range(3):  # warm up
        call()
    per: dict[bool, list[float]] = {True: [], False: []}
    for r in range(rounds):
        for looping in (r % 2 == 0, r % 2 == 1):
            _loop(world, looping)
            gc.collect()
            t0 = clock()
            for _ in range(chunk):
                call()
            per[looping].append((clock() - t0) / (chunk * k) * 1e6)
    world.close()
    a, b = statistics.median(per[True]), statistics.median(per[False])
    # each round's two chunks are neighbours in time: their difference is steadier
    saved = statistics.median(x - y for x, y in zip(per[True], per[False], strict=True))
    return f"| {name} | {a:,.1f} | {b:,.1f} | {saved:,.1f} | {100 * saved / a:.1f} % |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--chunk", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="", help="run the cases whose name holds this")
    ap.add_argument("--wall", action="store_true", help="time by wall clock, not CPU time")
    args = ap.parse_args()
    clock = time.perf_counter if args.wall else time.process_time
    th = args.threads
    cases: dict[str, Callable[[], Case]] = {
        f"cartpole x96, k=4, {th} thread(s)": lambda: _bare("kelab/robot/cartpole:v1", 96, th, 4),
        f"biped x256, k=4, {th} thread(s)": lambda: _bare("kelab/robot/biped:v2", 256, th, 4),
        f"Humanoid-v0 x256 env, k=2, {th} thread(s)": lambda: _humanoid(th),
    }
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    print("| case | looping, us/step | steps=k, us/step | saved, us/step | saved |")
    print("|---|---:|---:|---:|---:|")
    for name, make in cases.items():
        if args.only.lower() not in name.lower():
            continue
        print(measure(name, make(), args.rounds, args.chunk, clock), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
