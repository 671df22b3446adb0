"""Seeding of the per-copy Generators (internal).

`task_generators`, `reseed` and `place_world_streams` seed the task's and the World's
Generators; below them, `pcg64_states` computes the per-copy PCG64 states of
``SeedSequence(seed, spawn_key=(*stream, i))``, batched.


A full ``reset(seed)`` re-seeds two Generators per copy. Building each one from its own
``SeedSequence`` and ``PCG64`` costs ~35 us per copy and stream (the sequence's hash
rounds run word by word in Python-level loops of numpy's Cython); here the same rounds run
once per word for every copy at once in numpy (uint32 arithmetic wraps exactly as the C
code does), then each copy's PCG64 state is derived from its four words in Python ints
and set in place. The numbers are numpy's own: ``tests/rl/test_seeding.py`` compares
them with ``SeedSequence``/``PCG64`` over many seeds, streams and copy indices.

The algorithm is numpy's documented ``SeedSequence`` (entropy words, then spawn-key
words, mixed into a pool of four 32-bit words; ``generate_state`` hashes the pool into
output words) and PCG64's seeding (``initstate``/``initseq`` from those words, two LCG
steps), as numpy 1.17+ implements them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kelab._validate import check_seed, is_int
from kelab.sim.snapshot import rng_state, set_rng_state

_POOL = 4
_INIT_A = 0x43B0D7E5
_MULT_A = 0x931E8875
_INIT_B = 0x8B51F9DD
_MULT_B = 0x58F38DED
_MIX_L = 0xCA01F9DD
_MIX_R = 0x4973F715
_M32 = 0xFFFFFFFF
_M128 = (1 << 128) - 1
_PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645


def _words(value: int) -> list[int]:
    """An int >= 0 as little-endian 32-bit words (0 -> one zero word), as numpy coerces it."""
    out = [value & _M32]
    value >>= 32
    while value:
        out.append(value & _M32)
        value >>= 32
    return out


class _Hash:
    """The hash constant of the mixing rounds: data-independent, so one for every copy."""

    def __init__(self, init: int, mult: int) -> None:
        self.const = init
        self.mult = mult

    def mix(self, value: np.ndarray) -> np.ndarray:
        """``hashmix``: xor the constant, advance it, multiply, fold the high half (uint32)."""
        value = value ^ np.uint32(self.const)
        self.const = (self.const * self.mult) & _M32
        value = value * np.uint32(self.const)
        return value ^ (value >> np.uint32(16))


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r = np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y
    return r ^ (r >> np.uint32(16))


def pcg64_states(seed: int, stream: tuple[int, ...], indices: Sequence[int]) -> list[dict]:
    """PCG64 states of ``PCG64(SeedSequence(seed, spawn_key=(*stream, i)))`` for i in indices.

    Args:
        seed: An int >= 0 (the entropy).
        stream: Leading spawn-key ints (each >= 0).
        indices: The last spawn-key int of each copy (each >= 0).

    Returns:
        One ``bit_generator.state`` dict per index, equal to numpy's.
    """
    n = len(indices)
    run = _words(seed)
    if len(run) < _POOL:  # a spawn key follows: numpy pads the entropy to the pool size
        run = run + [0] * (_POOL - len(run))
    idx = np.asarray(indices, dtype=np.uint64)
    # the copy index: one word below 2**32, else two (numpy's coercion); rows by width
    wide = idx >> np.uint64(32)
    cols: list[np.ndarray] = [np.full(n, w, dtype=np.uint32) for w in run]
    for s in stream:
        cols.extend(np.full(n, w, dtype=np.uint32) for w in _words(s))
    lo = (idx & np.uint64(_M32)).astype(np.uint32)
    if (wide > 0).any():  # widths differ between copies: do them one by one (rare)
        return [_one(seed, stream, int(i)) for i in indices]
    cols.append(lo)
    with np.errstate(over="ignore"):
        h = _Hash(_INIT_A, _MULT_A)
        pool = [h.mix(cols[i]) for i in range(_POOL)]
        for src in range(_POOL):
            for dst in range(_POOL):
                if src != dst:
                    pool[dst] = _mix(pool[dst], h.mix(pool[src]))
        for src in range(_POOL, len(cols)):
            for dst in range(_POOL):
                pool[dst] = _mix(pool[dst], h.mix(cols[src]))
        g = _Hash(_INIT_B, _MULT_B)
        out32 = []
        for k in range(8):  # 4 uint64 words = 8 uint32 words, cycling through the pool
            v = pool[k % _POOL] ^ np.uint32(g.const)
            g.const = (g.const * g.mult) & _M32
            v = v * np.uint32(g.const)
            out32.append(v ^ (v >> np.uint32(16)))
    w = np.stack(out32, axis=1).astype(np.uint64)  # (n, 8) little-endian halves
    w64 = (w[:, 0::2] | (w[:, 1::2] << np.uint64(32))).tolist()
    return [_pcg_state(*row) for row in w64]


def _one(seed: int, stream: tuple[int, ...], index: int) -> dict:
    seq = np.random.SeedSequence(seed, spawn_key=(*stream, index))
    return np.random.PCG64(seq).state


def _pcg_state(s0: int, s1: int, i0: int, i1: int) -> dict:
    """PCG64's state after seeding with ``initstate = s0:s1``, ``initseq = i0:i1``."""
    inc = (((i0 << 64) | i1) << 1 | 1) & _M128
    state = inc  # state 0, one step: 0 * mult + inc
    state = (state + ((s0 << 64) | s1)) & _M128
    state = (state * _PCG_MULT + inc) & _M128
    return {
        "bit_generator": "PCG64",
        "state": {"state": state, "inc": inc},
        "has_uint32": 0,
        "uinteger": 0,
    }


