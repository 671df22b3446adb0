"""Tensors a policy cannot run (#37): dtypes and normaliser scales refused when a checkpoint loads.

A checkpoint's weights are floats KELab runs in float32: F32 as is, F16 and F64 read as
float32; bfloat16, float8, integer or bool weights, and an observation normaliser whose
std is negative or not finite, are one CheckpointError at load time, so ``kelab play``,
``kelab eval`` and ``kelab export`` each print one line and exit 2.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from prestart import Prestart
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from kelab.train.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from kelab.train.numpy_actor import NumpyActor
from kelab.train.player import RLPlayer
from kelab.train.policy import CheckpointPolicy
from kelab.train.shipped import shipped_policy

_CARTPOLE = "kelab.tasks.cartpole:CartPoleTask"
_HUMANOID = "kelab.tasks.humanoid:HumanoidTask"  # its actor has an observation normaliser


def _doctored(tmp_path: Path, target: str, change) -> Path:
    """A shipped policy copied to ``tmp_path`` with ``change(tensors)`` applied (JSON re-hashed)."""
    src = shipped_policy(target)
    meta = json.loads(src.read_text())
    tensors = st_load((src.parent / meta["weights"]["file"]).read_bytes())
    change(tensors)
    blob = st_save(tensors)
    name = "best-doctored.safetensors"
    (tmp_path / name).write_bytes(blob)
    meta["weights"] = {"file": name, "sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob)}
    path = tmp_path / "best.json"
    path.write_text(json.dumps(meta))
    return path


def _cast(key: str, dtype: torch.dtype):
    def change(tensors):
        tensors[key] = tensors[key].to(dtype)

    return change


def _set_std(value: float):
    def change(tensors):
        tensors["actor.obs_normalizer._std"][0, 3] = value

    return change


_REFUSED_DTYPES = [
    (torch.bfloat16, "BF16", "float32"),
    (torch.float8_e4m3fn, "F8_E4M3", "float32"),
    (torch.float8_e5m2, "F8_E5M2", "float32"),
    (torch.int32, "I32", "damaged"),
    (torch.int64, "I64", "damaged"),
    (torch.bool, "BOOL", "damaged"),
    (torch.uint8, "U8", "damaged"),
]


@pytest.mark.parametrize(
    ("dtype", "name", "fix"), _REFUSED_DTYPES, ids=[r[1] for r in _REFUSED_DTYPES]
)
@pytest.mark.parametrize("arrays", ["numpy", "torch"])
def test_weights_the_actor_cannot_run_as_float_are_refused_naming_tensor_and_dtype(
    tmp_path, dtype, name, fix, arrays
):
    path = _doctored(tmp_path, _CARTPOLE, _cast("actor.mlp.2.weight", dtype))
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path, arrays=arrays)
    text = str(err.value)
    assert "tensor 'actor.mlp.2.weight' must be" in text and f"got {name};" in text, text
    assert fix in text and "\n" not in text, text
    with pytest.raises(CheckpointError, match=f"got {name};"):
        RLPlayer(path, render_mode=None)


def test_a_bf16_tensor_outside_the_actor_is_refused_too(tmp_path):
    """numpy has no bfloat16: one anywhere in the file used to be a KeyError for play."""
    path = _doctored(tmp_path, _HUMANOID, _cast("actor.obs_normalizer._var", torch.bfloat16))
    with pytest.raises(CheckpointError, match=r"'actor\.obs_normalizer\._var' must be .*got BF16"):
        load_checkpoint(path, arrays="numpy")


def test_the_normaliser_count_must_be_an_integer(tmp_path):
    path = _doctored(tmp_path, _HUMANOID, _cast("actor.obs_normalizer.count", torch.float32))
    with pytest.raises(CheckpointError, match=r"'actor\.obs_normalizer\.count' must be an integer"):
        load_checkpoint(path)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_f16_and_f64_weights_load_as_float32_and_play_like_the_torch_actor(tmp_path, dtype):
    path = _doctored(tmp_path, _HUMANOID, _cast("actor.mlp.0.weight", dtype))
    numpy_ckpt, torch_ckpt = load_checkpoint(path, arrays="numpy"), load_checkpoint(path)
    assert numpy_ckpt.tensors["actor.mlp.0.weight"].dtype == np.float32
    assert torch_ckpt.tensors["actor.mlp.0.weight"].dtype == torch.float32
    obs = np.random.default_rng(0).normal(0.0, 1.0, (64, 17)).astype(np.float32)
    mine, theirs = NumpyActor(numpy_ckpt)(obs), CheckpointPolicy(torch_ckpt)(obs)
    assert np.abs(mine - theirs).max() <= 1e-5


def test_f64_values_beyond_float32_are_refused(tmp_path):
    def change(tensors):
        tensors["actor.mlp.0.bias"] = tensors["actor.mlp.0.bias"].to(torch.float64)
        tensors["actor.mlp.0.bias"][5] = 1e300

    path = _doctored(tmp_path, _HUMANOID, change)
    with pytest.raises(CheckpointError, match=r"'actor\.mlp\.0\.bias' \(F64\) must fit float32"):
        load_checkpoint(path, arrays="numpy")


@pytest.mark.parametrize("value", [-0.01, -0.5, float("nan"), float("inf")])
@pytest.mark.parametrize("arrays", ["numpy", "torch"])
def test_a_negative_or_non_finite_normaliser_std_is_refused_at_load(tmp_path, value, arrays):
    path = _doctored(tmp_path, _HUMANOID, _set_std(value))
    with pytest.raises(CheckpointError, match=r"'actor\.obs_normalizer\._std' must be finite and "
                       r">= 0 .*index 3") as err:  # fmt: skip
        load_checkpoint(path, arrays=arrays)
    assert "\n" not in str(err.value)


def test_a_zero_std_is_a_constant_observation_and_plays(tmp_path):
    """std 0 (an observation that never changed in training) scales by the eps: kept."""
    path = _doctored(tmp_path, _HUMANOID, _set_std(0.0))
    actor = NumpyActor(load_checkpoint(path, arrays="numpy"))
    assert np.isfinite(actor(np.ones((4, 17), np.float32))).all()


def test_a_checkpoint_built_in_python_is_checked_by_both_policies(tmp_path):
    """The policies check a Checkpoint made by hand as load_checkpoint does."""
    good = load_checkpoint(shipped_policy(_HUMANOID))
    bf16 = dict(
        good.tensors, **{"actor.mlp.0.weight": good.tensors["actor.mlp.0.weight"].bfloat16()}
    )
    std = good.tensors["actor.obs_normalizer._std"].clone()
    std[0, 0] = -1.0
    negative = dict(good.tensors, **{"actor.obs_normalizer._std": std})
    for tensors, says in ((bf16, "got BF16"), (negative, "must be finite and >= 0")):
        ckpt = Checkpoint(path=good.path, meta=good.meta, tensors=tensors)
        for policy in (NumpyActor, CheckpointPolicy):
            with pytest.raises(CheckpointError, match=says):
                policy(ckpt)


# ------------------------------------------------------------------ the command line
_NO_TORCH = """
import sys
class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise ImportError("torch is blocked in this test")
        return None
