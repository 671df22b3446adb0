"""Hidden-layer activations with their derivatives, for the policy networks.

:class:`ELU` is ``torch.nn.ELU()`` through one ``exp`` (torch's calls the slower
``expm1``); :func:`closed_form` gives, for the activations the PPO update differentiates
by hand (:mod:`kelab.train.backprop`), a function returning the output and the
derivative at each element.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["ELU", "Activation", "closed_form", "elu_and_derivative"]

Activation = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
"""An activation's forward pass: ``(output, derivative)``, elementwise."""

_SMALL = 16384  # below this many elements torch's own ELU is faster (no exp/expm1 gap)


def elu_and_derivative(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(elu(x), exp(min(x, 0)))``: ELU through one ``exp``, and its derivative.

    Example:
        >>> import torch
        >>> y, d = elu_and_derivative(torch.tensor([-1.0, 0.0, 2.0]))
        >>> [round(v, 4) for v in y.tolist()], [round(v, 4) for v in d.tolist()]
        ([-0.6321, 0.0, 2.0], [0.3679, 1.0, 1.0])
    """
    e = torch.exp(torch.clamp(x, max=0.0))  # exactly 1 where x > 0
    y = e - 1.0  # exactly 0 where x > 0, so y == x there
    y.add_(torch.clamp(x, min=0.0))
    return y, e


def _relu_and_derivative(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.relu(x)
    return y, (y > 0).to(x.dtype)  # torch's ReLU backward: 0 at x == 0


def _tanh_and_derivative(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.tanh(x)
    return y, 1.0 - y * y


class _ELUFunction(torch.autograd.Function):
    """ELU with alpha 1 through ``exp(min(x, 0))``, which is also its derivative."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y, e = elu_and_derivative(x)
        ctx.save_for_backward(e)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (e,) = ctx.saved_tensors
        return grad * e


class ELU(torch.nn.Module):
    """``torch.nn.ELU()`` (alpha 1) at about half the cost on a CPU.

    ``exp(x) - 1`` instead of ``expm1(x)`` for ``x <= 0`` (at most ~6e-8 apart), exactly
    ``x`` for ``x > 0``; the backward pass reuses the forward's ``exp``. Without gradients
    and for small batches (below 16384 elements) it is torch's ELU, faster there. It holds
    no weights, so checkpoints are the same with either.

    Example:
        >>> import torch
        >>> x = torch.linspace(-3, 3, 7)
        >>> bool((ELU()(x) - torch.nn.functional.elu(x)).abs().max() < 1e-6)
        True
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """ELU of ``x``, elementwise."""
        if x.requires_grad and torch.is_grad_enabled():
            return _ELUFunction.apply(x)
        if x.numel() <= _SMALL:  # e.g. sampling actions for a few copies
            return torch.nn.functional.elu(x)
        return elu_and_derivative(x)[0]


def closed_form(module: torch.nn.Module) -> Activation | None:
    """``module``'s activation as ``x -> (output, derivative)``, or None if not one here.

    ELU (alpha 1; :class:`ELU` or torch's), ReLU and Tanh have one; for any other module
    the caller differentiates through autograd.

    Example:
        >>> import torch
        >>> closed_form(torch.nn.Tanh()) is not None, closed_form(torch.nn.SELU())
        (True, None)
    """
    if isinstance(module, ELU) or (
        type(module) is torch.nn.ELU and module.alpha == 1.0 and not module.inplace
    ):
        return elu_and_derivative
    if type(module) is torch.nn.ReLU and not module.inplace:
        return _relu_and_derivative
    if type(module) is torch.nn.Tanh:
        return _tanh_and_derivative
    return None
