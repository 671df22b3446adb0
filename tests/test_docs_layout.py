"""Every page that names the default layout names the one the code has (#39 item 4).

docs/tasks.md said ``gymnasium.make_vec`` defaults to ``"packed"`` while docs/rl.md (and
the code) say ``"isolated"``.
"""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium

import kelab as ke

DOCS = Path(__file__).resolve().parents[1] / "docs"
CLAIM = re.compile(r"default layout[^`]{0,40}`\"(\w+)\"`", re.I)


def test_the_docs_name_the_default_layout_the_code_has():
    vec = gymnasium.make_vec(
        "kelab/CartPole-v0", num_envs=2, vectorization_mode="vector_entry_point"
    )
    made = vec.unwrapped.world.layout
    vec.close()
    assert made == ke.EnvConfig().layout == "isolated"
    claims = {
        (page.name, found)
        for page in sorted(DOCS.glob("*.md"))
        for found in CLAIM.findall(page.read_text())
    }
    assert {"tasks.md", "rl.md"} <= {name for name, _ in claims}, claims
    assert {found for _, found in claims} == {made}, claims
