"""RayLearningEnv: LearningEnv's contract with the copies split across Ray actors.

One local Ray (``ray.init(num_cpus=2)``) serves the whole module; every env here is
compared step by step with one in-process ``LearningEnv`` of the same size and seed.
"""

from __future__ import annotations

import os
import signal
import struct
import sys
import threading
import time

import gymnasium
import numpy as np
import pytest
from _rl_tasks import wobbly

import kelab as ke
from kelab.rl.episode_ends import EpisodeCounters, EpisodeEnds
from kelab.rl.randomization import EpisodeDraws
from kelab.rl.ray_channel import (
    EndedRows,
    EndsJoin,
    StepReply,
    compact_ends,
    expand_ends,
    pack_ends,
    unpack_ends,
)
from kelab.rl.ray_env import RayLearningEnv, WorkerDiedError, split_copies
from kelab.rl.ray_worker import EnvWorker, WorkerDescription, worker_config
from kelab.tasks.cartpole import CartPoleTask, RandomizedCartPoleTask
from kelab.tasks.humanoid import HumanoidTask


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray", reason="RayLearningEnv needs the [ray] extra (in [dev])")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


WALL_CLOCK = ("/episode/t",)  # info["episode"]["t"]: seconds of wall time, never identical


def same(a, b, where="") -> None:
    """Bit-identical values: arrays (dtype, shape, bytes), dicts of them, object arrays."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), (where, sorted(a), sorted(b))
        for k in a:
            if not f"{where}/{k}".endswith(WALL_CLOCK):
                same(a[k], b[k], f"{where}/{k}")
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (where, a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype == object:
        assert a.tolist() == b.tolist(), where
    else:
        assert a.tobytes() == b.tobytes(), where


def actions(rng, n, dim):
    return rng.uniform(-1.0, 1.0, (n, dim)).astype(np.float32)


# ---------------------------------------------------------------------- without Ray
def test_split_copies_covers_every_copy_once():
    assert split_copies(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert split_copies(4, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert split_copies(5, 1) == [(0, 5)]


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")
def test_batch_scheduling_marks_only_the_calling_thread():
    """A worker's stepping thread becomes a batch job; the process's other threads do not."""
    import threading

    from kelab.rl.ray_worker import batch_scheduling

    seen: list[int] = []

    def body() -> None:
        assert batch_scheduling() is True
        seen.append(os.sched_getscheduler(0))
        assert batch_scheduling() is True  # already a batch thread
        seen.append(os.sched_getscheduler(0))

    def idle_body() -> None:  # a thread its operator made idle keeps its policy
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        assert batch_scheduling() is False
        seen.append(os.sched_getscheduler(0))

    for target in (body, idle_body):
        thread = threading.Thread(target=target)
        thread.start()
        thread.join()
    assert seen == [os.SCHED_BATCH, os.SCHED_BATCH, os.SCHED_IDLE]
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # this (the test's) thread unchanged


def rows_of(rows, keep, first):
    """The EndedRows ``rows`` where ``keep``, as the worker whose first copy is ``first``."""
    return EndedRows(
        ids=rows.ids[keep] - first,
        final_obs=rows.final_obs[keep],
        ended_by=tuple(label for label, k in zip(rows.ended_by, keep, strict=True) if k),
        counters=EpisodeCounters(*(c[keep] for c in rows.counters)),
        names=rows.names,
        is_success=rows.is_success[keep],
        checks={k: v[keep] for k, v in rows.checks.items()},
        randomization=None
        if rows.randomization is None
        else EpisodeDraws(rows.randomization.labels, rows.randomization.table[:, keep]),
    )


def _first_ends(task) -> tuple[EndedRows, tuple[str, ...], dict]:
    """The first ended rows of a 6-copy LearningEnv of ``task`` (pushed hard), the
    condition names, and that step's info."""
    env = ke.LearningEnv(task, num_envs=6, seed=0)
    env.reset()
    rng = np.random.default_rng(0)
    info = {}
    while not info:
        *_, info = env.step(actions(rng, 6, 1) * 3)
    names = env.condition_names
    env.close()
    return compact_ends(info, names), names, info


def test_ended_rows_are_typed_travel_without_pickle_and_rebuild_the_info():
    """A worker's ended rows are an EndedRows (its counters an EpisodeCounters); encoded
    by pack_ends (a header + raw bytes) they decode into the same record; EndsJoin of two
    workers' rows, in either order, is one LearningEnv's EpisodeEnds and info."""
    ends, names, info = _first_ends(CartPoleTask())
    assert isinstance(ends, EndedRows) and isinstance(ends.counters, EpisodeCounters)
    assert ends.names == names and names
    assert ends.ended_by == tuple(info["ended_by"][info["_ended_by"]])
    assert compact_ends({}, names) is None
    header, blob = pack_ends(ends)
    assert b"pickle" not in header and pack_ends(None) == (b"", b"")
    assert unpack_ends(b"", b"") is None
    back = unpack_ends(header, blob)
    assert isinstance(back, EndedRows) and isinstance(back.counters, EpisodeCounters)
    assert (back.names, back.ended_by) == (ends.names, ends.ended_by)
    same(back.checks, ends.checks)
    for key in ("ids", "final_obs", "is_success"):
        same(getattr(back, key), getattr(ends, key), key)
    for key in EpisodeCounters._fields:
        same(getattr(back.counters, key), getattr(ends.counters, key), key)
    # the same rows as two workers' replies ([0, 3) and [3, 6)) rebuild the info
    halves = [
        (first, rows_of(back, keep, first))
        for first, keep in ((0, back.ids < 3), (3, back.ids >= 3))
        if keep.any()
    ]
    t = info["episode"].pop("t")
    for parts in (halves, halves[::-1], [(0, back)]):  # as replies arrive; one worker's
        join = EndsJoin(6, 4)
        for first, part in parts:
            join.add(first, part)
        joined = join.ends()
        assert isinstance(joined, EpisodeEnds) and joined.names == names
        assert joined.ids.tolist() == np.flatnonzero(info["_ended_by"]).tolist()
        got = join.info()
        assert np.allclose(got["episode"].pop("t"), t)
        same(got, info)
        got = expand_ends(parts, 6, 4)
        got["episode"].pop("t")
        same(got, info)
    assert EndsJoin(6, 4).ends() is None and expand_ends([], 6, 4) == {}
    # the layout in the header is parsed once per env; an object dtype or a field that
    # is not an EndedRows' is refused
    for field in ('["ids",null,"|O",[]]', '["pickled",null,"<f4",[]]'):
        schema = f'{{"names":[],"judged":false,"fields":[{field}]}}'.encode()
        with pytest.raises(ValueError, match="plain arrays of"):
            unpack_ends(struct.pack("<II", 1, len(schema)) + schema, bytes(8))
    # a success rule without checks: the (empty) checks still travel; no rule: None
    assert unpack_ends(*pack_ends(back._replace(checks={}))).checks == {}
    unjudged = unpack_ends(*pack_ends(back._replace(is_success=None, checks=None)))
    assert unjudged.is_success is None and unjudged.checks is None


