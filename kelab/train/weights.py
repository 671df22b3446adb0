"""Weights in and out of plain tensors: networks and optimizers <-> named tensors + JSON.

Models load only from the tensors of a :class:`~kelab.train.checkpoint.Checkpoint`
(safetensors) and the optimizer's settings from its JSON; nothing here unpickles. The
algorithms (:mod:`kelab.train.ppo`), the learner process and the policy of a checkpoint
(:mod:`kelab.train.policy`) all use these.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from kelab.errors import UserError
from kelab.train.checkpoint import CheckpointError

if TYPE_CHECKING:
    from kelab.train.adam import Adam

__all__ = ["load_model_state", "load_optimizer_state", "optimizer_state", "training_state"]


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
    optimizer: Adam,
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
    actor: torch.nn.Module, critic: torch.nn.Module, optimizer: Adam
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """What a checkpoint, or the learner process's reply, holds of training.

    The networks' and the optimizer's tensors, named ``actor.*``, ``critic.*`` and
    ``optimizer.*`` (the networks' own tensors, not copies, but for a critic's tensors that
    are the actor's), and the optimizer's JSON settings.
    """
    tensors: dict[str, torch.Tensor] = {}
    for prefix, model in (("actor", actor), ("critic", critic)):
        for key, value in model.state_dict().items():
            tensors[f"{prefix}.{key}"] = value
    # a critic sharing the actor's convolutions (TrainConfig.share_cnn) names them too:
    # copies, as safetensors holds no two names of one tensor
    actor_data = {t.data_ptr() for name, t in tensors.items() if name.startswith("actor.")}
    for name, value in tensors.items():
        if name.startswith("critic.") and value.numel() and value.data_ptr() in actor_data:
            tensors[name] = value.clone()
    opt_meta, opt_tensors = optimizer_state(optimizer)
    tensors.update({f"optimizer.{k}": v for k, v in opt_tensors.items()})
    return tensors, opt_meta


def load_optimizer_state(
    optimizer: Adam,
    meta: dict[str, Any],
    tensors: dict[str, torch.Tensor],
    path: Path,
) -> None:
    """Restore an optimizer from :func:`optimizer_state`'s two parts.

    Raises:
        CheckpointError: When the saved state does not fit this optimizer.
    """
    try:
        if not isinstance(meta, dict):
            raise TypeError(f"optimizer must be a JSON object, got {type(meta).__name__}")
        scalars = meta.get("scalars", {})
        if not isinstance(scalars, dict):
            raise TypeError(
                f"optimizer scalars must be a JSON object, got {type(scalars).__name__}"
            )
        if meta.get("type") != type(optimizer).__name__:
            raise UserError(f"optimizer type {meta.get('type')!r} != {type(optimizer).__name__}")
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
    except (KeyError, ValueError, TypeError, RuntimeError, AttributeError) as err:
        raise CheckpointError(
            f"{path}: the optimizer state does not fit this network ({err}); the checkpoint "
            "is damaged, or resume with a config matching the checkpoint's"
        ) from None
