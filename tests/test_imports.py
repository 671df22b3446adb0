"""What importing KELab loads, and that the built-in ids reach Gymnasium in any order."""

import sys
from pathlib import Path

import pytest
from prestart import Prestart


def _job(code: str) -> Prestart:
    """``python -W error -c code``, started early, beside the suite (tests/prestart.py)."""
    return Prestart([sys.executable, "-W", "error", "-c", code], cwd=Path.cwd(), timeout=120)


def _run(job: Prestart) -> str:
    done = job.result()
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


TIMING_LOADS = _job(
    "import sys, kelab.timing, kelab\n"
    "heavy = ('gymnasium', 'pymunk', 'numpy', 'pygame', 'moderngl', 'torch')\n"
    "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy\n"
    "      or m.startswith(('kelab.sim', 'kelab.rl', 'kelab.tasks', 'kelab.render',\n"
    "                       'kelab.app', 'kelab.train'))))"
)


@pytest.mark.prestart(TIMING_LOADS)
def test_import_kelab_timing_loads_nothing_of_the_layers_above_or_gymnasium():
    loaded = _run(TIMING_LOADS)
    assert loaded == "[]"


ORDERS = {
    "kelab-first": "import kelab\nimport gymnasium as gym",
    "gymnasium-first": "import gymnasium as gym\nimport kelab",
    "gymnasium-submodule-first": (
        "import kelab.timing\nimport gymnasium.spaces\nimport gymnasium as gym"
    ),
}
REGISTERED = {
    imports: _job(
        f"{imports}\n"
        "env = gym.make('kelab/CartPole-v0')\n"
        "print(type(env.unwrapped).__name__, sorted(i for i in gym.registry "
        "if i.startswith('kelab/')))\n"
        "import importlib.machinery as m\n"
        "assert isinstance(gym.__spec__.loader, m.SourceFileLoader)  # its own loader"
    )
    for imports in ORDERS.values()
}


@pytest.mark.parametrize(
    "imports",
    [
        pytest.param(imports, marks=pytest.mark.prestart(REGISTERED[imports]), id=order)
        for order, imports in ORDERS.items()
    ],
)
def test_the_built_in_ids_are_registered_whichever_is_imported_first(imports):
    out = _run(REGISTERED[imports])
    assert out.startswith("DirectRLEnv")
    for name in ("CartPole-v0", "Humanoid-v0", "Pi-Locomotion-v0", "BallToGoal-v0"):
        assert f"kelab/{name}" in out


MODULE_FORM = _job(
    "import gymnasium as gym\nprint(type(gym.make('kelab:kelab/BallToGoal-v0').unwrapped).__name__)"
)


@pytest.mark.prestart(MODULE_FORM)
def test_gymnasium_module_form_imports_kelab():
    assert _run(MODULE_FORM) == "DirectRLEnv"
