"""What importing KELab loads, and that the built-in ids reach Gymnasium in any order."""

import subprocess
import sys

import pytest


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_kelab_timing_loads_nothing_of_the_layers_above_or_gymnasium():
    loaded = _run(
        "import sys, kelab.timing, kelab\n"
        "heavy = ('gymnasium', 'pymunk', 'numpy', 'pygame', 'moderngl', 'torch')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy\n"
        "      or m.startswith(('kelab.sim', 'kelab.rl', 'kelab.tasks', 'kelab.render',\n"
        "                       'kelab.app', 'kelab.train'))))"
    )
    assert loaded == "[]"


@pytest.mark.parametrize(
    "imports",
    [
        "import kelab\nimport gymnasium as gym",
        "import gymnasium as gym\nimport kelab",
        "import kelab.timing\nimport gymnasium.spaces\nimport gymnasium as gym",
    ],
    ids=["kelab-first", "gymnasium-first", "gymnasium-submodule-first"],
)
def test_the_built_in_ids_are_registered_whichever_is_imported_first(imports):
    out = _run(
        f"{imports}\n"
        "env = gym.make('kelab/CartPole-v0')\n"
        "print(type(env.unwrapped).__name__, sorted(i for i in gym.registry "
        "if i.startswith('kelab/')))\n"
        "import importlib.machinery as m\n"
        "assert isinstance(gym.__spec__.loader, m.SourceFileLoader)  # its own loader"
    )
    assert out.startswith("DirectRLEnv")
    for name in ("CartPole-v0", "Humanoid-v0", "Pi-Locomotion-v0", "BallToGoal-v0"):
        assert f"kelab/{name}" in out


def test_gymnasium_module_form_imports_kelab():
    assert (
        _run(
            "import gymnasium as gym\n"
            "print(type(gym.make('kelab:kelab/BallToGoal-v0').unwrapped).__name__)"
        )
        == "DirectRLEnv"
    )
