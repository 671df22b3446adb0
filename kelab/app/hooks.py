"""Calling an App's hooks so that an error names the hook that raised, once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["call_hook", "name_in_message"]

_LOCATIONS = ("raised in callback ", "raised in App callback ")


def name_in_message(exc: BaseException, where: str) -> None:
    """Make ``str(exc)`` name the callback that raised, once.

    The location (the timeline's ``"raised in callback ..."`` note, else ``"raised in App
    callback <where>"``) goes at the end of the message, and the note saying the same is
    dropped, so a traceback shows it once. An exception whose message is not a str (an
    ``OSError``'s errno) keeps it as a PEP 678 note instead.

    Args:
        exc: The exception on its way out.
        where: The callback's name (``"render"``), used when no timeline note names one.

    Example:
        >>> exc = ValueError("bad gain")
        >>> name_in_message(exc, "render")
        >>> str(exc), getattr(exc, "__notes__", [])
        ("bad gain [raised in App callback 'render']", [])
    """
    notes = getattr(exc, "__notes__", [])
    named = [n for n in notes if n.startswith(_LOCATIONS)]
    text = named[-1] if named else f"raised in App callback {where!r}"
    message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else None
    if not named and message is not None:
        if message.startswith(_LOCATIONS) or any(f"[{w}" in message for w in _LOCATIONS):
            return  # named by an inner hook already (a hook inside the frame)
    if message is not None:
        if text not in message:
            exc.args = (f"{message} [{text}]", *exc.args[1:])
    elif not exc.args:
        exc.args = (text,)
    else:  # a message that is not a str: the note says where
        if not named:
            exc.add_note(text)
        return
    for note in named:  # in the message now: not a second time below it
        notes.remove(note)


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
