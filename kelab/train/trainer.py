"""``ke.RLTrainer``: PPO (rsl-rl-lib's) on a LearningEnv, with pickle-free checkpoints.

KELab runs its own loop and its own PPO, rollout storage and networks with rsl-rl-lib's
arithmetic (not its runner, which never resets the env, does not advance its counter
across ``learn(1)`` calls, starts TensorBoard and a git dump from ``log_dir`` and saves
with pickle). See docs/training.md.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import sys
import time
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kelab._validate import check_bool, check_int, check_seed
from kelab.errors import UserError
from kelab.train._malloc import heap_reuse
from kelab.train.extra import require_training_extra

require_training_extra()

import torch  # noqa: E402

from kelab.train._ctrl_c import StopRequest  # noqa: E402
from kelab.train.adapter import RslVecEnv  # noqa: E402
from kelab.train.algorithm import Algorithm, build_algorithm  # noqa: E402
from kelab.train.checkpoint import (  # noqa: E402
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
)
from kelab.train.config import (  # noqa: E402
    ALGORITHMS,
    NETWORK_FIELDS,
    TrainConfig,
    training_config_of,
)
from kelab.train.diagnose import Finding, TrainingWarning, TrainingWatch  # noqa: E402
from kelab.train.episodes import RecentEpisodes, finite_or_none  # noqa: E402
from kelab.train.judge import Judge  # noqa: E402
from kelab.train.progress import ProgressBar, end_live_line  # noqa: E402
from kelab.train.records import IterationRow, Judged, TrainState  # noqa: E402
from kelab.train.rollouts import Rollouts  # noqa: E402
from kelab.train.rundir import (  # noqa: E402
    builtin_task_id,
    claim_run_dir,
    library_versions,
    task_class_path,
)
from kelab.train.runlog import RunLog  # noqa: E402

if TYPE_CHECKING:
    from kelab.rl.env import LearningEnv
    from kelab.rl.ray_env import RayLearningEnv
    from kelab.train.curve_process import CurveProcess

__all__ = ["RLTrainer", "library_versions", "task_class_path", "training_config_of"]


_BEST_RULES = {
    False: "highest success rate over the recent training episodes, then highest mean "
    "return (see docs/training.md)",
    True: "highest success rate of the deterministic policy's evaluations (eval_every; for "
    "one that stopped early, the least it can be: the successes seen over its episodes), "
    "then highest mean return of the recent training episodes (see docs/training.md)",
}


def _check_same_networks(config: TrainConfig, checkpoint: Checkpoint) -> None:
    """Refuse resuming ``checkpoint`` with a config whose networks differ from its run's.

    Their tensors (and the optimizer's parameters) would not fit, and the load would say
    the checkpoint is damaged when it is the config that differs.
    """
    trained = checkpoint.meta.get("train_config")
    if not isinstance(trained, dict):
        return  # an older checkpoint: the load's own checks speak
    ran = TrainConfig.from_dict(trained)
    for name in NETWORK_FIELDS:
        given, was = getattr(config, name), getattr(ran, name)
        if given != was:
            flag = ("--no-" if given is False else "--") + name.replace("_", "-")
            raise CheckpointError(
                f"cannot resume from {checkpoint.path} with {name}={given!r}: its run was "
                f"trained with {name}={was!r}, a different network; resume with the run's own "
                f"config (RLTrainer(config=None); on the command line leave {flag} out) or "
                "train a new run"
            )


class RLTrainer:
    """Train a policy for a LearningEnv's task with PPO (rsl-rl-lib's algorithm).

    ``train(max_iterations)`` collects ``num_steps_per_env`` steps from every copy per
    iteration, updates the policy, and saves ``best`` and ``latest`` checkpoints in the run
    directory as it goes (safetensors + JSON, atomic; see docs/training.md for how "best"
    is chosen). Use it as a context manager or call :meth:`close`. While ``train()``
    runs, glibc's mmap/trim thresholds are raised process-wide so the update's tensors
    reuse heap pages; they are put back when it returns (``kelab.train._malloc``).

    Args:
        env: The LearningEnv (it is reset with ``seed``; the trainer does not close it).
        algorithm: ``"PPO"`` (the only one).
        seed: Seed of the env's first reset and of torch (same seed, same run).
        device: ``"cpu"`` (KELab simulates on the CPU; torch runs there too).
        run_dir: Where checkpoints and logs go; None means a new
            ``runs/<TaskClass>/<UTC time>/`` in the working directory. A directory that
            already holds a run is refused unless that run is the one resumed (from a
            checkpoint at least as recent as its ``latest``); the directory is claimed
            when the trainer is built.
        config: The training config; None uses the task's ``training_config`` (or the
            resumed checkpoint's). Its ``num_envs`` is replaced by the env's copies (a
            warning says so when they differ).
        resume: A checkpoint spec (``RUN_DIR:best``, ``RUN_DIR:latest`` or a .json path)
            to continue from: weights, normaliser, optimizer, iteration and env steps.
            The resumed run's ``best`` stays ``best`` (copied into a new ``run_dir``)
            until a better one is found.
        task_id: The Gymnasium id to record (``"kelab/CartPole-v0"``); None records a
            built-in task's own id (``RLPlayer("RUN:best")`` then builds it), else none.
        log: Write ``metrics.csv``, TensorBoard events and ``training_curve.png`` (the
            progress line on stderr is :meth:`train`'s ``progress``).
        curve_process: Draw ``training_curve.png`` in this
            :class:`~kelab.train.curve_process.CurveProcess` (its owner closes it) while
            training goes on; :meth:`close` waits for the last drawing. None: drawn here.

    Attributes:
        config: The training config in use (``num_envs`` = the env's copies).
        run_dir: The run directory.
        checkpoints: ``{"best": path, "latest": path}`` (None until written).
        iteration: Iterations trained, over every ``train()`` call and resumed run.
        env_steps: Env steps collected, likewise.
        best_iteration: The iteration whose state is ``best`` (None: none chosen yet in
            this session).
        evaluations: Evaluations of the deterministic policy run so far (``eval_every``).
        evaluation_time_s: Wall seconds spent on them (with ``eval_process``: sending
            weights and waiting for verdicts).

    Raises:
        UserError: For an unknown algorithm (listing the known ones), a device other than
            "cpu", an env that is not a LearningEnv, a ``run_dir`` holding another run, a
            policy-only resume checkpoint, or a resume checkpoint whose
            ``observation_dim`` / ``action_dim`` differ from the env's (naming both).
    """

    def __init__(
        self,
        env: LearningEnv,
        algorithm: str = "PPO",
        seed: int = 42,
        device: str = "cpu",
        run_dir: str | os.PathLike[str] | None = None,
        config: TrainConfig | None = None,
        resume: str | os.PathLike[str] | None = None,
        *,
        task_id: str | None = None,
        log: bool = True,
        curve_process: CurveProcess | None = None,
    ) -> None:
        from kelab.rl.env import LearningEnv
        from kelab.rl.ray_env import RayLearningEnv  # imports ray only when one is made

        if algorithm not in ALGORITHMS:
            raise UserError(
                f"unknown algorithm {algorithm!r}; known algorithms: {sorted(ALGORITHMS)}"
            )
        if device != "cpu":
            raise UserError(
                f"device must be 'cpu' (KELab simulates on the CPU and trains there), got "
                f"{device!r}"
            )
        if not isinstance(env, (LearningEnv, RayLearningEnv)):
            raise UserError(
                "RLTrainer needs a ke.LearningEnv or ke.RayLearningEnv (many copies in "
                f"lockstep), got {env!r}"
            )
        seed = check_seed(seed)
        if seed > 2**64 - 1:  # before the run dir is claimed: torch takes 64-bit seeds
            raise UserError(
                f"seed must be an int <= {2**64 - 1} (torch's seeds are 64-bit), got {seed}"
            )
        if config is not None and not isinstance(config, TrainConfig):
            raise UserError(f"config must be a kelab.train.TrainConfig or None, got {config!r}")
        self.env = env
        self.task = env.task
        self.algorithm = algorithm
        self.seed = int(seed)
        self.device = device
        # a built-in task made through the API records its id too (RLPlayer builds it)
        self.task_id = task_id if task_id is not None else builtin_task_id(self.task)
        self.log = bool(log)
        self._curve_process = curve_process
        shape = tuple(int(d) for d in env.single_observation_space.shape)
        self.obs_dim = math.prod(shape)  # an image task's images are taken flat
        self.act_dim = int(env.single_action_space.shape[0])

        checkpoint: Checkpoint | None = None
        if resume is not None:
            checkpoint = load_checkpoint(resume)
            self._check_dims(checkpoint, "resume")
            if checkpoint.meta.get("optimizer") is None:
                raise UserError(
                    f"cannot resume from {checkpoint.path}: it holds no optimizer state (a "
                    "policy-only checkpoint, e.g. a shipped one); train from scratch or "
                    "resume from a run's RUN_DIR:latest"
                )
            if config is None:
                config = TrainConfig.from_dict(checkpoint.meta["train_config"])
        given = config is not None  # by the caller, or the resumed run's
        if config is None:
            config = training_config_of(type(self.task))
        elif config.num_envs != env.num_envs:
            warnings.warn(
                f"TrainConfig.num_envs={config.num_envs} differs from the env's "
                f"{env.num_envs} copies; training {env.num_envs} (the env decides: build it "
                "with the config's num_envs to train that many)",
                UserWarning,
                stacklevel=2,
            )
        self.config = config.replace(
            num_envs=int(env.num_envs), observation_shape=shape if len(shape) == 3 else ()
        )
        layout = env.layout if isinstance(env, RayLearningEnv) else env.config.layout
        if given and config.layout != layout:  # as num_envs: the env decides, and says so
            warnings.warn(
                f"TrainConfig.layout={self.config.layout!r} differs from the env's layout "
                f"{layout!r}; training and evaluating {layout!r} (the env decides: build it "
                "with layout=config.layout to train in the config's layout)",
                UserWarning,
                stacklevel=2,
            )
            self.config = self.config.replace(layout=layout)
        self.run_dir, self._claim = claim_run_dir(
            run_dir,
            type(self.task).__name__,
            checkpoint,
            cli_task=(task_id or task_class_path(self.task)).removeprefix("kelab/"),
        )
        # dropped without close(): the claim is released all the same
        weakref.finalize(self, self._claim.release)
        try:
            self._build(env, checkpoint)
        except BaseException:  # a constructor that fails holds nothing, and leaves nothing
            self._claim.withdraw()
            raise

    def _build(self, env: LearningEnv | RayLearningEnv, checkpoint: Checkpoint | None) -> None:
        """The rest of ``__init__``, once the run directory is claimed."""
        if checkpoint is not None:
            _check_same_networks(self.config, checkpoint)
        torch.manual_seed(self.seed)
        torch.set_num_threads(self.config.torch_threads)
        self.vec = RslVecEnv(env, seed=self.seed)
        self.alg: Algorithm = build_algorithm(
            self.algorithm, self.config, self.obs_dim, self.act_dim, self.vec.num_envs, self.device
        )
        self.iteration = 0
        self.env_steps = 0
        self.wall_time_s = 0.0
        self.best_score: tuple[float, float] | None = None
        self.best_reward = -math.inf
        self.best_iteration: int | None = None
        """The iteration whose state is ``best`` in this session (None: none chosen yet)."""
        self.resumed_from: str | None = None
        self.checkpoints: dict[str, str | None] = {"best": None, "latest": None}
        # recent episodes, across train() calls (and resumes: the checkpoint records them)
        self._episodes = RecentEpisodes(self.config.success_window)
        if checkpoint is not None:
            self._restore(checkpoint)
        self._runlog = RunLog(self.run_dir, self.log, self._curve_process)
        self._closed = False
        # the best state since the last write: written with `latest` (not at every gain)
        self._pending_best: TrainState | None = None
        self._judge = Judge(type(self.task), self.config, self.obs_dim, self.act_dim)
        self._watch = TrainingWatch(self.config)  # says when the run shows a known failure
        self._stop: StopRequest | None = None  # Ctrl-C during train(): stop at a safe point
        self._rollouts = Rollouts(
            self.vec, self.alg, self.algorithm, self.config, self._episodes, self._count_steps,
            obs_dim=self.obs_dim, act_dim=self.act_dim, seed=self.seed, device=self.device,
        )  # fmt: skip

    @property
    def evaluations(self) -> int:
        """Evaluations of the deterministic policy run so far (``eval_every``)."""
        return self._judge.evaluations

    @property
    def findings(self) -> list[Finding]:
        """Known failures this trainer's runs showed, each warned when it was seen.

        The action noise collapsing, the value loss exploding, the deterministic policy
        doing worse than the noisy one (`kelab.train.diagnose`).
        """
        return list(self._watch.findings)

    @property
    def evaluation_time_s(self) -> float:
        """Wall seconds spent on those evaluations (part of ``wall_time_s``).

        With ``eval_process``: sending weights and waiting for verdicts.
        """
        return self._judge.time_s

    def _count_steps(self, steps: int) -> None:
        """Count the env steps of a rollout just collected."""
        self.env_steps += steps

    # ------------------------------------------------------------------ checkpoints
    def _check_dims(self, checkpoint: Checkpoint, what: str) -> None:
        if checkpoint.observation_dim != self.obs_dim or checkpoint.action_dim != self.act_dim:
            raise UserError(
                f"cannot {what} from {checkpoint.path}: the checkpoint has observation_dim="
                f"{checkpoint.observation_dim}, action_dim={checkpoint.action_dim}, but the "
                f"env's task {type(self.task).__name__} has observation_dim={self.obs_dim}, "
                f"action_dim={self.act_dim}; use a checkpoint trained on this task"
            )

    def _restore(self, checkpoint: Checkpoint) -> None:
        self.alg.load_training_state(checkpoint)
        meta = checkpoint.meta
        self.iteration = int(meta["iteration"])
        self.env_steps = int(meta["env_steps"])
        self.wall_time_s = float(meta.get("wall_time_s", 0.0))
        best = meta.get("best_score")
        if isinstance(best, list) and len(best) == 2:
            rate, mean_return = (-math.inf if v is None else float(v) for v in best)
            self.best_score = (rate, mean_return)
        self.best_reward = float(meta.get("best_reward", -math.inf) or -math.inf)
        if meta.get("recent_episodes") is not None:  # absent from older checkpoints
            try:
                self._episodes.restore(meta["recent_episodes"])
            except ValueError as err:
                warnings.warn(
                    f"resume: {checkpoint.path}: {err}; recent episodes start afresh",
                    UserWarning,
                    stacklevel=3,
                )
        self.resumed_from = str(checkpoint.path)
        self._keep_best(checkpoint.path.parent / "best.json")

    def _keep_best(self, best: Path) -> None:
        """A resumed run's ``best`` stays its best until this session finds a better one.

        Resumed in its own directory, ``best.json`` stays where it is; resumed into another,
        it is copied there. Without one, the resumed score is dropped (nothing holds it).
        """
        if not best.is_file():
            self.best_score = None
            return
        if best.parent.resolve() == self.run_dir.resolve():
            self.checkpoints["best"] = str(best)
            return
        try:
            kept = load_checkpoint(best)
        except CheckpointError as err:
            warnings.warn(
                f"resume: the run's best checkpoint cannot be copied ({err}); this run's "
                "best starts afresh",
                UserWarning,
                stacklevel=3,
            )
            self.best_score = None
            return
        meta = {k: v for k, v in kept.meta.items() if k not in ("format", "version", "weights")}
        self._write("best", kept.tensors, meta)

    def save(self, name: str, stats: IterationRow | None = None) -> Path:
        """Save a checkpoint ``name`` (``"best"``, ``"latest"``...) in the run directory.

        Args:
            name: The checkpoint name.
            stats: The iteration whose mean return and success rate it records.

        Returns:
            The checkpoint's JSON path.
        """
        return self._write(name, *self._state(name, stats))

    def _write(self, name: str, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> Path:
        path = save_checkpoint(self.run_dir, name, tensors, meta)
        self.checkpoints[name] = str(path)
        return path

    def _flush_best(self) -> None:
        """Write the best state held since the last write (see ``train``)."""
        if self._pending_best is not None:
            self._write("best", *self._pending_best)
            self._pending_best = None  # once written: a failed write is tried again

    def _snapshot(self, row: IterationRow) -> TrainState:
        """A copy of the state now, as checkpoint ``best`` would hold it."""
        return self._state("best", row, copy=True)

    def _state(self, name: str, stats: IterationRow | None, copy: bool = False) -> TrainState:
        """The tensors and JSON of checkpoint ``name`` now (copies with ``copy``)."""
        tensors, opt_meta = self.alg.training_state()
        if copy:
            tensors = {k: v.detach().clone() for k, v in tensors.items()}
            opt_meta = json.loads(json.dumps(opt_meta))
        meta = {
            "kind": name,
            "task": {"id": self.task_id, "class": task_class_path(self.task)},
            "observation_dim": self.obs_dim,
            "action_dim": self.act_dim,
            # a RayLearningEnv has no World in this process, only its fingerprint
            "scene_fingerprint": getattr(self.env, "fingerprint", None)
            or self.env.world.fingerprint,
            "timing": {
                "sim_dt": self.env.timing.sim_dt,
                "decimation": self.env.timing.decimation,
                "episode_length_s": self.env.timing.episode_length_s,
            },
            "algorithm": self.algorithm,
            "train_config": self.config.to_dict(),
            "seed": self.seed,
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "wall_time_s": round(self.wall_time_s, 3),
            "reward": None if stats is None else finite_or_none(stats.mean_return),
            "success_rate": None if stats is None else stats.success_rate,
            "best_score": None
            if self.best_score is None
            else [finite_or_none(v) for v in self.best_score],
            "best_reward": finite_or_none(self.best_reward),
            "best_rule": _BEST_RULES[bool(self.config.eval_every)],
            "optimizer": opt_meta,
            "learning_rate": float(self.alg.learning_rate),
            "resumed_from": self.resumed_from,
            "recent_episodes": self._episodes.to_json(),
            "versions": library_versions(),
            "saved_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        return TrainState(tensors, meta)

    # ------------------------------------------------------------------ best
    def _consider_best(self, judged: Judged) -> None:
        """Make the judged iteration ``best`` if it scores higher than the best so far.

        The score is the evaluated success rate (``eval_every``; otherwise the training
        success rate of the recent episodes), then the mean return. An evaluation that
        stopped early scores the least its rate can be (the successes it saw over its
        episodes): what it measured, never more; a passing one always scores higher.
        """
        verdict, row, state = judged
        rate = row.success_rate if verdict is None else verdict.successes / verdict.episodes
        mean_return = row.mean_return  # NaN before any episode ended: ranks lowest
        score = (
            -1.0 if rate is None else float(rate),
            mean_return if math.isfinite(mean_return) else -math.inf,
        )
        if self.best_score is not None and score <= self.best_score:
            return
        self.best_score = score
        self.best_iteration = int(row.iteration)
        if state is None:
            state = self._state("best", row, copy=True)
        else:
            state.meta["best_score"] = [finite_or_none(v) for v in score]
        self._pending_best = state

    # ------------------------------------------------------------------ training
    def train(
        self,
        max_iterations: int | None = None,
        callback: Callable[[dict[str, Any]], bool | None] | None = None,
        *,
        progress: bool = True,
    ) -> dict[str, Any]:
        """Run ``max_iterations`` PPO iterations (more after a resume) and return statistics.

        Ctrl-C stops after saving ``latest`` (the result then has ``interrupted=True``).

        Args:
            max_iterations: Iterations to run now; None uses ``config.max_iterations``.
            callback: Called after every iteration with that iteration's row
                (``iteration``, ``env_steps``, ``mean_return``, ``success_rate``,
                ``env_steps_per_s``, ``wall_time_s``...), e.g. for a progress bar;
                when it returns True, training ends after that iteration (e.g. once an
                evaluation of :meth:`policy` passes).
            progress: Show ``kelab train``'s progress line on stderr (iteration, return,
                success, steps/s, ETA): redrawn in place on a terminal, a line about
                every 10 s otherwise (a log, a notebook); False shows nothing.

        Returns:
            ``best_reward``, ``last_reward`` (mean return of the recent episodes),
            ``success_rate`` (recent episodes, by the task's success rule; None without
            one), ``iterations``, ``env_steps``, ``wall_time_s``, ``env_steps_per_s``,
            ``collect_steps_per_s`` (env steps per second of rollout collection alone),
            ``episodes``, ``stopped_at_target``, ``stopped_by_callback``,
            ``eval_success_rate`` (the last verdict read, ``eval_every``; else None),
            ``eval_episodes`` (the episodes it is over) and ``eval_stopped_early`` (that
            check stopped early: its rate is the most it can be),
            ``target_reached_at`` (the iteration the target was met, or None),
            ``interrupted``, ``run_dir`` and ``checkpoints`` (``{"best": path, "latest":
            path}``).
        """
        bar = None
        if check_bool(progress, "train: progress"):
            total = self.config.max_iterations if max_iterations is None else max_iterations
            bar = ProgressBar(total, self.iteration, sys.stderr, window=self.config.success_window)
            callback = bar.then(callback)
        # glibc keeps the update's tensors' pages (kelab.train._malloc); Ctrl-C stops at
        # the next safe point (kelab.train._ctrl_c)
        with heap_reuse(), StopRequest() as stop:
            self._stop = self._rollouts.stop = stop
            try:
                return self._train(max_iterations, callback)
            finally:
                self._stop = self._rollouts.stop = None
                if bar is not None:
                    bar.close()

    def _train(
        self,
        max_iterations: int | None,
        callback: Callable[[dict[str, Any]], bool | None] | None,
    ) -> dict[str, Any]:
        """The loop: rollout and update, row, evaluation, bookkeeping; then wind down."""
        if self._closed:
            raise RuntimeError("this RLTrainer is closed; create a new one")
        if max_iterations is None:
            max_iterations = self.config.max_iterations
        iterations = check_int(max_iterations, "max_iterations", low=1)
        call = self._open_call()
        rollouts = self._rollouts
        try:
            rollouts.prime()
            for i in range(iterations):
                losses = rollouts.iterate(more=i + 1 < iterations)
                self.iteration += 1
                row = call.unrecorded = self._row(losses, call)
                judged = self._judge.evaluate(row, self.alg, self.policy, self._snapshot)
                row = self._record(row, judged, call)
                if callback is not None and callback(row.as_dict()) is True:
                    call.called_off = True
                    break
                if self._stop is not None:
                    self._stop.check()  # Ctrl-C: after this iteration's bookkeeping
                if self._at_target(row, judged, call):
                    call.stopped = True
                    break
        except KeyboardInterrupt:
            call.interrupted = True
        finally:
            self._wind_down(call)
        self._read_last_verdict(call)
        return self._finish(call)

    def _open_call(self) -> _Call:
        """Start a ``train()`` call: the learner, the log, training mode, its counters."""
        updates = self._rollouts.updates
        if updates is not None:
            updates.settle()  # a call ended by a second Ctrl-C may have left one
            updates.open()
        self._runlog.open()
        self._rollouts.collect_time = 0.0
        self.alg.train_mode()
        return _Call(time.perf_counter(), self.wall_time_s, self.env_steps)

    def _row(self, losses: dict[str, float], call: _Call) -> IterationRow:
        """The metrics row of the iteration just ended (without its evaluation's fields)."""
        run_steps = self.env_steps - call.steps_before
        elapsed = time.perf_counter() - call.start_wall
        self.wall_time_s = call.base_wall + elapsed
        episodes = self._episodes
        return IterationRow(
            iteration=self.iteration,
            env_steps=self.env_steps,
            wall_time_s=self.wall_time_s,
            mean_return=episodes.mean_return,
            success_rate=episodes.success_rate,
            episodes=episodes.total,
            **self._rates(run_steps, elapsed),
            learning_rate=float(self.alg.learning_rate),
            action_std=float(self.alg.action_std().detach().mean()),
            value_loss=float(losses["value"]),
            surrogate_loss=float(losses["surrogate"]),
            entropy=float(losses["entropy"]),
        )

    def _record(self, row: IterationRow, judged: Judged | None, call: _Call) -> IterationRow:
        """Log the iteration with its verdict; best and latest checkpoints as due."""
        verdict = None if judged is None else judged.verdict
        row = row.with_verdict(verdict, None if judged is None else judged.row.iteration)
        for finding in self._watch.observe(row):  # said when seen, once per kind
            end_live_line()  # on a line of its own, not after the progress bar's
            warnings.warn(finding.message, TrainingWarning, stacklevel=4)
        call.last_row = row
        self._runlog.record(row)
        call.unrecorded = None
        cfg, episodes = self.config, self._episodes
        if episodes.returns and math.isfinite(row.mean_return):
            self.best_reward = max(self.best_reward, row.mean_return)
        if cfg.eval_every:  # evaluated iterations compete for best, on that rate
            if judged is not None:
                self._consider_best(judged)
        elif len(episodes.returns) >= min(cfg.success_window, self.vec.num_envs):
            self._consider_best(Judged(None, row, None))
        if self.iteration % cfg.checkpoint_every == 0:
            self._flush_best()
            self.save("latest", row)
            self._runlog.draw_curve(min_interval_s=30.0)  # matplotlib: ~0.3 s
        return row

    def _at_target(self, row: IterationRow, judged: Judged | None, call: _Call) -> bool:
        """Whether the run stops here at its target (``stop_at_target``, after patience)."""
        cfg = self.config
        if call.reached is None and self.iteration >= cfg.min_iterations:
            if cfg.eval_every:
                verdict = None if judged is None else judged.verdict
                met = verdict is not None and verdict.passed
            else:
                rate = row.success_rate
                met = (
                    rate is not None
                    and len(self._episodes.successes) >= cfg.success_window
                    and rate >= cfg.success_target
                )
            call.reached = self.iteration if met else None
        patience = 0 if cfg.eval_every else cfg.target_patience
        return (
            cfg.stop_at_target
            and call.reached is not None
            and self.iteration >= call.reached + patience
        )

    def _wind_down(self, call: _Call) -> None:
        """After the loop, however it ended: an update left running, a row left unlogged."""
        finished, interrupted = self._rollouts.finish_pending()
        call.interrupted = call.interrupted or interrupted
        if call.unrecorded is not None:  # cut short in its bookkeeping: its row still
            call.last_row = call.unrecorded
            self._runlog.record(call.unrecorded)
        if finished:  # it counts, with its row (its rollout counted when collected)
            self.iteration += 1
            call.last_row = self._row(finished, call)
            self._runlog.record(call.last_row)
            self._rollouts.sync()  # the next rollout acts with it
        self._rollouts.settle()  # a pending update in the learner process is dropped here

    def _read_last_verdict(self, call: _Call) -> None:
        """Wait for the verdict still out (``eval_process``): that policy may be best."""
        stop = self._stop
        call.interrupted = call.interrupted or (stop is not None and stop.requested)
        if not call.interrupted and self._judge.judging:
            start = time.perf_counter()
            if stop is not None:
                stop.release()  # no Ctrl-C yet: a double one may cut this wait short
            try:
                judged = self._judge.read_verdict()
            except KeyboardInterrupt:  # pressed twice while waiting: not worth the wait
                call.interrupted, judged = True, None
            self._judge.time_s += time.perf_counter() - start
            if judged is not None:
                self._consider_best(judged)
                self._record_late_verdict(judged, call)
        if stop is not None:
            stop.hold()  # from here on Ctrl-C waits for the saves (short and bounded)

    def _record_late_verdict(self, judged: Judged, call: _Call) -> None:
        """Report a verdict read after the last iteration like one read during training.

        The last iteration's row again, now with the verdict (``metrics.csv``,
        TensorBoard and the returned statistics); a passing one meets the target there
        (``target_reached_at``: the iteration it was read at, the last).
        """
        verdict, last = judged.verdict, call.last_row
        if verdict is None or last is None:
            return
        row = last.with_verdict(verdict, judged.row.iteration)
        self._runlog.record(row)
        call.last_row = row
        if verdict.passed and call.reached is None and self.iteration >= self.config.min_iterations:
            call.reached = self.iteration

    def _finish(self, call: _Call) -> dict[str, Any]:
        """Save ``latest`` (and ``best`` if none yet), draw the curve, sum the call up."""
        self.wall_time_s = call.base_wall + (time.perf_counter() - call.start_wall)
        self._flush_best()
        last_row = call.last_row
        if last_row is not None or self.checkpoints["latest"] is None:
            self.save("latest", last_row)
        if self.checkpoints["best"] is None:
            self.save("best", last_row)
            self.best_iteration = self.iteration
        self._runlog.draw_curve()
        self._runlog.flush()
        elapsed = time.perf_counter() - call.start_wall
        run_steps = self.env_steps - call.steps_before
        episodes = self._episodes
        return {
            "best_reward": finite_or_none(self.best_reward),
            "last_reward": finite_or_none(episodes.mean_return),
            "success_rate": episodes.success_rate,
            "iterations": self.iteration,
            "env_steps": self.env_steps,
            "wall_time_s": self.wall_time_s,
            **self._rates(run_steps, elapsed),
            "episodes": episodes.total,
            "stopped_at_target": call.stopped,
            "stopped_by_callback": call.called_off,
            "eval_success_rate": None if last_row is None else last_row.eval_success_rate,
            "eval_episodes": None if last_row is None else last_row.eval_episodes,
            "eval_stopped_early": None if last_row is None else last_row.eval_stopped_early,
            "target_reached_at": call.reached,
            "interrupted": call.interrupted,
            "run_dir": str(self.run_dir),
            "checkpoints": dict(self.checkpoints),
        }

    # ------------------------------------------------------------------ life cycle
    def policy(self, obs: np.ndarray) -> np.ndarray:
        """The current deterministic policy: ``(N, obs_dim)`` -> ``(N, act_dim)`` actions.

        The actor stays in training mode: its forward pass is the same in both (no dropout
        or batch norm; the normaliser learns only in the PPO update; tested), and
        switching modes costs more than the forward pass of a small network.
        """
        x = torch.as_tensor(np.asarray(obs, dtype=np.float32))
        with torch.inference_mode():
            actions = self.alg.deterministic_actions(x)
        return actions.numpy().clip(-1.0, 1.0)

    def close(self) -> None:
        """Close the log files, the curve written first (the env stays open: its owner's).

        A trainer that saved no checkpoint and logged no iteration (its first ``train()``
        failed in its first step, or it never trained) leaves its run directory as it
        found it: the claim and what it wrote there are taken back.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._judge.close()
            self._rollouts.settle()
        finally:
            try:
                self._runlog.close()  # waits for the curve: Ctrl-C may cut that short
            finally:
                if self._kept_nothing:  # e.g. its first step failed: the dir as found
                    self._claim.withdraw()
                else:
                    self._claim.release()

    @property
    def _kept_nothing(self) -> bool:
        """Whether this trainer saved no checkpoint and logged no iteration (yet)."""
        return not any(self.checkpoints.values()) and not self._runlog.history

    def _rates(self, run_steps: int, elapsed: float) -> dict[str, float]:
        """Env steps per second of this call: over its wall time, and while collecting."""
        return {
            "env_steps_per_s": run_steps / max(elapsed, 1e-9),
            "collect_steps_per_s": run_steps / max(self._rollouts.collect_time, 1e-9),
        }

    def __enter__(self) -> RLTrainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class _Call:
    """The bookkeeping of one ``train()`` call."""

    start_wall: float
    """``time.perf_counter()`` at its start."""
    base_wall: float
    """``wall_time_s`` before it."""
    steps_before: int
    """``env_steps`` before it."""
    reached: int | None = None
    """The iteration the target was first met (None: not yet)."""
    last_row: IterationRow | None = None
    """The last row logged."""
    unrecorded: IterationRow | None = None
    """The row of an iteration cut short in its bookkeeping."""
    stopped: bool = False
    called_off: bool = False
    interrupted: bool = False
