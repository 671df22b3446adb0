"""The layers of a policy network, from its config (no torch): what torch builds and numpy runs.

A policy network is an MLP, or, for an image observation with ``TrainConfig.cnn_channels``
set, a small convolutional network in front of the MLP: the flat observation is read as
the image ``(height, width, channels)`` (``TrainConfig.observation_shape``), scaled by
1/255, convolved (each convolution followed by the hidden activation), flattened and
passed to the MLP. :func:`architecture` lays the layers out once; the torch network
(:mod:`kelab.train.nets`), the checkpoint's shape check
(:func:`kelab.train.checkpoint.network_shapes`), the numpy actor and the ONNX export all
read the same :class:`Architecture`, so their tensors' names and shapes cannot drift.

Tensor names follow ``torch.nn.Sequential`` positions under ``mlp.``: an MLP's linear
layers are ``mlp.0``, ``mlp.2``... (rsl-rl-lib's names); a convolutional network's
``mlp.0`` is the image input (no weights), its convolutions ``mlp.1``, ``mlp.3``..., then
a flatten and the linear layers.

Example:
    >>> arch = architecture(100, 2, (16,), cnn=((8, 4, 2),), image=(10, 10, 1))
    >>> [(layer.index, layer.weight_shape) for layer in arch.layers]
    [(1, (8, 1, 4, 4)), (4, (16, 128)), (6, (2, 16))]
    >>> arch.convolutions[0].out_size
    (4, 4)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kelab.errors import UserError

if TYPE_CHECKING:
    from kelab.train.config import TrainConfig

__all__ = [
    "PIXEL_SCALE",
    "Architecture",
    "Convolution",
    "Linear",
    "architecture",
    "architecture_of",
    "conv_size",
]

PIXEL_SCALE = 1.0 / 255.0
"""What an image's values are multiplied by before the first convolution."""


def conv_size(size: int, kernel: int, stride: int) -> int:
    """Output length of an unpadded convolution along one axis.

    Example:
        >>> conv_size(36, 8, 4)
        8
    """
    return (size - kernel) // stride + 1


@dataclass(frozen=True)
class Convolution:
    """One 2D convolution (no padding) of the network.

    Attributes:
        index: Its position in the ``mlp`` Sequential (its tensors: ``mlp.<index>.*``).
        in_channels: Input channels.
        out_channels: Output channels (filters).
        kernel: Square kernel side.
        stride: Stride along both axes.
        in_size: Input ``(height, width)``.
        out_size: Output ``(height, width)``.
    """

    index: int
    in_channels: int
    out_channels: int
    kernel: int
    stride: int
    in_size: tuple[int, int]
    out_size: tuple[int, int]

    @property
    def weight_shape(self) -> tuple[int, int, int, int]:
        """``(out_channels, in_channels, kernel, kernel)``, torch's ``Conv2d`` layout."""
        return (self.out_channels, self.in_channels, self.kernel, self.kernel)


@dataclass(frozen=True)
class Linear:
    """One linear layer.

    Attributes:
        index: Its position in the ``mlp`` Sequential.
        n_in: Inputs.
        n_out: Outputs.
    """

    index: int
    n_in: int
    n_out: int

    @property
    def weight_shape(self) -> tuple[int, int]:
        """``(n_out, n_in)``, torch's ``Linear`` layout."""
        return (self.n_out, self.n_in)