sys.meta_path.insert(0, _Refuse())
"""


def _main_script(args: list[str], no_torch: bool) -> str:
    """``kelab ARGS`` as a ``python -c`` script (torch refused at import with ``no_torch``)."""
    prelude = _NO_TORCH if no_torch else ""
    return prelude + textwrap.dedent(f"""
        import sys
        from kelab.cli import main
        sys.exit(main({args!r}))
    """)


def _kelab(args: list[str], cwd: Path, no_torch: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _main_script(args, no_torch)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "SDL_VIDEODRIVER": "dummy"},
    )


def _refuse_bf16(args: list[str], no_torch: bool) -> Prestart:
    """``kelab ARGS`` on a checkpoint with a bf16 tensor, in a folder of its own holding it
    (``{spec}`` in ``args``), started early, beside the suite (tests/prestart.py)."""

    def command(folder: Path) -> list[str]:
        spec = str(_doctored(folder, _CARTPOLE, _cast("actor.mlp.0.weight", torch.bfloat16)))
        return [sys.executable, "-c", _main_script([a.format(spec=spec) for a in args], no_torch)]

    return Prestart(command, env={**os.environ, "SDL_VIDEODRIVER": "dummy"}, timeout=300)


BF16_REFUSALS = [
    _refuse_bf16(["play", "CartPole-v0", "--checkpoint", "{spec}", "--video", "p.mp4"], True),
    _refuse_bf16(["eval", "CartPole-v0", "--checkpoint", "{spec}", "--episodes", "1"], True),
    _refuse_bf16(["export", "CartPole-v0", "--checkpoint", "{spec}", "--out", "p.onnx"], False),
]


@pytest.mark.prestart(BF16_REFUSALS[0])
@pytest.mark.prestart(BF16_REFUSALS[1])
@pytest.mark.prestart(BF16_REFUSALS[2])
def test_play_eval_and_export_refuse_bf16_weights_in_one_line_exit_2():
    for job in BF16_REFUSALS:
        done = job.result()
        assert done.returncode == 2, (done.args, done.stderr[-2000:])
        assert done.stderr.count("\n") == 1, done.stderr[-2000:]
        assert done.stderr.startswith("kelab: error: ") and "got BF16;" in done.stderr
        assert "'actor.mlp.0.weight'" in done.stderr
        assert not (done.folder / "p.onnx").exists() and not (done.folder / "p.mp4").exists()


def test_export_refuses_a_normaliser_it_would_turn_into_nan_in_one_line(tmp_path):
    path = _doctored(tmp_path, _HUMANOID, _set_std(-0.01))  # std + eps = 0: x / 0
    out = tmp_path / "h.onnx"
    done = _kelab(["export", "Humanoid-v0", "--checkpoint", str(path), "--out", str(out)], tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "must be finite and >= 0" in done.stderr, done.stderr
    assert not out.exists()
