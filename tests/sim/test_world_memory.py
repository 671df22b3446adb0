"""The cgroup memory a World may take: page cache is reclaimable, every ancestor's limit counts."""

from __future__ import annotations

from pathlib import Path

from kelab.sim.physics._memory import _cgroup_left

MiB = 2**20


def _group(root: Path, rel: str, **files: str) -> None:
    folder = root / rel
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text + "\n")


def _proc(tmp_path: Path, text: str) -> Path:
    proc = tmp_path / "proc_self_cgroup"
    proc.write_text(text)
    return proc


def test_v2_page_cache_is_not_counted_as_used(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    stat = f"anon {100 * MiB}\nfile {700 * MiB}\ninactive_file {600 * MiB}\nactive_file 1\n"
    _group(root, "job", memory_max=str(1000 * MiB), memory_current=str(900 * MiB), memory_stat=stat)
    # 900 MiB in use, 600 of it inactive page cache the kernel reclaims: 700 MiB left, not 100
    assert _cgroup_left(root, _proc(tmp_path, "0::/job\n")) == 700 * MiB


def test_v2_every_ancestor_limit_applies(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    _group(root, "", memory_current=str(50_000 * MiB))  # the root group has no memory.max
    _group(root, "user.slice", memory_max=str(2000 * MiB), memory_current=str(1900 * MiB),
           memory_stat="inactive_file 0\n")  # fmt: skip
    _group(root, "user.slice/session", memory_max="max", memory_current=str(10 * MiB))
    _group(root, "user.slice/session/app", memory_max=str(8000 * MiB), memory_current="0")
    proc = _proc(tmp_path, "0::/user.slice/session/app\n")
    # the own group leaves 8000 MiB, but its grandparent only 100 MiB
    assert _cgroup_left(root, proc) == 100 * MiB


def test_v2_no_limit_anywhere_is_none(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    _group(root, "a/b", memory_max="max", memory_current=str(5 * MiB))
    _group(root, "a", memory_max="max", memory_current=str(5 * MiB))
    assert _cgroup_left(root, _proc(tmp_path, "0::/a/b\n")) is None


def test_v1_subtracts_total_inactive_file_and_walks_up(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    unlimited = str(2**63 - 4096)
    _group(root, "memory", memory_limit_in_bytes=unlimited, memory_usage_in_bytes="1")
    _group(root, "memory/docker", memory_limit_in_bytes=str(3000 * MiB),
           memory_usage_in_bytes=str(2900 * MiB),
           memory_stat=f"inactive_file {10 * MiB}\ntotal_inactive_file {2400 * MiB}\n")  # fmt: skip
    _group(root, "memory/docker/box", memory_limit_in_bytes=unlimited,
           memory_usage_in_bytes=str(100 * MiB))  # fmt: skip
    proc = _proc(tmp_path, "12:cpu,cpuacct:/docker/box\n4:memory:/docker/box\n")
    # docker: 3000 - (2900 - 2400 reclaimable cache) = 2500 MiB
    assert _cgroup_left(root, proc) == 2500 * MiB


def test_a_path_leaving_the_hierarchy_stays_inside_it(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    _group(root, "", memory_max=str(300 * MiB), memory_current=str(100 * MiB))
    (tmp_path / "memory.max").write_text(f"{MiB}\n")  # outside the root: never read
    assert _cgroup_left(root, _proc(tmp_path, "0::/../..\n")) == 200 * MiB
