"""Contacts at full speed (#40): the friction model's cost, side by side in one run.

    python benchmarks/contacts.py [--copies 256] [--rounds 15] [--chunk 20]
    python benchmarks/contacts.py --humanoid [--rounds 10] [--chunk 300]

``stack`` (the default): a floor, 5 stacked boxes and a ball, copies packed, one thread.
Three Worlds step in alternating chunks of ``--chunk`` physics steps, each chunk timed by
this process's CPU clock (other processes' load moves it far less than wall time):

- the default material (``ke.Material()``: static 0.6, dynamic 0.5) everywhere, with the
  friction model in KELab's C helper (the default where the helper is built);
- the same with the Python rules (``_friction.USE_C`` off: pymunk's per-contact
  ``pre_solve`` callback and the numpy regime update: what every World ran before #40,
  and what a World without the helper runs);
- equal coefficients everywhere (``Material(static_friction=0.5, dynamic_friction=0.5)``:
  no friction model at all, the engine's own speed).

The table gives env-steps per CPU second (the median chunk) and the median of the
per-round ratios to the equal-coefficient World.

``--humanoid``: Humanoid-v0 x256 (packed, random actions: the reset-heavy loop) with 1
and with 2 threads, each with the rules in C and with the Python rules, then with the
shipped policy acting, each env in a child process of its own (as a training run's), in
interleaved env-step chunks: the 2-thread/1-thread ratio by wall clock (what counts, on a machine
with a core free for each thread) and the same ratio from the threads' CPU times along
the critical path (``_packed.BarrierClock``): every physics step is a barrier of the
shard threads, so a 2-thread env step lasts ``serial + critical``, the calling thread's
CPU time outside the barriers (the World's and the task's Python and numpy, resets:
the worker waits) plus, per barrier, the longer of the two threads' CPU times. That
is the wall time where each thread has a core of its own (minus thread wake-ups), and
far steadier on a loaded machine, where wall ratios of threads mean little; the serial
column is its serial part per env step. The load average is printed with the table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

import kelab as ke
from kelab.sim.physics import _friction, _packed
from kelab.sim.physics._guard import native_module

DT = 1 / 120
EQUAL = ke.Material(static_friction=0.5, dynamic_friction=0.5)


def stack_scene(material: ke.Material) -> ke.Scene:
    """A floor, 5 stacked boxes (0.4 x 0.3 m, 1 kg) and a ball on top, all of ``material``."""
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(material=material), at="/")
    for i in range(5):
        box = ke.Prop(ke.Box(0.4, 0.3), mass=1.0, material=material,
                      initial_pose=ke.Pose(0.0, 0.15 + 0.301 * i))  # fmt: skip
        b.add(box, at=f"/World/Box{i}")
    ball = ke.Prop(ke.Circle(0.15), mass=0.5, material=material, initial_pose=ke.Pose(0.3, 2.0))
    b.add(ball, at="/World/Ball")
    return b.build()


def world(material: ke.Material, copies: int, use_c: bool) -> ke.World:
    """A packed World of the stack, its ball landed (1 s stepped)."""
    saved = _friction.USE_C
    _friction.USE_C = use_c
    try:
        w = ke.World(stack_scene(material), num_envs=copies, layout="packed")
    finally:
        _friction.USE_C = saved
    for _ in range(120):
        w.step(DT)
    return w


def interleave(
    runs: dict[str, Callable[[], None]], rounds: int, clock: Callable[[], float]
) -> dict:
    """Time each run once per round, the order rotating; seconds per run, by round."""
    times: dict[str, list[float]] = {k: [] for k in runs}
    names = list(runs)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            gc.collect()
            t0 = clock()
            runs[name]()
            times[name].append(clock() - t0)
    return times


def stack(copies: int, rounds: int, chunk: int) -> None:
    worlds = {
        "default material, rules in C": world(ke.Material(), copies, True),
        "default material, Python rules": world(ke.Material(), copies, False),
        "equal coefficients (no model)": world(EQUAL, copies, True),
    }

    def stepper(w: ke.World) -> Callable[[], None]:
        def run() -> None:
            for _ in range(chunk):
                w.step(DT)

        return run

    times = interleave({k: stepper(w) for k, w in worlds.items()}, rounds, time.process_time)
    base = times["equal coefficients (no model)"]
    print(f"\nstack x{copies}, packed, 1 thread, {rounds} rounds of {chunk} steps (CPU clock)\n")
    print("| World | env-steps per CPU second | vs equal coefficients |")
    print("|---|---:|---:|")
    for name, t in times.items():
        rate = copies * chunk / statistics.median(t)
        ratio = statistics.median(b / x for x, b in zip(t, base, strict=True))
        print(f"| {name} | {rate:,.0f} | {ratio:.2f}x |")
    for w in worlds.values():
        w.close()


def humanoid(rounds: int, chunk: int) -> None:
    """Random actions (the reset-heavy loop), rules in C and in Python, then the policy.

    Each env lives in a process of its own (:func:`_child`), as a training run's does,
    and this process times them in interleaved chunks. Built in one process, Worlds share
    its heap: where a World's Chipmunk objects land depends on what earlier Worlds left
    there, and that moved the later pair's 2-thread rate by 5-10 % (2026-12-06, the shipped
    policy after the random-action Worlds: 161-164k env-steps/s against 172-178k for the
    same tree alone). Only the two envs compared are alive at once (four Humanoid x256
    Worlds evict each other's data from the caches between chunks: a cost neither would
    have alone).
    """
    times: dict = {}
    for use_c in (True, False):
        pair = _interleave({(use_c, t): ("random", use_c, t) for t in (1, 2)}, rounds, chunk)
        times["load"] = [times.get("load", pair["load"])[0], pair["load"][1]]
        times.update((k, v) for k, v in pair.items() if k != "load")
    print(f"\nHumanoid-v0 x256, packed, random actions ({_resets(times, chunk)} resets per env "
          f"step), {rounds} rounds of {chunk} env steps {_loads(times)}\n")  # fmt: skip
    _table(times, chunk)
    times = _interleave({(True, t): ("policy", True, t) for t in (1, 2)}, rounds, chunk)
    print(f"\nHumanoid-v0 x256, packed, the shipped policy acting ({_resets(times, chunk)} resets "
          f"per env step), {rounds} rounds of {chunk} env steps {_loads(times)}\n")  # fmt: skip
    _table(times, chunk)


#: Env steps per timed chunk of ``--humanoid``. Each chunk starts with caches the other
#: env's chunk took (two Humanoid x256 Worlds do not fit in them together), a refill
#: neither pays when it runs alone, and a larger share of the faster 2-thread chunk: the
#: same trees gave 1.53-1.56x in chunks of 20 env steps, 1.59-1.60x of 100, 1.60-1.63x
#: of 300, and 1.64x each env run alone, one after the other (2026-12-06, random actions).
HUMANOID_CHUNK = 300


#: per round of one env: wall seconds, the calling thread's CPU seconds, its serial part
#: and the critical path (both CPU seconds; 1 thread: all of it serial), resets
Round = tuple[float, float, float, float, int]


def _interleave(
    specs: dict[tuple[bool, int], tuple[str, bool, int]], rounds: int, chunk: int
) -> dict:
    """Time ``rounds`` chunks of ``chunk`` env steps of every env, in rotating order.

    ``specs`` maps a key to a child's (loop, rules in C, threads): each env is stepped in
    a child process (:func:`_child`) started from a neutral folder with this tree first on
    its path; its warm-up chunks are not timed.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(ke.__file__)))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    kids = {
        key: subprocess.Popen(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--child",
                loop,
                str(int(use_c)),
                str(threads),
                str(chunk),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tempfile.gettempdir(),
            env=env,
        )  # fmt: skip
        for key, (loop, use_c, threads) in specs.items()
    }
    try:
        for kid in kids.values():  # built and warm: each says so
            if kid.stdout.readline().strip() != "ready":
                raise RuntimeError("a benchmark child failed to start (its error is above)")
        times: dict = {k: [] for k in kids}
        keys = list(kids)
        times["load"] = [_load()]
        for r in range(rounds):
            for key in keys[r % len(keys) :] + keys[: r % len(keys)]:
                kids[key].stdin.write("run\n")
                kids[key].stdin.flush()
                times[key].append(tuple(json.loads(kids[key].stdout.readline())))
        times["load"].append(_load())
        return times
    finally:
        for kid in kids.values():
            kid.stdin.close()
            kid.wait(timeout=60)