def test_ended_rows_carry_the_randomization_and_rebuild_its_info():
    """A task's domain randomization: the values each ended episode ran with travel in
    the ended rows (through Ray's object store and, encoded, through the channel) and
    EndsJoin puts them back into info["randomization"] as one LearningEnv has it."""
    ends, names, info = _first_ends(RandomizedCartPoleTask())
    drawn = ends.randomization
    assert drawn is not None and drawn.labels == tuple(info["randomization"])
    done = info["_randomization"]
    for row, label in zip(drawn.table, drawn.labels, strict=True):
        same(row, info["randomization"][label][done], label)
    back = unpack_ends(*pack_ends(ends))
    assert back.randomization.labels == drawn.labels
    same(back.randomization.table, drawn.table)
    t = info["episode"].pop("t")
    halves = [
        (first, rows_of(back, keep, first))
        for first, keep in ((0, back.ids < 3), (3, back.ids >= 3))
        if keep.any()
    ]
    for parts in (halves, halves[::-1], [(0, back)], [(0, ends)]):
        got = expand_ends(parts, 6, 4)
        assert np.allclose(got["episode"].pop("t"), t)
        same(got, info)
    # a layout whose randomization columns do not match its labels is refused
    header, blob = pack_ends(ends)
    rows, size = struct.unpack_from("<II", header)
    schema, labels = header[8 : 8 + size], header[8 + size :]
    for bad in (schema.replace(b'"drawn":[', b'"drawn":["extra",'),
                schema.replace(b',"drawn":', b',"other":')):  # fmt: skip
        with pytest.raises(ValueError, match="randomization must come with its labels"):
            unpack_ends(struct.pack("<II", rows, len(bad)) + bad + labels, blob)


def test_a_worker_describes_itself_in_a_typed_record_and_runs_its_share_of_the_config():
    """EnvWorker (the actor's body, here in a thread of this process): describe() is a
    WorkerDescription; worker_config(config, copies) makes its LearningEnv the copies of
    one LearningEnv(config=config), its step replies carrying typed EndedRows."""
    cfg = ke.EnvConfig(num_envs=5, seed=4, layout="packed")
    out = {}

    ray = pytest.importorskip("ray", reason="RayLearningEnv needs the [ray] extra (in [dev])")
    ray_was_up = ray.is_initialized()

    def work():  # EnvWorker marks its thread SCHED_BATCH: not the test's thread
        worker = EnvWorker(CartPoleTask(), worker_config(cfg, (2, 5)))
        out["described"] = worker.describe()
        out["reset"] = worker.reset(7, None)
        rng = np.random.default_rng(1)
        out["replies"] = [worker.step(actions(rng, 5, 1)[2:] * 3) for _ in range(40)]
        worker.close()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    d = out["described"]
    ref = ke.LearningEnv(CartPoleTask(), config=cfg)
    try:
        assert isinstance(d, WorkerDescription) and d.pid == os.getpid()
        if not ray_was_up:  # outside Ray no node, and describing it did not start a Ray
            assert d.node_id == "" and not ray.is_initialized()
        assert d.single_observation_space == ref.single_observation_space
        assert (d.layout, d.timing, d.fingerprint) == ("packed", ref.timing, ref.world.fingerprint)
        assert (d.max_episode_length, d.step_dt, d.has_rule) == (
            ref.max_episode_length,
            ref.step_dt,
            True,
        )
        same(out["reset"], ref.reset(seed=7)[0][2:])
        rng = np.random.default_rng(1)
        ended = 0
        for reply in out["replies"]:
            assert isinstance(reply, StepReply)
            obs, rew, term, trunc, info = ref.step(actions(rng, 5, 1) * 3)
            same(reply.obs, obs[2:])
            same(reply.rewards, rew[2:])
            rows = compact_ends(info, ref.condition_names)
            keep = None if rows is None else rows.ids >= 2
            if rows is None or not keep.any():
                assert reply.ends is None
                continue
            assert isinstance(reply.ends, EndedRows)
            want = rows_of(rows, keep, 2)
            same(reply.ends.ids, want.ids)
            same(reply.ends.final_obs, want.final_obs)
            assert reply.ends.ended_by == want.ended_by and reply.ends.names == want.names
            ended += 1
        assert ended > 0
    finally:
        ref.close()


def test_copy_offset_envs_together_reproduce_one_env():
    """Two LearningEnvs of copies [0, 3) and [3, 5) == one env of 5 (steps, resets, seeds)."""
    full = ke.LearningEnv(HumanoidTask(), num_envs=5, seed=4, layout="isolated")
    parts = [
        ke.LearningEnv(HumanoidTask(), num_envs=n, seed=4, copy_offset=a, layout="isolated")
        for a, n in ((0, 3), (3, 2))
    ]
    same(full.reset()[0], np.concatenate([p.reset()[0] for p in parts]))
    rng = np.random.default_rng(1)
    for t in range(40):
        if t == 20:
            same(full.reset(seed=9)[0], np.concatenate([p.reset(seed=9)[0] for p in parts]))
        a = actions(rng, 5, 6)
        ref = full.step(a)
        got = [parts[0].step(a[:3]), parts[1].step(a[3:])]
        for i in range(4):
            same(ref[i], np.concatenate([g[i] for g in got]))
    with pytest.raises(ValueError, match="copy_offset must be an int >= 0"):
        ke.LearningEnv(HumanoidTask(), num_envs=2, copy_offset=-1)


