"""Syntax trees of source text, parsed once a session and shared by the tests that read
KELab's code (the layer maps, the import doors, the design map, the line limit).

A dozen tests each walked every module of the package, and each parse of the whole
package takes ~0.9 CPU s here (a walk of it ~0.3 s): trees and walks are kept by the
text they were made from, so a file that changed is parsed again. The trees are shared:
read them, never change them.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

__all__ = ["nodes", "nodes_of", "tree", "tree_of"]


@functools.cache
def tree_of(text: str) -> ast.Module:
    """``ast.parse(text)``, once a session for each text."""
    return ast.parse(text)


@functools.cache
def nodes_of(text: str) -> tuple[ast.AST, ...]:
    """Every node of ``text``'s tree in ``ast.walk``'s order, once a session."""
    return tuple(ast.walk(tree_of(text)))


def tree(path: str | Path) -> ast.Module:
    """The syntax tree of the module at ``path`` (read as UTF-8)."""
    return tree_of(Path(path).read_text(encoding="utf-8"))


def nodes(path: str | Path) -> tuple[ast.AST, ...]:
    """Every node of the module at ``path``, in ``ast.walk``'s order."""
    return nodes_of(Path(path).read_text(encoding="utf-8"))