TASK_STREAM = 0x5EED
"""Spawn-key tag of the task's per-copy Generators (the World's have no tag)."""


def seed_sequences(
    seed: int | Sequence[int], n: int, stream: tuple[int, ...], offset: int = 0
) -> list[np.random.SeedSequence]:
    """The SeedSequence of each of ``n`` copies on ``stream``.

    An int seeds copy ``i`` from ``SeedSequence(seed, spawn_key=(*stream, offset + i))``
    (its global index, for RayLearningEnv's workers); a list gives one seed per copy.

    Raises:
        ValueError: For a list of the wrong length, or a seed out of range.
    """
    if is_int(seed):
        base = check_seed(seed)
        return [
            np.random.SeedSequence(base, spawn_key=(*stream, i)) for i in range(offset, offset + n)
        ]
    seeds = list(seed)  # type: ignore[arg-type]
    if len(seeds) != n:
        raise ValueError(f"reset(seed=[...]) needs one seed per copy: {n}, got {len(seeds)}")
    return [np.random.SeedSequence(check_seed(s), spawn_key=(*stream, 0)) for s in seeds]


def task_generators(seed: int, n: int, offset: int = 0) -> list[np.random.Generator]:
    """The task's per-copy Generators for ``seed`` (copy ``i`` as global copy ``offset + i``)."""
    return [np.random.default_rng(s) for s in seed_sequences(seed, n, (TASK_STREAM,), offset)]


def reseed(
    task_rngs: list[np.random.Generator],
    world_rngs: list[np.random.Generator],
    seed: int | Sequence[int],
    offset: int = 0,
    ids: Sequence[int] | None = None,
) -> None:
    """Re-seed the task's and the World's per-copy Generators in place.

    Copy ``i`` gets the same streams whether it is re-seeded alone or with all copies.

    Args:
        task_rngs: The task's Generators, one per copy.
        world_rngs: The World's Generators, one per copy.
        seed: An int (copy ``i`` from ``(seed, offset + i)``) or one seed per copy.
        offset: Global index of copy 0.
        ids: The copies to re-seed (None: all).
    """
    n = len(task_rngs)
    sel = list(range(n)) if ids is None else list(ids)
    pcg = np.random.PCG64
    if is_int(seed) and all(
        type(g.bit_generator) is pcg for gens in (task_rngs, world_rngs) for g in gens
    ):  # numpy's own states, computed for all copies at once
        base, at = check_seed(seed), [offset + i for i in sel]
        task = pcg64_states(base, (TASK_STREAM,), at)
        world = pcg64_states(base, (), at)
        for i, ts, ws in zip(sel, task, world, strict=True):
            task_rngs[i].bit_generator.state = ts
            world_rngs[i].bit_generator.state = ws
        return
    task_seqs = seed_sequences(seed, n, (TASK_STREAM,), offset)
    # the World seeds copy i from SeedSequence(seed).spawn(n)[i], i.e. spawn_key (i,)
    world_seqs = seed_sequences(seed, n, (), offset)
    for i in sel:  # nothing below can fail: every seed was checked above
        for gens, seqs in ((task_rngs, task_seqs), (world_rngs, world_seqs)):
            fresh = np.random.default_rng(seqs[i])
            if type(gens[i].bit_generator) is type(fresh.bit_generator):
                set_rng_state(gens[i], rng_state(fresh))  # in place: references stay valid
            else:  # a user's Generator of another bit generator: the env's own again
                gens[i] = fresh


def place_world_streams(world_rngs: list[np.random.Generator], seed: int, offset: int) -> None:
    """Give a World's copies ``0..n-1`` the streams of global copies ``offset..offset+n-1``."""
    seqs = seed_sequences(seed, len(world_rngs), (), offset)
    for gen, seq in zip(world_rngs, seqs, strict=True):
        set_rng_state(gen, rng_state(np.random.default_rng(seq)))