def test_arguments_are_checked_before_ray_starts():
    with pytest.raises(ValueError, match="num_workers must be <= num_envs"):
        RayLearningEnv(HumanoidTask(), 2, 3)
    with pytest.raises(ValueError, match="num_workers must be an int >= 1"):
        RayLearningEnv(HumanoidTask(), 2, 0)
    with pytest.raises(ValueError, match="render_mode='human' cannot be passed"):
        RayLearningEnv(HumanoidTask(), 2, 1, render_mode="human")
    with pytest.raises(ValueError, match="address must be None"):
        RayLearningEnv(HumanoidTask(), 2, 1, address="")


def test_the_config_and_its_aliases_are_folded_and_checked_before_ray_starts(monkeypatch):
    """RayLearningEnv takes LearningEnv's EnvConfig and keywords, folded by env_config."""
    monkeypatch.setitem(sys.modules, "ray", None)  # nothing below may get as far as Ray
    cfg = ke.EnvConfig(num_envs=4, seed=2, layout="packed")
    with pytest.raises(ValueError, match="render_mode='rgb_array' cannot be passed"):
        RayLearningEnv(CartPoleTask(), num_workers=2, config=ke.EnvConfig(render_mode="rgb_array"))
    with pytest.raises(ValueError, match="num_workers must be an int >= 1, got None"):
        RayLearningEnv(CartPoleTask(), config=cfg)
    with pytest.raises(ValueError, match=r"num_workers must be <= num_envs \(4\)"):
        RayLearningEnv(CartPoleTask(), num_workers=5, config=cfg)  # the config's copies
    with pytest.raises(ValueError, match="config must be a ke.EnvConfig or None"):
        RayLearningEnv(CartPoleTask(), 4, 2, config={"layout": "packed"})
    with pytest.raises(ValueError, match="dt must be"):
        RayLearningEnv(CartPoleTask(), num_workers=2, config=cfg, dt=-1.0)
    with pytest.raises(ValueError, match="layout must be one of"):
        RayLearningEnv(CartPoleTask(), 4, 2, layout="tiled")
    with pytest.raises(ImportError):  # every check passed: only Ray is missing
        RayLearningEnv(CartPoleTask(), num_workers=2, config=cfg, dt=1 / 100, copy_offset=3)


def test_without_ray_the_error_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ImportError, match=r"pip install 'kelab\[ray\]'"):
        RayLearningEnv(CartPoleTask(), 2, 1)


# ---------------------------------------------------------------------- with Ray
# Every actor is a new process (seconds on a busy machine): the isolated 2-worker env is
# shared by two tests; the others are made (and closed) in their test.
CPUS = 0.25  # per worker: up to 8 live actors fit the module's ray.init(num_cpus=2)


@pytest.fixture(scope="module")
def humanoid2(local_ray):
    env = RayLearningEnv(HumanoidTask(), 7, 2, seed=2, layout="isolated", cpus_per_worker=CPUS)
    yield env
    env.close()


def run_side_by_side(env, ref, steps, rng, reset_at=()):
    """Step both envs with the same actions; every output must be bit-identical."""
    same(env.reset(seed=5)[0], ref.reset(seed=5)[0])
    ended = 0
    for t in range(steps):
        if t in reset_at:
            seeds = list(range(100, 100 + ref.num_envs))
            same(env.reset(seed=seeds)[0], ref.reset(seed=seeds)[0], "reset")
        a = actions(rng, ref.num_envs, ref.single_action_space.shape[0])
        got, want = env.step(a), ref.step(a)
        for i, name in enumerate(("obs", "reward", "terminated", "truncated", "info")):
            same(got[i], want[i], f"step {t} {name}")
        same(env.episode_length_buf, ref.episode_length_buf, f"step {t} episode_length_buf")
        ended += int(want[4]["_ended_by"].sum()) if want[4] else 0
    return ended


@pytest.mark.parametrize(
    ("workers", "shared_memory"), [(1, True), (2, True), (3, True), (2, False)]
)
def test_bit_identical_to_one_learning_env_isolated(humanoid2, workers, shared_memory):
    """Steps through the shared-memory channel (workers on this machine) and through Ray's
    object store (as on other machines) give the same results as one LearningEnv."""
    if (workers, shared_memory) == (2, True):
        env = humanoid2
    else:
        env = RayLearningEnv(
            HumanoidTask(),
            7,
            workers,
            seed=2,
            layout="isolated",
            cpus_per_worker=CPUS,
            shared_memory=shared_memory,
            pin_workers=workers == 3,
        )
    ref = ke.LearningEnv(HumanoidTask(), num_envs=7, seed=2, layout="isolated")
    try:
        assert env.single_observation_space == ref.single_observation_space
        assert env.single_action_space == ref.single_action_space
        assert env.observation_space == ref.observation_space
        assert env.action_space == ref.action_space
        assert env.metadata == {**ref.metadata, "render_modes": []}
        assert env.metadata["autoreset_mode"] is gymnasium.vector.AutoresetMode.SAME_STEP
        assert (env.max_episode_length, env.step_dt) == (ref.max_episode_length, ref.step_dt)
        assert env.success_rule is ref.success_rule is HumanoidTask.success_rule
        assert [w["copies"] for w in env.workers] == split_copies(7, workers)
        assert len({w["pid"] for w in env.workers}) == workers
        if hasattr(os, "SCHED_BATCH"):  # each worker steps as a batch job (ray_worker.py)
            assert [os.sched_getscheduler(w["pid"]) for w in env.workers] == [
                os.SCHED_BATCH
            ] * workers
        way = "shared memory" if shared_memory else "ray"
        assert [w["steps_through"] for w in env.workers] == [way] * workers
        ended = run_side_by_side(env, ref, 60, np.random.default_rng(workers), reset_at=(30,))
        assert ended > 0  # random torques topple the biped: autoresets were compared
    finally:
        ref.close()
        if env is not humanoid2:
            env.close()


