"""``Adam``: torch's fused Adam step, without ``torch.optim``.

Building any ``torch.optim`` optimizer imports ``torch._dynamo`` (its methods are wrapped
in ``torch._disable_dynamo``, which imports the compiler on first use): ~1.2 s of a 7 s
``kelab train CartPole-v0``, for a compiler training never uses. :class:`Adam` runs the
same kernel ``torch.optim.Adam(params, lr, fused=True)`` runs, on the same state, so a
run gives the same bits; the kernel is torch's private ``torch._fused_adam_``, called
through its one door, :func:`kelab.train._torch.adam_step`, which steps through
``torch.optim.Adam(fused=True)`` instead where torch is not the release it was written
for. Its :meth:`Adam.state_dict` has torch's layout (a checkpoint's ``optimizer`` entry
is unchanged, and old checkpoints resume).

Example:
    >>> import torch
    >>> w = torch.nn.Parameter(torch.ones(3))
    >>> opt = Adam([w], lr=0.1)
    >>> w.grad = torch.tensor([1.0, -1.0, 0.0])
    >>> opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, 1.1, 1.0]
    >>> sorted(opt.state_dict()["state"][0])
    ['exp_avg', 'exp_avg_sq', 'step']
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

from kelab.errors import UserError
from kelab.train._torch import adam_step

__all__ = ["Adam"]

_BETAS = (0.9, 0.999)
_EPS = 1e-8


class Adam:
    """Adam with torch's defaults (betas 0.9/0.999, eps 1e-8, no weight decay), fused.

    Args:
        params: The parameters it updates (one group), in a fixed order.
        lr: The learning rate (``param_groups[0]["lr"]`` may change it between steps).

    Attributes:
        param_groups: One group, as torch's: ``lr``, the fixed settings and ``params``.
        state: Per parameter: ``step`` (a float32 scalar tensor), ``exp_avg``, ``exp_avg_sq``.
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float) -> None:
        params = list(params)
        if not params:
            raise UserError("Adam needs at least one parameter, got none; pass the networks'")
        # torch.optim.Adam's group, key for key (a checkpoint's JSON records it)
        self.param_groups: list[dict[str, Any]] = [
            {
                "lr": lr,
                "betas": _BETAS,
                "eps": _EPS,
                "weight_decay": 0,
                "amsgrad": False,
                "maximize": False,
                "foreach": None,
                "capturable": False,
                "differentiable": False,
                "fused": True,
                "decoupled_weight_decay": False,
                "params": params,
            }
        ]
        self.state: dict[torch.nn.Parameter, dict[str, torch.Tensor]] = {}

    @property
    def _params(self) -> list[torch.nn.Parameter]:
        return self.param_groups[0]["params"]

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step for every parameter that has a gradient."""
        params, states = [], []
        for p in self._params:
            if p.grad is None:
                continue
            state = self.state.get(p)
            if state is None:
                state = self.state[p] = {
                    "step": torch.zeros((), dtype=torch.float32),
                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                }
            params.append(p)
            states.append(state)
        if params:
            adam_step(params, states, lr=float(self.param_groups[0]["lr"]), betas=_BETAS, eps=_EPS)

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [...]}``, torch's layout (no copies)."""
        index = {id(p): i for i, p in enumerate(self._params)}
        state = {index[id(p)]: dict(s) for p, s in self.state.items()}
        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        group["params"] = list(range(len(self._params)))
        return {"state": dict(sorted(state.items())), "param_groups": [group]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take a :meth:`state_dict` (this class's or ``torch.optim.Adam``'s), whole or not at all.

        Raises:
            UserError: When its groups, settings or tensors do not fit these parameters.
        """
        groups = state_dict["param_groups"]
        params = self._params
        if len(groups) != 1 or len(groups[0]["params"]) != len(params):
            sizes = [len(g["params"]) for g in groups]
            raise UserError(
                f"the optimizer state must hold one group of {len(params)} parameters, got "
                f"groups of {sizes}; load the state of an optimizer over the same networks"
            )
        group = groups[0]
        for key, value in self.param_groups[0].items():
            if key not in ("lr", "params") and group.get(key, value) != value:
                raise UserError(
                    f"optimizer setting {key!r} must be {value!r}, got {group[key]!r}; only "
                    "torch's fused-Adam defaults load"
                )
        lr = group.get("lr")
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0.0 <= lr < math.inf:
            raise UserError(f"optimizer lr must be a finite number >= 0, got {lr!r}")
        new: dict[torch.nn.Parameter, dict[str, torch.Tensor]] = {}
        for i, entry in state_dict["state"].items():
            if not 0 <= int(i) < len(params):
                raise UserError(
                    f"optimizer state index must be in [0, {len(params)}), got {i!r}; load the "
                    "state of an optimizer over the same networks"
                )
            p = params[int(i)]
            step = torch.as_tensor(entry["step"], dtype=torch.float32)
            if step.numel() != 1:
                raise UserError(
                    f"optimizer state {i}.step must be one number, got shape {tuple(step.shape)}"
                )
            step = step.reshape(())
            if not (bool(torch.isfinite(step)) and step >= 0 and step == step.round()):
                raise UserError(
                    f"optimizer state {i}.step must be a whole number >= 0, got {step.item()}; "
                    "the checkpoint is damaged"
                )
            avg, sq = entry["exp_avg"], entry["exp_avg_sq"]
            for name, t in (("exp_avg", avg), ("exp_avg_sq", sq)):
                if not torch.is_tensor(t) or t.shape != p.shape:
                    shape = tuple(t.shape) if torch.is_tensor(t) else type(t).__name__
                    raise UserError(
                        f"optimizer state {i}.{name} must have its parameter's shape "
                        f"{tuple(p.shape)}, got {shape}"
                    )
                # Adam divides by sqrt(exp_avg_sq): a NaN, an infinity or a negative there
                # is NaN weights after the next step
                if not bool(torch.isfinite(t).all()) or (
                    name == "exp_avg_sq" and bool((t < 0).any())
                ):
                    raise UserError(
                        f"optimizer state {i}.{name} must be finite"
                        + (" and >= 0" if name == "exp_avg_sq" else "")
                        + "; the checkpoint is damaged"
                    )
            new[p] = {
                "step": step.clone(),
                "exp_avg": avg.to(p.dtype).clone(),
                "exp_avg_sq": sq.to(p.dtype).clone(),
            }
        if new and len(new) != len(params):
            position = {id(p): k for k, p in enumerate(params)}
            indices = sorted(position[id(p)] for p in new)
            raise UserError(
                f"optimizer state must cover every parameter or none, got {indices} of "
                f"{len(params)}; load the state of an optimizer over the same networks"
            )
        self.param_groups[0]["lr"] = lr
        self.state = new
