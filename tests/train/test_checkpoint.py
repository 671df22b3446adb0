"""Checkpoints: atomic saves, specs, and tampered or hostile files refused clearly."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil

import pytest
import torch

from kelab.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


def _save(directory, value: float, name: str = "best"):
    tensors = {"actor.w": torch.full((3, 2), value)}
    meta = {
        "task": {"id": None, "class": "x:Y"},
        "observation_dim": 2,
        "action_dim": 3,
        "train_config": {},
        "iteration": int(value),
        "env_steps": 0,
    }
    return save_checkpoint(directory, name, tensors, meta)


def test_save_and_load_round_trip_and_specs(tmp_path):
    path = _save(tmp_path, 1.0)
    assert path == tmp_path / "best.json"
    for spec in (f"{tmp_path}:best", tmp_path, path, str(path)):
        assert load_checkpoint(spec).tensors["actor.w"].tolist() == [[1.0, 1.0]] * 3
    _save(tmp_path, 2.0)  # replaces: the old weights file is gone
    assert len(list(tmp_path.glob("best-*.safetensors"))) == 1
    assert load_checkpoint(tmp_path).meta["iteration"] == 2
    with pytest.raises(CheckpointError, match="no checkpoint 'latest'"):
        load_checkpoint(f"{tmp_path}:latest")
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.json")
    only_latest, empty = tmp_path / "only_latest", tmp_path / "empty"
    _save(only_latest, 3.0, name="latest")
    empty.mkdir()
    with pytest.raises(CheckpointError, match=r"without best.json; pass .*only_latest:latest"):
        load_checkpoint(only_latest)
    with pytest.raises(CheckpointError, match=r"holds no checkpoint \(no best.json or latest"):
        load_checkpoint(empty)


@pytest.mark.parametrize("crash_at", ["weights", "json"])
def test_a_crash_mid_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch, crash_at):
    _save(tmp_path, 1.0)
    real_replace = os.replace

    def crashing_replace(src, dst):
        if str(dst).endswith(".json" if crash_at == "json" else ".safetensors"):
            raise KeyboardInterrupt  # Ctrl-C (or a kill) right before the rename
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crashing_replace)
    with pytest.raises(KeyboardInterrupt):
        _save(tmp_path, 2.0)
    monkeypatch.setattr(os, "replace", real_replace)
    ckpt = load_checkpoint(f"{tmp_path}:best")
    assert ckpt.meta["iteration"] == 1 and ckpt.tensors["actor.w"][0, 0] == 1.0
    assert not list(tmp_path.glob(".*.tmp"))  # the temp file was removed


def test_a_changed_weights_file_is_refused(tmp_path):
    _save(tmp_path, 1.0)
    weights = next(tmp_path.glob("best-*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="does not match the sha256"):
        load_checkpoint(tmp_path)


def test_damaged_json_is_refused(tmp_path):
    path = _save(tmp_path, 1.0)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(tmp_path)
    meta = json.loads(text)
    meta["observation_dim"] = "4"
    path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="'observation_dim' must be an integer"):
        load_checkpoint(tmp_path)
    meta["observation_dim"] = 2
    meta["weights"]["file"] = "../../etc/passwd"
    path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="weights must name a file in the same folder"):
        load_checkpoint(tmp_path)


class _Boom:
    def __reduce__(self):
        return (shutil.rmtree, ("/definitely/not/here/kelab-test",))


def test_a_pickle_in_place_of_the_weights_never_runs(tmp_path, monkeypatch):
    """Even with a matching checksum, a pickle is refused as not-safetensors, unexecuted."""
    path = _save(tmp_path, 1.0)
    payload = pickle.dumps(_Boom())
    calls = []
    monkeypatch.setattr(shutil, "rmtree", lambda *a, **k: calls.append(a))
    meta = json.loads(path.read_text())
    (tmp_path / meta["weights"]["file"]).write_bytes(payload)
    meta["weights"]["sha256"] = hashlib.sha256(payload).hexdigest()
    path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="not a valid safetensors file"):
        load_checkpoint(tmp_path)
    assert calls == []


def test_the_weights_file_as_a_spec_names_its_json(trained_run):
    run = trained_run["dir"]
    weights = next(run.glob("best-*.safetensors"))
    with pytest.raises(CheckpointError, match=r"pass the checkpoint's \.json") as err:
        load_checkpoint(weights)
    assert str(run / "best.json") in str(err.value)