def _child(loop: str, use_c: bool, threads: int, chunk: int) -> None:
    """Build one Humanoid-v0 x256 env; time a chunk of env steps per ``run`` line read.

    Writes ``ready`` once warm, then one JSON :data:`Round` per chunk. The policy's
    actions (the numpy player) are computed outside the timed steps.
    """
    import gymnasium

    _friction.USE_C = use_c
    env = gymnasium.make_vec("kelab/Humanoid-v0", num_envs=256, layout="packed",
                             vectorization_mode="vector_entry_point",
                             num_threads=threads)  # fmt: skip
    obs = env.reset(seed=0)[0]
    if loop == "policy":
        from kelab.tasks.humanoid import HumanoidTask
        from kelab.train.player import RLPlayer
        from kelab.train.shipped import shipped_policy

        spec = shipped_policy(f"{HumanoidTask.__module__}:{HumanoidTask.__qualname__}")
        player = RLPlayer(str(spec))
        warm = 2  # and into the episodes
    else:  # the same actions in every child
        rng = np.random.default_rng(0)
        actions = [rng.uniform(-1, 1, (256, 6)).astype(np.float32) for _ in range(chunk)]
        warm = 1

    def run() -> Round:
        nonlocal obs
        gc.collect()
        clock = _packed.CLOCK = _packed.BarrierClock()
        wall = main = 0.0
        resets = 0
        for i in range(chunk):
            a = player.act(obs) if loop == "policy" else actions[i]
            w0, c0 = time.perf_counter(), time.thread_time()
            result = env.step(a)
            main += time.thread_time() - c0
            wall += time.perf_counter() - w0
            resets += int(np.count_nonzero(result[2] | result[3]))
            obs = result[0]
        _packed.CLOCK = None
        serial = main - clock.caller
        return (wall, main, serial, serial + clock.critical, resets)

    for _ in range(warm):  # caches built
        run()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "run":
            print(json.dumps(run()), flush=True)
    env.close()


