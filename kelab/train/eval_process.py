"""``EvalProcess``: a :class:`~kelab.train.target.TargetCheck` in a second process.

Training runs on one core; judging the deterministic policy (``TrainConfig.eval_every``)
then costs wall time the trainer could spend training. With ``TrainConfig.eval_process``
the trainer forks one process when it is built; each evaluation sends the actor's weights
there (raw float32 bytes, in the actor's own parameter order: no pickle) and reads the
verdict one evaluation period later, so the check runs on another core meanwhile.

The verdict on iteration ``k``'s policy is always read at iteration ``k + eval_every``
(blocking if the check is not done): runs stay deterministic, and give the same verdicts
as checks in the trainer's process, at fixed later iterations.

Example:
    >>> from kelab.tasks.cartpole import CartPoleTask
    >>> from kelab.train.config import TrainConfig
    >>> from kelab.train.ppo import build_actor
    >>> config = TrainConfig(actor_hidden_dims=(8,), critic_hidden_dims=(8,))
    >>> actor = build_actor(config, 4, 1)
    >>> check = EvalProcess(CartPoleTask, config, 4, 1, target=0.95, episodes=4)
    >>> check.submit(actor)
    >>> check.result().passed  # an untrained policy
    False
    >>> check.close()
"""

from __future__ import annotations

import signal
import struct
import warnings
from typing import TYPE_CHECKING

import numpy as np
import torch

from kelab.train._ctrl_c import uninterrupted
from kelab.train._fork import HelperProcess, can_fork, reply, requests
from kelab.train.config import TrainConfig
from kelab.train.target import TargetCheck, TargetVerdict, require_success_rule

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from kelab.rl.task import Task
    from kelab.train.nets import PolicyNet

__all__ = ["EvalProcess", "can_fork"]

# passed, episodes judged, failed, episodes of the deciding stage, full evaluation ran
_VERDICT = struct.Struct("<?iii?")


def _float_tensors(actor: torch.nn.Module) -> list[torch.Tensor]:
    """The actor's floating-point weights and buffers, in ``state_dict`` order."""
    return [t for t in actor.state_dict().values() if t.is_floating_point()]


def _pack(actor: torch.nn.Module) -> bytes:
    with torch.no_grad():
        flat = torch.cat([t.detach().reshape(-1).to(torch.float32) for t in _float_tensors(actor)])
    return flat.numpy().tobytes()


def _serve(
    conn: Connection,
    task_type: type[Task],
    config: TrainConfig,
    obs_dim: int,
    act_dim: int,
    check_args: tuple[float, int, int, int],
) -> None:
    """The evaluation process: weights in, verdicts out, until the pipe closes."""
    from kelab.train.ppo import build_actor, deterministic_actions

    # Ctrl-C and SIGTERM (to the process group, say) are the trainer's to handle: it
    # stops at a safe point and ends this process, which also ends when its pipe does
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    warnings.simplefilter("ignore")  # nothing to stderr: its lock may be held by a parent thread
    torch.set_num_threads(1)
    target, episodes, pre_episodes, seed = check_args
    check = TargetCheck(task_type, target, episodes, pre_episodes, seed, config.layout)
    actor = build_actor(config, obs_dim, act_dim)
    tensors = _float_tensors(actor)
    sizes = [t.numel() for t in tensors]
    total = sum(sizes)

    def policy(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(obs, dtype=np.float32))
            return deterministic_actions(actor, x).numpy().clip(-1.0, 1.0)

    try:
        for data in requests(conn):
            flat = np.frombuffer(data, dtype=np.float32)
            if flat.size != total:  # a protocol error: nothing to judge
                break
            with torch.no_grad():
                for t, chunk in zip(tensors, np.split(flat, np.cumsum(sizes)[:-1]), strict=True):
                    t.copy_(torch.from_numpy(chunk.copy()).reshape(t.shape))
            v = check(policy)
            if not reply(conn, _VERDICT.pack(v.passed, v.judged, v.failed, v.episodes, v.full)):
                break
    finally:
        check.close()
        conn.close()


class EvalProcess(HelperProcess):
    """Judge actor weights against a task's success target in a forked process.

    One check at a time: :meth:`submit` sends the weights (copied at once, so training may
    go on changing them), :meth:`result` waits for that check's verdict.

    Args:
        task_type: The task class (the process builds its evaluation envs from it).
        config: The training config the actor was built with (the evaluation envs use
            its ``layout``: a policy is judged in the simulation it trains in).
        obs_dim: Observation size.
        act_dim: Action size.
        target: Success rate to meet.
        episodes: Episodes of the full evaluation.
        pre_episodes: Episodes of the pre-check (see :class:`TargetCheck`).
        seed: Seed of every evaluation.

    Raises:
        RuntimeError: When this process cannot fork safely (see :func:`can_fork`).
    """

    what = "evaluation process"
    fix = "set TrainConfig.eval_process=False to evaluate in the training process"

    def __init__(
        self,
        task_type: type[Task],
        config: TrainConfig,
        obs_dim: int,
        act_dim: int,
        target: float,
        episodes: int = 100,
        pre_episodes: int = 10,
        seed: int = 1000,
    ) -> None:
        require_success_rule(task_type, "EvalProcess")
        if not can_fork():
            raise RuntimeError(
                "EvalProcess cannot fork here (no 'fork' start method, or this process is "
                "a Ray driver); evaluate in this process instead"
            )
        args = (target, episodes, pre_episodes, seed)
        super().__init__(_serve, (task_type, config, obs_dim, act_dim, args), "kelab-eval")

    def submit(self, actor: PolicyNet) -> None:
        """Start judging ``actor``'s current weights.

        Raises:
            RuntimeError: When the previous verdict was not read, or the process is gone.
        """
        if self._pending:
            raise RuntimeError("EvalProcess.submit: read the previous verdict with result() first")
        with uninterrupted():  # sent and marked pending, or neither
            try:
                self._conn.send_bytes(_pack(actor))
            except OSError as err:
                raise RuntimeError(self._gone(err)) from None
            self._pending = True

    def result(self) -> TargetVerdict:
        """The verdict of the submitted weights (waits for it).

        Raises:
            RuntimeError: When nothing was submitted, or the process ended unexpectedly.
        """
        if not self._pending:
            raise RuntimeError("EvalProcess.result: nothing was submitted")
        self.wait()  # Ctrl-C may cut the wait short; it reads nothing
        with uninterrupted():  # the verdict read whole, or not at all
            self._pending = False
            try:
                data = self._conn.recv_bytes()
            except (EOFError, OSError) as err:
                raise RuntimeError(self._gone(err)) from None
        passed, judged, failed, episodes, full = _VERDICT.unpack(data)
        return TargetVerdict(bool(passed), judged, failed, episodes, bool(full))
