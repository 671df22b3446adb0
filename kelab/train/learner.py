"""Where the PPO update runs beside the next rollout (``TrainConfig.overlap_rollout``).

With ``overlap_rollout`` the trainer starts the update on the rollout just collected,
collects the next rollout with the policy from before that update meanwhile, then waits
for the update. The update runs in:

- :class:`LearnerProcess`, a process forked at the start of each ``train()`` call (a
  copy of the trainer's networks, optimizer and generators as they are then), on another
  core. The two rollout storages live in shared memory; after each update the learner
  sends its networks, normalisers, optimizer and generator back (safetensors bytes and a
  JSON header: no pickle), and the trainer's own copy becomes an exact mirror of the
  learner's. Used where the trainer may fork (``kelab.train._fork.can_fork``) and torch
  runs one thread per process (``TrainConfig.torch_threads == 1``: a forked child cannot
  use the OpenMP thread pool of its parent).
- :class:`UpdateThread` otherwise: the update in a thread of this process. torch releases
  the GIL in its kernels, but on small networks the update's Python holds it most of the
  time (CartPole-v0: no gain; Humanoid-v0: 0.36x -> 0.49x of the bare env's rate,
  against ~0.58x in a process).

Both give bit-identical results (the same update on the same data, tested): the choice is
speed only.

Example:
    >>> from kelab.train.config import TrainConfig
    >>> from kelab.train.ppo import build_algorithm
    >>> alg = build_algorithm(TrainConfig(num_envs=4, num_steps_per_env=2), 3, 1, 4)
    >>> learner = LearnerProcess(alg, [alg.storage])
    >>> learner.pending
    False
    >>> learner.close()
"""

from __future__ import annotations

import json
import signal
import struct
import threading
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from kelab.train._ctrl_c import uninterrupted
from kelab.train._fork import HelperProcess, can_fork, reply, requests
from kelab.train._malloc import heap_reuse
from kelab.train.checkpoint import CheckpointError
from kelab.train.weights import load_optimizer_state, training_state

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from kelab.train.ppo import FinalObsPPO
    from kelab.train.storage import RolloutStorage

__all__ = ["LearnerProcess", "OverlappedUpdates", "PendingUpdate", "UpdateThread"]

_HEADER = struct.Struct("<I")  # length of the JSON header that precedes the tensors
_OK, _FAILED = b"K", b"E"
_GENERATOR = "update_generator"  # the state of FinalObsPPO.update_generator, as a tensor


class PendingUpdate(Protocol):
    """An update started beside a rollout; :meth:`result` waits for it."""

    def result(self, reraise: bool = True) -> dict[str, float]:
        """Wait for the update and return its losses (its error re-raised with ``reraise``)."""
        ...


class UpdateThread:
    """``alg.update()`` in a thread of this process, started at construction.

    Example:
        >>> from kelab.train.config import TrainConfig
        >>> from kelab.train.ppo import build_algorithm
        >>> alg = build_algorithm(TrainConfig(num_envs=4, num_steps_per_env=2), 3, 1, 4)
        >>> alg.storage.share_memory_()  # as the learner process sees it
        >>> sorted(UpdateThread(alg).result())
        ['entropy', 'surrogate', 'value']
    """

    def __init__(self, alg: FinalObsPPO) -> None:
        self._losses: dict[str, float] | None = None
        self._error: BaseException | None = None
        # waited on instead of join(): a join interrupted by Ctrl-C can leave the thread
        # looking ended while it still runs (CPython before 3.12)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(alg,), name="kelab-ppo-update")
        self._thread.start()

    def _run(self, alg: FinalObsPPO) -> None:
        try:
            self._losses = alg.update()
        except BaseException as error:  # handed to the caller by result()
            self._error = error
        finally:
            self._done.set()

    def result(self, reraise: bool = True) -> dict[str, float]:
        """Wait for the update; its losses, or its exception re-raised here."""
        self._done.wait()
        if self._error is not None and reraise:
            raise self._error
        return self._losses or {}


def _model_tensors(alg: FinalObsPPO) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The networks' and the optimizer's tensors by name, and the optimizer's JSON."""
    tensors, opt_meta = training_state(alg.actor, alg.critic, alg.optimizer)
    if alg.update_generator is not None:
        tensors[_GENERATOR] = alg.update_generator.get_state()
    return tensors, opt_meta


