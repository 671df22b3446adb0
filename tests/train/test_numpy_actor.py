"""Playback without torch: the numpy actor equals the torch actor; play/eval never import torch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from prestart import Prestart
from train_helpers import shipped_task_ids

import kelab as ke
from kelab.tasks import TASK_IDS
from kelab.tasks.registry import task_class
from kelab.train.checkpoint import load_checkpoint, save_checkpoint
from kelab.train.config import TrainConfig
from kelab.train.numpy_actor import NumpyActor
from kelab.train.policy import CheckpointPolicy
from kelab.train.shipped import shipped_policy


def _real_observations(target: str, policy: NumpyActor, steps: int = 60) -> np.ndarray:
    """Observations a policy meets on its task: 8 copies, ``steps`` steps."""
    env = ke.LearningEnv(task_class(target)(), num_envs=8, seed=7)
    obs, _ = env.reset(seed=7)
    seen = [obs]
    for _ in range(steps):
        obs, *_ = env.step(policy(obs))
        seen.append(obs)
    env.close()
    return np.concatenate(seen)


@pytest.mark.parametrize("env_id", shipped_task_ids())
def test_the_numpy_actor_gives_the_torch_actors_actions(env_id):
    spec = shipped_policy(TASK_IDS[env_id])
    numpy_actor = NumpyActor(load_checkpoint(spec, arrays="numpy"))
    torch_actor = CheckpointPolicy(load_checkpoint(spec))
    rng = np.random.default_rng(0)
    random = rng.normal(0.0, 3.0, (512, numpy_actor.observation_dim)).astype(np.float32)
    real = _real_observations(TASK_IDS[env_id], numpy_actor)
    # Random observations lie far outside what the policy was trained on: its hidden
    # values grow large there, and two float32 matmuls that sum in another order (BLAS
    # kernels differ per CPU) differ by a few ulps of those: 1.4e-5 for Humanoid on an
    # AMD EPYC, under 1e-5 elsewhere. On the observations the task gives, 1e-5 holds.
    for obs, tolerance in ((random, 1e-4), (real, 1e-5)):
        mine, theirs = numpy_actor(obs), torch_actor(obs)
        assert mine.dtype == np.float32 and mine.shape == theirs.shape
        assert np.abs(mine - theirs).max() <= tolerance
    assert np.abs(numpy_actor(real[0]) - torch_actor(real[0])).max() <= 1e-5  # one obs


@pytest.mark.parametrize("activation", ["elu", "relu", "tanh", "selu", "gelu", "silu"])
def test_every_activation_and_the_normaliser_match_torch(tmp_path, activation):
    from kelab.train.ppo import build_actor

    torch.manual_seed(0)
    config = TrainConfig(actor_hidden_dims=(7, 5), activation=activation)
    actor = build_actor(config, 3, 2)
    with torch.no_grad():
        for p in actor.parameters():
            p.normal_(0.0, 1.0)
        norm = actor.obs_normalizer
        norm._mean.copy_(torch.tensor([[0.5, -1.0, 2.0]]))
        norm._std.copy_(torch.tensor([[0.2, 1.5, 3.0]]))
        norm._var.copy_(norm._std.square())
    tensors = {f"actor.{k}": v for k, v in actor.state_dict().items()}
    meta = {
        "task": {"id": None, "class": "x:Y"},
        "observation_dim": 3,
        "action_dim": 2,
        "train_config": config.to_dict(),
        "iteration": 0,
        "env_steps": 0,
    }
    path = save_checkpoint(tmp_path, "best", tensors, meta)
    obs = np.random.default_rng(1).normal(0.0, 2.0, (256, 3)).astype(np.float32)
    mine = NumpyActor(load_checkpoint(path, arrays="numpy"))(obs)
    theirs = CheckpointPolicy(load_checkpoint(path))(obs)
    assert np.abs(mine - theirs).max() <= 1e-5
    assert 0 < np.abs(mine).max() <= 1.0 and np.abs(mine).max() == 1.0  # clipped, as sent


def test_rlplayer_acts_with_the_numpy_actor():
    player = ke.RLPlayer(shipped_policy(TASK_IDS["kelab/CartPole-v0"]), render_mode=None)
    assert isinstance(player.policy, NumpyActor)
    assert isinstance(player.checkpoint.tensors["actor.mlp.0.weight"], np.ndarray)


_NO_TORCH = """
import sys

class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "rsl_rl", "tensordict"):
            raise ImportError(f"{name} is blocked in this test")
        return None

