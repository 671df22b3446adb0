"""A checkpoint's deterministic policy in numpy: what ``kelab play`` and ``kelab eval`` run.

Playing a policy needs no torch: :class:`NumpyActor` computes the same function as the
torch actor that trained it (:class:`~kelab.train.nets.PolicyNet`: the frozen normaliser,
the convolutions of an image policy, the linear layers with the config's hidden
activation between them, the Gaussian's mean as the action), from the weights that
:func:`~kelab.train.checkpoint.load_checkpoint` reads with safetensors' numpy API, and
clips the actions to [-1, 1] as the player sends them, its matrix products on one BLAS
thread (:mod:`kelab.train.blas_threads`). It agrees with
:class:`kelab.train.policy.CheckpointPolicy` (torch) within 1e-5
(``tests/train/test_numpy_actor.py``, every shipped policy).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from kelab.train.architecture import PIXEL_SCALE, architecture_of
from kelab.train.blas_threads import SPLIT_FROM, one_blas_thread
from kelab.train.checkpoint import Checkpoint, CheckpointError, check_networks, check_tensors
from kelab.train.config import TrainConfig

__all__ = ["ACTIVATIONS", "NORMALIZER_EPS", "NumpyActor", "finished_actions", "observation_batch"]

NORMALIZER_EPS = 1e-2
"""rsl-rl-lib's ``EmpiricalNormalization`` eps: ``(obs - mean) / (std + eps)``."""

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_erf = np.vectorize(math.erf, otypes=[np.float64])


def observation_batch(
    obs: npt.ArrayLike, observation_dim: int, image: tuple[int, ...] | None = None
) -> tuple[np.ndarray, bool]:
    """Observations as a float32 ``(N, observation_dim)`` batch, and whether one was given.

    The one check both policies (:class:`NumpyActor`, torch's ``CheckpointPolicy``) make.
    A policy trained on images (``image``: ``(height, width, channels)``) also takes them
    as the env gives them, ``(N, height, width, channels)`` or one image (uint8 or
    float), read flat.

    Args:
        obs: ``(N, observation_dim)`` observations, or one ``(observation_dim,)``.
        observation_dim: The size the policy was trained on.
        image: The image shape the policy was trained on, or None.

    Returns:
        The batch, and True when ``obs`` was a single observation (a batch of one).

    Raises:
        ValueError: For observations of another shape.

    Example:
        >>> batch, single = observation_batch([0.0, 1.0], 2)
        >>> batch.shape, single
        ((1, 2), True)
        >>> observation_batch(np.zeros((5, 3, 4, 2), np.uint8), 24, (3, 4, 2))[0].shape
        (5, 24)
    """
    x = np.asarray(obs, dtype=np.float32)
    if image is not None and x.shape[-3:] == tuple(image) and x.ndim in (3, 4):
        x = x.reshape(-1, observation_dim) if x.ndim == 4 else x.reshape(observation_dim)
    single = x.ndim == 1
    if single:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != observation_dim:
        images = f", (N, {', '.join(map(str, image))})" if image is not None else ""
        raise ValueError(
            f"observations must have shape (N, {observation_dim}){images} or one of them, "
            f"got {np.shape(obs)}"
        )
    return x, single


def finished_actions(out: np.ndarray, single: bool) -> np.ndarray:
    """A policy's raw batch of actions clipped to [-1, 1]; one row back when ``single``.

    Raises:
        ValueError: When any action is NaN.
    """
    out = np.clip(out, -1.0, 1.0)
    if not math.isfinite(float(np.abs(out).sum())):
        raise ValueError("the policy produced NaN actions (observations out of range?)")
    return out[0] if single else out


def _elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def _selu(x: np.ndarray) -> np.ndarray:
    return _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(np.minimum(x, 0)))


def _gelu(x: np.ndarray) -> np.ndarray:  # torch's exact (erf) GELU
    return (0.5 * x * (1.0 + _erf(x.astype(np.float64) / math.sqrt(2.0)))).astype(x.dtype)


def _silu(x: np.ndarray) -> np.ndarray:  # x * sigmoid(x), in float64 (no overflow warning)
    x64 = x.astype(np.float64)
    return (x64 / (1.0 + np.exp(-x64))).astype(x.dtype)


ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "elu": _elu,
    "relu": lambda x: np.maximum(x, 0),
    "tanh": np.tanh,
    "selu": _selu,
    "gelu": _gelu,
    "silu": _silu,
}
"""``TrainConfig.activation`` -> the same function on float32 arrays (rsl-rl-lib's)."""


