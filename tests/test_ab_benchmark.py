"""benchmarks/ab.py (#30): the A/B runner's bit-identity case and its input errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from prestart import Prestart

ROOT = Path(__file__).resolve().parents[1]
AB = ROOT / "benchmarks" / "ab.py"


def _ab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(AB), *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


STATES_AGAINST_HEAD = Prestart(  # ~3 s, started early, beside the suite (tests/prestart.py)
    [sys.executable, str(AB), "--against", "HEAD", "--rounds", "1", "--cases", "states"]
    + ["--steps", "3"],
    cwd=ROOT,
    timeout=600,
)


@pytest.mark.prestart(STATES_AGAINST_HEAD)
def test_states_against_head_are_identical_and_the_table_names_both_sides():
    done = STATES_AGAINST_HEAD.result()
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("| states"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == cells[2] and len(cells[1]) == 16  # the same sha256 prefix
    assert cells[3] == "identical"
    assert "load average before:" in done.stdout and "load average after:" in done.stdout


def test_bad_inputs_say_what_to_pass():
    done = _ab("--against", "no-such-commit-xyz")
    assert done.returncode != 0
    assert "--against must name a commit" in done.stderr and "'no-such-commit-xyz'" in done.stderr
    done = _ab("--against", "HEAD", "--cases", "warp")
    assert "--cases: unknown case 'warp'; pick from" in done.stderr
    done = _ab("--against", "HEAD", "--rounds", "0")
    assert "--rounds must be >= 1, got 0" in done.stderr
