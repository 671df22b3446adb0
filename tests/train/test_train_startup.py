"""``kelab train``'s start and end: what the command imports, when, and what it leaves.

Each check runs in a fresh interpreter (``python -c``), where ``sys.modules`` and the
garbage collector start as a command's do. Nothing here times anything.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def _run(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON line last."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_trainer_is_imported_once_with_its_objects_frozen():
    seen = _run(
        """
        import gc, json, sys
        from kelab.cli.train import import_trainer
        before = gc.get_freeze_count()
        import_trainer()
        frozen = gc.get_freeze_count()
        import_trainer()  # imported already: nothing more is frozen
        print(json.dumps({
            "before": before, "frozen": frozen, "again": gc.get_freeze_count(),
            "enabled": gc.isenabled(), "torch": "torch" in sys.modules,
            "trainer": "kelab.train.trainer" in sys.modules,
        }))
        """
    )
    assert seen["before"] == 0 and seen["torch"] and seen["trainer"]
    # torch's modules, functions and classes: out of every later collection's sight
    assert seen["frozen"] > 100_000, seen
    assert seen["again"] == seen["frozen"]
    assert seen["enabled"]  # the collector runs again for what training makes


def test_a_collector_the_caller_turned_off_stays_off():
    seen = _run(
        """
        import gc, json
        gc.disable()
        from kelab.cli.train import import_trainer
        import_trainer()
        print(json.dumps({"enabled": gc.isenabled()}))
        """
    )
    assert seen == {"enabled": False}
