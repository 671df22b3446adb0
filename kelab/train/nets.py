"""The policy's networks: an MLP behind an observation normaliser, with a Gaussian's std.

:class:`PolicyNet` is the actor (``init_std`` given: it also holds the action noise's
learnt standard deviation) and the critic (``init_std=None``). Its tensors keep
rsl-rl-lib's ``MLPModel`` names (``obs_normalizer._mean``, ``distribution.std_param``,
``mlp.0.weight``, ...) and are created in the same order from torch's random generator,
so checkpoints from either load into the other and a seed gives the same weights. It is
plain torch: building and running it imports neither rsl-rl nor tensordict (whose
``torch._dynamo`` import was ~1.3 s of ``kelab train``'s start).

Example:
    >>> import torch
    >>> actor = PolicyNet(4, 1, (8, 8), "elu", obs_normalization=True, init_std=0.5)
    >>> list(actor.state_dict())[:5]
    ['obs_normalizer._mean', 'obs_normalizer._var', 'obs_normalizer._std', 'obs_normalizer.count', 'distribution.std_param']
    >>> actor.mlp(actor.obs_normalizer(torch.zeros(3, 4))).shape
    torch.Size([3, 1])
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from kelab.errors import UserError
from kelab.train.activations import ELU
from kelab.train.architecture import PIXEL_SCALE, architecture

__all__ = ["ACTIVATIONS", "GaussianStd", "Normalizer", "PixelInput", "PolicyNet"]

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "elu": ELU,  # torch's ELU through one exp (kelab.train.activations)
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "selu": nn.SELU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
}
"""Hidden-layer activations by ``TrainConfig.activation`` name."""


class Normalizer(nn.Module):
    """Running mean and variance of the observations; ``(x - mean) / (std + eps)``.

    The statistics learn from each rollout (:meth:`update`, in training mode only) with
    the arithmetic of rsl-rl-lib's ``EmpiricalNormalization``, so runs stay bit for bit.

    Args:
        dim: Observation size.
        eps: Added to the standard deviation.
    """

    def __init__(self, dim: int, eps: float = 1e-2) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("_mean", torch.zeros(dim).unsqueeze(0))
        self.register_buffer("_var", torch.ones(dim).unsqueeze(0))
        self.register_buffer("_std", torch.ones(dim).unsqueeze(0))
        self.register_buffer("count", torch.tensor(0, dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised ``x``."""
        return (x - self._mean) / (self._std + self.eps)

    def update(self, x: torch.Tensor) -> None:
        """Learn from a batch ``(n, dim)`` (nothing in eval mode)."""
        if not self.training:
            return
        count_x = torch.tensor(x.shape[0], dtype=self.count.dtype)
        var_x = torch.var(x, dim=0, unbiased=False, keepdim=True)
        mean_x = torch.mean(x, dim=0, keepdim=True)
        self.count += count_x
        rate = count_x / self.count
        delta_mean = mean_x - self._mean
        self._mean += rate * delta_mean
        self._var += rate * (var_x - self._var + delta_mean * (mean_x - self._mean))
        self._std = torch.sqrt(self._var)


class GaussianStd(nn.Module):
    """The action noise's standard deviation: one learnt value per action, clamped.

    Args:
        dim: Action size.
        init_std: Its starting value.
    """

    def __init__(self, dim: int, init_std: float) -> None:
        super().__init__()
        self.std_param = nn.Parameter(init_std * torch.ones(dim))
        self.std_range = (1e-6, 1e6)
        """Where :meth:`std` clamps the parameter (rsl-rl's default range)."""

    def std(self) -> torch.Tensor:
        """The standard deviation: the parameter clamped to :attr:`std_range`."""
        return self.std_param.clamp(self.std_range[0], self.std_range[1])


