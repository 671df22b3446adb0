"""Weights in and out of plain tensors, and the deterministic policy of a checkpoint.

Models load only from the tensors of a :class:`~kelab.train.checkpoint.Checkpoint`
(safetensors) and the optimizer's settings from its JSON; nothing here unpickles.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kelab.train.checkpoint import Checkpoint, CheckpointError, check_networks
from kelab.train.config import TrainConfig
from kelab.train.ppo import build_actor, deterministic_actions

__all__ = [
    "CheckpointPolicy",
    "export_policy",
    "load_model_state",
    "load_optimizer_state",
    "optimizer_state",
    "training_state",
]


def load_model_state(
    model: torch.nn.Module, tensors: dict[str, torch.Tensor], path: Path, what: str
) -> None:
    """Load ``tensors`` into ``model`` strictly (every key, every shape).

    Raises:
        CheckpointError: Naming the missing, unexpected or mis-shaped tensors.
    """
    own = model.state_dict()
    missing = sorted(set(own) - set(tensors))
    extra = sorted(set(tensors) - set(own))
    wrong = sorted(
        k for k in own if k in tensors and tuple(own[k].shape) != tuple(tensors[k].shape)
    )
    if missing or extra or wrong:
        detail = []
        if missing:
            detail.append(f"missing {missing[:5]}")
        if extra:
            detail.append(f"unexpected {extra[:5]}")
        if wrong:
            detail.append(
                "shape " + ", ".join(f"{k} {tuple(tensors[k].shape)} != {tuple(own[k].shape)}"
                                     for k in wrong[:5])
            )  # fmt: skip
        raise CheckpointError(
            f"{path}: the {what} tensors do not fit the network its train_config describes "
            f"({'; '.join(detail)}); the checkpoint is damaged or was changed"
        )
    for key, value in tensors.items():
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise CheckpointError(f"{path}: {what} tensor {key!r} holds NaN or infinite values")
    model.load_state_dict(tensors, strict=True)


def optimizer_state(
    optimizer: torch.optim.Optimizer,
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """Split an optimizer's state into JSON settings and named tensors."""
    state = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, entry in state["state"].items():
        for name, value in entry.items():
            if torch.is_tensor(value):
                tensors[f"state.{index}.{name}"] = value
            else:
                scalars.setdefault(str(index), {})[name] = value
    groups = []
    for group in state["param_groups"]:
        groups.append({k: (list(v) if isinstance(v, tuple) else v) for k, v in group.items()})
    return {"type": type(optimizer).__name__, "param_groups": groups, "scalars": scalars}, tensors


def training_state(
    actor: torch.nn.Module, critic: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """What a checkpoint, or the learner process's reply, holds of training.

    The networks' and the optimizer's tensors, named ``actor.*``, ``critic.*`` and
    ``optimizer.*`` (the networks' own tensors, not copies), and the optimizer's JSON
    settings.
    """
    tensors: dict[str, torch.Tensor] = {}
    for prefix, model in (("actor", actor), ("critic", critic)):
        for key, value in model.state_dict().items():
            tensors[f"{prefix}.{key}"] = value
    opt_meta, opt_tensors = optimizer_state(optimizer)
    tensors.update({f"optimizer.{k}": v for k, v in opt_tensors.items()})
    return tensors, opt_meta


def load_optimizer_state(
    optimizer: torch.optim.Optimizer,
    meta: dict[str, Any],
    tensors: dict[str, torch.Tensor],
    path: Path,
) -> None:
    """Restore an optimizer from :func:`optimizer_state`'s two parts.

    Raises:
        CheckpointError: When the saved state does not fit this optimizer.
    """
    try:
        if meta.get("type") != type(optimizer).__name__:
            raise ValueError(f"optimizer type {meta.get('type')!r} != {type(optimizer).__name__}")
        groups = []
        for group in meta["param_groups"]:
            g = dict(group)
            if isinstance(g.get("betas"), list):
                g["betas"] = tuple(g["betas"])
            groups.append(g)
        state: dict[int, dict[str, Any]] = {}
        for key, value in tensors.items():
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
        for index, values in meta.get("scalars", {}).items():
            state.setdefault(int(index), {}).update(values)
        optimizer.load_state_dict({"state": state, "param_groups": groups})
    except (KeyError, ValueError, TypeError, RuntimeError) as err:
        raise CheckpointError(
            f"{path}: the optimizer state does not fit this network ({err}); the checkpoint "
            "is damaged, or resume with a config matching the checkpoint's"
        ) from None


class CheckpointPolicy:
    """The deterministic policy of a checkpoint: observations in, clipped actions out.

    The observation normaliser's statistics come from the checkpoint and stay frozen.

    Args:
        checkpoint: A loaded checkpoint.
    """

    def __init__(self, checkpoint: Checkpoint) -> None:
        try:
            config = TrainConfig.from_dict(checkpoint.meta["train_config"])
        except ValueError as err:
            raise CheckpointError(f"{checkpoint.path}: bad train_config ({err})") from None
        shapes = {k: tuple(v.shape) for k, v in checkpoint.tensors.items()}
        check_networks(checkpoint.path, checkpoint.meta, shapes)  # before building anything
        self.config = config
        self.observation_dim = checkpoint.observation_dim
        self.action_dim = checkpoint.action_dim
        self.actor = build_actor(config, self.observation_dim, self.action_dim)
        load_model_state(self.actor, checkpoint.prefixed("actor"), checkpoint.path, "actor")
        self.actor.eval()

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Actions for ``(N, obs_dim)`` or ``(obs_dim,)`` observations, in [-1, 1].

        Raises:
            ValueError: For observations of another size.
        """
        x = np.asarray(obs, dtype=np.float32)
        single = x.ndim == 1
        if single:
            x = x[None, :]
        if x.ndim != 2 or x.shape[1] != self.observation_dim:
            raise ValueError(
                f"observations must have shape (N, {self.observation_dim}) or "
                f"({self.observation_dim},), got {np.shape(obs)}"
            )
        with torch.inference_mode():
            t = torch.from_numpy(np.ascontiguousarray(x))
            out = deterministic_actions(self.actor, t).numpy()
        out = np.clip(out, -1.0, 1.0)
        if not math.isfinite(float(np.abs(out).sum())):
            raise ValueError("the policy produced NaN actions (observations out of range?)")
        return out[0] if single else out


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
