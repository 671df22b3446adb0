"""The deterministic policy of a checkpoint, and policy-only copies of checkpoints.

Models load only from the tensors of a :class:`~kelab.train.checkpoint.Checkpoint`
(safetensors); nothing here unpickles. The weight helpers live in
:mod:`kelab.train.weights` (re-exported here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from kelab.train.checkpoint import Checkpoint, CheckpointError, check_networks, check_tensors
from kelab.train.config import TrainConfig
from kelab.train.numpy_actor import finished_actions, observation_batch
from kelab.train.ppo import build_actor, deterministic_actions
from kelab.train.weights import (
    load_model_state,
    load_optimizer_state,
    optimizer_state,
    training_state,
)

__all__ = [
    "CheckpointPolicy",
    "export_policy",
    "load_model_state",
    "load_optimizer_state",
    "optimizer_state",
    "training_state",
]


class CheckpointPolicy:
    """The deterministic policy of a checkpoint: observations in, clipped actions out.

    The observation normaliser's statistics come from the checkpoint and stay frozen.

    Args:
        checkpoint: A loaded checkpoint.

    Raises:
        CheckpointError: When its JSON and weights disagree, or a tensor cannot be run
            (:func:`~kelab.train.checkpoint.check_tensors`).
    """

    def __init__(self, checkpoint: Checkpoint) -> None:
        try:
            config = TrainConfig.from_dict(checkpoint.meta["train_config"])
        except ValueError as err:
            raise CheckpointError(f"{checkpoint.path}: bad train_config ({err})") from None
        shapes = {k: tuple(v.shape) for k, v in checkpoint.tensors.items()}
        check_networks(checkpoint.path, checkpoint.meta, shapes)  # before building anything
        check_tensors(checkpoint.path, checkpoint.tensors)  # load_checkpoint's, for one made here
        self.config = config
        self.observation_dim = checkpoint.observation_dim
        self.action_dim = checkpoint.action_dim
        self.actor = build_actor(config, self.observation_dim, self.action_dim)
        load_model_state(self.actor, checkpoint.prefixed("actor"), checkpoint.path, "actor")
        self.actor.eval()

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Actions for ``(N, obs_dim)`` or ``(obs_dim,)`` observations, in [-1, 1].

        An image policy also takes ``(N, H, W, C)`` or one ``(H, W, C)`` image.

        Raises:
            ValueError: For observations of another size.
        """
        x, single = observation_batch(obs, self.observation_dim, self.config.image)
        with torch.inference_mode():
            t = torch.from_numpy(np.ascontiguousarray(x))
            out = deterministic_actions(self.actor, t).numpy()
        return finished_actions(out, single)


def export_policy(
    spec: str | Path | Checkpoint,
    directory: str | Path,
    name: str,
    evaluation: dict[str, Any] | None = None,
) -> Path:
    """Write a small, policy-only copy of a checkpoint, e.g. to ship with a task.

    The copy holds the actor and its observation normaliser (no critic, no optimizer):
    it plays and evaluates like the original, but cannot be resumed.

    Args:
        spec: The checkpoint (a spec or a loaded one).
        directory: Where ``<name>.json`` and its safetensors go.
        name: The checkpoint name.
        evaluation: An evaluation report (``EvaluationReport.to_dict()``) to record.

    Returns:
        The new checkpoint's JSON path.
    """
    from kelab.train.checkpoint import load_checkpoint, save_checkpoint

    ckpt = spec if isinstance(spec, Checkpoint) else load_checkpoint(spec)
    tensors = {f"actor.{k}": v for k, v in ckpt.prefixed("actor").items()}
    dropped = ("format", "version", "weights", "recent_episodes")  # the last: training's
    meta = {k: v for k, v in ckpt.meta.items() if k not in dropped}
    meta["optimizer"] = None
    meta["kind"] = "policy"
    meta["exported_from"] = {"path": str(ckpt.path), "sha256": ckpt.meta["weights"]["sha256"]}
    if evaluation is not None:
        meta["evaluation"] = evaluation
    return save_checkpoint(directory, name, tensors, meta)