def test_bit_identical_packed_where_packed_is_exact_in_a_rollout(local_ray):
    """The cartpole is a joint chain, where packed copies are exact (docs/world.md).

    Also what a trainer's rollout reads: (obs, action, reward, done, final_obs) batches.
    """
    cfg = ke.EnvConfig(num_envs=8, seed=1, layout="packed")
    env = RayLearningEnv(CartPoleTask(), num_workers=3, config=cfg, cpus_per_worker=CPUS)
    ref = ke.LearningEnv(CartPoleTask(), config=cfg)
    try:
        assert env.layout == ref.world.layout == "packed"
        assert env.config == ref.config
        # worker 2 cannot reach its channel (as from another container): it falls back to
        # Ray by itself, and the mixed step (2 through shared memory, 1 through Ray) is exact
        env._pool.channels[2].address = "\0kelab-test-no-such-socket"
        rng = np.random.default_rng(7)
        ended = run_side_by_side(env, ref, 90, rng)
        assert ended > 0
        ways = [w["steps_through"] for w in env.workers]
        assert ways == ["shared memory", "shared memory", "ray"]
        returns = []
        for t in range(60):
            if t % 2:  # the same step in two halves: the learner could work in between
                env.step_async(actions(rng, 8, 1))
                with pytest.raises(RuntimeError, match="a step is in flight"):
                    env.step(actions(rng, 8, 1))
                with pytest.raises(RuntimeError, match="a step is in flight"):
                    env.success_rule = None
                obs, rew, term, trunc, info = env.step_wait()
            else:
                obs, rew, term, trunc, info = env.step(actions(rng, 8, 1))
            assert obs.dtype == np.float32 and rew.shape == (8,) and obs.flags.writeable
            if info:
                done = info["_ended_by"]
                assert np.array_equal(done, term | trunc)
                assert np.isfinite(info["final_obs"][done]).all()
                assert np.array_equal(info["_is_success"], done)
                returns += info["episode_return"][done].tolist()
        assert returns and np.isfinite(returns).all()
        assert env.episode_length_buf.max() < env.max_episode_length
    finally:
        env.close()
        ref.close()


@pytest.mark.parametrize("shared_memory", [True, False])
def test_the_randomization_each_episode_ran_with_is_in_the_info(local_ray, shared_memory):
    """A task with domain randomization (masses, strength, gravity, pushes drawn per copy):
    its workers draw what one LearningEnv draws, and info["randomization"] holds the values
    of the episodes that ended, as LearningEnv's (docs/rl.md), through either way."""
    cfg = ke.EnvConfig(num_envs=6, seed=3, layout="isolated")
    env = RayLearningEnv(
        RandomizedCartPoleTask(), num_workers=2, config=cfg, cpus_per_worker=CPUS,
        shared_memory=shared_memory,
    )  # fmt: skip
    ref = ke.LearningEnv(RandomizedCartPoleTask(), config=cfg)
    try:
        rng = np.random.default_rng(5)
        same(env.reset(seed=5)[0], ref.reset(seed=5)[0])
        seen = 0
        for t in range(120):
            a = actions(rng, 6, 1) * 3
            got, want = env.step(a), ref.step(a)
            for i, name in enumerate(("obs", "reward", "terminated", "truncated", "info")):
                same(got[i], want[i], f"step {t} {name}")
            if want[4]:
                assert set(got[4]["randomization"]) == set(want[4]["randomization"])
                assert (
                    got[4]["final_info"]["randomization"].keys() == want[4]["randomization"].keys()
                )
                seen += 1
        assert seen > 0
        way = "shared memory" if shared_memory else "ray"
        assert [w["steps_through"] for w in env.workers] == [way, way]
    finally:
        env.close()
        ref.close()


def test_the_same_config_and_aliases_give_one_learning_envs_results(local_ray):
    """config=, the older aliases and the config's copy_offset reach every worker (each
    runs worker_config(config, its copies)): step for step the env is
    LearningEnv(task, config=env.config)."""
    cfg = ke.EnvConfig(num_envs=5, seed=9, copy_offset=3)
    aliases = {"dt": 1 / 100, "physics_steps_per_action": 3}
    env = RayLearningEnv(CartPoleTask(), num_workers=2, config=cfg, cpus_per_worker=CPUS, **aliases)
    ref = ke.LearningEnv(CartPoleTask(), config=cfg, **aliases)
    unplaced = ke.LearningEnv(CartPoleTask(), num_envs=5, seed=9, **aliases)  # offset 0
    try:
        assert env.config == ref.config and env.config.layout == ref.world.layout == "isolated"
        assert env.timing == ref.timing and env.timing.decimation == 3
        assert env.step_dt == ref.step_dt
        assert env.reset(seed=5)[0].tobytes() != unplaced.reset(seed=5)[0].tobytes()
        ended = run_side_by_side(env, ref, 80, np.random.default_rng(5), reset_at=(40,))
        assert ended > 0
    finally:
        env.close()
        ref.close()
        unplaced.close()


def test_snapshot_restore_across_workers(humanoid2):
    env = humanoid2
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(10):
        env.step(actions(rng, 7, 6))
    snap = ke.Snapshot.from_bytes(env.snapshot().to_bytes())  # pickle-free bytes
    assert sorted(k for k in snap.arrays if k.startswith("worker/")) == [
        "worker/0000",
        "worker/0001",
    ]
    later = [actions(rng, 7, 6) for _ in range(25)]
    first = [env.step(a) for a in later]
    buf = env.episode_length_buf.copy()
    env.restore(snap)
    again = [env.step(a) for a in later]
    for t, (x, y) in enumerate(zip(first, again, strict=True)):
        for i in range(5):
            same(x[i], y[i], f"step {t} item {i}")
    same(env.episode_length_buf, buf)
    assert any(x[4] for x in first)  # an episode ended after the snapshot
    meta = {**snap.meta, "ranges": [[0, 7]]}
    other = ke.Snapshot(snap.fingerprint, snap.step_count, snap.sim_time, snap.arrays, meta)
    with pytest.raises(ValueError, match="same num_envs and num_workers"):
        env.restore(other)
    with pytest.raises(ValueError, match="needs a snapshot from RayLearningEnv"):
        env.restore(ke.Snapshot("x", 0, 0.0))


