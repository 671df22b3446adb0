"""``python -m kelab.cli``: the ``kelab`` command, like ``python -m kelab``."""

from __future__ import annotations

from kelab.cli import run

if __name__ == "__main__":
    run()
