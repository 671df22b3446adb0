"""Checkpoints without pickle: weights in safetensors, everything else in JSON.

A checkpoint named ``best`` in a run directory is two files: ``best.json`` (task,
dimensions, scene fingerprint, training config, progress, library versions, and the name
and SHA-256 of its weights file) and ``best-<sha256 prefix>.safetensors`` (actor, critic,
observation normaliser and optimizer tensors). Saving writes the weights file first, then
renames the JSON over the old one (temp file, fsync, rename): the JSON rename is the
commit, so a crash or Ctrl-C at any moment leaves the previous checkpoint whole and
loadable. Loading reads only JSON and safetensors, checks the checksum, and never runs
code from the files. A checkpoint *spec* is a path to the JSON file (or to a run
directory, meaning its ``best``), or ``RUN_DIR:best`` / ``RUN_DIR:latest``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kelab._files import atomic_write_bytes
from kelab._validate import is_int, must
from kelab.errors import UserError

if TYPE_CHECKING:
    import numpy as np
    import torch

__all__ = [
    "FORMAT",
    "VERSION",
    "Checkpoint",
    "CheckpointError",
    "atomic_write_bytes",
    "load_checkpoint",
    "check_dtypes",
    "check_networks",
    "check_tensors",
    "network_shapes",
    "read_header",
    "read_meta",
    "refuse_weights_file",
    "resolve_spec",
    "save_checkpoint",
]

FORMAT = "kelab-checkpoint"
VERSION = 1
_MAX_JSON_BYTES = 4 * 1024 * 1024
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_REQUIRED = {
    "format": str,
    "version": int,
    "task": dict,
    "observation_dim": int,
    "action_dim": int,
    "train_config": dict,
    "iteration": int,
    "env_steps": int,
    "weights": dict,
}


_KINDS = {str: "a string", int: "an integer", dict: "a JSON object"}
_MAX_HEADER_BYTES = 16 * 1024 * 1024
_MAX_WEIGHTS_BYTES = 2 * 1024**3  # a policy's tensors (and its optimizer's) are far smaller
_MAX_DIGITS = 4300  # CPython's own int/str bound; a trainer's saved state holds 400-digit ints
_DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2,
    "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip
_FLOATS = ("F16", "F32", "F64")  # what a policy runs, as float32
_INTEGERS = ("I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64")
_COUNT = ".obs_normalizer.count"  # a network's one integer tensor (observations seen)
_STD = ".obs_normalizer._std"  # what a normaliser divides by (plus its eps)
# numpy's and torch's dtype names -> safetensors'
_DTYPE_NAMES = {
    "float16": "F16", "half": "F16", "float32": "F32", "float64": "F64", "double": "F64",
    "bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "bool": "BOOL",
    "int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64", "uint8": "U8",
    "uint16": "U16", "uint32": "U32", "uint64": "U64",
}  # fmt: skip


class CheckpointError(UserError):
    """A checkpoint file is missing, damaged, changed, or not a KELab checkpoint."""


class _BadJsonError(ValueError):
    """Why :func:`_parse_json` refused a document (its message is the reason)."""


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > _MAX_DIGITS:
        raise _BadJsonError(f"an integer of {digits} digits, more than {_MAX_DIGITS}")
    return int(text)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _BadJsonError(f"the key {key!r} twice in one object")
        out[key] = value
    return out


def _parse_json(raw: bytes) -> Any:
    """Parse untrusted JSON bytes; any problem raises :class:`_BadJsonError` with a one-line reason.

    Refuses what ``json.loads`` alone would accept or crash on: a key repeated in one object
    (the last would silently win), integers of more than ``_MAX_DIGITS`` digits, and nesting
    deep enough to exhaust the parser's recursion.
    """
    try:
        return json.loads(
            raw.decode("utf-8"), parse_int=_parse_int, object_pairs_hook=_no_duplicates
        )
    except _BadJsonError:
        raise
    except UnicodeDecodeError as err:
        raise _BadJsonError(f"not UTF-8 ({err})") from None
    except RecursionError:
        raise _BadJsonError("nested deeper than the parser's recursion limit") from None
    except ValueError as err:  # json.JSONDecodeError and anything else json refuses
        raise _BadJsonError(str(err)) from None


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint.

    Attributes:
        path: The checkpoint's JSON file.
        meta: Everything but the tensors (the JSON object).
        tensors: Name -> CPU tensor from the safetensors file, or numpy array when loaded
            with ``load_checkpoint(spec, arrays="numpy")`` (no torch needed).
    """

    path: Path
    meta: dict[str, Any]
    tensors: dict[str, torch.Tensor] | dict[str, np.ndarray]

    @property
    def observation_dim(self) -> int:
        """Observation size the policy was trained on."""
        return int(self.meta["observation_dim"])

    @property
    def action_dim(self) -> int:
        """Action size the policy outputs."""
        return int(self.meta["action_dim"])

    def prefixed(self, prefix: str) -> dict[str, torch.Tensor] | dict[str, np.ndarray]:
        """Tensors under ``prefix`` + ``"."``, with the prefix removed."""
        cut = len(prefix) + 1
        return {k[cut:]: v for k, v in self.tensors.items() if k.startswith(prefix + ".")}


