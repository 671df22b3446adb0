"""kelab/_files.py: the one atomic writer behind checkpoints, settings, recordings, previews."""

from __future__ import annotations

import os

import pytest

from kelab._files import atomic_file, atomic_write_bytes, publish, temp_beside


def _usual_mode() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def test_atomic_file_writes_with_the_usual_mode_and_leaves_no_temp(tmp_path):
    path = tmp_path / "sub" / "a.bin"  # the folder is made
    with atomic_file(path) as fh:
        fh.write(b"one")
        assert not path.exists()  # nothing at the path until the block ends
    assert path.read_bytes() == b"one"
    assert os.stat(path).st_mode & 0o777 == _usual_mode()  # not mkstemp's 0600
    assert atomic_write_bytes(path, b"two") == path and path.read_bytes() == b"two"
    assert os.listdir(path.parent) == ["a.bin"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temp(tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="disk on fire"):
        with atomic_file(path) as fh:
            fh.write(b"half of the new")
            raise RuntimeError("disk on fire")
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["a.bin"]


def test_temp_beside_and_publish_for_writers_that_need_a_name(tmp_path):
    path = tmp_path / "clip.gif"
    tmp = temp_beside(path, suffix=".gif")
    assert tmp.parent == tmp_path and tmp.suffix == ".gif" and tmp.read_bytes() == b""
    assert os.stat(tmp).st_mode & 0o777 == _usual_mode()
    tmp.write_bytes(b"GIF89a")
    assert publish(tmp, path) == path
    assert path.read_bytes() == b"GIF89a" and os.listdir(tmp_path) == ["clip.gif"]


def test_the_temp_file_is_created_new_never_through_a_planted_link(tmp_path, monkeypatch):
    # mkstemp picked a name; now the name is ours, and one that exists (a link planted
    # under it included) is skipped: O_CREAT | O_EXCL | O_NOFOLLOW
    import secrets

    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    names = iter(["aaaaaaaaaa", "bbbbbbbbbb"])
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(names))
    (tmp_path / ".a.bin.aaaaaaaaaa.tmp").symlink_to(victim)
    atomic_write_bytes(tmp_path / "a.bin", b"new")
    assert victim.read_bytes() == b"precious" and (tmp_path / "a.bin").read_bytes() == b"new"
    assert os.path.islink(tmp_path / ".a.bin.aaaaaaaaaa.tmp")


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o444])
def test_a_rewrite_keeps_the_files_permissions(tmp_path, mode):
    # a file the user made private (or read-only) stays so after an atomic rewrite,
    # through atomic_file and through temp_beside + publish alike
    path = tmp_path / "secret.json"
    path.write_bytes(b"old")
    os.chmod(path, mode)
    atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"new" and os.stat(path).st_mode & 0o777 == mode
    tmp = temp_beside(path)
    tmp.write_bytes(b"newer")  # the temp file stays writable until it is published
    publish(tmp, path)
    assert path.read_bytes() == b"newer" and os.stat(path).st_mode & 0o777 == mode


def test_a_link_at_the_path_lends_no_permissions(tmp_path):
    # the link is replaced, not followed: its target's mode is not the new file's
    target = tmp_path / "target"
    target.write_bytes(b"t")
    os.chmod(target, 0o600)
    path = tmp_path / "a.bin"
    path.symlink_to(target)
    atomic_write_bytes(path, b"new")
    assert not path.is_symlink() and os.stat(path).st_mode & 0o777 == _usual_mode()
    assert target.read_bytes() == b"t"
