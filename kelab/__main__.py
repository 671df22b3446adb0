"""``python -m kelab``: the ``kelab`` command (:func:`kelab.cli.run`).

``python -m kelab train CartPole-v0`` works like ``kelab train CartPole-v0``.
"""

from __future__ import annotations

from kelab.cli import run

if __name__ == "__main__":
    run()