def test_a_refused_ray_restore_leaves_every_worker_as_it_was(humanoid2):
    """Corrupt driver arrays, unknown keys, bad worker bytes, and a worker part that only
    worker 1 refuses (after worker 0 restored): each raises ValueError, every worker is put
    back, and the env steps on bit for bit as one LearningEnv that saw no restore."""
    env = humanoid2
    ref = ke.LearningEnv(HumanoidTask(), num_envs=7, seed=2, layout="isolated")
    try:
        same(env.reset(seed=6)[0], ref.reset(seed=6)[0])
        rng = np.random.default_rng(5)
        for _ in range(4):
            a = actions(rng, 7, 6)
            env.step(a)
            ref.step(a)
        good = env.snapshot()
        a = actions(rng, 7, 6)
        env.step(a)
        ref.step(a)

        def forged(arrays=None, meta=None):
            return ke.Snapshot(
                good.fingerprint,
                good.step_count,
                good.sim_time,
                {**good.arrays, **(arrays or {})},
                {**good.meta, **(meta or {})},
            )

        inner = ke.Snapshot.from_bytes(good.arrays["worker/0001"].tobytes())
        refused = ke.Snapshot(  # valid bytes that worker 1's LearningEnv refuses
            inner.fingerprint, inner.step_count, inner.sim_time, inner.arrays,
            {**inner.meta, "started": "no"},
        )  # fmt: skip
        flipped = good.arrays["worker/0000"].copy()
        flipped[40] ^= 1
        cases = [
            (forged({"junk": np.zeros(1)}), r"unknown keys \['junk'\]"),
            (forged(meta={"extra": 1}), r"unknown keys \['meta extra'\]"),
            (forged({"driver/episode_length_buf": -np.ones(7, np.int64)}), "got -1 for copy 0"),
            (forged({"driver/returns": np.full(7, np.nan)}), "finite floats"),
            (forged(meta={"started": "no"}), "'started' must be True or False"),
            (forged({"worker/0000": flipped}), "checksum|snapshot"),
            (forged({"worker/0001": np.frombuffer(refused.to_bytes(), np.uint8)}), "'started'"),
        ]
        for bad, match in cases:
            before = env.snapshot().to_bytes()
            buf = env.episode_length_buf.copy()
            with pytest.raises(ValueError, match=match):
                env.restore(bad)
            assert env.snapshot().to_bytes() == before, match
            same(env.episode_length_buf, buf)
        for t in range(6):
            a = actions(rng, 7, 6)
            for i, (x, y) in enumerate(zip(env.step(a), ref.step(a), strict=True)):
                same(x, y, f"step {t} item {i}")
    finally:
        ref.close()


BAD_OPTIONS = [
    {"env_ids": [0.7]},
    {"env_ids": "1"},
    {"env_ids": [1, 1]},
    {"env_ids": [7]},
    {"env_ids": [-1]},
    {"env_ids": []},
    {"reset_mask": [True] * 7},
    {"reset_mask": np.zeros(7, bool)},
    {"reset_mask": np.ones(6, bool)},
    {"env_ids": [0], "reset_mask": np.ones(7, bool)},
    "env_ids",
]
BAD_ACTIONS = [
    "0.5",
    np.zeros((7, 6), np.complex64),
    np.zeros((6, 6), np.float32),
    np.full((7, 6), np.nan, np.float32),
    np.where(np.arange(7)[:, None] == 3, 1e39, 0.0) * np.ones((7, 6)),
]


def raised(call, *args, **kwargs) -> str:
    """The error ``call(*args, **kwargs)`` raises (asserting it raises one), as text."""
    with pytest.raises((ValueError, RuntimeError)) as err:
        call(*args, **kwargs)
    return f"{type(err.value).__name__}: {err.value}"


def test_reset_options_seeds_and_action_checks_are_learning_envs(humanoid2):
    """Partial resets (env_ids / reset_mask, with and without seeds) reset only those copies,
    bit for bit as one LearningEnv; bad options, seeds and actions raise its very errors and
    change nothing."""
    env = humanoid2
    ref = ke.LearningEnv(HumanoidTask(), num_envs=7, seed=2, layout="isolated")
    try:
        same(env.reset(seed=5)[0], ref.reset(seed=5)[0])
        rng = np.random.default_rng(3)
        resets = {
            4: dict(options={"env_ids": [5, 1]}),  # copies of both workers
            9: dict(seed=11, options={"env_ids": np.array([2])}),  # worker 0 only
            14: dict(options={"reset_mask": np.arange(7) >= 4}),  # worker 1 only
            19: dict(seed=list(range(40, 47)), options={"env_ids": [0, 6]}),
        }
        for t in range(24):
            if t in resets:
                same(env.reset(**resets[t])[0], ref.reset(**resets[t])[0], f"reset {t}")
                same(env.episode_length_buf, ref.episode_length_buf, f"reset {t} counters")
                assert (env.episode_length_buf > 0).any()  # not every copy was reset
            a = actions(rng, 7, 6)
            for i, (x, y) in enumerate(zip(env.step(a), ref.step(a), strict=True)):
                same(x, y, f"step {t} item {i}")
        buf = env.episode_length_buf.copy()
        for bad in BAD_OPTIONS:
            assert raised(env.reset, options=bad) == raised(ref.reset, options=bad), bad
        for bad in ([1, 2], "7", -1, [0] * 6 + [-3]):
            assert raised(env.reset, seed=bad) == raised(ref.reset, seed=bad), bad
        for bad in BAD_ACTIONS:
            assert raised(env.step, bad) == raised(ref.step, bad)
        same(env.episode_length_buf, buf)  # nothing was reset or stepped
        a = actions(rng, 7, 6) * 3  # clipped alike
        for i, (x, y) in enumerate(zip(env.step(a), ref.step(a), strict=True)):
            same(x, y, f"after the refusals, item {i}")
    finally:
        ref.close()


def kill(env, worker):
    os.kill(env.workers[worker]["pid"], signal.SIGKILL)
    time.sleep(0.5)  # let Ray notice the process is gone


