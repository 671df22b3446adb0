"""Prototype measurement: packed spaces of a few copies against the in-place reset surgery.

Run: python benchmarks/small_spaces.py [--copies 8,16,32] [--rounds 7] [--steps 40]

Issue #38.5 asks whether the simpler design - packed spaces of 8-32 copies, which bound
the scans a reset pays for (Chipmunk's removals walk every cached arbiter and constraint
of the space) - comes within ~10 % of the in-place reset surgery (``_native.c``'s
``reset`` and ``_reset.py``). Humanoid-v0, 256 copies, one thread. Sides, all built in
this process and measured in alternating chunks (CPU time):

- ``surgery``: today's packed layout: one space of 256 copies, resets in place in C.
- ``spaces-k``: the same copies in 256/k spaces of k copies, stepped one after the other
  in this thread (the World is built with ``num_threads=256/k`` and its shard threads
  stopped at once: a closed ``ShardWorkers`` runs every shard's job in the calling
  thread), resets by Chipmunk's remove + re-add (the in-place reset off). Each space's
  spatial hash has the packed layout's size (cells for all 256 copies), so the results
  are bit-identical to the packed layout's (its sharding never changes a bit; checked:
  ``--check``). The C helper still reads and writes the bodies.
- ``spaces-k/h``: the same, each space's hash sized for its k copies: not bit-identical
  (the hash's size orders the contacts), shown for what the hash's size costs.

A prototype: its per-space Python loops (a step dispatches every space's job, a reset
walks every space) are what a product version would have unless it moved them into C.

Rows: ``reset``: ``World.set_body_states`` of 12 random copies (their own present
states), us of CPU per copy, after a step of every copy (contacts in place); ``env``:
``LearningEnv.step`` with random actions (copies fall and reset every few dozen steps),
env-steps/s; ``physics``: ``World.step`` alone (no resets), steps/s of all copies. Each
row: the median over the rounds, and its ratio to ``surgery``.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

import gymnasium
import numpy as np

import kelab  # noqa: F401  (registers the kelab/ tasks)
from kelab.sim.physics import _shard

N = 256
RESET = 12


@contextmanager
def hash_for(copies: int) -> Iterator[None]:
    """Size each packed space's spatial hash for ``copies`` copies while a World is built."""
    original = _shard.Plan.__init__

    def init(self: _shard.Plan, *args: object) -> None:
        original(self, *args)
        self.cells = max(1000, 4 * copies * max(self.moving_shapes, 1))

    _shard.Plan.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        _shard.Plan.__init__ = original  # type: ignore[method-assign]


def make(copies: int | None, own_hash: bool = False) -> gymnasium.vector.VectorEnv:
    """Humanoid-v0 x256 packed: one space with the surgery (None), or spaces of ``copies``.

    ``own_hash``: each space's spatial hash sized for its copies.
    """
    if copies is None:
        env = gymnasium.make_vec(
            "kelab/Humanoid-v0", num_envs=N, vectorization_mode="vector_entry_point",
            layout="packed", num_threads=1,
        )  # fmt: skip
        assert all(s.kept is not None for s in env.unwrapped.world._backend._shards)
    else:
        with hash_for(copies) if own_hash else hash_for(N):
            env = gymnasium.make_vec(
                "kelab/Humanoid-v0", num_envs=N, vectorization_mode="vector_entry_point",
                layout="packed", num_threads=N // copies,
            )  # fmt: skip
        backend = env.unwrapped.world._backend
        backend._workers.close()  # every shard stepped here, one after the other
        for shard in backend._shards:
            shard.kept = None  # resets by remove + re-add
        assert len(backend._shards) == N // copies
    env.reset(seed=0)
    return env


def env_chunk(env: gymnasium.vector.VectorEnv, rng: np.random.Generator, steps: int) -> float:
    """Env-steps/s over ``steps`` random-action steps (CPU time)."""
    shape = env.action_space.shape
    acts = [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(steps)]
    t0 = time.process_time()
    for a in acts:
        env.step(a)
    return N * steps / (time.process_time() - t0)


