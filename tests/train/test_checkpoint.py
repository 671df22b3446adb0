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
    """An actor of 2 observations -> 3 hidden units -> 3 actions, its first layer all ``value``."""
    tensors = {
        "actor.mlp.0.weight": torch.full((3, 2), value),
        "actor.mlp.0.bias": torch.zeros(3),
        "actor.mlp.2.weight": torch.zeros(3, 3),
        "actor.mlp.2.bias": torch.zeros(3),
        "actor.distribution.std_param": torch.ones(3),
    }
    meta = {
        "task": {"id": None, "class": "x:Y"},
        "observation_dim": 2,
        "action_dim": 3,
        "train_config": {"actor_hidden_dims": [3], "obs_normalization": False},
        "iteration": int(value),
        "env_steps": 0,
    }
    return save_checkpoint(directory, name, tensors, meta)


def test_save_and_load_round_trip_and_specs(tmp_path):
    path = _save(tmp_path, 1.0)
    assert path == tmp_path / "best.json"
    for spec in (f"{tmp_path}:best", tmp_path, path, str(path)):
        assert load_checkpoint(spec).tensors["actor.mlp.0.weight"].tolist() == [[1.0, 1.0]] * 3
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
    assert ckpt.meta["iteration"] == 1 and ckpt.tensors["actor.mlp.0.weight"][0, 0] == 1.0
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
    meta["weights"].update(sha256=hashlib.sha256(payload).hexdigest(), bytes=len(payload))
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


def _shipped_copy(tmp_path, **changes):
    """The shipped CartPole policy copied to ``tmp_path`` with JSON fields changed."""
    from kelab.train.shipped import shipped_policy

    src = shipped_policy("kelab.tasks.cartpole:CartPoleTask")
    meta = json.loads(src.read_text())
    shutil.copy(src.parent / meta["weights"]["file"], tmp_path / meta["weights"]["file"])
    for key, value in changes.items():
        if key in meta["train_config"]:
            meta["train_config"][key] = value
        else:
            meta[key] = value
    path = tmp_path / "best.json"
    path.write_text(json.dumps(meta))
    return path


def test_json_sizes_that_the_weights_do_not_hold_are_refused_before_building(tmp_path):
    path = _shipped_copy(tmp_path, observation_dim=10**9)
    with pytest.raises(
        CheckpointError,
        match=r"observation_dim=1000000000, .* but its weights file holds actor\.mlp\.0\.weight "
        r"of shape \(64, 4\)",
    ) as err:
        load_checkpoint(path)
    assert "\n" not in str(err.value)
    _shipped_copy(tmp_path, actor_hidden_dims=[4096] * 300)
    with pytest.raises(
        CheckpointError,
        match=r"train_config\.actor_hidden_dims=\[4096, 4096, 4096, \.\.\.\] \(300 layers\), "
        r".* actor\.mlp\.0\.weight of shape \(64, 4\), not \(4096, 4\)",
    ):
        load_checkpoint(path)
    _shipped_copy(tmp_path, action_dim=3)
    with pytest.raises(CheckpointError, match=r"action_dim=3, .* actor\.mlp\.4\.weight of shape"):
        load_checkpoint(path)


def test_a_weights_file_of_another_size_than_recorded_is_refused_unread(tmp_path, monkeypatch):
    path = _save(tmp_path, 1.0)
    meta = json.loads(path.read_text())
    meta["weights"]["bytes"] += 1
    path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"is \d+ bytes, but .* recorded \d+"):
        load_checkpoint(tmp_path)


