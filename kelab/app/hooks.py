"""Calling an App's hooks so that an error names the hook that raised, once."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

from kelab.timing.schedule import check_callable

__all__ = [
    "HOOK_ARGS",
    "call_hook",
    "check_assigned_hook",
    "check_hook_methods",
    "name_in_message",
]

#: The App's hooks an instance may replace (``app.fixed_update = f``), with the arguments
#: each is called with: an assigned value must be a callable taking them.
HOOK_ARGS: dict[str, tuple[str, ...]] = {
    "setup": (),
    "pre_update": (),
    "fixed_update": ("ts",),
    "late_update": ("ts",),
    "free_update": ("dt",),
    "pre_render": (),
    "render": ("canvas", "alpha"),
    "post_render": (),
    "state_dict": (),
    "load_state_dict": ("state",),
    "on_pick": ("body",),
    "on_pick_hover": ("body",),
    "on_drag_begin": ("body",),
    "on_drag_update": ("body", "target"),
    "on_drag_end": ("body",),
}

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


def check_assigned_hook(name: str, value: object) -> None:
    """Refuse ``app.<name> = value`` for a hook (`HOOK_ARGS`) unless it takes its arguments.

    Other names pass. Raises ``UserError`` (a ``ValueError``), one line.

    Example:
        >>> check_assigned_hook("fixed_update", lambda ts: None)
        >>> check_assigned_hook("title", 5)  # not a hook
        >>> try:
        ...     check_assigned_hook("fixed_update", 5)
        ... except ValueError as e:
        ...     print(str(e)[:52])
        App.fixed_update must be a callable taking (ts), got
    """
    args = HOOK_ARGS.get(name)
    if args is not None:
        check_callable(
            value,
            f"App.{name}",
            args,
            f"assign a function, e.g. app.{name} = lambda {', '.join(args)}: ..."
            f" (del app.{name} goes back to the class's)",
        )


def check_hook_methods(cls: type) -> None:
    """Refuse an App subclass whose hook method cannot take its arguments, when it is defined.

    ``def fixed_update(self): ...`` would fail at its first call, frames later; here the
    class statement itself says so, in one line. Hooks defined as something other than a
    plain function (a staticmethod, a callable object) are left to the call.

    Example:
        >>> class Fine:
        ...     def fixed_update(self, ts): ...
        >>> check_hook_methods(Fine)
        >>> class Wrong:
        ...     def fixed_update(self): ...
        >>> try:
        ...     check_hook_methods(Wrong)
        ... except ValueError as e:
        ...     print(str(e)[:58])
        Wrong.fixed_update must be a callable taking (ts), got Wro
    """
    for name, args in HOOK_ARGS.items():
        fn = cls.__dict__.get(name)
        if inspect.isfunction(fn):
            check_callable(
                types.MethodType(fn, cls),  # the signature without self
                f"{cls.__qualname__}.{name}",
                args,
                f"define it as def {name}({', '.join(('self', *args))}): ...",
            )


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
