import subprocess
import sys

import pytest

from kelab.cli import main, run_demo


def test_demo_balances_every_copy():
    summary = run_demo(seconds=6.0, num_envs=3, seed=1)
    assert summary["balanced"]
    assert summary["robot_steps"] == 301 and summary["physics_steps"] == 721
    assert summary["capture_samples"] == 181
    assert summary["final_tilt_max_rad"] < 0.05 < summary["initial_tilt_max_rad"]


def test_demo_is_deterministic():
    a = run_demo(seconds=2.0, num_envs=2)
    b = run_demo(seconds=2.0, num_envs=2)
    assert a["final_tilt_max_rad"] == b["final_tilt_max_rad"]


def test_main_demo_exit_code(capsys):
    assert main(["demo", "--seconds", "3", "--num-envs", "2"]) == 0
    out = capsys.readouterr().out
    assert "balanced" in out and "True" in out


def test_main_rejects_bad_arguments():
    with pytest.raises(SystemExit):
        main(["demo", "--seconds", "0"])


def test_console_entry_point_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "kelab.cli", "demo", "--seconds", "5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "simulated_s" in proc.stdout