def test_task_errors_and_a_dead_worker_are_named(local_ray):
    class NaNOnFullThrottle(CartPoleTask):  # defined here: Ray ships it by value
        """A task bug on demand: the reward of a copy given action 1.0 is NaN."""

        def apply_actions(self, actions):
            self.full = actions[:, 0] == 1.0
            super().apply_actions(actions)

        def get_rewards(self):
            r = super().get_rewards()
            r[self.full] = np.nan
            return r

    env = RayLearningEnv(NaNOnFullThrottle(), 6, 2, seed=0, cpus_per_worker=CPUS)
    try:
        env.reset()
        a = np.zeros((6, 1), np.float32)
        a[4] = 1.0  # worker 1's copy 1
        with pytest.raises(
            ke.TaskError, match=r"get_rewards\(\) returned NaN .* copies \[1\]"
        ) as err:
            env.step(a)
        assert "Ray worker 1, which holds copies [3, 6)" in "".join(err.value.__notes__)
        with pytest.raises(RuntimeError, match=r"last step\(\) raised TaskError.*reset\(\)"):
            env.step(np.zeros((6, 1), np.float32))  # out of step, as one LearningEnv is
        with pytest.raises(RuntimeError, match=r"reset\(\) without options"):
            env.reset(options={"env_ids": [0]})
        env.reset()
        with pytest.raises(ValueError, match=r"actions must have shape \(6, 1\)"):
            env.step(np.zeros((3, 1), np.float32))
        env.step(np.zeros((6, 1), np.float32))
        host = env.workers[1]["host"]
        kill(env, 1)
        with pytest.raises(WorkerDiedError) as died:
            env.step(np.zeros((6, 1), np.float32))
        e = died.value
        assert (e.worker, e.copies, e.host) == (1, (3, 6), host)
        message = str(e)
        assert "worker 1 of 2 (copies [3, 6)" in message and host in message
        assert "restart=True" in message
    finally:
        env.close()


def _restartable_pair_after_5_steps() -> tuple:
    """A restart=True RayLearningEnv and its LearningEnv twin, stepped 5 times alike."""
    kw = {"layout": "isolated"}
    env = RayLearningEnv(HumanoidTask(), 6, 2, seed=8, restart=True, cpus_per_worker=CPUS, **kw)
    ref = ke.LearningEnv(HumanoidTask(), num_envs=6, seed=8, **kw)
    same(env.reset()[0], ref.reset()[0])
    rng = np.random.default_rng(3)
    for _ in range(5):
        a = actions(rng, 6, 6)
        env.step(a)
        last_obs, *_ = ref.step(a)
    return env, ref, rng, last_obs


def test_restarted_worker_cuts_its_episodes_short_and_stepping_goes_on(local_ray):
    env, ref, rng, last_obs = _restartable_pair_after_5_steps()
    try:
        lengths = env.episode_length_buf.copy()
        old_pid = env.workers[0]["pid"]
        kill(env, 0)
        a = actions(rng, 6, 6)
        obs, rew, term, trunc, info = env.step(a)
        want = ref.step(a)
        # the dead worker's copies [0, 3): cut short, fresh episodes
        assert env.restarts == 1 and env.workers[0]["pid"] != old_pid
        assert trunc[:3].all() and not term[:3].any() and (rew[:3] == 0).all()
        assert info["_ended_by"][:3].all()
        assert info["ended_by"][:3].tolist() == ["cut short by the task"] * 3
        same(info["final_obs"][:3], last_obs[:3])  # the last observation it sent
        same(info["episode_length"][:3], lengths[:3])
        assert not info["is_success"][:3].any()
        assert (env.episode_length_buf[:3] == 0).all()
        # the other worker's copies go on exactly as in one LearningEnv
        for i in range(4):
            same(np.asarray((obs, rew, term, trunc)[i])[3:], want[i][3:], f"item {i}")
        for _ in range(20):
            obs, *_ = env.step(actions(rng, 6, 6))
            assert obs.shape == (6, 17) and np.isfinite(obs).all()
    finally:
        env.close()
        ref.close()


def _kill_and_wait_for_ray_to_restart(env, worker):
    """SIGKILL a worker, then wait until Ray has built its actor again (a new pid
    answers), so that the env's next call reaches the new actor: the restart the env did
    not see (the pool's actor handle is private: tests only)."""
    ray = pytest.importorskip("ray")
    old = env.workers[worker]["pid"]
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if ray.get(env._pool.actors[worker].describe.remote(), timeout=10).pid != old:
                return
        except ray.exceptions.RayError:
            pass
        time.sleep(0.05)
    raise AssertionError("Ray did not restart the worker within 60 s")


def test_a_restart_ray_made_before_the_next_call_is_seen(local_ray):
    """Ray may restart a dead worker before the env calls it again (the driver busy
    elsewhere, e.g. a PPO update): the next step then reaches copies never reset. It is
    reported as a restart seen in a step (its copies cut short), and a reset or restore
    that reaches the new actor counts it too."""
    env, ref, rng, last_obs = _restartable_pair_after_5_steps()
    try:
        _kill_and_wait_for_ray_to_restart(env, 1)
        a = actions(rng, 6, 6)
        obs, rew, term, trunc, info = env.step(a)  # was: "call reset() before step()"
        want = ref.step(a)
        assert env.restarts == 1
        assert trunc[3:].all() and not term[3:].any() and (rew[3:] == 0).all()
        assert info["ended_by"][3:].tolist() == ["cut short by the task"] * 3
        same(info["final_obs"][3:], last_obs[3:])
        for i in range(4):
            same(np.asarray((obs, rew, term, trunc)[i])[:3], want[i][:3], f"item {i}")
        pid = env.workers[0]["pid"]
        _kill_and_wait_for_ray_to_restart(env, 0)
        seeds = list(range(50, 56))
        same(env.reset(seed=seeds)[0], ref.reset(seed=seeds)[0])
        assert env.restarts == 2 and env.workers[0]["pid"] != pid
        a = actions(rng, 6, 6)
        got, want = env.step(a), ref.step(a)
        for i in range(4):
            same(got[i], want[i], f"item {i} after the reset")
    finally:
        env.close()
        ref.close()


def test_a_restarted_worker_gets_the_success_rule_set_after_construction(local_ray):
    """Ray rebuilds a restarted worker from its constructor arguments: a success rule set
    later (``env.success_rule = ...``) is sent to it again, or its episodes would be
    judged by the task's own rule."""

    @ke.success
    def always(task):  # defined here: Ray ships it by value
        return np.ones(task.num_envs, dtype=bool)

    env = RayLearningEnv(CartPoleTask(), 4, 2, seed=0, restart=True, cpus_per_worker=CPUS)
    try:
        env.reset()
        env.success_rule = always
        kill(env, 1)
        rng = np.random.default_rng(0)
        env.step(actions(rng, 4, 1))  # the death: copies 2 and 3 cut short
        assert env.restarts == 1
        judged = []
        for _ in range(300):  # full pushes: the poles fall, the task's rule says failure
            _, _, _, _, info = env.step(np.ones((4, 1), dtype=np.float32))
            if info:
                judged += info["is_success"][info["_ended_by"]].tolist()
        assert judged and all(judged)
    finally:
        env.close()


