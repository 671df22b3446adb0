"""A World's lifetime: close() refuses every change; a World dropped unclosed stops its threads."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kelab as ke
from kelab.sim.physics._packed import ShardWorkers

DT = 1 / 120
ROOT = Path(__file__).resolve().parents[2]


def _balls() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(0.0, 1.0)), at="/World/Ball")
    return b.build()


def _changes(w: ke.World) -> dict[str, object]:
    """Every call that changes a World, each as a thunk."""
    n = w.num_envs
    poses, vels = w.body_poses, w.body_velocities
    snap = w.snapshot()

    def set_log() -> None:
        w.max_log_steps = 10

    def set_updates() -> None:
        w.controller_updates = "held"

    return {
        "step": lambda: w.step(DT),
        "reset_envs": lambda: w.reset_envs([0]),
        "set_body_states": lambda: w.set_body_states(None, poses, vels),
        "restore": lambda: w.restore(snap),
        "set_joint_efforts": lambda: w.set_joint_efforts(np.zeros((n, 0))),
        "set_joint_position_targets": lambda: w.set_joint_position_targets(np.zeros((n, 0))),
        "set_body_forces": lambda: w.set_body_forces(np.ones((n, 2, 2))),
        "apply_force_at_point": lambda: w.apply_force_at_point(0, 1, (1.0, 0.0), (0.0, 1.0)),
        "max_log_steps": set_log,
        "controller_updates": set_updates,
        "update_controllers": w.update_controllers,
    }


@pytest.mark.parametrize(("layout", "threads"), [("packed", 3), ("packed", 1), ("isolated", 3)])
def test_a_closed_world_refuses_every_change_and_stays_readable(layout: str, threads: int) -> None:
    # issue #37.14: a closed 3-thread packed World stepped its first shard only
    w = ke.World(_balls(), num_envs=6, num_threads=threads, layout=layout)
    for _ in range(30):
        w.step(DT)
    w.close()
    w.close()  # again: nothing happens
    before = np.concatenate([w.body_poses, w.body_velocities], axis=2)
    log, steps = len(w._log), w.step_count
    for name, change in _changes(w).items():
        with pytest.raises(RuntimeError, match=r"^World is closed; "):
            change()
        after = np.concatenate([w.body_poses, w.body_velocities], axis=2)
        assert np.array_equal(after, before), name
        assert len(w._log) == log and w.step_count == steps, name
        assert w.controller_updates == "every_step" and w.max_log_steps != 10, name
    # reads still work, every shard read in this thread
    assert w.body_poses[:, 1, 1].tolist() == [before[0, 1, 1]] * 6
    assert w.contact_forces.shape == (6, 2, 2) and w.snapshot().step_count == 30
    assert w.env_indices([1, 2]).tolist() == [1, 2]


def test_closed_shard_workers_run_later_jobs_in_the_calling_thread() -> None:
    workers = ShardWorkers(3)
    workers.close()
    seen: list[int] = []
    workers.run(seen.append, 3)
    assert seen == [0, 1, 2]


def test_a_closed_learning_env_runs_no_task_hook() -> None:
    sys.path.insert(0, str(ROOT / "tests" / "rl"))
    from _rl_tasks import RecordingTask

    task = RecordingTask()
    env = ke.LearningEnv(task, num_envs=4, num_threads=2, layout="packed")
    env.reset()
    snap = env.snapshot()
    env.close()
    task.calls.clear()
    for call in (
        lambda: env.step(np.zeros((4, 1))),
        env.reset,
        lambda: env.reset(options={"env_ids": [1]}),
        lambda: env.restore(snap),
    ):
        with pytest.raises(RuntimeError, match="environment is closed"):
            call()
    assert task.calls == []


_DROP = textwrap.dedent(
    """
    import gc, sys, threading, time
    import numpy as np
    import kelab as ke
    sys.path.insert(0, sys.argv[1])
    from _rl_tasks import RecordingTask

    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Prop(ke.Circle(0.1), initial_pose=ke.Pose(0.0, 1.0)), at="/World/Ball")
    scene = b.build()
    base = threading.active_count()
    for k in range(40):
        w = ke.World(scene, num_envs=6, num_threads=3, layout="packed")
        for _ in range(3):
            w.step(1 / 120)  # pipelined steps still queued when it is dropped
        if k % 2:
            w.set_body_forces(np.ones((6, 2, 2)))  # a read and changed forces in between
            w.body_poses
        del w
    for layout in ("packed", "isolated"):
        for _ in range(10):
            env = ke.LearningEnv(RecordingTask(), num_envs=6, num_threads=3, layout=layout)
            env.reset()
            env.step(np.zeros((6, 1)))
            del env
    gc.collect()
    deadline = time.monotonic() + 30
    while threading.active_count() > base and time.monotonic() < deadline:
        time.sleep(0.05)
    print(base, threading.active_count())
    """
)


def test_dropped_worlds_and_envs_stop_their_threads() -> None:
    # issue #37.15: 100 Worlds with num_threads=3 dropped unclosed left 200 threads
    done = subprocess.run(
        [sys.executable, "-c", _DROP, str(ROOT / "tests" / "rl")],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    base, left = map(int, done.stdout.split())
    assert left == base, f"{left - base} threads left running"
