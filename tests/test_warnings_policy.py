"""The suite runs warnings-as-errors: a new warning fails the test that caused it.

pyproject.toml's ``[tool.pytest.ini_options] filterwarnings`` starts with ``"error"``; the
expected warnings are ignored narrowly where they happen (a ``filterwarnings`` mark on the
test, with the reason beside it), never suite-wide.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import warnings


def test_warns():
    warnings.warn("a new warning", UserWarning)


def test_quiet():
    pass
"""


def test_a_warning_fails_the_test_that_raised_it(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "-p",
         "no:cacheprovider", "--rootdir", str(tmp_path), str(probe)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 failed, 1 passed" in out and "UserWarning: a new warning" in out, out
