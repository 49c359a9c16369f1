"""Mangle values as hashable Python objects.

Stored facts are tuples of these values, compared and hashed structurally. Two rules of the dialect
shape the classes: a name never equals a string, and an int never equals a float (Python says
``1 == 1.0``), so names are their own interned type and floats are a ``float`` subclass with a
hash and equality of their own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any, ClassVar

from .errors import ValueConversionError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

_NAME_RE = re.compile(r"(?:/[A-Za-z0-9._~%-]+)+")


class Name:
    """A name constant such as ``/a/b``; interned, so equality and hashing are by identity."""

    __slots__ = ("__weakref__", "text")
    _interned: ClassVar[dict[str, Name]] = {}
    text: str

    def __new__(cls, text: str) -> Name:
        found = cls._interned.get(text)
        if found is not None:
            return found
        if not isinstance(text, str) or not _NAME_RE.fullmatch(text):
            raise ValueConversionError(f"not a name constant: {text!r} (expected /part/part...)")
        obj = object.__new__(cls)
        object.__setattr__(obj, "text", text)
        cls._interned[text] = obj
        return obj

    @classmethod
    def of(cls, word: str) -> Name:
        """The name constant ``/word`` — how Python turns one of its words (a category, a decision, a tool, a
        role's prefix) into the name the rules read: ``Name.of("safety")`` is ``/safety``. A word that makes no name
        constant is a ValueConversionError, as for ``Name``."""
        return cls("/" + word)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("Name is immutable")

    def __reduce__(self) -> tuple[type[Name], tuple[str]]:
        return (Name, (self.text,))

    def __repr__(self) -> str:
        return f"Name({self.text!r})"

    def __lt__(self, other: object) -> bool:
        if type(other) is not Name:
            return NotImplemented
        return self.text < other.text

    def __str__(self) -> str:
        return self.text

    def parts(self) -> list[str]:
        """The segments of the name, ``/a/b`` -> ``['a', 'b']``."""
        return self.text[1:].split("/")


TRUE = Name("/true")
FALSE = Name("/false")


class Float(float):
    """A float64 that is never equal to an int of the same magnitude."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is Float and float.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(("float", float(self)))

    def __repr__(self) -> str:
        return f"Float({float.__repr__(self)})"


_LIST_SALT = hash("fn:List")  # a list hashes apart from the tuple of its items (which it never equals)


class List(tuple[Any, ...]):
    """A Mangle list; a tuple that only equals other lists."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is List and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:  # the items' tuple's hash, salted: no copy (a verdict's reasons are hashed per decision)
        return tuple.__hash__(self) ^ _LIST_SALT

    def __repr__(self) -> str:
        return f"List({list(self)!r})"


class Pair(tuple[Any, Any]):
    """A Mangle pair ``fn:pair(a, b)``."""

    __slots__ = ()

    def __new__(cls, first: Any, second: Any) -> Pair:
        return tuple.__new__(cls, (first, second))

    def __getnewargs__(self) -> tuple[Any, Any]:
        return (self[0], self[1])

    def __eq__(self, other: object) -> bool:
        return type(other) is Pair and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(("pair", self[0], self[1]))

    def __repr__(self) -> str:
        return f"Pair({self[0]!r}, {self[1]!r})"


class _Keyed:
    """Shared body of maps and structs: ordered entries for display, order-free equality."""

    __slots__ = ("_set", "entries")
    entries: tuple[tuple[Any, Any], ...]
    _set: frozenset[tuple[Any, Any]]

    def __init__(self, entries: Iterable[tuple[Any, Any]]) -> None:
        seen: dict[Any, Any] = {}
        for key, value in entries:
            seen.setdefault(key, value)
        object.__setattr__(self, "entries", tuple(seen.items()))
        object.__setattr__(self, "_set", frozenset(self.entries))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Keyed) and type(other) is type(self) and self._set == other._set

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._set))

    def __reduce__(self) -> tuple[type[_Keyed], tuple[tuple[tuple[Any, Any], ...]]]:
        return (type(self), (self.entries,))

    def get(self, key: Any) -> Any:
        for k, v in self.entries:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.entries)!r})"


class Map(_Keyed):
    """A Mangle map; the first value given for a key wins."""

    __slots__ = ()


class Struct(_Keyed):
    """A Mangle struct: fields are names."""

    __slots__ = ()


Value = Name | str | bytes | int | Float | List | Pair | Map | Struct


def type_name(value: Any) -> str:
    """The dialect's name for a value's type, for error messages."""
    kind = type(value)
    return _TYPE_NAMES.get(kind, kind.__name__)


_TYPE_NAMES: dict[type, str] = {
    Name: "name",
    str: "string",
    bytes: "bytes",
    int: "int64",
    Float: "float64",
    List: "list",
    Pair: "pair",
    Map: "map",
    Struct: "struct",
}


def to_value(obj: Any) -> Value:
    """Convert a Python object to a Mangle value; raises TypeError or ValueError on what has none."""
    kind = type(obj)
    if kind in (Name, str, bytes, Float, List, Pair, Map, Struct):
        return obj  # type: ignore[no-any-return]
    if kind is int:
        if not INT64_MIN <= obj <= INT64_MAX:
            raise ValueConversionError(f"integer {obj} does not fit in int64")
        return obj  # type: ignore[no-any-return]
    if kind is float:
        return Float(obj)
    if kind is bool:
        raise TypeError("booleans have no Mangle value; use Name('/true') or Name('/false')")
    if isinstance(obj, list | tuple):
        return List(to_value(item) for item in obj)
    if isinstance(obj, dict):
        return Map((to_value(k), to_value(v)) for k, v in obj.items())
    raise TypeError(f"no Mangle value for Python {kind.__name__}: {obj!r}")


def format_float(value: float) -> str:
    """Shortest round-trip form that always shows a '.' or an exponent."""
    if math.isnan(value):
        return "fn:float:nan()"
    if math.isinf(value):
        return "fn:float:inf()" if value > 0 else "fn:float:neg_inf()"
    text = float.__repr__(value)
    if "." in text or "e" in text:
        return text
    return text + ".0"


def _quote(text: str) -> str:
    if text.isprintable() and '"' not in text and "\\" not in text:  # the common case, at C speed
        return f'"{text}"'
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(f"\\u{{{ord(ch):x}}}")
    out.append('"')
    return "".join(out)


def _quote_bytes(data: bytes) -> str:
    out = ['b"']
    for byte in data:
        ch = chr(byte)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\x{byte:02x}")
    out.append('"')
    return "".join(out)


def display(value: Any) -> str:
    """The canonical display of the spec, used by the CLI and golden tests."""
    kind = type(value)
    if kind is Name:
        return value.text  # type: ignore[no-any-return]
    if kind is str:
        return _quote(value)
    if kind is int:
        return str(value)
    if kind is Float:
        return format_float(value)
    if kind is bytes:
        return _quote_bytes(value)
    if kind is List:
        return "[" + ", ".join(display(v) for v in value) + "]"
    if kind is Pair:
        return f"fn:pair({display(value[0])}, {display(value[1])})"
    if kind is Map:
        if not value.entries:
            return "fn:map()"
        return "[" + ", ".join(f"{display(k)}: {display(v)}" for k, v in value.entries) + "]"
    if kind is Struct:
        return "{" + ", ".join(f"{display(k)}: {display(v)}" for k, v in value.entries) + "}"
    raise TypeError(f"not a Mangle value: {value!r}")


def display_fact(predicate: str, args: tuple[Any, ...]) -> str:
    """A fact written as the language writes it, ``p(/a, "x", 3)``."""
    return f"{predicate}(" + ", ".join(display(a) for a in args) + ")"


_RANK = {Name: 0, int: 1, Float: 1, str: 2, bytes: 3, Pair: 4, List: 5, Map: 6, Struct: 7}


def sort_key(value: Any) -> tuple[Any, ...]:
    """A total order over values (numbers by magnitude, then by type), for deterministic output."""
    kind = type(value)
    rank = _RANK.get(kind, 9)
    if kind is Name:
        return (rank, value.text)
    if kind is int or kind is Float:
        return (rank, float(value), kind is Float, int(value) if kind is int else 0)
    if kind is str or kind is bytes:
        return (rank, value)
    if kind is List or kind is Pair:
        return (rank, len(value), tuple(sort_key(v) for v in value))
    if kind is Map or kind is Struct:
        return (rank, tuple(sorted((sort_key(k), sort_key(v)) for k, v in value.entries)))
    return (rank, repr(value))


def fact_sort_key(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(sort_key(a) for a in args)


_NATIVE_ORDER = frozenset({int, str, bytes, Name})


def sort_facts(facts: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Facts in the order of fact_sort_key.

    Plain tuple comparison gives that same order whenever it succeeds on ints, strings, bytes and
    names (a decisive comparison between two types raises TypeError), and is many times faster.
    """
    items = list(facts)
    if set(map(type, chain.from_iterable(items))) <= _NATIVE_ORDER:
        try:
            return sorted(items)
        except TypeError:
            pass
    return sorted(items, key=fact_sort_key)
