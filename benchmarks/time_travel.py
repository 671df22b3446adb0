"""Time travel cost (#28): seek time to steps of the last minute, memory per minute.

For each demo scene (demos/*.py, their App subclass and scene), run one minute of
simulated time headless, then seek to random steps of the last minute and time each
seek; memory is the history's keyframes (their World snapshots' bytes) plus the per-step
inputs and digests, per minute of history. Run on a quiet machine:

    python benchmarks/time_travel.py [--seeks 20] [--demos cartpole_keyboard,...]

Numbers vary with the machine; docs/app.md ("Time travel") quotes them with the machine.
"""

from __future__ import annotations

import argparse
import importlib
import random
import statistics
import sys
import time
from pathlib import Path

import kelab as ke

DEMOS = {
    "cartpole_keyboard": "CartpoleKeys",
    "physics_playground": "Playground",
    "multi_rate": "MultiRate",
}


def _bytes(tt: object) -> int:
    """Approximate bytes of a TimeTravel's history (snapshots exact, the rest estimated)."""
    keys = tt._keys  # noqa: SLF001 - a benchmark's look inside
    total = sum(len(k.world.to_bytes()) for k in keys.values() if k.world is not None)
    total += 16 * len(tt._digests) + 400 * len(tt._inputs)  # noqa: SLF001
    return total


def measure(name: str, seeks: int, max_log_steps: int, minutes: float = 1.0) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
    mod = importlib.import_module(name)
    world = ke.World(mod.build_scene(), max_log_steps=max_log_steps)
    app = getattr(mod, DEMOS[name])(
        world=world, headless=True, size=(320, 200), render_hz=None,
        time_mode=ke.TimeMode.SIM_HIGH_PERF, steps_per_frame=25,
    )  # fmt: skip
    hz = app.timeline.runner(app.config.runner).hz_float
    steps = int(minutes * 60 * hz)
    while app.fixed_step < steps:
        app.renderFrameOnce()
    hist = app.history
    rng = random.Random(0)
    times = []
    for _ in range(seeks):
        k = rng.randrange(max(hist.start, hist.stop - 1 - int(60 * hz)), hist.stop)
        t = time.perf_counter()
        app.seek(k)
        times.append(time.perf_counter() - t)
    mb_per_min = _bytes(app.time_travel) / 1e6 / (len(hist) / hz / 60)
    app.close()
    return {
        "demo": name,
        "hz": hz,
        "steps": len(hist),
        "seek_median_ms": 1e3 * statistics.median(times),
        "seek_max_ms": 1e3 * max(times),
        "mb_per_minute": mb_per_min,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeks", type=int, default=20)
    p.add_argument("--demos", default=",".join(DEMOS))
    p.add_argument("--max-log-steps", type=int, default=7200, help="the World's (rebase period)")
    args = p.parse_args()
    for name in args.demos.split(","):
        r = measure(name, args.seeks, args.max_log_steps)
        print(
            f"{r['demo']:<20} max_log_steps {args.max_log_steps}  {r['hz']:g} Hz  "
            f"{r['steps']} steps  seek median "
            f"{r['seek_median_ms']:.1f} ms, max {r['seek_max_ms']:.1f} ms  "
            f"history {r['mb_per_minute']:.1f} MB/min"
        )


if __name__ == "__main__":
    main()
