"""torch's private fused-Adam kernel, behind one door (#38).

:func:`adam_step` is one step of ``torch.optim.Adam(params, lr, fused=True)``. Where this
torch is the one it was written for (:data:`VERIFIED`, checked at import), it calls the
kernel that optimizer calls, ``torch._fused_adam_`` (with ``torch._foreach_add_`` on the
step counts), directly: building any ``torch.optim`` optimizer imports
``torch._dynamo``, ~1.2 s of a ``kelab train CartPole-v0`` that never compiles anything
(benchmarks/README.md, "After the learner's rewrite": ``RLTrainer()`` 0.15 -> 0.03 s).
Anywhere else it steps through ``torch.optim.Adam(fused=True)`` itself, the public path:
the same kernel, so the same bits, ~1.2 s later. Nothing else in kelab calls a private
torch function (tests/test_layers.py).

Example:
    >>> import torch
    >>> w = torch.nn.Parameter(torch.ones(2))
    >>> w.grad = torch.tensor([1.0, -1.0])
    >>> state = {"step": torch.zeros(()), "exp_avg": torch.zeros(2), "exp_avg_sq": torch.zeros(2)}
    >>> adam_step([w], [state], lr=0.1, betas=(0.9, 0.999), eps=1e-8)
    >>> [round(v, 4) for v in w.tolist()], float(state["step"])
    ([0.9, 1.1], 1.0)
"""

from __future__ import annotations

import re

import torch

__all__ = ["PRIVATE_KERNEL", "VERIFIED", "adam_step", "private_kernel_fits"]

VERIFIED = ("2.13",)
"""The torch releases (major.minor) whose ``_fused_adam_`` signature and semantics this
module was written against and tested with (tests/train/test_lean_ppo.py)."""


def private_kernel_fits(version: str) -> bool:
    """Whether torch ``version`` (``"2.13.0+cpu"``) is one :data:`VERIFIED` release.

    Example:
        >>> private_kernel_fits("2.13.0+cpu"), private_kernel_fits("2.14.0")
        (True, False)
    """
    found = re.match(r"(\d+)\.(\d+)(\D|$)", version)
    return found is not None and f"{found[1]}.{found[2]}" in VERIFIED


PRIVATE_KERNEL: bool = private_kernel_fits(str(torch.__version__)) and all(
    hasattr(torch, name) for name in ("_fused_adam_", "_foreach_add_")
)
"""True where :func:`adam_step` calls torch's private kernel; False: ``torch.optim.Adam``."""


def adam_step(
    params: list[torch.nn.Parameter],
    states: list[dict[str, torch.Tensor]],
    *,
    lr: float,
    betas: tuple[float, float],
    eps: float,
) -> None:
    """One fused Adam step (no weight decay, no amsgrad) of ``params`` from their ``.grad``.

    Args:
        params: The parameters, each with a gradient, updated in place.
        states: Per parameter, torch's Adam state, updated in place: ``step`` (a float32
            scalar tensor), ``exp_avg`` and ``exp_avg_sq`` (the parameter's shape).
        lr: The learning rate.
        betas: Adam's ``(beta1, beta2)``.
        eps: Adam's ``eps``.
    """
    if not PRIVATE_KERNEL:
        _public_adam_step(params, states, lr=lr, betas=betas, eps=eps)
        return
    steps = [s["step"] for s in states]
    torch._foreach_add_(steps, 1)
    torch._fused_adam_(
        params,
        [p.grad for p in params],
        [s["exp_avg"] for s in states],
        [s["exp_avg_sq"] for s in states],
        [],
        steps,
        amsgrad=False,
        lr=lr,
        beta1=betas[0],
        beta2=betas[1],
        weight_decay=0.0,
        eps=eps,
        maximize=False,
        grad_scale=None,
        found_inf=None,
    )


def _public_adam_step(
    params: list[torch.nn.Parameter],
    states: list[dict[str, torch.Tensor]],
    *,
    lr: float,
    betas: tuple[float, float],
    eps: float,
) -> None:
    """:func:`adam_step` through ``torch.optim.Adam(fused=True)``, on the same tensors."""
    optimizer = torch.optim.Adam(params, lr=lr, betas=betas, eps=eps, fused=True)
    for p, state in zip(params, states, strict=True):
        optimizer.state[p] = state  # torch steps these very tensors in place
    optimizer.step()
