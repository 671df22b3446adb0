"""World inputs: copy counts that cannot fit, env ids, state shapes, non-finite physics."""

from __future__ import annotations

import pytest

import kelab as ke
import kelab.sim._isolated as isolated
from kelab.sim.assets import Asset


def _biped() -> ke.Scene:
    b = ke.SceneBuilder()
    b.add(ke.Terrain.plane(), at="/")
    b.add(ke.Robot(Asset.from_registry("kelab/robot/biped:v1")), at="/World/Robot")
    return b.build()


# ---------------------------------------------------------------- num_envs vs memory
def test_isolated_world_too_large_for_memory_is_refused_before_it_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(isolated, "memory_available", lambda: 16 * 2**30)
    built = []
    real = isolated.build_copy
    monkeypatch.setattr(isolated, "build_copy", lambda *a: built.append(1) or real(*a))
    with pytest.raises(ValueError) as err:
        ke.World(_biped(), num_envs=10**6)
    msg = str(err.value)
    assert "num_envs=1000000" in msg and "layout='isolated'" in msg
    assert "GiB in all" in msg and "16.0 GiB is available" in msg  # the estimate and memory
    assert "layout='packed'" in msg and "fewer copies" in msg  # the fix
    assert len(built) == isolated.PROBE_COPIES  # refused after measuring a few copies
    most = int(msg.split("at most ")[1].split()[0])
    assert 10_000 < most < 200_000  # ~200 kB per biped copy: 16 GiB * 0.8 / 200 kB = 69k


def test_memory_estimate_follows_what_is_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolated, "memory_available", lambda: 50 * 2**20)
    with pytest.raises(ValueError, match="num_envs=1000"):
        ke.World(_biped(), num_envs=1000)
    monkeypatch.setattr(isolated, "memory_available", lambda: None)  # unknown: no check
    assert ke.World(_biped(), num_envs=12).num_envs == 12


def test_packed_cap_is_worded_like_the_isolated_refusal() -> None:
    with pytest.raises(ValueError) as err:
        ke.World(_biped(), num_envs=20000, layout="packed")
    msg = str(err.value)
    assert msg.startswith("World: num_envs must be at most 16384 for layout='packed'")
    assert "got num_envs=20000" in msg and "fewer copies" in msg
