"""Time travel cost (#28): seek times over the last minute, history memory per minute.

For each demo scene (demos/*.py: their App subclass and scene) and for the shipped
Humanoid policy played in an App (``kelab play --interactive``), run one minute of
simulated time headless, then time

- ``seek``: seeks to random steps of the last minute (a jump back or forward: the
  nearest keyframe's World restore plus the re-run from it);
- ``back``: one step back from a random step (the paused Left key, a slider moved left);
- ``fwd``: one step forward after a seek (the paused Right key, a slider moved right:
  runs on from where it stands, no restore).

Memory is the history's keyframes (their World snapshots' bytes and the App's state)
plus the per-step inputs and digests, per minute of history. Run on a quiet machine:

    python benchmarks/time_travel.py [--seeks 20] [--demos cartpole_keyboard,humanoid_play]
        [--max-log-steps N]   # the World's rebase period (default: the World's own)

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
    "manual_loop": "Manual",
    "humanoid_play": None,  # the shipped Humanoid policy in kelab.train.interactive's App
}
SIZE = {"headless": True, "size": (320, 200), "render_hz": None}


def _bytes(tt: object) -> int:
    """Approximate bytes of a TimeTravel's history (snapshots exact, the rest estimated)."""
    keys = tt._keys  # noqa: SLF001 - a benchmark's look inside
    total = sum(len(k.world.to_bytes()) for k in keys.values() if k.world is not None)
    for k in keys.values():  # the App's state: count its bytes values (an env's snapshot)
        state = k.app_state if isinstance(k.app_state, dict) else {}
        total += sum(len(v) for v in state.values() if isinstance(v, bytes)) + 200
    total += 16 * len(tt._digests) + 400 * len(tt._inputs)  # noqa: SLF001
    return total


def _app(name: str, max_log_steps: int | None) -> ke.App:
    hp = {"time_mode": ke.TimeMode.SIM_HIGH_PERF, "steps_per_frame": 25, **SIZE}
    if name == "humanoid_play":
        from kelab.tasks.humanoid import HumanoidTask
        from kelab.train.interactive import policy_app
        from kelab.train.shipped import shipped_policy

        player = ke.RLPlayer(shipped_policy("kelab.tasks.humanoid:HumanoidTask"), render_mode=None)
        env = ke.DirectRLEnv(HumanoidTask(), seed=0)
        return policy_app(env, player.act, episodes=None, seed=0, **hp)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "demos"))
    mod = importlib.import_module(name)
    extra = {} if max_log_steps is None else {"max_log_steps": max_log_steps}
    world = ke.World(mod.build_scene(), **extra)
    if name == "physics_playground":  # as its main(): fixed steps on a 240 Hz runner
        timeline = ke.Timeline()
        timeline.add_runner("Physics", mod.PHYSICS_HZ)
        hp.update(timeline=timeline, runner="Physics", steps_per_frame=100)
    return getattr(mod, DEMOS[name])(world=world, **hp)


def _timed(fn: object, *args: object) -> float:
    t = time.perf_counter()
    fn(*args)
    return 1e3 * (time.perf_counter() - t)


def measure(name: str, seeks: int, max_log_steps: int | None, minutes: float = 1.0) -> dict:
    """Run ``name`` for ``minutes`` of simulated time, then time seeks (milliseconds)."""
    app = _app(name, max_log_steps)
    hz = float(1 / app.clock.step_exact)
    steps = int(minutes * 60 * hz)
    while app.fixed_step < steps:
        app.renderFrameOnce()
    hist = app.history
    lo = max(hist.start, hist.stop - 1 - int(60 * hz))
    rng = random.Random(0)
    seek, back, fwd = [], [], []
    for _ in range(seeks):
        seek.append(_timed(app.seek, rng.randrange(lo, hist.stop)))
        k = rng.randrange(lo + 1, hist.stop - 1)
        app.seek(k)
        back.append(_timed(app.seek, k - 1))
        fwd.append(_timed(app.seek, k))
    mb_per_min = _bytes(app.time_travel) / 1e6 / (len(hist) / hz / 60)
    world_log = app.world.max_log_steps if app.world is not None else 0
    app.close()
    med = statistics.median
    return {
        "demo": name,
        "hz": hz,
        "max_log_steps": world_log,
        "steps": len(hist),
        "seek_median_ms": med(seek),
        "seek_max_ms": max(seek),
        "back_median_ms": med(back),
        "back_max_ms": max(back),
        "fwd_median_ms": med(fwd),
        "fwd_max_ms": max(fwd),
        "mb_per_minute": mb_per_min,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeks", type=int, default=20)
    p.add_argument("--demos", default=",".join(DEMOS))
    p.add_argument("--max-log-steps", type=int, default=None, help="the World's rebase period")
    args = p.parse_args()
    for name in args.demos.split(","):
        r = measure(name, args.seeks, args.max_log_steps)
        print(
            f"{r['demo']:<19} {r['hz']:g} Hz  max_log_steps {r['max_log_steps']}  "
            f"seek {r['seek_median_ms']:.1f} / {r['seek_max_ms']:.1f} ms  "
            f"back {r['back_median_ms']:.1f} / {r['back_max_ms']:.1f} ms  "
            f"fwd {r['fwd_median_ms']:.2f} / {r['fwd_max_ms']:.2f} ms  "
            f"history {r['mb_per_minute']:.1f} MB/min",
            flush=True,
        )


if __name__ == "__main__":
    main()
