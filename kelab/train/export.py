"""A checkpoint's policy as an ONNX graph, for any ONNX runtime (``kelab export``).

The graph maps raw float32 observations ``[N, observation_dim]`` to the actions
``ke.RLPlayer.act`` sends (``[N, action_dim]``): the frozen observation normaliser, the
linear layers and their activation, and the clipping to [-1, 1] are all in it. A policy
of an image task takes its uint8 images ``[N, height, width, channels]`` as the env gives
them (``kelab.observation_shape`` in the metadata), and its convolutions are ``Conv``
nodes. It is
built from the weights with ``onnx.helper`` (no torch), and its metadata names the task,
the sizes and the checkpoint's weights hash (``kelab.task``, ``kelab.observation_dim``,
``kelab.action_dim``, ``kelab.checkpoint_sha256``, ``kelab.checkpoint``). The file is
written atomically. Needs the export extra: ``pip install 'kelab[export]'``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kelab._files import atomic_write_bytes, make_parent
from kelab.errors import MissingExtraError, UserError
from kelab.train.architecture import PIXEL_SCALE

if TYPE_CHECKING:
    import onnx

    from kelab.rl.task import Task
    from kelab.train.numpy_actor import NumpyActor

__all__ = [
    "INSTALL_HINT",
    "OPSET",
    "export_onnx",
    "policy_graph",
]

OPSET = 17
"""The ONNX opset the graphs use (onnxruntime >= 1.13 runs it)."""

INSTALL_HINT = "exporting needs the export extra: pip install 'kelab[export]'"

_SELU = {"alpha": 1.6732632423543772848170429916717, "gamma": 1.0507009873554804934193349852946}


def _require_onnx() -> None:
    import importlib.util

    if importlib.util.find_spec("onnx") is None:
        raise MissingExtraError(f"onnx not installed; {INSTALL_HINT}")


def policy_graph(actor: NumpyActor, metadata: dict[str, str]) -> onnx.ModelProto:
    """The ONNX model of ``actor``: observations ``[N, obs_dim]`` -> clipped actions.

    Args:
        actor: The policy (its layers, activation name and normaliser).
        metadata: Strings stored as the model's ``metadata_props``.

    Returns:
        A checked ``onnx.ModelProto`` (opset :data:`OPSET`).
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: object) -> str:
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def activate(x: str, out: str) -> str:
        name, k = actor.activation_name, out
        if name == "elu":
            return node("Elu", [x], out, alpha=1.0)
        if name == "relu":
            return node("Relu", [x], out)
        if name == "tanh":
            return node("Tanh", [x], out)
        if name == "selu":
            return node("Selu", [x], out, **_SELU)
        if name == "silu":  # x * sigmoid(x)
            return node("Mul", [x, node("Sigmoid", [x], f"{k}_s")], out)
        # gelu, exact: 0.5 x (1 + erf(x / sqrt 2))
        scaled = node("Mul", [x, const(f"{k}_rsqrt2", np.float32(1 / math.sqrt(2)))], f"{k}_a")
        erf = node("Erf", [scaled], f"{k}_b")
        one = node("Add", [erf, const(f"{k}_one", np.float32(1.0))], f"{k}_c")
        half = node("Mul", [x, const(f"{k}_half", np.float32(0.5))], f"{k}_d")
        return node("Mul", [half, one], out)

    def shape(name: str, dims: list[int]) -> str:
        inits.append(numpy_helper.from_array(np.asarray(dims, dtype=np.int64), name))
        return name

    x = "observations"
    image = actor.image
    if image is not None:  # uint8 images as the env gives them, read flat
        x = node("Cast", [x], "pixels", to=TensorProto.FLOAT)
        x = node("Reshape", [x, shape("flat_shape", [-1, actor.observation_dim])], "flat")
    if actor.mean is not None and actor.scale is not None:
        x = node("Sub", [x, const("obs_mean", actor.mean)], "centred")
        x = node("Div", [x, const("obs_scale", actor.scale)], "normalised")
    if actor.convolutions:
        arch_image = actor.architecture.image
        assert arch_image is not None
        x = node("Reshape", [x, shape("image_shape", [-1, *arch_image])], "images")
        x = node("Transpose", [x], "channels_first", perm=[0, 3, 1, 2])
        x = node("Mul", [x, const("pixel_scale", np.float32(PIXEL_SCALE))], "scaled")
        for k, (conv, weight, bias) in enumerate(actor.convolutions):
            kernel = weight.T.reshape(conv.weight_shape)  # back to (out, in, k, k)
            x = node(
                "Conv",
                [x, const(f"conv_w{k}", kernel), const(f"conv_b{k}", bias)],
                f"conv{k}",
                kernel_shape=[conv.kernel, conv.kernel],
                strides=[conv.stride, conv.stride],
            )
            x = activate(x, f"conv_act{k}")
        x = node("Flatten", [x], "features", axis=1)
    last = len(actor.layers) - 1
    for k, (weight, bias) in enumerate(actor.layers):
        x = node("MatMul", [x, const(f"w{k}", weight)], f"matmul{k}")
        x = node("Add", [x, const(f"b{k}", bias)], f"linear{k}")
        if k < last:
            x = activate(x, f"hidden{k}")
    node("Clip", [x, const("low", np.float32(-1.0)), const("high", np.float32(1.0))], "actions")
    if image is not None:
        obs = helper.make_tensor_value_info("observations", TensorProto.UINT8, ["N", *image])
    else:
        obs = helper.make_tensor_value_info(
            "observations", TensorProto.FLOAT, ["N", actor.observation_dim]
        )
    actions = helper.make_tensor_value_info("actions", TensorProto.FLOAT, ["N", actor.action_dim])
    graph = helper.make_graph(nodes, "kelab_policy", [obs], [actions], inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="kelab"
    )
    model.ir_version = 8  # what onnxruntime >= 1.13 reads
    helper.set_model_props(model, metadata)
    onnx.checker.check_model(model, full_check=True)
    return model


