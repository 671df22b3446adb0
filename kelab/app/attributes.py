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

    A property without a setter is refused the same way, with a message naming it:

        >>> class Dial(ReadOnlyAttributes):
        ...     @property
        ...     def value(self):
        ...         return 1
        >>> try:
        ...     Dial().value = 2
        ... except AttributeError as exc:
        ...     print(exc.args[0][:42])
        Dial.value is read-only (Dial computes it)
        >>> Dial.reserved_names()
        ('value',)
    """

    _read_only: ClassVar[frozenset[str]] = frozenset()

    def __setattr__(self, name: str, value: object) -> None:
        cls = type(self).__name__
        if name in type(self)._read_only and name in self.__dict__:
            raise AttributeError(
                f"{cls}.{name} is set for the object's life and cannot be replaced; change "
                f"it in place or make a new {cls}"
            )
        static = getattr(type(self), name, None)
        if isinstance(static, property) and static.fset is None:
            raise AttributeError(
                f"{cls}.{name} is read-only ({cls} computes it) and cannot be set; use "
                f"another name for an attribute of your own"
            )
        object.__setattr__(self, name, value)

    @classmethod
    def reserved_names(cls) -> tuple[str, ...]:
        """The public names an instance refuses to have set (a subclass picks others).

        Its read-only properties and the attributes it holds for life.
        """
        names = set(cls._read_only)
        names.update(
            n
            for n in dir(cls)
            if not n.startswith("_")
            and isinstance(getattr(cls, n, None), property)
            and getattr(cls, n).fset is None
        )
        return tuple(sorted(names))
