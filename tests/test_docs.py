"""Every ```python block in docs/*.md and README.md runs, so the examples never rot."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
PAGES = sorted(p for p in DOCS.glob("*.md") if BLOCK.search(p.read_text())) + [
    DOCS.parent / "README.md"
]


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_doc_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples may write files
    for i, block in enumerate(BLOCK.findall(page.read_text())):
        namespace = {"__name__": f"docs_{page.stem}_{i}"}
        code = textwrap.dedent(block)  # a block inside a list item is indented
        exec(compile(code, f"{page.name}[block {i}]", "exec"), namespace)