sys.meta_path.insert(0, _Refuse())
"""


def _eval_and_play_without_torch(folder: Path) -> list[str]:
    script = _NO_TORCH + textwrap.dedent(f"""
        import kelab as ke
        from kelab.cli import main

        assert main(["eval", "CartPole-v0", "--episodes", "4"]) == 0
        assert main(["play", "CartPole-v0", "--episodes", "1",
                     "--video", {str(folder / "v.mp4")!r}]) == 0
        player = ke.RLPlayer("{shipped_policy(TASK_IDS["kelab/BallToGoal-v0"])}",
                             render_mode=None)
        assert player.play(episodes=1)["episodes"] == 1
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "rsl_rl"))
        assert not leaked, leaked
        print("OK")
    """)
    return [sys.executable, "-c", script]


#: ~3 s of commands in a fresh interpreter, beside the suite (tests/prestart.py)
WITHOUT_TORCH = Prestart(
    _eval_and_play_without_torch,
    env={**os.environ, "SDL_VIDEODRIVER": "dummy"},
    timeout=300,
)


@pytest.mark.prestart(WITHOUT_TORCH)
def test_import_kelab_play_and_eval_never_import_torch():
    done = WITHOUT_TORCH.result()
    assert done.returncode == 0 and done.stdout.strip().endswith("OK"), done.stderr[-3000:]
    assert (done.folder / "v.mp4").stat().st_size > 1000


def test_both_policies_refuse_bad_observations_and_nan_alike():
    spec = shipped_policy(TASK_IDS["kelab/CartPole-v0"])
    numpy_actor = NumpyActor(load_checkpoint(spec, arrays="numpy"))
    torch_actor = CheckpointPolicy(load_checkpoint(spec))
    for bad in (np.zeros((2, 6)), np.zeros(3), np.zeros((1, 2, 4)), [[0.0] * 5]):
        messages = set()
        for policy in (numpy_actor, torch_actor):
            with pytest.raises(ValueError, match=r"observations must have shape \(N, 4\)") as err:
                policy(bad)
            messages.add(str(err.value))
        assert len(messages) == 1, messages
    for policy in (numpy_actor, torch_actor):
        with pytest.raises(ValueError, match="the policy produced NaN actions"):
            policy(np.full(4, np.nan, np.float32))
        assert policy(np.zeros(4, np.float32)).shape == (1,)


def _humanoid_actor() -> NumpyActor:
    spec = shipped_policy(TASK_IDS["kelab/Humanoid-v0"])
    return NumpyActor(load_checkpoint(spec, arrays="numpy"))


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_blas_threads():
    """The process's BLAS libraries on 2 threads for the test (their counts put back)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):
        if _blas_threads() != [2] * len(_blas_threads()) or not _blas_threads():
            pytest.fail(f"the BLAS could not be set to 2 threads: {_blas_threads()}")
        yield


def test_the_actor_runs_its_products_on_one_blas_thread(two_blas_threads):
    # the trial (2026-12-06): a convolutional policy's act() took 64-76 ms for 6-32
    # observations on numpy's multithreaded OpenBLAS, 1.1-5 ms on one thread
    actor = _humanoid_actor()
    seen: list[list[int]] = []
    activation = actor.activation

    def spy(x: np.ndarray) -> np.ndarray:  # runs between two of the actor's products
        seen.append(_blas_threads())
        return activation(x)

    actor.activation = spy
    actor(np.zeros((64, actor.observation_dim), np.float32))
    assert seen and all(threads == [1] * len(threads) for threads in seen), seen
    assert _blas_threads() == [2] * len(_blas_threads())  # the user's setting, back


def test_the_actions_are_the_same_bits_on_any_blas_threads(two_blas_threads):
    # a product split over threads may sum a block's edge in another order: with the
    # BLAS's own threads the actions depended on the machine's core count
    from threadpoolctl import threadpool_limits

    actor = _humanoid_actor()
    obs = np.random.default_rng(0).normal(0.0, 1.0, (512, actor.observation_dim))
    on_two = actor(obs.astype(np.float32))
    with threadpool_limits(limits=1, user_api="blas"):
        on_one = actor(obs.astype(np.float32))
    assert on_two.tobytes() == on_one.tobytes()


_THREADS = """
from threadpoolctl import threadpool_info

def threads():
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
"""


def _run_on_two_blas_threads(script: str) -> str:
    """Run ``_THREADS + script`` in a new process whose BLAS starts on 2 threads.

    Set by OpenBLAS's variable, not threadpoolctl: a thread that sets a limit is the
    only one threadpoolctl (3.8) lets set OpenBLAS's shared pool until the limit ends.
    """
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    done = subprocess.run(
        [sys.executable, "-c", _THREADS + textwrap.dedent(script)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_one_blas_thread_nests_and_other_threads_wait_their_turn():
    out = _run_on_two_blas_threads("""
        import threading
        from kelab.train.blas_threads import one_blas_thread

        seen, started = [], threading.Event()

        def other():  # asks while the main thread's block is open: waits for its end
            started.set()
            with one_blas_thread():
                seen.append(("other", threads()))

        thread = threading.Thread(target=other)
        seen.append(("before", threads()))
        with one_blas_thread():
            with one_blas_thread():
                seen.append(("inner", threads()))
            seen.append(("outer", threads()))
            thread.start()
            assert started.wait(30)
            thread.join(0.2)  # it cannot get in yet
            seen.append(("main", threads()))
        thread.join(30)
        seen.append(("after", threads()))
        print(seen)
    """)
    assert out == str(
        [("before", [2]), ("inner", [1]), ("outer", [1]), ("main", [1]), ("other", [1]),
         ("after", [2])]
    )  # fmt: skip


def test_import_kelab_and_building_a_player_leave_the_blas_threads_alone():
    spec = str(shipped_policy(TASK_IDS["kelab/Humanoid-v0"]))
    out = _run_on_two_blas_threads(f"""
        import numpy as np
        before = threads()
        import kelab as ke
        player = ke.RLPlayer({spec!r}, render_mode=None)
        built = threads()
        player.act(np.zeros((64, player.observation_dim), np.float32))
        print(before, built, threads())
    """)
    assert out.split() == ["[2]", "[2]", "[2]"]
