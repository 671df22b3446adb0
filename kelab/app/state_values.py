"""An App's own state compared by value: the digest time travel checks, and its size.

The App's time travel (`kelab.app.time_travel`) digests the App subclass's
``state_dict()`` at every fixed step to tell the recorded state from one changed in code,
and keeps deep copies of it in its keyframes. `state_digest` walks the value once: it
refuses what cannot be kept or compared (a value that holds itself, one nested deeper
than `MAX_STATE_DEPTH`, an object with no readable value) with one line naming where, and
returns a 16-byte digest of the value and an estimate of its size in memory.

What the digest compares (two values with the same digest are equal; the type is part of
the value, so ``1``, ``1.0``, ``True`` and ``np.int64(1)`` all differ):

- ``None``, ``bool``, ``int``, ``str``, ``bytes``, ``bytearray``, ``complex``, and
  ``float`` by its exact bits (``0.0`` and ``-0.0`` differ; a NaN equals itself);
- numpy arrays by dtype, shape and values (not their memory layout; object arrays item by
  item), numpy scalars by dtype and bits, a ``np.random.Generator`` or bit generator by its
  state, other array-likes (``__array__``: a torch tensor) by their type and values;
- ``dict`` by its items (key order ignored), ``list`` and ``tuple`` by their items in order,
  ``set`` and ``frozenset`` by their items (order ignored), subclasses (a namedtuple, an
  OrderedDict) with their type and ``__dict__`` too;
- an enum member by its type and name; classes, functions, methods and modules by their
  qualified name;
- any other object by its type and what a deep copy keeps of it: its own ``__reduce__`` or
  ``__getstate__`` where its class defines one (``random.Random``, ``Fraction``,
  ``Decimal``, ``datetime``, ``Path``), else its attributes, ``__dict__`` and
  ``__slots__``, by value (dataclasses and plain objects alike; never ``repr()``, which
  holds an address).

Example:
    >>> import numpy as np
    >>> class Gains:
    ...     def __init__(self, kp):
    ...         self.kp, self.trace = kp, np.zeros(3)
    >>> a = state_digest({"gains": Gains(2.0), "n": 3}, "state_dict()")
    >>> b = state_digest({"n": 3, "gains": Gains(2.0)}, "state_dict()")
    >>> a.digest == b.digest, a.nbytes > 24
    (True, True)
    >>> state_digest({"gains": Gains(2.5), "n": 3}, "state_dict()").digest == a.digest
    False
"""

from __future__ import annotations

import copyreg
import enum
import hashlib
import struct
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MAX_STATE_DEPTH", "StateDigest", "state_digest"]

#: Deepest nesting `state_digest` accepts (containers and objects): a deep copy of a value
#: much deeper would exhaust Python's recursion limit.
MAX_STATE_DEPTH = 64

_FLOAT = struct.Struct("<d")
_NAMED = (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)
_METHODS = (types.MethodType, types.BuiltinMethodType)
_KINDS = "numbers, str, bytes, numpy arrays, dicts, lists, tuples, sets, dataclasses or objects"


@dataclass(frozen=True)
class StateDigest:
    """What `state_digest` found: the value's digest and its estimated size.

    Attributes:
        digest: 16 bytes; equal for equal values (see the module doc).
        nbytes: An estimate of the memory a deep copy takes (arrays exactly).
    """

    digest: bytes
    nbytes: int


def state_digest(value: object, name: str) -> StateDigest:
    """Digest ``value`` by value (see the module doc) and estimate its size.

    Args:
        value: The state (any nesting of the kinds the module doc lists).
        name: Who returned it, for the error (``"App.state_dict()"``).

    Raises:
        ValueError: ``value`` holds itself, is nested deeper than `MAX_STATE_DEPTH`, or
            holds an object ``copy.deepcopy`` cannot copy or with no readable value (a
            lock, an open file, a socket, a generator): one line naming where, as
            ``state['key'][3].attr``.
    """
    walk = _Walk(name)
    h = hashlib.blake2b(digest_size=16)
    walk.feed(h, value, 0)
    return StateDigest(h.digest(), walk.nbytes)


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', None)}.{getattr(obj, '__qualname__', obj)}"


def _type_name(value: object) -> str:
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _own(t: type, attr: str) -> bool:
    """Whether class ``t`` defines ``attr`` itself (not `object`'s default)."""
    return getattr(t, attr, None) is not getattr(object, attr)


