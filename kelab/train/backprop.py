"""Forward and backward passes of the policy MLPs for the PPO update, without autograd.

A PPO mini-batch on a CPU trains two small MLPs (64-128 units) on a few hundred to a few
thousand samples: each matrix product takes tens of microseconds, so autograd's graph,
its saved-tensor bookkeeping and the per-op dispatch of the backward pass cost as much as
the arithmetic. :class:`ManualPass` runs the same products itself: the forward pass keeps
each layer's input and the activation's derivative, the backward pass is three matrix
products and a sum per layer, and the gradients it writes to ``.grad`` are the numbers
autograd computes (the same products in the same order). Networks it cannot run
(activations without a closed-form derivative here) get :class:`AutogradPass`, the same
interface over ``torch.autograd``. What it buys is measured in
``benchmarks/train_backprop.py`` (benchmarks/README.md, "train_backprop": the update
~20 % faster, the same weights for ELU networks).

Example:
    >>> import torch
    >>> from kelab.train.activations import ELU
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 8), ELU(), torch.nn.Linear(8, 2))
    >>> x, g = torch.randn(5, 3), torch.randn(5, 2)
    >>> net(x).backward(g)
    >>> ref = [p.grad.clone() for p in net.parameters()]
    >>> net.zero_grad(set_to_none=True)
    >>> p = network_pass(net)
    >>> out = p.forward(x)
    >>> p.backward(g)
    >>> all(torch.allclose(p.grad, r) for p, r in zip(net.parameters(), ref))
    True
"""

from __future__ import annotations

import torch

from kelab.train.activations import Activation, closed_form

__all__ = ["AutogradPass", "ManualPass", "NetworkPass", "SharedTrunkPass", "network_pass"]


class NetworkPass:
    """One forward pass of a network, then one backward pass that fills ``.grad``.

    ``backward`` *sets* each parameter's ``.grad`` (it does not accumulate) from the
    gradient of the loss with respect to the last ``forward``'s output.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The network's output for ``x``, remembering what the backward pass needs."""
        raise NotImplementedError

    def backward(self, grad_out: torch.Tensor) -> None:
        """Write the gradients of the last forward pass's parameters to ``.grad``."""
        raise NotImplementedError


class ManualPass(NetworkPass):
    """Linear layers and ELU / ReLU / Tanh activations, forward and backward by hand.

    The backward pass of a linear layer ``y = x @ W.T + b`` with incoming gradient ``g``
    is ``dW = g.T @ x``, ``db = g.sum(0)``, ``dx = g @ W``; an activation multiplies ``g``
    by its derivative, kept from the forward pass.
    """

    def __init__(self, net: torch.nn.Sequential) -> None:
        """Check that every layer of ``net`` is a Linear or a supported activation."""
        steps: list[torch.nn.Linear | Activation] = []
        for module in net:
            if isinstance(module, torch.nn.Linear):
                steps.append(module)
                continue
            act = closed_form(module)
            if act is None:
                raise ValueError(
                    f"ManualPass runs Linear layers and ELU/ReLU/Tanh, got {module!r}; "
                    "use network_pass(net), which falls back to autograd"
                )
            steps.append(act)
        self._steps = steps
        self._tape: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The network's output; keeps each layer's input and each activation's derivative."""
        tape: list[torch.Tensor] = []
        h = x
        with torch.no_grad():
            for step in self._steps:
                if isinstance(step, torch.nn.Linear):
                    tape.append(h)
                    h = torch.addmm(step.bias, h, step.weight.t())
                else:
                    h, derivative = step(h)
                    tape.append(derivative)
        self._tape = tape
        return h

    def backward(self, grad_out: torch.Tensor) -> None:
        """Set ``.grad`` of every weight and bias from the loss gradient at the output."""
        g = grad_out
        tape = self._tape
        with torch.no_grad():
            for k in range(len(self._steps) - 1, -1, -1):
                step = self._steps[k]
                if isinstance(step, torch.nn.Linear):
                    step.weight.grad = torch.mm(g.t(), tape[k])
                    step.bias.grad = g.sum(0)
                    if k > 0:  # the input's gradient, unless the input is the data
                        g = torch.mm(g, step.weight)
                else:
                    g = g * tape[k]
        self._tape = []


class AutogradPass(NetworkPass):
    """Any network, through ``torch.autograd`` (for activations ManualPass does not run)."""

    def __init__(self, net: torch.nn.Module) -> None:
        """Wrap ``net``; its parameters must require gradients."""
        self._net = net
        self._out: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The network's output; the graph is kept for :meth:`backward`."""
        with torch.enable_grad():
            self._out = self._net(x)
        return self._out.detach()

    def backward(self, grad_out: torch.Tensor) -> None:
        """Set ``.grad`` of the network's parameters from the gradient at the output."""
        if self._out is None:
            raise RuntimeError("AutogradPass.backward needs a forward pass first")
        for p in self._net.parameters():
            p.grad = None
        self._out.backward(grad_out)
        self._out = None


class SharedTrunkPass:
    """Two networks on one trunk (their first layers the same modules), through autograd.

    The forward pass runs the trunk once and both heads on its output; the backward pass
    sends both heads' gradients back through the trunk once, their sum reaching its
    parameters (what autograd gives for the sum of the two losses).

    Args:
        trunk: The shared first layers.
        head_a: The rest of the first network.
        head_b: The rest of the second network.
    """

    def __init__(
        self, trunk: torch.nn.Module, head_a: torch.nn.Module, head_b: torch.nn.Module
    ) -> None:
        self._modules = (trunk, head_a, head_b)
        self._outs: tuple[torch.Tensor, torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both networks' outputs for ``x``, detached; the graph is kept for :meth:`backward`."""
        trunk, head_a, head_b = self._modules
        with torch.enable_grad():
            features = trunk(x)
            self._outs = (head_a(features), head_b(features))
        return self._outs[0].detach(), self._outs[1].detach()

    def backward(self, grad_a: torch.Tensor, grad_b: torch.Tensor) -> None:
        """Set ``.grad`` of the trunk's and both heads' parameters from both outputs' gradients."""
        if self._outs is None:
            raise RuntimeError("SharedTrunkPass.backward needs a forward pass first")
        for module in self._modules:
            for p in module.parameters():
                p.grad = None
        torch.autograd.backward(self._outs, (grad_a, grad_b))
        self._outs = None


def network_pass(net: torch.nn.Sequential) -> NetworkPass:
    """A :class:`ManualPass` for ``net`` where every layer is supported, else an autograd one."""
    try:
        return ManualPass(net)
    except ValueError:
        return AutogradPass(net)