def physics_chunk(env: gymnasium.vector.VectorEnv, steps: int) -> float:
    """World steps/s of all copies (no resets, no task), CPU time."""
    world = env.unwrapped.world
    dt = env.unwrapped.timing.sim_dt
    t0 = time.process_time()
    for _ in range(steps):
        world.step(dt)
    return N * steps / (time.process_time() - t0)


def reset_chunk(env: gymnasium.vector.VectorEnv, rng: np.random.Generator, calls: int) -> float:
    """us of CPU per copy of ``set_body_states`` of 12 copies, a step between calls."""
    world = env.unwrapped.world
    dt = env.unwrapped.timing.sim_dt
    spent = 0.0
    for _ in range(calls):
        world.step(dt)
        ids = np.sort(rng.choice(N, RESET, replace=False))
        poses, vels = world.body_poses[ids], world.body_velocities[ids]
        t0 = time.process_time()
        world.set_body_states(ids, poses, vels)
        spent += time.process_time() - t0
    return spent / (calls * RESET) * 1e6


def check(ks: list[int]) -> None:
    """spaces-k (the packed layout's hash size) gives the packed layout's bits."""
    digests = {}
    for name, k in [("surgery", None)] + [(f"spaces-{k}", k) for k in ks]:
        env = make(k)
        rng = np.random.default_rng(7)
        out = []
        for _ in range(150):  # copies fall and reset
            obs, rew, term, trunc, _ = env.step(rng.uniform(-1, 1, env.action_space.shape))
            out.append(np.concatenate([obs.ravel(), rew.ravel(), term.ravel(), trunc.ravel()]))
        digests[name] = hashlib.sha256(np.concatenate(out).tobytes()).hexdigest()[:16]
        env.close()
    print(digests)
    assert len(set(digests.values())) == 1, "not bit-identical"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", default="8,16,32", help="copies per space of the prototype")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=40, help="env steps per chunk")
    ap.add_argument("--resets", type=int, default=20, help="reset calls per chunk")
    ap.add_argument("--check", action="store_true", help="only: spaces-k's states == packed")
    args = ap.parse_args()
    ks = list(map(int, args.copies.split(",")))
    if args.check:
        check(ks)
        return
    sides: dict[str, tuple[int | None, bool]] = {"surgery": (None, False)}
    sides.update({f"spaces-{k}": (k, False) for k in ks})
    sides.update({f"spaces-{k}/h": (k, True) for k in ks})
    envs = {name: make(*side) for name, side in sides.items()}
    rngs = {name: np.random.default_rng(1) for name in sides}
    got: dict[str, dict[str, list[float]]] = {
        name: {"reset": [], "env": [], "physics": []} for name in sides
    }
    names = list(sides)
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]  # who goes first rotates
        for name in order:
            env = envs[name]
            got[name]["env"].append(env_chunk(env, rngs[name], args.steps))
            got[name]["reset"].append(reset_chunk(env, rngs[name], args.resets))
            got[name]["physics"].append(physics_chunk(env, args.steps))
            env.reset(seed=r)  # the next chunk starts from fresh episodes again
    base = {row: statistics.median(got["surgery"][row]) for row in ("reset", "env", "physics")}
    print(f"Humanoid-v0 x{N}, 1 thread, {args.rounds} rounds, CPU time, medians")
    head = ["side", "reset us/copy", "vs surgery", "env steps/s", "vs surgery", "physics/s", "vs"]
    print("| " + " | ".join(head) + " surgery |\n|---" + "|---:" * 6 + "|")
    for name in names:
        m = {row: statistics.median(got[name][row]) for row in ("reset", "env", "physics")}
        print(
            f"| {name} | {m['reset']:.1f} | {m['reset'] / base['reset']:.2f}x | "
            f"{m['env']:,.0f} | {m['env'] / base['env']:.3f} | "
            f"{m['physics']:,.0f} | {m['physics'] / base['physics']:.3f} |"
        )
    for env in envs.values():
        env.close()


if __name__ == "__main__":
    main()