def _serve(conn: Connection, alg: FinalObsPPO, storages: Sequence[RolloutStorage]) -> None:
    """The learner process: a storage index in, the update's results out, until EOF."""
    # Ctrl-C and SIGTERM (to the process group, say) are the trainer's to handle: it
    # stops at a safe point and ends this process, which also ends when its pipe does
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    warnings.simplefilter("ignore")  # nothing to stderr: its lock may be held by a parent thread
    torch.set_num_threads(1)  # the parent's OpenMP pool does not exist here
    with heap_reuse():  # this process only updates: keep the update's pages (_malloc)
        for data in requests(conn):  # b"" asks it to stop
            if len(data) != 1 or data[0] >= len(storages):
                break  # a protocol error
            try:
                alg.storage = storages[data[0]]
                alg.train_mode()  # the normalisers learn only in training mode
                losses = alg.update()
                tensors, opt_meta = _model_tensors(alg)
                header = {
                    "losses": losses,
                    "learning_rate": float(alg.learning_rate),
                    "optimizer": opt_meta,
                }
                head = json.dumps(header).encode()
                message = _OK + _HEADER.pack(len(head)) + head + save_tensors(tensors)
            except Exception:  # reported to the trainer, which raises it
                message = _FAILED + traceback.format_exc().encode()
            if not reply(conn, message):
                break
    conn.close()


