"""Judging the deterministic policy while training (``TrainConfig.eval_every``).

:class:`Judge` runs the evaluations of :class:`~kelab.train.target.TargetCheck` in the
trainer's process, or (``eval_process``) submits the policy to a forked
:class:`~kelab.train.eval_process.EvalProcess` and reads the verdict ``eval_every``
iterations later, so runs stay deterministic.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from kelab.train._ctrl_c import uninterrupted
from kelab.train.records import IterationRow, Judged, TrainState

if TYPE_CHECKING:
    from kelab.train.algorithm import Algorithm
    from kelab.train.config import TrainConfig
    from kelab.train.eval_process import EvalProcess
    from kelab.train.target import TargetCheck, TargetVerdict

__all__ = ["Judge"]


class Judge:
    """The evaluations of one trainer's deterministic policy.

    Args:
        task_type: The task class the evaluations build their env from.
        config: The training config (``eval_every``, ``eval_process``, the target).
        obs_dim: Observation size.
        act_dim: Action size.

    Attributes:
        eval_process: The forked evaluator (None: evaluations run here, or none at all).
        target_check: The in-process evaluator, built at its first use.
        evaluations: Verdicts read so far.
        time_s: Wall seconds spent evaluating (with ``eval_process``: submitting and
            waiting for verdicts).
    """

    def __init__(self, task_type: type, config: TrainConfig, obs_dim: int, act_dim: int) -> None:
        self.task_type = task_type
        self.config = config
        self.eval_process: EvalProcess | None = None
        self.target_check: TargetCheck | None = None
        self.evaluations = 0
        self.time_s = 0.0
        self._judging: tuple[IterationRow, TrainState] | None = None
        if config.eval_every and config.eval_process:
            from kelab.train.eval_process import EvalProcess, can_fork

            if not can_fork():
                warnings.warn(
                    "TrainConfig.eval_process: this process cannot fork an evaluation "
                    "process (no 'fork' start method, or it is a Ray driver); evaluating "
                    "in the training process instead",
                    RuntimeWarning,
                    stacklevel=4,
                )
            else:
                # no pre-check there: it only saves time, which that process has to spare
                self.eval_process = EvalProcess(
                    task_type, config, obs_dim, act_dim,
                    config.success_target, config.eval_episodes, pre_episodes=0,
                )  # fmt: skip

    @property
    def judging(self) -> bool:
        """A submitted policy's verdict is still to be read."""
        return self._judging is not None

    def evaluate(
        self,
        row: IterationRow,
        alg: Algorithm,
        policy: Callable[[np.ndarray], np.ndarray],
        snapshot: Callable[[IterationRow], TrainState],
    ) -> Judged | None:
        """Judge the deterministic policy if ``row``'s iteration is one to (``eval_every``).

        Args:
            row: The iteration just trained.
            alg: The algorithm (its actor is what ``eval_process`` judges).
            policy: The deterministic policy, numpy in and out (judged here).
            snapshot: A copy of the trainer's state now, kept with the submitted policy.

        Returns:
            The verdict, the row of the iteration it judged, and that iteration's state
            (None: the current one); None when no verdict came this iteration. With
            ``eval_process`` the verdict is on the policy submitted ``eval_every``
            iterations ago, and this iteration's policy is submitted.
        """
        every = self.config.eval_every
        if not every or row.iteration % every:
            return None
        if self.eval_process is None:
            return Judged(self._check_here(policy), row, None)
        start = time.perf_counter()
        judged = self.read_verdict()
        cfg = self.config
        stopping = (  # the run ends here: nothing more to judge
            judged is not None
            and judged.verdict is not None
            and judged.verdict.passed
            and cfg.stop_at_target
            and row.iteration >= cfg.min_iterations
        )
        if not stopping:
            with uninterrupted():  # submitted and remembered, or neither
                self.eval_process.submit(alg.actor)
                self._judging = (row, snapshot(row))
        self.time_s += time.perf_counter() - start
        return judged

    def read_verdict(self) -> Judged | None:
        """The verdict of the policy the evaluation process is judging (waits for it)."""
        if self.eval_process is None or self._judging is None:
            return None
        self.eval_process.wait()  # Ctrl-C may cut this short; the rest happens whole
        with uninterrupted():
            verdict = self.eval_process.result()
            (row, state), self._judging = self._judging, None
            self.evaluations += 1
        return Judged(verdict, row, state)

    def _check_here(self, policy: Callable[[np.ndarray], np.ndarray]) -> TargetVerdict:
        """Judge the current deterministic policy in this process."""
        if self.target_check is None:
            from kelab.train.target import TargetCheck

            cfg = self.config
            self.target_check = TargetCheck(
                self.task_type, cfg.success_target, cfg.eval_episodes, layout=cfg.layout
            )
        start = time.perf_counter()
        verdict = self.target_check(policy)
        self.evaluations += 1
        self.time_s += time.perf_counter() - start
        return verdict

    def close(self) -> None:
        """End the evaluators (the forked process, the in-process env)."""
        try:
            if self.target_check is not None:
                self.target_check.close()
                self.target_check = None
        finally:
            if self.eval_process is not None:
                self.eval_process.close()
                self.eval_process = None