def save_checkpoint(
    directory: str | os.PathLike[str],
    name: str,
    tensors: dict[str, torch.Tensor],
    meta: dict[str, Any],
) -> Path:
    """Save a checkpoint ``name`` in ``directory`` (see the module docstring).

    Args:
        directory: The run directory.
        name: ``"best"``, ``"latest"`` or another plain name.
        tensors: Name -> tensor (moved to CPU and made contiguous).
        meta: The JSON part; ``format``, ``version`` and ``weights`` are filled in.

    Returns:
        The checkpoint's JSON path.
    """
    from safetensors.torch import save as st_save

    if not _NAME.match(name):
        raise UserError(f"checkpoint name must be letters, digits, '_', '.', '-', got {name!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    flat = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    blob = st_save(flat, metadata={"format": FORMAT})
    digest = hashlib.sha256(blob).hexdigest()
    weights_name = f"{name}-{digest[:16]}.safetensors"
    weights_path = directory / weights_name
    if not weights_path.exists():
        atomic_write_bytes(weights_path, blob)
    full = {
        "format": FORMAT,
        "version": VERSION,
        **meta,
        "weights": {"file": weights_name, "sha256": digest, "bytes": len(blob)},
    }
    text = json.dumps(full, indent=2, sort_keys=False, allow_nan=False) + "\n"
    json_path = atomic_write_bytes(directory / f"{name}.json", text.encode("utf-8"))
    # the commit is done: older weights of this name are no longer referenced
    for old in directory.glob(f"{name}-*.safetensors"):
        if old.name != weights_name:
            try:
                old.unlink()
            except OSError:
                pass
    return json_path


def refuse_weights_file(spec: str | os.PathLike[str]) -> None:
    """Refuse a checkpoint spec naming the ``.safetensors`` weights instead of the ``.json``.

    A checkpoint is its JSON (``best.json``) plus the weights file it names
    (``best-<sha256>.safetensors``); only the JSON (or ``RUN_DIR:best``) loads it.

    Raises:
        CheckpointError: For a path ending in ``.safetensors``, naming the JSON next to it that
            uses those weights when there is one.
    """
    path = Path(os.fspath(spec))
    if path.suffix.lower() != ".safetensors":
        return
    fix = f"{path.parent}:best" if path.name.startswith("best") else "RUN_DIR:best"
    for candidate in sorted(path.parent.glob("*.json")) if path.parent.is_dir() else []:
        try:
            if candidate.stat().st_size > 1_000_000:  # a checkpoint's JSON is small
                continue
            meta = _parse_json(candidate.read_bytes())
        except (OSError, ValueError):
            continue
        weights = meta.get("weights") if isinstance(meta, dict) else None
        if isinstance(weights, dict) and weights.get("file") == path.name:
            fix = str(candidate)
            break
    raise CheckpointError(
        f"checkpoint {str(path)!r} is a .safetensors weights file; pass the checkpoint's "
        f".json (or RUN_DIR:best), not its weights file: {fix}"
    )


def resolve_spec(spec: str | os.PathLike[str]) -> Path:
    """Return the JSON path a checkpoint spec names.

    ``RUN_DIR:best`` / ``RUN_DIR:latest`` (or any ``RUN_DIR:NAME``), a run directory (its
    ``best``), or the JSON file itself.

    Raises:
        CheckpointError: When nothing is found there, naming what was looked for, or
            ``spec`` is not a path (None: what ``shipped_policy()`` returns for a task
            that ships no policy).
    """
    try:
        text = os.fspath(spec)
    except TypeError:  # None, a number, a list...: not a path at all
        fix = (
            "kelab.train.shipped.shipped_policy() returns None for a task that ships no "
            "trained policy: train one (kelab train TASK) and pass its RUN_DIR:best"
            if spec is None
            else "pass one of those as a str or pathlib.Path"
        )
        allowed = "a path (RUN_DIR:best, RUN_DIR:latest or a checkpoint .json)"
        raise CheckpointError(must("checkpoint", allowed, spec, fix)) from None
    if not isinstance(text, str) or not text:
        raise CheckpointError(f"a checkpoint spec must be a non-empty path, got {spec!r}")
    refuse_weights_file(text)
    path = Path(text)
    head, sep, tail = text.rpartition(":")
    if sep and head and _NAME.match(tail) and not path.exists():
        path = Path(head) / f"{tail}.json"
        if not path.is_file():
            raise CheckpointError(
                f"no checkpoint {tail!r} in {head!r}: {path} does not exist; a spec is "
                "RUN_DIR:best, RUN_DIR:latest or the path of a checkpoint .json"
            )
        return path
    if path.is_dir():
        if (path / "best.json").is_file():
            return path / "best.json"
        if (path / "latest.json").is_file():
            raise CheckpointError(
                f"{text!r} is a directory without best.json; pass {text}:latest or a "
                "checkpoint .json path"
            )
        raise CheckpointError(
            f"{text!r} holds no checkpoint (no best.json or latest.json); pass a run "
            "directory that saved one, RUN_DIR:best, RUN_DIR:latest or a checkpoint .json path"
        )
    if path.is_file():
        return path
    raise CheckpointError(
        f"checkpoint {text!r} does not exist; a spec is RUN_DIR:best, RUN_DIR:latest or the "
        "path of a checkpoint .json"
    )


def read_meta(spec: str | os.PathLike[str]) -> dict[str, Any]:
    """A checkpoint's checked JSON metadata alone (no tensors read, no torch).

    Raises:
        CheckpointError: As :func:`load_checkpoint` would for its JSON.

    Example:
        >>> read_meta("kelab/train/policies/CartPoleTask.json")["train_config"]["num_envs"]
        64
    """
    return _read_json(resolve_spec(spec))


def _read_json(path: Path) -> dict[str, Any]:
    size = path.stat().st_size
    if size > _MAX_JSON_BYTES:
        raise CheckpointError(
            f"{path} is {size} bytes, more than a checkpoint's JSON can be "
            f"({_MAX_JSON_BYTES}); it is not a KELab checkpoint"
        )
    with path.open("rb") as fh:
        raw = fh.read(_MAX_JSON_BYTES + 1)  # bounded: the file may grow after stat
    if len(raw) > _MAX_JSON_BYTES:
        raise CheckpointError(f"{path} grew past {_MAX_JSON_BYTES} bytes while being read")
    try:
        meta = _parse_json(raw)
    except _BadJsonError as err:
        raise CheckpointError(
            f"{path} is not valid JSON ({err}); the checkpoint is damaged or was changed: "
            "use another checkpoint (e.g. RUN_DIR:latest) or retrain"
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a KELab checkpoint (no format {FORMAT!r})")
    for key, kind in _REQUIRED.items():
        value = meta.get(key)
        if not (is_int(value) if kind is int else isinstance(value, kind)):
            raise CheckpointError(
                must(
                    f"{path}: field {key!r}",
                    _KINDS[kind],
                    value,
                    "the checkpoint is damaged or was changed",
                )
            )
    if meta["version"] != VERSION:
        raise CheckpointError(
            f"{path} has checkpoint version {meta['version']}; this KELab reads version {VERSION}"
        )
    for key in ("observation_dim", "action_dim"):
        if meta[key] < 1:
            raise CheckpointError(f"{path}: {key} must be >= 1, got {meta[key]}")
    return meta


def read_header(blob: bytes, where: str | os.PathLike[str]) -> dict[str, tuple[int, ...]]:
    """The tensor names and shapes of a safetensors file, checked against its bytes.

    Reads only the header (an 8-byte little-endian length, then JSON): every tensor must
    have a known dtype, a shape of ints >= 0 and data offsets inside the file whose span
    is exactly its shape's size, so nothing sized from it can be larger than the file.

    Args:
        blob: The whole file.
        where: The file's path, for the messages.

    Raises:
        CheckpointError: ``"<where> is not a valid safetensors file: <what is wrong>"``.

    Example:
        >>> import json
        >>> head = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})
        >>> read_header(len(head).to_bytes(8, "little") + head.encode() + bytes(8), "w.st")
        {'w': (2,)}
    """
    return {name: shape for name, (_, shape) in _header_entries(blob, where).items()}


def _header_entries(
    blob: bytes, where: str | os.PathLike[str]
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """:func:`read_header`'s checks; tensor name -> (safetensors dtype, shape)."""

    def bad(what: str) -> CheckpointError:
        return CheckpointError(f"{where} is not a valid safetensors file: {what}")

    if len(blob) < 8:
        raise bad(f"{len(blob)} bytes, shorter than the 8-byte header length")
    size = int.from_bytes(blob[:8], "little")
    if size > len(blob) - 8 or size > _MAX_HEADER_BYTES:
        raise bad(f"its header claims {size} bytes, but the file has {len(blob) - 8} after it")
    try:
        header = _parse_json(blob[8 : 8 + size])
    except _BadJsonError as err:
        raise bad(f"its header is not valid JSON ({err})") from None
    if not isinstance(header, dict):
        raise bad("its header is not a JSON object")
    data = len(blob) - 8 - size
    entries: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        entry = entry if isinstance(entry, dict) else {}
        dtype, shape, span = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if (
            dtype not in _DTYPE_BYTES
            or not isinstance(shape, list)
            or not all(is_int(n) and n >= 0 for n in shape)
            or not isinstance(span, list)
            or len(span) != 2
            or not all(is_int(n) for n in span)
        ):
            raise bad(f"tensor {name!r} has no valid dtype, shape and data_offsets")
        count = 1
        for n in shape:
            count *= n
        begin, end = span
        if not 0 <= begin <= end <= data or end - begin != count * _DTYPE_BYTES[dtype]:
            raise bad(
                f"tensor {name!r} ({dtype} {shape}) does not fit its data_offsets {span} "
                f"in {data} bytes of data"
            )
        entries[name] = (dtype, tuple(shape))
    return entries


def network_shapes(
    prefix: str,
    obs_dim: int,
    out_dim: int,
    hidden_dims: tuple[int, ...] | list[int],
    obs_normalization: bool,
    *,
    actor: bool,
    cnn: tuple[tuple[int, int, int], ...] = (),
    image: tuple[int, int, int] | None = None,
) -> dict[str, tuple[int, ...]]:
    """The tensors of a policy network as KELab saves it: name -> shape.

    :class:`~kelab.train.nets.PolicyNet`, with rsl-rl-lib's ``MLPModel`` names:
    ``mlp.<2k>.weight``/``.bias`` for each linear layer (a convolutional network's
    layers where :mod:`kelab.train.architecture` puts them), the observation
    normaliser's statistics when it normalises, and the actor's action std.

    Example:
        >>> network_shapes("actor", 4, 1, [8], False, actor=True)["actor.mlp.2.weight"]
        (1, 8)
    """
    from kelab.train.architecture import architecture

    arch = architecture(obs_dim, out_dim, hidden_dims, cnn=cnn, image=image)
    shapes: dict[str, tuple[int, ...]] = arch.shapes(prefix)
    if obs_normalization:
        for stat in ("_mean", "_var", "_std"):
            shapes[f"{prefix}.obs_normalizer.{stat}"] = (1, obs_dim)
        shapes[f"{prefix}.obs_normalizer.count"] = ()
    if actor:
        shapes[f"{prefix}.distribution.std_param"] = (out_dim,)
    return shapes


def _dims_text(dims: tuple[int, ...]) -> str:
    shown = ", ".join(str(n) for n in dims[:3])
    return f"[{shown}, ...] ({len(dims)} layers)" if len(dims) > 3 else f"[{shown}]"


def check_networks(path: Path, meta: dict[str, Any], shapes: dict[str, tuple[int, ...]]) -> None:
    """Refuse a checkpoint whose JSON sizes networks its weights do not hold.

    The actor (and the critic, when the weights hold one) must have exactly the tensors
    and shapes that ``observation_dim``, ``action_dim`` and ``train_config`` describe, so
    nothing is built from the JSON's sizes alone (an ``observation_dim`` of 10**9 or 300
    layers of 4096 units are refused here, not allocated).

    Args:
        path: The checkpoint's JSON, for the messages.
        meta: Its JSON object.
        shapes: Tensor name -> shape, from :func:`read_header` (or loaded tensors).

    Raises:
        CheckpointError: One line naming the JSON's field and the tensor that disagree.
    """
    from kelab.train.config import TrainConfig

    try:
        config = TrainConfig.from_dict(meta["train_config"])
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: bad train_config ({err})") from None
    obs_dim, act_dim = int(meta["observation_dim"]), int(meta["action_dim"])
    nets = [("actor", act_dim, config.actor_hidden_dims, True)]
    if any(name.startswith("critic.") for name in shapes):
        nets.append(("critic", 1, config.critic_hidden_dims, False))
    image = config.image if config.cnn else None
    for prefix, out_dim, hidden, actor in nets:
        try:
            want = network_shapes(
                prefix, obs_dim, out_dim, hidden, config.obs_normalization, actor=actor,
                cnn=config.cnn, image=image,
            )  # fmt: skip
        except ValueError as err:
            raise CheckpointError(f"{path}: bad train_config ({err})") from None
        have = {k: v for k, v in shapes.items() if k.startswith(prefix + ".")}
        if want == have:
            continue
        sizes = (
            f"observation_dim={obs_dim}, action_dim={act_dim}, train_config."
            f"{prefix}_hidden_dims={_dims_text(tuple(hidden))}, obs_normalization="
            f"{config.obs_normalization}"
        )
        if config.cnn:
            sizes += f", cnn_channels={list(config.cnn_channels)}, observation_shape={image}"
        wrong = [k for k in want if k in have and want[k] != have[k]]
        if wrong:
            key = wrong[0]
            detail = f"{key} of shape {have[key]}, not {want[key]}"
        else:
            missing = sorted(set(want) - set(have))
            extra = sorted(set(have) - set(want))
            detail = "; ".join(
                f"{label} {', '.join(keys[:3])}" + (f" (+{len(keys) - 3} more)" * (len(keys) > 3))
                for label, keys in (("missing", missing), ("unexpected", extra))
                if keys
            )
            detail = f"no such {prefix}: {detail}"
        raise CheckpointError(
            f"{path}: its JSON sizes the {prefix} as {sizes}, but its weights file holds "
            f"{detail}; the checkpoint is damaged or was changed: use another checkpoint"
        )


def check_dtypes(path: str | os.PathLike[str], dtypes: dict[str, str]) -> None:
    """Refuse tensors a policy cannot run as float32, by their safetensors dtype names.

    Every tensor must be a float KELab reads as float32 (``F32``; ``F16`` and ``F64`` are
    converted when loaded), but a normaliser's ``count``, which must be an integer. bfloat16
    and float8 (``BF16``, ``F8_E4M3``, ``F8_E5M2``) are refused with the way to convert them
    (numpy, which plays policies without torch, has neither); integer or bool weights are
    refused as damage.

    Args:
        path: The checkpoint's JSON, for the messages.
        dtypes: Tensor name -> safetensors dtype (``"F32"``, ``"BF16"``, ...).

    Raises:
        CheckpointError: One line naming the first tensor refused, its dtype and the fix.

    Example:
        >>> check_dtypes("best.json", {"actor.mlp.0.bias": "F16", "x.obs_normalizer.count": "I64"})
        >>> try:
        ...     check_dtypes("best.json", {"actor.mlp.0.bias": "BF16"})
        ... except CheckpointError as err:
        ...     print(str(err)[:72])
        best.json: tensor 'actor.mlp.0.bias' must be F32, F16 or F64 (KELab runs
    """
    for name, dtype in dtypes.items():
        if name.endswith(_COUNT):
            if dtype in _INTEGERS:
                continue
            raise CheckpointError(
                f"{path}: tensor {name!r} must be an integer (I64, the observations a "
                f"normaliser has seen), got {dtype}; the checkpoint is damaged or was changed: "
                "use another checkpoint or retrain"
            )
        if dtype in _FLOATS:
            continue
        if dtype == "BF16" or dtype.startswith("F8"):
            fix = (
                "save the weights as float32 (torch: {k: v.float() for k, v in "
                "tensors.items()}) with kelab.train.checkpoint.save_checkpoint"
            )
        else:
            fix = "weights are floats: the checkpoint is damaged or was changed; use another "
            fix += "checkpoint or retrain"
        raise CheckpointError(
            f"{path}: tensor {name!r} must be F32, F16 or F64 (KELab runs policies in "
            f"float32), got {dtype}; {fix}"
        )


def _dtype_name(value: Any) -> str:
    """The safetensors name of a numpy array's or torch tensor's dtype (``"F32"``, ...)."""
    text = str(getattr(value, "dtype", type(value).__name__)).removeprefix("torch.")
    return _DTYPE_NAMES.get(text, text)


def check_tensors(
    path: str | os.PathLike[str], tensors: dict[str, torch.Tensor] | dict[str, np.ndarray]
) -> None:
    """Refuse tensors a policy cannot run: :func:`check_dtypes`, and the normalisers' std.

    A normaliser maps ``x`` to ``(x - mean) / (std + eps)``: its ``std`` (a square root)
    must be finite and >= 0, or the policy's actions are NaN (a scale of 0), mirrored (a
    negative scale) or garbage. A std of 0, an observation that never changed in
    training, is kept (the eps scales it).

    Args:
        path: The checkpoint's JSON, for the messages.
        tensors: Name -> numpy array or torch tensor (a :class:`Checkpoint`'s ``tensors``).

    Raises:
        CheckpointError: One line naming the tensor, the value and the fix.
    """
    import numpy as np

    check_dtypes(path, {name: _dtype_name(value) for name, value in tensors.items()})
    for name, value in tensors.items():
        if not name.endswith(_STD):
            continue
        std = np.asarray(value.detach() if hasattr(value, "detach") else value, np.float64)
        bad = ~(np.isfinite(std) & (std >= 0))
        if bad.any():
            index = int(np.flatnonzero(bad.ravel())[0])
            got = float(std.ravel()[index])
            raise CheckpointError(
                f"{path}: tensor {name!r} must be finite and >= 0 (a normaliser divides by "
                f"std + eps), got {got!r} at index {index}; the checkpoint is damaged or was "
                "changed: use another checkpoint or retrain"
            )


def _as_float32(path: Path, name: str, dtype: str, value: Any) -> Any:
    """An F16 or F64 tensor (numpy or torch) as float32; F64 values must fit float32."""
    import numpy as np

    array = value if isinstance(value, np.ndarray) else value.numpy()
    with np.errstate(over="ignore"):
        narrow = array.astype(np.float32)
    if np.count_nonzero(np.isfinite(narrow)) != np.count_nonzero(np.isfinite(array)):
        raise CheckpointError(
            f"{path}: tensor {name!r} ({dtype}) must fit float32 (KELab runs policies in "
            f"float32; its largest value is {float(np.finfo(np.float32).max):.4g}), got "
            f"{float(np.abs(array[np.isfinite(array)]).max()):.4g}; the checkpoint is "
            "damaged or was changed: use another checkpoint or retrain"
        )
    if isinstance(value, np.ndarray):
        return narrow
    import torch

    return torch.from_numpy(narrow)


def load_checkpoint(spec: str | os.PathLike[str], *, arrays: str = "torch") -> Checkpoint:
    """Load a checkpoint from a spec (see :func:`resolve_spec`): JSON and safetensors only.

    Everything is checked before any tensor is made: the weights file's size against the
    one recorded, its SHA-256, its safetensors header against its bytes, and the networks
    the JSON describes against the header's shapes (:func:`check_networks`), and every
    tensor's dtype (:func:`check_dtypes`). F16 and F64 tensors are converted to float32
    (F16 exactly, F64 rounded to the nearest, as torch loads them into a float32 network),
    and the normalisers' std must be finite and >= 0 (:func:`check_tensors`).

    Args:
        spec: The checkpoint.
        arrays: ``"torch"`` (CPU tensors) or ``"numpy"`` (arrays; needs no torch).

    Raises:
        CheckpointError: For a missing file, invalid JSON (also a repeated key, an integer
            of more than 4,300 digits or nesting too deep to parse), a ``weights.bytes``
            missing or over 2 GiB, a weights file whose size or SHA-256 does not match,
            a file that is not safetensors, sizes in the JSON that the weights do not
            hold, a tensor that is bfloat16, float8, an integer or bool (but a normaliser's
            count, which must be an integer), F64 values beyond float32, or a normaliser
            std that is negative or not finite. One line naming the tensor and the fix.
    """
    from safetensors import SafetensorError

    if arrays == "numpy":
        from safetensors.numpy import load as st_load
    elif arrays == "torch":
        from safetensors.torch import load as st_load
    else:
        raise UserError(must("load_checkpoint arrays", "'torch' or 'numpy'", arrays))

    path = resolve_spec(spec)
    meta = _read_json(path)
    weights = meta["weights"]
    file = weights.get("file")
    digest = weights.get("sha256")
    if not isinstance(file, str) or not _NAME.match(file) or not isinstance(digest, str):
        raise CheckpointError(
            f"{path}: weights must name a file in the same folder and its sha256, got {weights!r}"
        )
    weights_path = path.parent / file
    if not weights_path.is_file():
        raise CheckpointError(f"{path} names weights file {file!r}, which is missing")
    recorded = weights.get("bytes")
    if not is_int(recorded) or not 8 <= recorded <= _MAX_WEIGHTS_BYTES:
        raise CheckpointError(
            must(
                f"{path}: weights.bytes",
                f"an integer from 8 to {_MAX_WEIGHTS_BYTES} (the weights file's size)",
                recorded,
                "the checkpoint is damaged or was changed: use another checkpoint or retrain",
            )
        )
    size = weights_path.stat().st_size
    if recorded != size:
        raise CheckpointError(
            f"weights file {weights_path} is {size} bytes, but {path} recorded {recorded!r}: "
            "it was changed or damaged after saving; use another checkpoint or retrain"
        )
    with weights_path.open("rb") as fh:
        blob = fh.read(recorded + 1)  # bounded: the file may grow after stat
    if len(blob) != recorded:
        raise CheckpointError(
            f"weights file {weights_path} changed size while being read (recorded {recorded} "
            "bytes); load it again when nothing is writing it"
        )
    actual = hashlib.sha256(blob).hexdigest()
    if actual != digest:
        raise CheckpointError(
            f"weights file {weights_path} does not match the sha256 recorded in {path} "
            f"(recorded {digest[:16]}..., file {actual[:16]}...): it was changed or damaged "
            "after saving; use another checkpoint or retrain"
        )
    entries = _header_entries(blob, weights_path)
    check_networks(path, meta, {name: shape for name, (_, shape) in entries.items()})
    check_dtypes(path, {name: dtype for name, (dtype, _) in entries.items()})  # before loading
    try:
        tensors = st_load(blob)
    except (SafetensorError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{weights_path} is not a valid safetensors file: {err}") from None
    for name, (dtype, _) in entries.items():
        if dtype in ("F16", "F64"):
            tensors[name] = _as_float32(path, name, dtype, tensors[name])
    check_tensors(path, tensors)
    return Checkpoint(path=path, meta=meta, tensors=tensors)