class PixelInput(nn.Module):
    """The flat observation read as images: ``(N, H*W*C)`` -> ``(N, C, H, W)``, times 1/255.

    Any ``(N, ...)`` of ``H*W*C`` values per row works (``(N, H, W, C)`` too).

    Args:
        image: ``(height, width, channels)``.
    """

    def __init__(self, image: tuple[int, int, int]) -> None:
        super().__init__()
        self.image = tuple(int(v) for v in image)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Channels first, scaled to [0, 1] for pixel values in [0, 255]."""
        return x.reshape(-1, *self.image).permute(0, 3, 1, 2) * PIXEL_SCALE


class PolicyNet(nn.Module):
    """An MLP behind an observation normaliser (see the module docstring).

    With ``cnn`` the ``mlp`` Sequential starts with convolutions on the observation read
    as an ``image`` (:mod:`kelab.train.architecture`: a :class:`PixelInput`, each
    ``Conv2d`` followed by the activation, a flatten, then the MLP).

    Args:
        obs_dim: Observation size.
        out_dim: Output size (actions, or 1 for a value).
        hidden_dims: Hidden layer sizes.
        activation: A name of :data:`ACTIVATIONS`.
        obs_normalization: Normalise observations (else the normaliser is the identity).
        init_std: The action noise's starting std (None: no noise, a critic).
        cnn: ``(channels, kernel, stride)`` per convolution; empty for an MLP.
        image: The observation's ``(height, width, channels)`` (needed with ``cnn``).

    Raises:
        UserError: For an unknown activation, no hidden layer, or convolutions that do
            not fit the image.
    """

    def __init__(
        self,
        obs_dim: int,
        out_dim: int,
        hidden_dims: Sequence[int],
        activation: str,
        obs_normalization: bool,
        init_std: float | None = None,
        *,
        cnn: Sequence[tuple[int, int, int]] = (),
        image: tuple[int, int, int] | None = None,
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise UserError(
                f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}; "
                "pick one of those"
            )
        if not hidden_dims:
            raise UserError("hidden_dims must name at least one layer, got (); give e.g. (64, 64)")
        self.obs_dim = int(obs_dim)
        self.obs_normalization = bool(obs_normalization)
        # registered in rsl-rl's order (normaliser, distribution, mlp): the same state_dict
        self.obs_normalizer: nn.Module = (
            Normalizer(self.obs_dim) if obs_normalization else nn.Identity()
        )
        self.distribution = None if init_std is None else GaussianStd(out_dim, float(init_std))
        act = ACTIVATIONS[activation]
        hidden = [int(h) for h in hidden_dims]
        arch = architecture(self.obs_dim, out_dim, hidden, cnn=cnn, image=image)
        layers: list[nn.Module] = []
        if arch.image is not None:
            layers.append(PixelInput(arch.image))
            for conv in arch.convolutions:
                layers += [
                    nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel, conv.stride),
                    act(),
                ]
            layers.append(nn.Flatten())
        for k, linear in enumerate(arch.linears):
            layers.append(nn.Linear(linear.n_in, linear.n_out))
            if k < len(arch.linears) - 1:
                layers.append(act())
        self.mlp = nn.Sequential(*layers)
        self.trunk_size = 0 if arch.flatten_index is None else arch.flatten_index + 1
        """Layers of ``mlp`` up to the flatten (0 for an MLP): the convolutional trunk."""

    def share_convolutions(self, other: PolicyNet) -> None:
        """Use ``other``'s convolutions: the same modules, so the same weights and gradients.

        The trunk (``mlp[:trunk_size]``) becomes ``other``'s; this network's own head stays.
        Its ``state_dict`` still names the trunk's tensors under its own prefix.

        Raises:
            UserError: Unless both are convolutional networks of the same trunk shapes.
        """
        mine, theirs = self.mlp[: self.trunk_size], other.mlp[: other.trunk_size]
        shapes = [tuple(p.shape) for p in mine.parameters()]
        if not self.trunk_size or shapes != [tuple(p.shape) for p in theirs.parameters()]:
            raise UserError(
                f"share_convolutions needs two convolutional networks with the same trunk, "
                f"got {shapes} and {[tuple(p.shape) for p in theirs.parameters()]}; build "
                "both from one config"
            )
        for k in range(self.trunk_size):
            self.mlp[k] = other.mlp[k]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """The network's output (an actor's: the Gaussian's mean) for raw observations."""
        return self.mlp(self.obs_normalizer(obs))

    def update_normalization(self, obs: torch.Tensor) -> None:
        """Let the normaliser learn from ``(n, obs_dim)`` observations (if it normalises)."""
        if isinstance(self.obs_normalizer, Normalizer):
            self.obs_normalizer.update(obs)