@dataclass(frozen=True)
class Architecture:
    """A policy network's layers in order (see the module docstring).

    Attributes:
        obs_dim: The flat observation size.
        image: ``(height, width, channels)`` the observation is read as, or None (an MLP).
        convolutions: The convolutions, in order (empty for an MLP).
        linears: The linear layers, in order; the last one gives the output.
    """

    obs_dim: int
    image: tuple[int, int, int] | None
    convolutions: tuple[Convolution, ...]
    linears: tuple[Linear, ...]

    @property
    def layers(self) -> tuple[Convolution | Linear, ...]:
        """Every layer with weights, in order."""
        return (*self.convolutions, *self.linears)

    @property
    def flatten_index(self) -> int | None:
        """Where the flatten sits in the Sequential (None for an MLP)."""
        return self.convolutions[-1].index + 2 if self.convolutions else None

    def shapes(self, prefix: str) -> dict[str, tuple[int, ...]]:
        """Every weight and bias: ``"<prefix>.mlp.<index>.weight"`` -> shape."""
        out: dict[str, tuple[int, ...]] = {}
        for layer in self.layers:
            out[f"{prefix}.mlp.{layer.index}.weight"] = layer.weight_shape
            out[f"{prefix}.mlp.{layer.index}.bias"] = (layer.weight_shape[0],)
        return out


def architecture(
    obs_dim: int,
    out_dim: int,
    hidden_dims: Sequence[int],
    *,
    cnn: Sequence[tuple[int, int, int]] = (),
    image: tuple[int, int, int] | None = None,
) -> Architecture:
    """Lay out a policy network.

    Args:
        obs_dim: The flat observation size.
        out_dim: Outputs (actions, or 1 for a value).
        hidden_dims: The MLP's hidden widths.
        cnn: ``(channels, kernel, stride)`` of each convolution; empty for an MLP.
        image: ``(height, width, channels)`` of the observation; needed with ``cnn``.

    Raises:
        UserError: For convolutions without an image, an image that is not the
            observation, or a kernel larger than what reaches it.
    """
    if not cnn:
        dims = [obs_dim, *hidden_dims, out_dim]
        linears = tuple(
            Linear(2 * k, n_in, n_out)
            for k, (n_in, n_out) in enumerate(zip(dims[:-1], dims[1:], strict=True))
        )
        return Architecture(obs_dim, None, (), linears)
    if image is None:
        raise UserError(
            f"TrainConfig.cnn_channels needs an image observation (a task with "
            f"observation_shape), got a vector of {obs_dim}; leave cnn_channels empty "
            "for an MLP"
        )
    height, width, channels = image
    if height * width * channels != obs_dim:
        raise UserError(
            f"TrainConfig.observation_shape {image} must hold the observation's {obs_dim} "
            "values; train the task whose observation it is"
        )
    convs: list[Convolution] = []
    size, index = (height, width), 1
    for filters, kernel, stride in cnn:
        out = (conv_size(size[0], kernel, stride), conv_size(size[1], kernel, stride))
        if min(out) < 1:
            raise UserError(
                f"TrainConfig: convolution {len(convs) + 1} (kernel {kernel}, stride {stride}) "
                f"does not fit its {size[0]}x{size[1]} input (the observation {height}x"
                f"{width}); use smaller cnn_kernels or cnn_strides, or fewer layers"
            )
        convs.append(Convolution(index, channels, filters, kernel, stride, size, out))
        channels, size, index = filters, out, index + 2
    flat = channels * size[0] * size[1]
    dims = [flat, *hidden_dims, out_dim]
    first = index + 1  # after the flatten
    linears = tuple(
        Linear(first + 2 * k, n_in, n_out)
        for k, (n_in, n_out) in enumerate(zip(dims[:-1], dims[1:], strict=True))
    )
    return Architecture(obs_dim, image, tuple(convs), linears)


def architecture_of(
    config: TrainConfig, obs_dim: int, out_dim: int, hidden_dims: Sequence[int]
) -> Architecture:
    """:func:`architecture` with the config's convolutions and observation image.

    An image observation without ``cnn_channels`` gets an MLP on its flat values.

    Example:
        >>> from kelab.train.config import TrainConfig
        >>> config = TrainConfig(cnn_channels=(4,), cnn_kernels=(3,), cnn_strides=(1,),
        ...                      observation_shape=(5, 5, 2))
        >>> architecture_of(config, 50, 1, (8,)).convolutions[0].out_size
        (3, 3)
    """
    image = config.image if config.cnn else None
    return architecture(obs_dim, out_dim, hidden_dims, cnn=config.cnn, image=image)
