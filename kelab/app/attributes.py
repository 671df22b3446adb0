"""Attributes an object holds for life: set once, then refused, never silently ignored.

The App and the panel's model keep collaborators that others hold on to (the App's
clock drives the timeline it was made for, the panel window draws the model it was
given...). Replacing one would leave the others on the old object, so the change would
do nothing while looking done. `ReadOnlyAttributes` refuses it with an error instead.
Imports nothing of KELab.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["ReadOnlyAttributes"]


class ReadOnlyAttributes:
    """A base that refuses to replace the attributes named in ``_read_only`` once set.

    Example:
        >>> class Box(ReadOnlyAttributes):
        ...     _read_only = frozenset({"content"})
        ...     def __init__(self):
        ...         self.content = []
        >>> box = Box()
        >>> try:
        ...     box.content = [1]
        ... except AttributeError as exc:
        ...     print(exc.args[0][:44])
        Box.content is set for the object's life and
    """

    _read_only: ClassVar[frozenset[str]] = frozenset()

    def __setattr__(self, name: str, value: object) -> None:
        if name in type(self)._read_only and name in self.__dict__:
            cls = type(self).__name__
            raise AttributeError(
                f"{cls}.{name} is set for the object's life and cannot be replaced; change "
                f"it in place or make a new {cls}"
            )
        object.__setattr__(self, name, value)