class LearnerProcess(HelperProcess):
    """Run ``alg``'s PPO updates in a forked process, mirroring the results into ``alg``.

    The process is a copy of ``alg`` at construction (networks, normalisers, optimizer,
    learning rate, generators); each :meth:`start` updates it on one of ``storages``
    (moved to shared memory here), and :meth:`result` copies the updated state back into
    ``alg``, exactly. Between the two, ``alg`` and the storage being learnt from must not
    change; changes to ``alg`` made while the process lives are not seen by it (the
    trainer forks one per ``train()`` call).

    Args:
        alg: The PPO algorithm (``FinalObsPPO``) whose updates run in the process.
        storages: The rollout storages ``alg.storage`` may be when an update starts.

    Raises:
        RuntimeError: When this process cannot fork safely (``kelab.train._fork.can_fork``).
        OSError: When the fork itself fails (no memory, too many processes).
    """

    what = "learner process"
    fix = "set TrainConfig.overlap_rollout=False to update in the training process"

    def __init__(self, alg: FinalObsPPO, storages: Sequence[RolloutStorage]) -> None:
        if not can_fork():
            raise RuntimeError(
                "LearnerProcess cannot fork here (no 'fork' start method, or this process "
                "is a Ray driver); run the update in a thread (UpdateThread) instead"
            )
        if not 1 <= len(storages) <= 255:
            raise ValueError(
                f"storages must hold 1 to 255 rollout storages, got {len(storages)}; pass "
                "the storages alg.storage takes turns with"
            )
        self._alg = alg
        self._storages = list(storages)
        for storage in self._storages:
            storage.share_memory_()  # a no-op for tensors already shared
        super().__init__(_serve, (alg, self._storages), "kelab-learner")

    def start(self) -> LearnerProcess:
        """Start updating on ``alg.storage`` (one of the storages given at construction).

        Returns:
            This object, whose :meth:`result` waits for the update.

        Raises:
            RuntimeError: When an update is pending, ``alg.storage`` is not one of the
                storages, or the process is gone.
        """
        if self._pending:
            raise RuntimeError("LearnerProcess.start: read the last update with result() first")
        index = next((i for i, s in enumerate(self._storages) if s is self._alg.storage), None)
        if index is None:
            raise RuntimeError(
                "LearnerProcess.start: alg.storage is not one of the storages the learner "
                "shares; give every storage to LearnerProcess(alg, storages)"
            )
        with uninterrupted():  # sent and marked pending, or neither
            try:
                self._conn.send_bytes(bytes((index,)))
            except OSError as err:
                raise RuntimeError(self._gone(err)) from None
            self._pending = True
        return self

    def result(self, reraise: bool = True) -> dict[str, float]:
        """Wait for the update, copy its state into ``alg`` and return its losses.

        Without a pending update, ``{}``. With ``reraise=False`` a failed update, or a
        process that is gone, returns ``{}`` instead of raising.

        Raises:
            RuntimeError: When the update failed (the learner's traceback in the message),
                or the process ended unexpectedly.
        """
        if not self._pending:
            return {}
        self.wait()  # Ctrl-C may cut the wait short; it reads nothing
        with uninterrupted():  # the message read and applied whole, or not at all
            try:
                data = self._conn.recv_bytes()
            except (EOFError, OSError) as err:
                self._pending = False
                if not reraise:
                    return {}
                raise RuntimeError(self._gone(err)) from None
            self._pending = False
            if data[:1] != _OK:
                if not reraise:
                    return {}
                raise RuntimeError(
                    "the PPO update failed in the learner process; its traceback:\n"
                    + data[1:].decode(errors="replace")
                )
            (size,) = _HEADER.unpack_from(data, 1)
            start = 1 + _HEADER.size
            header = json.loads(data[start : start + size])
            # copies: safetensors' tensors view the immutable message bytes
            tensors = {k: v.clone() for k, v in load_tensors(data[start + size :]).items()}
            self._apply(header, tensors)
        return {k: float(v) for k, v in header["losses"].items()}

    def _apply(self, header: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
        alg = self._alg
        try:
            for prefix, model in (("actor.", alg.actor), ("critic.", alg.critic)):
                own = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
                model.load_state_dict(own, strict=True)
            opt = "optimizer."
            opt_tensors = {k[len(opt) :]: v for k, v in tensors.items() if k.startswith(opt)}
            load_optimizer_state(alg.optimizer, header["optimizer"], opt_tensors, Path("-"))
        except (CheckpointError, RuntimeError, KeyError) as err:
            raise RuntimeError(
                f"the learner process sent a state that does not fit this trainer ({err}); "
                "this is a bug in kelab.train.learner, please report it"
            ) from None
        if alg.update_generator is not None:
            alg.update_generator.set_state(tensors[_GENERATOR])
        alg.learning_rate = float(header["learning_rate"])
        alg.storage.clear()  # as the update cleared the learner's copy


class OverlappedUpdates:
    """Where a trainer's overlapped updates run: its learner process, else a thread.

    The process is forked at :meth:`open` (once per ``train()`` call: it starts from
    ``alg`` as it is then), where this process may fork and torch runs one thread;
    elsewhere (or when the fork fails, with a warning) each update runs in an
    :class:`UpdateThread`. One update at a time: :meth:`start`, then :meth:`finish`.

    Args:
        alg: The PPO algorithm whose updates run beside the rollouts.
        storages: The two rollout storages ``alg.storage`` takes turns with.
        torch_threads: ``TrainConfig.torch_threads`` (a forked child cannot use its
            parent's OpenMP pool: more than one means threads here).
    """

    def __init__(
        self, alg: FinalObsPPO, storages: Sequence[RolloutStorage], torch_threads: int
    ) -> None:
        self._alg = alg
        self._storages = list(storages)
        self._torch_threads = int(torch_threads)
        self._update: PendingUpdate | None = None
        self.learner: LearnerProcess | None = None
        """This call's learner process (None: updates run in threads, or no call runs)."""

    @property
    def pending(self) -> bool:
        """An update was started and not finished (or dropped) yet."""
        return self._update is not None

    @property
    def in_process(self) -> bool:
        """Updates run in the learner process (not in threads of this one)."""
        return self.learner is not None

    def open(self) -> None:
        """Fork this call's learner process, where it may (see the class docstring)."""
        if self._torch_threads != 1 or not can_fork():
            return
        try:
            self.learner = LearnerProcess(self._alg, self._storages)
        except OSError as err:
            warnings.warn(
                f"overlap_rollout: could not fork the learner process ({err}); updating in "
                "a thread of this process instead",
                RuntimeWarning,
                stacklevel=4,
            )

    def start(self) -> None:
        """Start ``alg.update()`` on ``alg.storage``."""
        self._update = self.learner.start() if self.learner is not None else UpdateThread(self._alg)

    def finish(self, reraise: bool = True) -> dict[str, float]:
        """Wait for the update and return its losses.

        ``{}`` when none ran, or it failed and not ``reraise`` (with a warning). A
        ``KeyboardInterrupt`` during the wait leaves it pending.
        """
        update = self._update
        if update is None:
            return {}
        try:
            losses = update.result()
        except KeyboardInterrupt:
            raise  # still pending: settle() ends it
        except Exception as err:
            self._update = None
            if reraise:
                raise
            warnings.warn(
                f"the PPO update running when training stopped failed ({err}); the state "
                "before it is kept",
                RuntimeWarning,
                stacklevel=3,
            )
            return {}
        self._update = None
        return losses

    def settle(self) -> None:
        """End the learner process, and any update still pending.

        In the process a pending update is dropped (``alg`` keeps the state before it);
        in a thread it is waited for (it changes ``alg`` in place).
        """
        if self.learner is not None:
            self.learner.close()
            self.learner = None
        elif self._update is not None:
            self._update.result(reraise=False)
        self._update = None
