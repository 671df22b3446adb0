"""Calling an App's hooks so that an error names the hook that raised (PEP 678 notes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["call_hook", "name_in_message"]


def name_in_message(exc: BaseException, where: str) -> None:
    """Make sure ``str(exc)`` names the callback that raised (PEP 678 note + message).

    Args:
        exc: The exception on its way out.
        where: The callback's name (``"render"``), used when no timeline note names one.
    """
    notes = [
        n
        for n in getattr(exc, "__notes__", [])
        if n.startswith(("raised in callback", "raised in App callback"))
    ]
    text = notes[-1] if notes else f"raised in App callback {where!r}"
    if not notes and hasattr(exc, "add_note"):
        exc.add_note(text)
    if exc.args and isinstance(exc.args[0], str):
        if text not in exc.args[0]:
            exc.args = (f"{exc.args[0]} [{text}]", *exc.args[1:])
    elif not exc.args:
        exc.args = (text,)


def call_hook(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Return ``fn(*args)``; an exception it raises propagates naming ``name``.

    Args:
        name: The hook's name for the message (``"on_pick"``).
        fn: The hook.
        *args: Its arguments.
    """
    try:
        return fn(*args)
    except Exception as exc:
        name_in_message(exc, name)
        raise
