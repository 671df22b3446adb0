"""Overhead per fixed step of FixedStepClock + Timeline vs a bare Python loop.

Configurations: 1, 2 and 8 runners, with 1 and 10 callbacks bound to each. The clock is
driven by a fake wall clock at 60 frames/s of simulated wall time, as the App drives it,
for a fixed amount of simulated time. The bare loop calls the very same callbacks in the
very same order from a precomputed schedule: the cost of the callbacks themselves. The
difference per boundary is KELab's scheduling overhead.

Run: python benchmarks/timeline_overhead.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import kelab as ke

RATES = [50, 30, 100, 60, 25, 120, 10, 200]


def build(n_runners: int, n_callbacks: int, counter: list[int]) -> ke.Timeline:
    tl = ke.Timeline(default_runners=False)
    for i in range(n_runners):
        tl.add_runner("Robot" if i == 0 else f"R{i}", RATES[i])

    def callback(ts: float) -> None:
        counter[0] += 1

    for name in tl.runners:
        for j in range(n_callbacks):
            tl.bind(callback, runner=name, phase=ke.Phase(j % 5), priority=j)
    return tl


def measure(n_runners: int, n_callbacks: int, seconds: float) -> dict:
    counter = [0]
    tl = build(n_runners, n_callbacks, counter)
    frames = int(seconds * 60)
    fake = [i / 60 for i in range(frames + 1)]
    it = iter(fake)
    clock = ke.FixedStepClock.for_timeline(tl, clock=lambda: next(it), max_steps_per_frame=64)
    start = time.perf_counter()
    for _ in fake:
        clock.tick_timeline(tl)
    kelab_s = time.perf_counter() - start
    calls = counter[0]
    boundaries = sum(r.steps for r in tl)  # runner-steps

    # bare loop: the same calls, in the same order, from a precomputed flat schedule
    schedule = []
    replay = build(n_runners, n_callbacks, counter)
    for result in replay.advance(tl.time):
        plan = replay._plan(result.runners)
        schedule.extend((cb, ts) for cb, ts, _ in plan)
    counter[0] = 0
    start = time.perf_counter()
    for cb, ts in schedule:
        cb(ts)
    bare_s = time.perf_counter() - start
    assert counter[0] == calls, (counter[0], calls)
    return {
        "calls": calls,
        "runner_steps": boundaries,
        "kelab_us": kelab_s / boundaries * 1e6,
        "bare_us": bare_s / boundaries * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0, help="simulated seconds per row")
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"{args.seconds:g} simulated s per row at 60 frames/s; runner rates {RATES}")
    print()
    print(
        "| runners | callbacks/runner | runner-steps | KELab us/runner-step | "
        "bare loop us/runner-step | overhead us/runner-step | ratio |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n_runners in (1, 2, 8):
        for n_callbacks in (1, 10):
            r = measure(n_runners, n_callbacks, args.seconds)
            print(
                f"| {n_runners} | {n_callbacks} | {r['runner_steps']} | {r['kelab_us']:.2f} | "
                f"{r['bare_us']:.2f} | {r['kelab_us'] - r['bare_us']:.2f} | "
                f"{r['kelab_us'] / r['bare_us']:.1f}x |"
            )


if __name__ == "__main__":
    main()
