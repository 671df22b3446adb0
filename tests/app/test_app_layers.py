"""The App layer's import graph: no circle, the App on top.

Every import counts, also those under ``if TYPE_CHECKING:`` (they are real knowledge of
another module). The App's collaborators never see it: each is given a small context
(tests/app/test_collaborators.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

import source_trees

import kelab.app

APP_DIR = Path(kelab.app.__file__).parent


def _module(path: Path) -> str:
    parts = ["kelab", "app", *path.relative_to(APP_DIR).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    files = {_module(f): f for f in APP_DIR.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in files}
    for mod, f in files.items():
        for node in source_trees.nodes(f):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for t in targets:
                while t not in files and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in files and t != mod:
                    edges[mod].add(t)
    return edges


def _circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Kosaraju)."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(v: str, graph: dict[str, set[str]], out: list[str]) -> None:
        stack = [(v, iter(sorted(graph[v])))]
        seen.add(v)
        while stack:
            node, it = stack[-1]
            nxt = next((w for w in it if w not in seen), None)
            if nxt is None:
                stack.pop()
                out.append(node)
            else:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(graph[nxt]))))

    for v in sorted(edges):
        if v not in seen:
            visit(v, edges, order)
    reverse: dict[str, set[str]] = {v: set() for v in edges}
    for v, ws in edges.items():
        for w in ws:
            reverse[w].add(v)
    seen.clear()
    comps = []
    for v in reversed(order):
        if v not in seen:
            comp: list[str] = []
            visit(v, reverse, comp)
            if len(comp) > 1:
                comps.append(set(comp))
    return comps


def test_the_app_layer_has_no_import_circle():
    assert _circles(_graph()) == []


def test_only_the_package_imports_the_app_module():
    edges = _graph()
    users = sorted(m for m, ws in edges.items() if "kelab.app.app" in ws)
    assert users == ["kelab.app"], users  # collaborators are given contexts instead


def test_ports_import_none_of_their_users():
    users = {"kelab.app.app", "kelab.app.menu", "kelab.app.hotkeys", "kelab.app.panel"}
    assert not (_graph()["kelab.app.ports"] & users)
    assert not any(m.startswith("kelab.app.panel.") for m in _graph()["kelab.app.ports"])