def _resets(times: dict, chunk: int) -> str:
    """Resets per env step, over every env's rounds."""
    runs = [t for k, x in times.items() if k != "load" for t in x]
    return f"{sum(t[4] for t in runs) / (len(runs) * chunk):.1f}"


def _loads(times: dict) -> str:
    return f"(load average {times['load'][0]:.2f} before, {times['load'][1]:.2f} after)"


def _table(times: dict, chunk: int) -> None:
    print("| rules | 1 thread env-steps/s (wall) | 2 threads (wall) | 2 threads / 1 thread, "
          "wall | the same from the critical path (CPU) | 2 threads: serial + barriers, "
          "us per env step |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    for use_c in (True, False):
        if (use_c, 1) not in times:
            continue
        one, two = times[(use_c, 1)], times[(use_c, 2)]
        wall = statistics.median(a[0] / b[0] for a, b in zip(one, two, strict=True))
        crit = statistics.median(a[1] / b[3] for a, b in zip(one, two, strict=True))
        r1, r2 = (256 * chunk / statistics.median(t[0] for t in x) for x in (one, two))
        ser = statistics.median(t[2] for t in two) / chunk * 1e6
        bar = statistics.median(t[3] - t[2] for t in two) / chunk * 1e6
        name = "C" if use_c else "Python"
        print(f"| {name} | {r1:,.0f} | {r2:,.0f} | {wall:.2f}x | {crit:.2f}x | "
              f"{ser:,.0f} + {bar:,.0f} |")  # fmt: skip


def _load() -> float:
    """The 1-minute load average (NaN where the system does not say)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=256)
    ap.add_argument("--rounds", type=int, help="timed chunks of each (15; --humanoid: 10)")
    ap.add_argument("--chunk", type=int, help="steps per timed chunk (20; --humanoid: 300)")
    ap.add_argument("--humanoid", action="store_true", help="Humanoid-v0, 1 vs 2 threads")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)  # one env (_child)
    args = ap.parse_args()
    if args.child:
        loop, use_c, threads, chunk = args.child
        _child(loop, use_c == "1", int(threads), int(chunk))
        return
    if native_module() is None:
        print("(no C helper here: every row runs the Python rules)")
    if args.humanoid:
        humanoid(args.rounds or 10, args.chunk or HUMANOID_CHUNK)
    else:
        stack(args.copies, args.rounds or 15, args.chunk or 20)


if __name__ == "__main__":
    main()
