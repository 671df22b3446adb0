"""The PPO update's hand-written backward pass gives autograd's gradients."""

from __future__ import annotations

import pytest
import torch

from kelab.train.activations import ELU, closed_form
from kelab.train.backprop import AutogradPass, ManualPass, network_pass


def _net(activation: torch.nn.Module) -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(5, 16), activation, torch.nn.Linear(16, 16), activation,
        torch.nn.Linear(16, 3),
    )  # fmt: skip


@pytest.mark.parametrize(
    "activation",
    [ELU(), torch.nn.ELU(), torch.nn.ReLU(), torch.nn.Tanh(), torch.nn.SELU(), torch.nn.GELU()],
    ids=lambda m: type(m).__name__ + ("-kelab" if isinstance(m, ELU) else ""),
)
def test_gradients_match_autograd(activation):
    net = _net(activation)
    x = torch.randn(64, 5) * 2.0
    g = torch.randn(64, 3)
    out_ref = net(x)
    out_ref.backward(g)
    ref = [p.grad.clone() for p in net.parameters()]
    for p in net.parameters():
        p.grad = torch.full_like(p, 7.0)  # set, not accumulated
    pas = network_pass(net)
    expected = AutogradPass if closed_form(activation) is None else ManualPass
    assert type(pas) is expected
    out = pas.forward(x)
    assert not out.requires_grad
    assert torch.allclose(out, out_ref.detach(), atol=1e-6)
    pas.backward(g)
    for (name, p), r in zip(net.named_parameters(), ref, strict=True):
        assert torch.allclose(p.grad, r, atol=1e-6, rtol=1e-5), name


def test_manual_pass_refuses_an_unsupported_layer():
    with pytest.raises(ValueError, match="ManualPass runs Linear layers and ELU/ReLU/Tanh"):
        ManualPass(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Softplus()))


def test_autograd_pass_needs_a_forward_first():
    with pytest.raises(RuntimeError, match="needs a forward pass first"):
        AutogradPass(torch.nn.Linear(2, 2)).backward(torch.zeros(1, 2))


def test_relu_gradient_is_zero_at_zero_like_torch():
    net = torch.nn.Sequential(torch.nn.Linear(1, 1), torch.nn.ReLU(), torch.nn.Linear(1, 1))
    with torch.no_grad():
        net[0].weight.fill_(1.0)
        net[0].bias.fill_(0.0)
    x = torch.zeros(4, 1)  # pre-activation exactly 0
    net(x).backward(torch.ones(4, 1))
    ref = net[0].weight.grad.clone()
    pas = network_pass(net)
    pas.forward(x)
    pas.backward(torch.ones(4, 1))
    assert torch.equal(net[0].weight.grad, ref)
