"""Pacing accuracy at 60 Hz and 50 Hz: SimulationPacer vs pygame's Clock.tick / tick_busy_loop.

Each pacer paces an empty loop (plus ~1 ms of simulated work per step) for about
``--seconds`` per rate. Reported per pacer: achieved rate error in percent and the
lateness of each step relative to its ideal absolute deadline (p50 / p99 / max, ms).

Run: python benchmarks/pacing_accuracy.py [--seconds 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
import pygame  # noqa: E402

import kelab as ke  # noqa: E402

WORK_S = 0.001  # simulated per-step work, spun on perf_counter


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def run(wait, hz: float, seconds: float) -> dict:
    steps = int(seconds * hz)
    stamps = np.empty(steps + 1)
    stamps[0] = time.perf_counter()
    wait()  # first call aligns pygame's clock; the pacer's schedule starts at creation
    stamps[0] = time.perf_counter()
    for i in range(1, steps + 1):
        busy(WORK_S)
        wait()
        stamps[i] = time.perf_counter()
    elapsed = stamps[-1] - stamps[0]
    rate = steps / elapsed
    # lateness of each step: how far past its own deadline (previous step + 1/hz) it ended
    lateness_ms = np.maximum(0.0, np.diff(stamps) - 1 / hz) * 1000.0
    return {
        "rate_error_pct": (rate - hz) / hz * 100.0,
        "p50": float(np.percentile(lateness_ms, 50)),
        "p99": float(np.percentile(lateness_ms, 99)),
        "max": float(np.max(lateness_ms)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}")
    print(f"pygame-ce {pygame.version.ver}, {args.seconds:g} s per rate, {WORK_S * 1e3:g} ms work")
    print()
    print("| rate | pacer | rate error % | lateness p50 ms | p99 ms | max ms |")
    print("|---:|---|---:|---:|---:|---:|")
    for hz in (60, 50):
        results = {}
        pacer = ke.SimulationPacer(1 / hz)
        results["kelab SimulationPacer"] = run(pacer.wait, hz, args.seconds)
        clock = pygame.time.Clock()
        results["pygame Clock.tick"] = run(lambda c=clock, h=hz: c.tick(h), hz, args.seconds)
        clock = pygame.time.Clock()
        results["pygame tick_busy_loop"] = run(
            lambda c=clock, h=hz: c.tick_busy_loop(h), hz, args.seconds
        )
        for name, r in results.items():
            print(
                f"| {hz} Hz | {name} | {r['rate_error_pct']:+.3f} | {r['p50']:.3f} | "
                f"{r['p99']:.3f} | {r['max']:.3f} |"
            )
        ours = abs(results["kelab SimulationPacer"]["rate_error_pct"])
        theirs = abs(results["pygame Clock.tick"]["rate_error_pct"])
        print(
            f"|  | rate error of Clock.tick / SimulationPacer | "
            f"{theirs / max(ours, 1e-6):.0f}x | | | |"
        )


if __name__ == "__main__":
    main()