class NumpyActor:
    """The deterministic policy of a checkpoint in numpy: observations in, clipped actions out.

    Args:
        checkpoint: A checkpoint loaded with ``load_checkpoint(spec, arrays="numpy")`` (one
            loaded with torch tensors works too, converted to arrays).

    Raises:
        CheckpointError: When the checkpoint's JSON and weights disagree, its
            ``train_config`` is bad, a tensor is not a float it runs as float32 or holds
            NaN, a normaliser's std is negative (:func:`~kelab.train.checkpoint.check_tensors`),
            or its activation has no numpy form here.

    Example:
        >>> from kelab.train.checkpoint import load_checkpoint
        >>> from kelab.train.shipped import shipped_policy
        >>> spec = shipped_policy("kelab.tasks.cartpole:CartPoleTask")
        >>> actor = NumpyActor(load_checkpoint(spec, arrays="numpy"))
        >>> actor(np.zeros((3, 4), np.float32)).shape
        (3, 1)
    """

    def __init__(self, checkpoint: Checkpoint) -> None:
        shapes = {k: tuple(v.shape) for k, v in checkpoint.tensors.items()}
        check_networks(checkpoint.path, checkpoint.meta, shapes)  # before building anything
        check_tensors(checkpoint.path, checkpoint.tensors)  # load_checkpoint's, for one made here
        tensors = {k: np.asarray(v) for k, v in checkpoint.prefixed("actor").items()}
        config = TrainConfig.from_dict(checkpoint.meta["train_config"])  # checked just above
        if config.activation not in ACTIVATIONS:
            raise CheckpointError(
                f"{checkpoint.path}: train_config.activation must be one of "
                f"{tuple(ACTIVATIONS)} to play without torch, got {config.activation!r}; "
                "use kelab.train.policy.CheckpointPolicy (needs kelab[train])"
            )
        for key, value in tensors.items():
            if value.dtype.kind == "f" and not np.isfinite(value).all():
                raise CheckpointError(
                    f"{checkpoint.path}: actor tensor {key!r} holds NaN or infinite values"
                )
        self.observation_dim = checkpoint.observation_dim
        self.action_dim = checkpoint.action_dim
        self.activation_name = config.activation
        self.activation = ACTIVATIONS[config.activation]
        self.architecture = architecture_of(
            config, self.observation_dim, self.action_dim, config.actor_hidden_dims
        )  # checked by check_networks above
        self.image = config.image  # what the observations may come as
        #: Per convolution: its layer, its weights ``(out, in * k * k)`` and bias ``(out,)``.
        self.convolutions = [
            (
                conv,
                np.ascontiguousarray(
                    tensors[f"mlp.{conv.index}.weight"].reshape(conv.out_channels, -1).T,
                    dtype=np.float32,
                ),
                tensors[f"mlp.{conv.index}.bias"].astype(np.float32),
            )
            for conv in self.architecture.convolutions
        ]
        self.layers = [
            (
                np.ascontiguousarray(tensors[f"mlp.{linear.index}.weight"].T, dtype=np.float32),
                tensors[f"mlp.{linear.index}.bias"].astype(np.float32),
            )
            for linear in self.architecture.linears
        ]
        #: The multiply-adds of the largest matrix product per observation.
        self.largest_product = max(
            [w.size for w in (weight for weight, _ in self.layers)]
            + [w.size * c.out_size[0] * c.out_size[1] for c, w, _ in self.convolutions]
        )
        self.mean: np.ndarray | None = None
        self.scale: np.ndarray | None = None
        if config.obs_normalization:
            self.mean = tensors["obs_normalizer._mean"].astype(np.float32)
            self.scale = (tensors["obs_normalizer._std"] + np.float32(NORMALIZER_EPS)).astype(
                np.float32
            )

    def __call__(self, obs: npt.ArrayLike) -> np.ndarray:
        """Actions for ``(N, obs_dim)`` or ``(obs_dim,)`` observations, in [-1, 1].

        The matrix products run on one BLAS thread (``one_blas_thread``, in
        :mod:`kelab.train.blas_threads`): faster for a policy's small products, and the
        same bits on any number of cores; the BLAS's own thread count is back on return.

        Raises:
            ValueError: For observations of another size, or NaN actions.
        """
        x, single = observation_batch(obs, self.observation_dim, self.image)
        if len(x) * self.largest_product < SPLIT_FROM:  # no BLAS thread would start
            return self._forward(x, single)
        with one_blas_thread():
            return self._forward(x, single)

    def _forward(self, x: np.ndarray, single: bool) -> np.ndarray:
        """:meth:`__call__` of a batch, on the BLAS's threads as they are set."""
        if self.mean is not None:
            x = (x - self.mean) / self.scale
        if self.convolutions:
            x = self._convolve(x)
        last = len(self.layers) - 1
        for k, (weight, bias) in enumerate(self.layers):
            x = x @ weight + bias
            if k < last:
                x = self.activation(x)
        return finished_actions(x, single)

    def _convolve(self, x: np.ndarray) -> np.ndarray:
        """The convolutions on flat images ``(N, H*W*C)``; flat features ``(N, F)`` out.

        Each is a matrix product over the kernel's windows (``sliding_window_view``), as
        torch's ``Conv2d`` without padding computes it, then the activation.
        """
        image = self.architecture.image
        assert image is not None
        n = x.shape[0]
        h = (x.reshape(n, *image) * np.float32(PIXEL_SCALE)).transpose(0, 3, 1, 2)
        for conv, weight, bias in self.convolutions:
            k, s = conv.kernel, conv.stride
            oh, ow = conv.out_size
            windows = sliding_window_view(h, (k, k), axis=(2, 3))[:, :, ::s, ::s][:, :, :oh, :ow]
            # (N, C, oh, ow, k, k) -> (N, oh, ow, C * k * k), in the weights' (C, k, k) order
            cols = windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, -1)
            out = self.activation(cols @ weight + bias)  # (N * oh * ow, out)
            h = out.reshape(n, oh, ow, conv.out_channels).transpose(0, 3, 1, 2)
        return np.ascontiguousarray(h).reshape(n, -1)  # (N, C, h, w) flat, as nn.Flatten
