"""Run a function once a named module has been imported, without importing it.

``import kelab`` must not load Gymnasium (``import kelab.timing`` is pure time logic),
yet ``import kelab; import gymnasium; gymnasium.make("kelab/CartPole-v0")`` must find
KELab's ids. :func:`after_import` bridges the two: if the module is loaded already the
function runs at once; otherwise a finder on ``sys.meta_path`` waits for the module's
first import and runs the function right after the module's own code, before the
``import`` statement returns. Imports nothing of kelab, so every layer may use it.

Example:
    >>> import sys
    >>> seen = []
    >>> after_import("json", lambda: seen.append("json"))  # json is loaded: runs now
    >>> seen
    ['json']
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType

__all__ = ["after_import"]

_lock = threading.Lock()


class _Loader(importlib.abc.Loader):
    """The module's own loader, then the waiting functions (attributes pass through)."""

    def __init__(self, loader: importlib.abc.Loader, finder: _Waiting) -> None:
        self._loader = loader
        self._finder = finder

    def __getattr__(self, name: str) -> object:
        return getattr(self._loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        module.__loader__ = self._loader  # the module keeps its own loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._finder.fire()


class _Waiting(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the real loader of one module to call back after it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.callbacks: list[Callable[[], object]] = []

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, self)
        return spec

    def fire(self) -> None:
        with _lock:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback()


def after_import(name: str, callback: Callable[[], object]) -> None:
    """Call ``callback()`` once module ``name`` is imported: now if it already is.

    Args:
        name: A top-level module name such as ``"gymnasium"``.
        callback: A function of no arguments; its errors propagate from the ``import``
            statement that loaded the module.
    """
    with _lock:
        loaded = name in sys.modules
        if not loaded:
            for finder in sys.meta_path:
                if isinstance(finder, _Waiting) and finder.name == name:
                    finder.callbacks.append(callback)
                    return
            waiting = _Waiting(name)
            waiting.callbacks.append(callback)
            sys.meta_path.insert(0, waiting)
    if loaded:
        callback()
