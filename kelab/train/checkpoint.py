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

if TYPE_CHECKING:
    import torch

__all__ = [
    "FORMAT",
    "VERSION",
    "Checkpoint",
    "CheckpointError",
    "atomic_write_bytes",
    "load_checkpoint",
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


class CheckpointError(ValueError):
    """A checkpoint file is missing, damaged, changed, or not a KELab checkpoint."""


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint.

    Attributes:
        path: The checkpoint's JSON file.
        meta: Everything but the tensors (the JSON object).
        tensors: Name -> CPU tensor, from the safetensors file.
    """

    path: Path
    meta: dict[str, Any]
    tensors: dict[str, torch.Tensor]

    @property
    def observation_dim(self) -> int:
        """Observation size the policy was trained on."""
        return int(self.meta["observation_dim"])

    @property
    def action_dim(self) -> int:
        """Action size the policy outputs."""
        return int(self.meta["action_dim"])

    def prefixed(self, prefix: str) -> dict[str, torch.Tensor]:
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
        raise ValueError(f"checkpoint name must be letters, digits, '_', '.', '-', got {name!r}")
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
            meta = json.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
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
        CheckpointError: When nothing is found there, naming what was looked for.
    """
    text = os.fspath(spec)
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


def _read_json(path: Path) -> dict[str, Any]:
    size = path.stat().st_size
    if size > _MAX_JSON_BYTES:
        raise CheckpointError(
            f"{path} is {size} bytes, more than a checkpoint's JSON can be "
            f"({_MAX_JSON_BYTES}); it is not a KELab checkpoint"
        )
    raw = path.read_bytes()
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
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


def load_checkpoint(spec: str | os.PathLike[str]) -> Checkpoint:
    """Load a checkpoint from a spec (see :func:`resolve_spec`): JSON and safetensors only.

    Raises:
        CheckpointError: For a missing file, invalid JSON, a weights file whose SHA-256
            does not match the JSON, or a file that is not safetensors.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load as st_load

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
    blob = weights_path.read_bytes()
    actual = hashlib.sha256(blob).hexdigest()
    if actual != digest:
        raise CheckpointError(
            f"weights file {weights_path} does not match the sha256 recorded in {path} "
            f"(recorded {digest[:16]}..., file {actual[:16]}...): it was changed or damaged "
            "after saving; use another checkpoint or retrain"
        )
    try:
        tensors = st_load(blob)
    except (SafetensorError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{weights_path} is not a valid safetensors file: {err}") from None
    return Checkpoint(path=path, meta=meta, tensors=tensors)