def _check_out(out: str | os.PathLike[str]) -> Path:
    path = Path(os.fspath(out))
    if path.suffix.lower() != ".onnx":
        raise UserError(
            f"--out must be a file ending in .onnx, got {str(path)!r}; e.g. policy.onnx"
        )
    if path.is_dir():
        raise UserError(f"--out must be a file, got the folder {str(path)!r}; add a file name")
    return make_parent(path, "--out")  # a missing folder is created, as play --video does


def export_onnx(
    task: str | type[Task] | Task,
    out: str | os.PathLike[str],
    checkpoint: str | os.PathLike[str] | None = None,
) -> Path:
    """Write ``checkpoint``'s policy for ``task`` as an ONNX file at ``out`` (atomically).

    Args:
        task: The task it plays: a built-in id (``"CartPole-v0"``), ``"module:TaskClass"``,
            a ke.Task subclass or a ke.Task; the checkpoint's task and sizes must match it.
        out: The ``.onnx`` file to write (its folder must exist).
        checkpoint: A checkpoint spec; None: the task's shipped policy.

    Returns:
        The path written.

    Raises:
        MissingExtraError: Without the export extra (onnx); an ImportError too.
        UserError: For a bad ``out``, an unknown task, a task without a shipped policy,
            or a checkpoint that does not fit the task (CheckpointError).

    Example:
        >>> import tempfile, onnx
        >>> path = export_onnx("CartPole-v0", tempfile.mkdtemp() + "/cartpole.onnx")
        >>> {p.key: p.value for p in onnx.load(path).metadata_props}["kelab.task"]
        'kelab/CartPole-v0'
    """
    _require_onnx()
    path = _check_out(out)
    from kelab.train.player import RLPlayer

    if checkpoint is None:
        from kelab.tasks.registry import resolve_task
        from kelab.train.shipped import shipped_policy

        if isinstance(task, str):
            class_path = resolve_task(task)[1]
        else:
            cls = task if isinstance(task, type) else type(task)
            class_path = f"{cls.__module__}:{cls.__qualname__}"
        shipped = shipped_policy(class_path)
        if shipped is None:
            raise UserError(
                f"KELab ships no policy for {class_path}; pass a checkpoint of yours "
                "(--checkpoint RUN_DIR:best)"
            )
        checkpoint = shipped
    player = RLPlayer(checkpoint, render_mode=None, task=task)
    meta = player.checkpoint.meta
    task_meta = meta.get("task") if isinstance(meta.get("task"), dict) else {}
    metadata = {
        "kelab.task": str(task_meta.get("id") or task_meta.get("class") or ""),
        "kelab.task_class": str(task_meta.get("class") or ""),
        "kelab.observation_dim": str(player.observation_dim),
        "kelab.observation_shape": json.dumps(list(player.policy.image or ())),
        "kelab.action_dim": str(player.action_dim),
        "kelab.checkpoint_sha256": str(meta["weights"]["sha256"]),
        "kelab.checkpoint": str(player.checkpoint.path),
        "kelab.actions": "clipped to [-1, 1], as RLPlayer.act sends them",
    }
    model = policy_graph(player.policy, metadata)
    return atomic_write_bytes(path, model.SerializeToString())