@pytest.mark.parametrize(
    "header",
    [
        b"\xff" * 8,  # a header longer than the file
        (40).to_bytes(8, "little") + b'{"actor.x": {"dtype": "F32", "shape": [1000000000],',
        None,  # offsets past the end of the data
    ],
)
def test_a_safetensors_header_that_does_not_fit_its_file_is_refused(tmp_path, header):
    path = _save(tmp_path, 1.0)
    meta = json.loads(path.read_text())
    if header is None:
        entry = {"dtype": "F32", "shape": [10**9], "data_offsets": [0, 4 * 10**9]}
        text = json.dumps({"actor.mlp.0.weight": entry}).encode()
        header = len(text).to_bytes(8, "little") + text
    blob = header + b"\0" * 64
    (tmp_path / meta["weights"]["file"]).write_bytes(blob)
    meta["weights"].update(sha256=hashlib.sha256(blob).hexdigest(), bytes=len(blob))
    path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="is not a valid safetensors file: "):
        load_checkpoint(tmp_path)


def test_kelab_eval_refuses_a_checkpoint_sized_past_its_weights_in_one_line(tmp_path, capsys):
    from kelab.cli import main

    path = _shipped_copy(tmp_path, actor_hidden_dims=[4096] * 300)
    assert main(["eval", "CartPole-v0", "--checkpoint", str(path), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "300 layers" in err, err


def _with_json_text(path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ('"iteration": 1', '"iteration": ' + "[" * 100_000, "nested deeper than"),
        ('"iteration": 1', '"iteration": 1' + "0" * 5000, "an integer of 5001 digits"),
        ('"iteration": 1', '"iteration": 1, "iteration": 2', "the key 'iteration' twice"),
    ],
    ids=["deep", "huge-int", "duplicate-key"],
)
def test_hostile_checkpoint_json_is_one_checkpoint_error(tmp_path, old, new, reason):
    path = _save(tmp_path, 1.0)
    _with_json_text(path, old, new)
    with pytest.raises(CheckpointError, match=f"is not valid JSON .*{reason}") as err:
        load_checkpoint(tmp_path)
    assert "\n" not in str(err.value)


def test_kelab_play_refuses_a_deeply_nested_checkpoint_in_one_line(tmp_path, capsys):
    from kelab.cli import main

    path = _shipped_copy(tmp_path)
    path.write_text("[" * 100_000)
    assert main(["play", "CartPole-v0", "--checkpoint", str(path), "--video", "x.mp4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested deeper than" in err, err


def _header_blob(header_text: str) -> bytes:
    raw = header_text.encode()
    return len(raw).to_bytes(8, "little") + raw + bytes(8)


@pytest.mark.parametrize(
    ("header_text", "reason"),
    [
        ("[" * 100_000, "nested deeper than"),
        ('{"w": {"dtype": "F32", "shape": [1' + "0" * 5000 + '], "data_offsets": [0, 8]}}',
         "an integer of 5001 digits"),
        ('{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
         '"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}',
         "the key 'w' twice"),
    ],
    ids=["deep", "huge-int", "duplicate-tensor"],
)  # fmt: skip
def test_hostile_safetensors_headers_are_one_checkpoint_error(header_text, reason):
    from kelab.train.checkpoint import read_header

    with pytest.raises(CheckpointError, match=f"not a valid safetensors file: .*{reason}") as err:
        read_header(_header_blob(header_text), "w.safetensors")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("recorded", [None, "18", 2**40])
def test_weights_without_a_valid_recorded_size_are_refused(tmp_path, recorded):
    path = _save(tmp_path, 1.0)
    meta = json.loads(path.read_text())
    if recorded is None:
        del meta["weights"]["bytes"]
    else:
        meta["weights"]["bytes"] = recorded
    path.write_text(json.dumps(meta))
    wrong = rf"weights\.bytes must be an integer .*got {recorded!r}"
    with pytest.raises(CheckpointError, match=wrong):
        load_checkpoint(tmp_path)


def test_a_weights_file_over_the_cap_is_refused_before_reading(tmp_path, monkeypatch):
    from kelab.train import checkpoint

    _save(tmp_path, 1.0)
    monkeypatch.setattr(checkpoint, "_MAX_WEIGHTS_BYTES", 100)
    with pytest.raises(CheckpointError, match=r"weights\.bytes must be an integer from 8 to 100"):
        load_checkpoint(tmp_path)
