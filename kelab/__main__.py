"""``python -m kelab``: the ``kelab`` command (:func:`kelab.cli.main`).

``python -m kelab train CartPole-v0`` works like ``kelab train CartPole-v0``.
"""

from __future__ import annotations

import sys

from kelab.cli import main

if __name__ == "__main__":
    sys.exit(main())