def test_a_death_seen_outside_a_step_restarts_the_worker_and_the_next_step_reports_it(
    local_ray,
):
    env, ref, rng, last_obs = _restartable_pair_after_5_steps()
    try:
        old_pid = env.workers[0]["pid"]
        kill(env, 0)
        with pytest.raises(RuntimeError, match=r"Ray workers \[0\] died and were restarted"):
            env.snapshot()  # the death is seen here: the worker is restarted, not reported dead
        assert env.restarts == 1 and env.workers[0]["pid"] != old_pid
        a = actions(rng, 6, 6)
        obs, rew, term, trunc, info = env.step(a)  # reports the restart as a step death would
        want = ref.step(a)
        assert trunc[:3].all() and not term[:3].any() and (rew[:3] == 0).all()
        assert info["ended_by"][:3].tolist() == ["cut short by the task"] * 3
        same(info["final_obs"][:3], last_obs[:3])
        for i in range(4):
            same(np.asarray((obs, rew, term, trunc)[i])[3:], want[i][3:], f"item {i}")
        snap = env.snapshot()  # reported: snapshots work again, and replay exactly
        a = actions(rng, 6, 6)
        first = env.step(a)[0]
        env.restore(snap)
        same(env.step(a)[0], first)
        assert env.restarts == 1
        kill(env, 1)  # seen by a reset: repeated on the restarted worker, nothing owed after
        seeds = list(range(40, 46))
        same(env.reset(seed=seeds)[0], ref.reset(seed=seeds)[0])
        assert env.restarts == 2
        a = actions(rng, 6, 6)
        got, want = env.step(a), ref.step(a)
        for i in range(4):  # no copy reported cut short: the reset set every copy
            same(got[i], want[i], f"item {i} after the reset")
    finally:
        env.close()
        ref.close()
    assert env.restarts == 2  # still counted once closed
    with pytest.raises(RuntimeError, match="this RayLearningEnv is closed"):
        _ = env.workers


def test_a_death_before_the_first_reset_is_restarted_by_the_reset(local_ray):
    env = RayLearningEnv(CartPoleTask(), 4, 2, seed=0, restart=True, cpus_per_worker=CPUS)
    try:
        kill(env, 0)
        obs, _ = env.reset(seed=0)  # no episode to cut short: the reset is repeated
        assert env.restarts == 1 and obs.shape == (4, 4)
        obs, *_ = env.step(np.zeros((4, 1), np.float32))
        assert np.isfinite(obs).all()
    finally:
        env.close()


def test_ray_init_options_override_the_local_defaults_and_a_dead_address_is_refused_fast():
    from kelab.rl.ray_start import probe_address, start_ray

    class FakeRay:
        def __init__(self) -> None:
            self.calls: list[dict] = []

        def is_initialized(self) -> bool:
            return False

        def init(self, **kwargs) -> None:
            self.calls.append(kwargs)

    fake = FakeRay()
    assert start_ray(fake, None, 3, 1.0, {"num_cpus": 2, "include_dashboard": True})
    assert fake.calls[-1] == {"num_cpus": 2, "include_dashboard": True}
    assert start_ray(fake, None, 3, 1.0, None)
    assert fake.calls[-1]["num_cpus"] >= 3 and fake.calls[-1]["include_dashboard"] is False
    assert start_ray(fake, "auto", 3, 1.0, {"namespace": "x"})
    assert fake.calls[-1] == {"address": "auto", "namespace": "x"}
    with pytest.raises(ConnectionError, match=r"address must be a reachable Ray head .*got "
                       r"'127.0.0.1:1'.*ray start --head"):  # fmt: skip
        probe_address("127.0.0.1:1", timeout_s=5.0)


def test_a_ray_learning_env_gives_the_learning_env_s_report(local_ray):
    # (was in test_evaluation.py with a Ray of its own: one ray.init less a session)
    env = ke.RayLearningEnv(
        CartPoleTask(), 4, num_workers=2, seed=5, layout="isolated", cpus_per_worker=CPUS
    )
    try:
        assert env.condition_names == ()  # known from the first step on
        report = ke.evaluate(env, wobbly, episodes=6, seed=7)
        assert env.condition_names == ("pole fell", "cart left the track")
    finally:
        env.close()
    local = ke.LearningEnv(CartPoleTask(), num_envs=4, seed=5, layout="isolated")
    assert report == ke.evaluate(local, wobbly, episodes=6, seed=7)
    local.close()


def test_workers_a_local_ray_can_never_place_are_refused_at_once(local_ray, monkeypatch):
    """The module's Ray is this process's own (ray.init(num_cpus=2) here): it has no
    autoscaler, so 3 workers of 1 CPU can never be placed; no worker is started, and the
    error names the CPUs needed and free (it used to wait start_timeout_s=300 s)."""
    from kelab.rl import ray_env
    from kelab.rl.ray_start import owns_local_ray

    assert owns_local_ray()

    def no_pool(*args, **kwargs):
        raise AssertionError("no worker may be started")

    monkeypatch.setattr(ray_env, "WorkerPool", no_pool)
    with pytest.raises(
        ValueError,
        match=r"RayLearningEnv: num_workers x cpus_per_worker must fit this process's local Ray "
        r"\(2 CPUs, [0-9.]+ free; .*cannot grow\), got 3 x 1 = 3 CPUs; .*cpus_per_worker=0\.66",
    ):
        RayLearningEnv(CartPoleTask(), 6, 3)


