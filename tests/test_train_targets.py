"""benchmarks/train_targets.py (#30): it trains on ``kelab train``'s path and judges after."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import kelab as ke

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "train_targets.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("train_targets_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_humanoid_trains_in_its_layout_stops_itself_and_is_judged_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
):
    """The env is built packed (the config's layout, as ``kelab train``), the trainer's
    own evaluation stops the run (no gated check of the script's while training), and
    ``best`` is judged afterwards by ``evaluate``, the row saying whether the speed held."""
    script = _load_script()
    built: list[dict] = []
    real_env = ke.LearningEnv

    def recording_env(task, **kwargs):
        built.append(kwargs)
        return real_env(task, **kwargs)

    judged: list[int] = []
    real_evaluate = script.evaluate

    def recording_evaluate(task_type, policy, episodes, seed=1000):
        judged.append(len(built))  # envs built so far: the training one, the judge's next
        return real_evaluate(task_type, policy, episodes, seed)

    monkeypatch.setattr(script.ke, "LearningEnv", recording_env)
    monkeypatch.setattr(script, "evaluate", recording_evaluate)
    tiny = {
        "num_envs": "4",
        "num_steps_per_env": "4",
        "max_iterations": "3",
        "min_iterations": "1",
        "eval_every": "1",
        "eval_episodes": "2",
        "eval_process": "false",
        "overlap_rollout": "false",
        "success_target": "0.0",  # the first evaluation passes: the trainer stops there
    }
    argv = ["train_targets.py", "Humanoid-v0", "--seed", "0", "--episodes", "2"]
    argv += ["--run-dir", str(tmp_path / "run"), "--check-every", "1"]
    for field, value in tiny.items():
        argv += ["--set", f"{field}={value}"]
    monkeypatch.setattr(sys, "argv", argv)
    script.main()
    out = capsys.readouterr().out

    assert built[0]["layout"] == "packed" and built[0]["num_threads"] == 1
    assert built[0]["num_envs"] == 4 and built[0]["seed"] == 0
    assert judged == [1], "best is judged once, after training, never during it"
    row = next(line for line in out.splitlines() if line.startswith("| kelab/Humanoid-v0"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "0"
    assert cells[3].startswith("trainer at 1; judged 0.00 success over 2 eps, mean forward")
    assert "speed >= 0.5 m/s" in cells[3]
    held = "speed >= 0.5 m/s held" in cells[3]
    assert cells[2] == ("yes" if held else "no")
    assert held or cells[3].endswith("(target NOT held)")
    assert cells[5] == "1"  # iterations: the trainer stopped at its first evaluation