class _Walk:
    """One walk over a value: the path to where it is, the containers on it, the size."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.path: list[str] = []
        self.on_path: set[int] = set()
        self.nbytes = 0

    # -- errors ------------------------------------------------------------------------------
    def _where(self) -> str:
        p = self.path
        shown = p if len(p) <= 6 else [*p[:3], "...", *p[-2:]]
        return "state" + "".join(shown)

    def _refuse(self, what: str, got: str, fix: str) -> ValueError:
        return ValueError(f"{self.name} must return {what}, got {got} at {self._where()}; {fix}")

    # -- the walk ----------------------------------------------------------------------------
    def feed(self, h: Any, value: object, depth: int) -> None:
        """Hash ``value`` (tagged with its kind) into ``h``."""
        t = type(value)
        if value is None:
            h.update(b"N")
        elif t is bool:
            h.update(b"T" if value else b"F")
        elif t is int:
            text = str(value).encode()
            h.update(b"i%d:" % len(text) + text)
        elif t is float:
            h.update(b"f" + _FLOAT.pack(value))
        elif t is str:
            raw = value.encode("utf-8", "surrogatepass")
            h.update(b"s%d:" % len(raw) + raw)
            self.nbytes += len(raw)
        elif isinstance(value, np.ndarray | np.generic):
            self._array(h, value, depth)
        else:
            self._other(h, value, depth)
        self.nbytes += 8

    def _array(self, h: Any, value: np.ndarray | np.generic, depth: int) -> None:
        a = np.asarray(value)
        dtype = str(a.dtype.descr) if a.dtype.fields else a.dtype.str
        kind = b"a" if isinstance(value, np.ndarray) else b"g"
        h.update(kind + f"{dtype}{a.shape}".encode())
        if a.dtype.hasobject:
            self._items(h, list(a.ravel()), depth, "[...]")
        else:
            h.update(np.ascontiguousarray(a).tobytes())
            self.nbytes += a.nbytes

    def _other(self, h: Any, value: object, depth: int) -> None:
        if isinstance(value, int | float | str):  # a subclass: its type and its value
            h.update(f"x{_qualname(type(value))}".encode())
            base = next(b for b in (bool, int, float, str) if isinstance(value, b))
            self.feed(h, base(value), depth)
        elif isinstance(value, bytes | bytearray):
            h.update(b"b%s%d:" % (type(value).__name__.encode(), len(value)) + bytes(value))
            self.nbytes += len(value)
        elif isinstance(value, complex):
            h.update(b"c" + _FLOAT.pack(value.real) + _FLOAT.pack(value.imag))
        elif isinstance(value, enum.Enum):
            h.update(f"e{_qualname(type(value))}.{value.name}".encode())
        elif isinstance(value, _NAMED):
            h.update(f"q{_qualname(value)}".encode())
        elif isinstance(value, _METHODS):
            h.update(f"m{_qualname(getattr(value, '__func__', value))}".encode())
        elif isinstance(value, np.random.Generator):
            self._nested(h, value, depth, b"R", lambda: [(".state", value.bit_generator.state)])
        elif isinstance(value, np.random.BitGenerator):
            self._nested(h, value, depth, b"B", lambda: [(".state", value.state)])
        elif hasattr(type(value), "__array__") and not isinstance(value, dict | list | tuple):
            h.update(f"A{_qualname(type(value))}".encode())  # a torch tensor, say
            self._array(h, self._as_array(value), depth)
        else:
            self._container_or_object(h, value, depth)

    def _as_array(self, value: Any) -> np.ndarray:
        """An array-like's values (``__array__``; a tensor detached and on the CPU first)."""
        try:
            detach = getattr(value, "detach", None)
            if callable(detach):
                value = detach()
                cpu = getattr(value, "cpu", None)
                value = cpu() if callable(cpu) else value
            return np.asarray(value)
        except Exception:
            raise self._refuse(
                f"values KELab can compare ({_KINDS})",
                f"a {_type_name(value)} whose values do not convert to a numpy array",
                "convert it to a numpy array in state_dict()",
            ) from None

    def _container_or_object(self, h: Any, value: object, depth: int) -> None:
        t = type(value)
        extra = getattr(value, "__dict__", None) if t.__module__ != "builtins" else None
        if isinstance(value, dict):
            self._enter(value, depth)
            h.update(f"D{_type_name(value)}:{len(value)}".encode())
            self._mapping(h, list(value.items()), depth)
            self._leave(value)
        elif isinstance(value, list | tuple):
            self._nested(h, value, depth, b"L", None)
        elif isinstance(value, set | frozenset):
            self._enter(value, depth)
            h.update(f"S{_type_name(value)}:{len(value)}".encode())
            self._unordered(h, list(value), depth)
            self._leave(value)
        else:
            self._object(h, value, depth)
            return
        if extra:  # a subclass's own attributes
            self._enter(value, depth)
            self._mapping(h, list(extra.items()), depth)
            self._leave(value)

    def _object(self, h: Any, value: object, depth: int) -> None:
        """An object by its type and what a deep copy keeps of it (the module doc)."""
        t = type(value)
        h.update(f"O{_qualname(t)}".encode())
        if _own(t, "__reduce_ex__") or _own(t, "__reduce__"):
            parts = self._reduced(value)
        elif _own(t, "__getstate__"):
            try:
                parts = [(".__getstate__()", value.__getstate__())]  # type: ignore[attr-defined]
            except Exception:  # a socket's refuses: no copy either
                raise self._uncopyable(value) from None
        else:
            attrs = dict(getattr(value, "__dict__", {}))
            for klass in t.__mro__:
                slots = klass.__dict__.get("__slots__", ())
                for slot in (slots,) if isinstance(slots, str) else slots:
                    if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
                        attrs[slot] = getattr(value, slot)
            if not attrs and not hasattr(value, "__dict__"):  # a C object we cannot read
                parts = self._reduced(value)
            else:
                self._check_copyable(value)  # an open file has a __dict__ but no copy
                self._enter(value, depth)
                self._mapping(h, list(attrs.items()), depth, attrs=True)
                self._leave(value)
                return
        self._enter(value, depth)
        for label, part in parts:
            self.path.append(label)
            h.update(label.encode())
            self.feed(h, part, depth + 1)
            self.path.pop()
        self._leave(value)

    def _uncopyable(self, value: object) -> ValueError:
        return self._refuse(
            f"values KELab can copy and compare ({_KINDS})",
            f"one that cannot be copied or compared by value: a {_type_name(value)}",
            "leave it out of state_dict() (keep what rebuilds it: a file's name, a counter),"
            " or give its class a __getstate__",
        )

    def _check_copyable(self, value: object) -> None:
        """Refuse ``value`` where ``copy.deepcopy`` would fail on it (not on its parts).

        Mirrors deepcopy's choice: a ``__deepcopy__`` or a ``copyreg`` entry is trusted,
        else ``__reduce_ex__(4)`` must succeed (an open file's raises though the file has
        a ``__dict__``).
        """
        t = type(value)
        if getattr(t, "__deepcopy__", None) is not None or t in copyreg.dispatch_table:
            return
        try:
            value.__reduce_ex__(4)
        except Exception:
            raise self._uncopyable(value) from None

    def _reduced(self, value: object) -> list[tuple[str, object]]:
        """The parts of ``value.__reduce_ex__(4)`` (what ``copy.deepcopy`` rebuilds it from)."""
        try:
            rv = value.__reduce_ex__(4)
        except Exception:
            raise self._uncopyable(value) from None
        if isinstance(rv, str):
            return [(".__reduce__()", rv)]
        rv = tuple(rv) + (None,) * (5 - len(rv))
        return [
            (".__reduce__()[1]", rv[1]),
            (".__reduce__()[2]", rv[2]),
            (".__reduce__()[3]", None if rv[3] is None else list(rv[3])),
            (".__reduce__()[4]", None if rv[4] is None else list(rv[4])),
        ]

    def _nested(self, h: Any, value: Any, depth: int, tag: bytes, parts: Any) -> None:
        self._enter(value, depth)
        if parts is None:  # a list or tuple: its items in order
            h.update(tag + f"{_type_name(value)}:{len(value)}".encode())
            self._items(h, value, depth, None)
        else:
            h.update(tag)
            for label, part in parts():
                self.path.append(label)
                self.feed(h, part, depth + 1)
                self.path.pop()
        self._leave(value)

    def _items(self, h: Any, items: Any, depth: int, label: str | None) -> None:
        for i, item in enumerate(items):
            self.path.append(label or f"[{i}]")
            self.feed(h, item, depth + 1)
            self.path.pop()

    def _mapping(self, h: Any, items: list, depth: int, attrs: bool = False) -> None:
        """Items in an order that does not depend on insertion (str keys sorted)."""
        if all(type(k) is str for k, _ in items):
            for key, item in sorted(items, key=lambda kv: kv[0]):
                self.path.append(f".{key}" if attrs else f"[{key!r}]")
                raw = key.encode("utf-8", "surrogatepass")
                h.update(b"k%d:" % len(raw) + raw)
                self.feed(h, item, depth + 1)
                self.path.pop()
            return
        digests = []
        for key, item in items:
            sub = hashlib.blake2b(digest_size=16)
            self.path.append(f"[{key!r}]")
            self.feed(sub, key, depth + 1)
            sub.update(b"=")
            self.feed(sub, item, depth + 1)
            self.path.pop()
            digests.append(sub.digest())
        for d in sorted(digests):
            h.update(d)

    def _unordered(self, h: Any, items: list, depth: int) -> None:
        digests = []
        for item in items:
            sub = hashlib.blake2b(digest_size=16)
            self.path.append("{...}")
            self.feed(sub, item, depth + 1)
            self.path.pop()
            digests.append(sub.digest())
        for d in sorted(digests):
            h.update(d)

    def _enter(self, value: object, depth: int) -> None:
        if id(value) in self.on_path:
            raise self._refuse(
                "values without cycles",
                f"a {_type_name(value)} that holds itself",
                "return the values without the back-reference",
            )
        if depth >= MAX_STATE_DEPTH:
            raise self._refuse(
                f"values nested at most {MAX_STATE_DEPTH} levels deep",
                f"a {_type_name(value)} nested deeper than {MAX_STATE_DEPTH} levels",
                "return a flatter state",
            )
        self.on_path.add(id(value))
        self.nbytes += 56

    def _leave(self, value: object) -> None:
        self.on_path.discard(id(value))
