"""``python -m kelab.cli``: the ``kelab`` command, like ``python -m kelab``."""

from __future__ import annotations

import sys

from kelab.cli import main

if __name__ == "__main__":
    sys.exit(main())
