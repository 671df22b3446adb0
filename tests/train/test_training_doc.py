"""docs/training.md lists exactly the keys of the dict ``RLTrainer.train()`` returns."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "training.md"


def documented_keys() -> list[str]:
    """The first column of the table after "`train()` returns a dict with exactly these keys"."""
    text = DOC.read_text()
    start = text.index("`train()` returns a dict with exactly these keys")
    rows = re.findall(
        r"^\| `(\w+)` \|", text[start : text.index("\n\n", text.index("| key |", start))], re.M
    )
    return rows


def test_the_summary_keys_are_documented(trained_run):
    keys = documented_keys()
    assert len(keys) == len(set(keys)), keys
    assert set(keys) == set(trained_run["stats"]), (
        f"documented only: {sorted(set(keys) - set(trained_run['stats']))}; "
        f"undocumented: {sorted(set(trained_run['stats']) - set(keys))}"
    )