def test_a_cluster_that_can_grow_keeps_the_wait():
    """Only a Ray that cannot grow is refused: one this process did not start (joined by
    address: an autoscaler or an operator may add nodes) keeps the start_timeout_s wait."""
    from kelab.rl.ray_start import check_room

    class FakeRay:
        def nodes(self):
            return [{"Alive": True, "Resources": {"CPU": 2.0}}, {"Alive": False, "Resources": {}}]

        def cluster_resources(self):
            return {"CPU": 2.0}

        def available_resources(self):
            return {"CPU": 1.0}

    fake = FakeRay()
    check_room(fake, 3, 1.0, can_grow=True)  # no error: Ray waits for new nodes
    check_room(fake, 4, 0.5, can_grow=False)  # fits (1 CPU busy now: waited for, as before)
    with pytest.raises(ValueError, match=r"2 CPUs, 1 free.*got 3 x 1 = 3 CPUs"):
        check_room(fake, 3, 1.0, can_grow=False)
    with pytest.raises(ValueError, match=r"got 2 x 1.5 = 3 CPUs"):  # 1.5 fits only once
        check_room(fake, 2, 1.5, can_grow=False)


def test_rltrainer_trains_on_ray_workers_exactly_as_on_one_env(local_ray, tmp_path):
    """RLTrainer takes a RayLearningEnv unchanged; packed cartpoles are exact, so the same
    seed gives the same PPO run as on one in-process LearningEnv."""
    pytest.importorskip("torch", reason="RLTrainer needs the [train] extra (in [dev])")
    from kelab.train.config import TrainConfig

    config = TrainConfig(
        num_envs=16,
        num_steps_per_env=8,
        actor_hidden_dims=(16, 16),
        critic_hidden_dims=(16, 16),
        num_learning_epochs=2,
        num_mini_batches=2,
        success_window=20,
        checkpoint_every=2,
    )
    runs = {}
    for name in ("ray", "local"):
        if name == "ray":
            env = RayLearningEnv(CartPoleTask(), 16, 2, seed=3, cpus_per_worker=CPUS)
        else:
            env = ke.LearningEnv(CartPoleTask(), num_envs=16, seed=3)
        try:
            with ke.RLTrainer(env, seed=3, run_dir=tmp_path / name, config=config) as trainer:
                stats = trainer.train(3)
                runs[name] = (stats, trainer.policy(np.zeros((4, 4), np.float32)))
        finally:
            env.close()
    (ray_stats, ray_act), (stats, act) = runs["ray"], runs["local"]
    assert ray_stats["env_steps"] == stats["env_steps"] == 3 * 8 * 16
    for key in ("last_reward", "best_reward", "success_rate", "episodes"):
        assert ray_stats[key] == stats[key], key
    same(ray_act, act)  # the same weights after three updates
    assert (tmp_path / "ray").is_dir() and any((tmp_path / "ray").iterdir())


def test_kelab_train_workers(local_ray, tmp_path, capsys):
    pytest.importorskip("torch", reason="kelab train needs the [train] extra (in [dev])")
    from kelab.cli import main

    run = tmp_path / "run"
    code = main(["train", "CartPole-v0", "--num-envs", "8", "--iterations", "1",
                 "--run-dir", str(run), "--workers", "1"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "training kelab/CartPole-v0: 8 copies in 1 Ray worker(s)" in out.out
    assert (run / "latest.json").exists()
    assert main(["train", "CartPole-v0", "--ray-address", "auto"]) == 2
    assert capsys.readouterr().err.startswith("kelab: error: --ray-address needs --workers K")
    # 3 workers of 1 CPU never fit the 2-CPU test cluster (this process's own): refused
    args = ["train", "CartPole-v0", "--num-envs", "6", "--workers", "3",
            "--run-dir", str(tmp_path / "late")]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "got 3 x 1 = 3 CPUs" in err and "cannot grow" in err, err


def test_more_workers_than_copies_and_a_task_class_get_the_fix_in_the_message(capsys):
    pytest.importorskip("torch", reason="kelab train needs the [train] extra (in [dev])")
    from kelab.cli import main

    assert main(["train", "CartPole-v0", "--num-envs", "2", "--workers", "3"]) == 2
    assert capsys.readouterr().err.strip() == (
        "kelab: error: --workers must be <= the 2 copies (--num-envs), got 3; every worker "
        "needs at least one copy: lower --workers or raise --num-envs"
    )
    with pytest.raises(ke.TaskError, match=r"got <class .*CartPoleTask'>; pass an instance: "
                       r"CartPoleTask\(\)"):  # fmt: skip
        RayLearningEnv(CartPoleTask, 4, 2)


def test_a_task_error_in_every_worker_raises_the_first_and_reads_every_reply(local_ray):
    class Boom(CartPoleTask):  # defined here: Ray ships it by value
        def get_rewards(self):
            raise ValueError("boom in get_rewards")

    env = RayLearningEnv(Boom(), 6, 2, seed=0, cpus_per_worker=CPUS)
    try:
        env.reset()
        with pytest.raises(ValueError, match="boom in get_rewards") as err:
            env.step(np.zeros((6, 1), np.float32))
        assert "Ray worker 0, which holds copies [0, 3)" in "".join(err.value.__notes__)
        env.reset()  # as with one LearningEnv: a reset, and the env steps again
        with pytest.raises(ValueError, match="boom in get_rewards"):
            env.step(np.zeros((6, 1), np.float32))  # the same task error, not a stale reply
    finally:
        env.close()


def test_a_worker_env_that_cannot_be_built_raises_its_own_error(local_ray):
    """An error building a worker's LearningEnv reaches the caller as itself (type and
    message, with a note naming the worker), not as a dead worker's Ray text."""

    class NeedsAsset(CartPoleTask):  # defined here: Ray ships it by value
        def build(self, scene):
            raise FileNotFoundError("cartpole.json is not on this node")

    import ray

    free = ray.available_resources().get("CPU", 0.0)
    with pytest.raises(FileNotFoundError, match="cartpole.json is not on this node") as err:
        RayLearningEnv(NeedsAsset(), 4, 2, seed=0, cpus_per_worker=CPUS)
    assert "Ray worker 0, which holds copies [0, 2)" in "".join(err.value.__notes__)
    for _ in range(100):  # the failed env's actors are gone (Ray frees their CPUs soon after)
        if ray.available_resources().get("CPU", 0.0) >= free:
            break
        time.sleep(0.1)
    assert ray.available_resources().get("CPU", 0.0) >= free
    with pytest.raises(ValueError, match=r"^physics_steps_per_action must be an int in"):
        RayLearningEnv(
            CartPoleTask(), 4, 2, seed=0, cpus_per_worker=CPUS, physics_steps_per_action=0
        )
