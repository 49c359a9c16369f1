"""Built-in functions, predicates and reducers of the dialect.

A failing function raises BuiltinError; the evaluator adds the clause's position and aborts, so a
runtime error is never silently skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import InputError, LimitError
from .values import (
    FALSE,
    INT64_MAX,
    INT64_MIN,
    TRUE,
    Float,
    List,
    Map,
    Name,
    Pair,
    Struct,
    display,
    type_name,
)


class BuiltinError(InputError):
    """A built-in was applied to values it is not defined for."""


class ValueLimitError(BuiltinError, LimitError):
    """A built-in would build a value beyond the engine's bounds (a rule doubling a string each round, a list
    nested inside itself): reported as a limit, before memory or the interpreter's stack runs out."""


MAX_STRING_CHARS = 1_000_000
MAX_VALUE_ITEMS = 100_000  # elements of a list, map or struct, nested ones included
MAX_VALUE_DEPTH = 32  # lists, pairs, maps and structs inside each other


def bounded(fn: str, value: Any) -> Any:
    """``value`` if it is within the value bounds, else ValueLimitError naming the built-in and the bound."""
    if type(value) is str:
        if len(value) > MAX_STRING_CHARS:
            raise ValueLimitError(f"{fn}: the result would have {len(value)} characters; strings are limited to "
                                  f"{MAX_STRING_CHARS} (a limit of the engine)")  # fmt: skip
        return value
    if not isinstance(value, List | Pair | Map | Struct):
        return value
    if type(value) is List and len(value) <= MAX_VALUE_ITEMS:  # a flat list (a verdict's reasons): one level, no walk
        for child in value:
            if isinstance(child, tuple | Map | Struct):
                break
        else:
            return value
    items = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > MAX_VALUE_DEPTH:
            raise ValueLimitError(f"{fn}: the result would be nested more than {MAX_VALUE_DEPTH} levels deep "
                                  "(a limit of the engine)")  # fmt: skip
        children = current.entries if isinstance(current, Map | Struct) else current
        for child in children:
            items += 1
            if isinstance(child, tuple | Map | Struct):
                stack.append((child, depth + (0 if type(child) is tuple else 1)))
        if items > MAX_VALUE_ITEMS:
            raise ValueLimitError(f"{fn}: the result would hold more than {MAX_VALUE_ITEMS} elements "
                                  "(a limit of the engine)")  # fmt: skip
    return value


def _limited(fn: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def checked(*args: Any) -> Any:
        return bounded(fn, function(*args))

    checked.__name__ = function.__name__
    return checked


UNBOUND: Any = object()  # marks a built-in predicate argument that the built-in should bind


def _int(fn: str, value: Any) -> int:
    if type(value) is not int:
        raise BuiltinError(f"{fn} expects int64 arguments, got {type_name(value)} {display(value)}")
    return value


def _number(fn: str, value: Any) -> float:
    if type(value) is not int and type(value) is not Float:
        raise BuiltinError(f"{fn} expects numbers, got {type_name(value)} {display(value)}")
    return value


def _checked(fn: str, result: int) -> int:
    if not INT64_MIN <= result <= INT64_MAX:
        raise BuiltinError(f"{fn}: integer overflow (result {result} does not fit in int64)")
    return result


def _of_type(fn: str, value: Any, kind: type, what: str) -> Any:
    if type(value) is not kind:
        raise BuiltinError(f"{fn} expects {what}, got {type_name(value)} {display(value)}")
    return value


# -- arithmetic --------------------------------------------------------------------------------
def fn_plus(*args: Any) -> int:
    return _checked("fn:plus", sum(_int("fn:plus", a) for a in args))


def fn_minus(*args: Any) -> int:
    if not args:
        raise BuiltinError("fn:minus needs at least one argument")
    first = _int("fn:minus", args[0])
    if len(args) == 1:
        return _checked("fn:minus", -first)
    return _checked("fn:minus", first - sum(_int("fn:minus", a) for a in args[1:]))


def fn_mult(*args: Any) -> int:
    result = 1
    for a in args:
        result = _checked("fn:mult", result * _int("fn:mult", a))
    return result


def fn_div(*args: Any) -> int:
    if len(args) < 2:
        raise BuiltinError("fn:div needs at least two arguments")
    result = _int("fn:div", args[0])
    for a in args[1:]:
        divisor = _int("fn:div", a)
        if divisor == 0:
            raise BuiltinError("fn:div: division by zero")
        quotient = abs(result) // abs(divisor)
        result = _checked("fn:div", quotient if (result >= 0) == (divisor > 0) else -quotient)
    return result


def fn_mod(a: Any, b: Any) -> int:
    dividend, divisor = _int("fn:mod", a), _int("fn:mod", b)
    if divisor == 0:
        raise BuiltinError("fn:mod: division by zero")
    remainder = abs(dividend) % abs(divisor)
    return -remainder if dividend < 0 else remainder


def fn_float_plus(*args: Any) -> Float:
    return Float(math.fsum(_number("fn:float:plus", a) for a in args))


def fn_float_mult(*args: Any) -> Float:
    result = 1.0
    for a in args:
        result *= _number("fn:float:mult", a)
    return Float(result)


def fn_float_div(*args: Any) -> Float:
    if len(args) < 2:
        raise BuiltinError("fn:float:div needs at least two arguments")
    result = float(_number("fn:float:div", args[0]))
    for a in args[1:]:
        divisor = _number("fn:float:div", a)
        if divisor == 0:
            raise BuiltinError("fn:float:div: division by zero")
        result /= divisor
    return Float(result)


def fn_sqrt(a: Any) -> Float:
    value = _number("fn:sqrt", a)
    if value < 0:
        raise BuiltinError(f"fn:sqrt of a negative number {display(a)}")
    return Float(math.sqrt(value))


# -- lists, pairs, maps, structs -----------------------------------------------------------------
def fn_list(*args: Any) -> List:
    return List(args)


def fn_list_cons(head: Any, tail: Any) -> List:
    return List((head, *_of_type("fn:list:cons", tail, List, "a list as second argument")))


def fn_list_append(lst: Any, item: Any) -> List:
    return List((*_of_type("fn:list:append", lst, List, "a list as first argument"), item))


def fn_list_get(lst: Any, index: Any) -> Any:
    items = _of_type("fn:list:get", lst, List, "a list as first argument")
    i = _int("fn:list:get", index)
    if not 0 <= i < len(items):
        raise BuiltinError(f"fn:list:get: index {i} out of range for a list of length {len(items)}")
    return items[i]


def fn_list_len(lst: Any) -> int:
    return len(_of_type("fn:list:len", lst, List, "a list"))


def fn_list_contains(lst: Any, item: Any) -> Name:
    return TRUE if item in _of_type("fn:list:contains", lst, List, "a list as first argument") else FALSE


def fn_pair(a: Any, b: Any) -> Pair:
    return Pair(a, b)


def fn_tuple(*args: Any) -> Any:
    """One argument is itself, two a pair, more nest to the right: (a, (b, c))."""
    if not args:
        raise BuiltinError("fn:tuple needs at least one argument")
    result = args[-1]
    for item in reversed(args[:-1]):
        result = Pair(item, result)
    return result


def _entries(fn: str, args: tuple[Any, ...], what: str) -> list[tuple[Any, Any]]:
    if len(args) % 2:
        raise BuiltinError(f"{fn} needs {what} pairs (an even number of arguments)")
    return list(zip(args[0::2], args[1::2], strict=True))


def _lookup(fn: str, container: Any, kind: type, key: Any) -> Any:
    try:
        return _of_type(fn, container, kind, f"a {kind.__name__.lower()} as first argument").get(key)
    except KeyError:
        raise BuiltinError(f"{fn}: {display(key)} not in {display(container)}") from None


def fn_map(*args: Any) -> Map:
    return Map(_entries("fn:map", args, "key, value"))


def fn_map_get(m: Any, key: Any) -> Any:
    return _lookup("fn:map:get", m, Map, key)


def fn_struct(*args: Any) -> Struct:
    entries = _entries("fn:struct", args, "/field, value")
    for field, _ in entries:
        if type(field) is not Name:
            raise BuiltinError(f"fn:struct field names are names like /f, got {display(field)}")
    return Struct(entries)


def fn_struct_get(s: Any, field: Any) -> Any:
    return _lookup("fn:struct:get", s, Struct, field)


# -- names and strings ---------------------------------------------------------------------------
def _name(fn: str, value: Any) -> Name:
    return _of_type(fn, value, Name, "a name")  # type: ignore[no-any-return]


def fn_name_to_string(n: Any) -> str:
    return _name("fn:name:to_string", n).text


def fn_name_root(n: Any) -> Name:
    return Name.of(_name("fn:name:root", n).parts()[0])


def fn_name_tip(n: Any) -> Name:
    return Name.of(_name("fn:name:tip", n).parts()[-1])


def fn_name_list(n: Any) -> List:
    return List(Name.of(part) for part in _name("fn:name:list", n).parts())


def fn_number_to_string(n: Any) -> str:
    return str(_int("fn:number:to_string", n))


def fn_float64_to_string(f: Any) -> str:
    return display(Float(_number("fn:float64:to_string", f)))


def fn_string_concat(*args: Any) -> str:
    for a in args:
        if type(a) is not str:
            break
    else:  # strings alone (a reason worded from a call's names): measured and joined without a look at each type
        if sum(map(len, args)) > MAX_STRING_CHARS:
            raise _concat_too_long()
        return "".join(args)
    out = []
    for a in args:
        kind = type(a)
        if kind is str:
            out.append(a)
        elif kind is Name:
            out.append(a.text)
        elif kind is int or kind is Float:
            out.append(display(a))
        else:
            raise BuiltinError(f"fn:string:concat takes strings, names and numbers, got {type_name(a)}")
    if sum(map(len, out)) > MAX_STRING_CHARS:  # every piece counted, numbers and names too, before the join allocates
        raise _concat_too_long()
    return "".join(out)


def _concat_too_long() -> ValueLimitError:
    return ValueLimitError(f"fn:string:concat: the result would exceed {MAX_STRING_CHARS} characters "
                           "(a limit of the engine)")  # fmt: skip


def fn_string_replace(s: Any, old: Any, new: Any, count: Any) -> str:
    text = _of_type("fn:string:replace", s, str, "a string")
    old_text, new_text = (_of_type("fn:string:replace", x, str, "a string") for x in (old, new))
    times = text.count(old_text) if old_text else len(text) + 1
    limit = _int("fn:string:replace", count)
    times = times if limit < 0 else min(times, limit)
    if len(text) + times * (len(new_text) - len(old_text)) > MAX_STRING_CHARS:
        raise ValueLimitError(f"fn:string:replace: the result would exceed {MAX_STRING_CHARS} characters "
                              "(a limit of the engine)")  # fmt: skip
    return text.replace(  # type: ignore[no-any-return]
        _of_type("fn:string:replace", old, str, "a string"),
        _of_type("fn:string:replace", new, str, "a string"),
        _int("fn:string:replace", count),
    )


# -- reducers (also usable on a list outside a transform) -----------------------------------------
def _numbers(fn: str, values: Any) -> list[Any]:
    return [_number(fn, v) for v in values]


def reduce_sum(values: Any) -> int:
    return _checked("fn:sum", sum(_int("fn:sum", v) for v in values))


def reduce_max(values: Any) -> Any:
    items = _numbers("fn:max", values)
    if not items:
        raise BuiltinError("fn:max of an empty list")
    return max(items, key=float)


def reduce_min(values: Any) -> Any:
    items = _numbers("fn:min", values)
    if not items:
        raise BuiltinError("fn:min of an empty list")
    return min(items, key=float)


def reduce_avg(values: Any) -> Float:
    items = _numbers("fn:avg", values)
    if not items:
        raise BuiltinError("fn:avg of an empty list")
    return Float(math.fsum(items) / len(items))


def reduce_float_sum(values: Any) -> Float:
    return Float(math.fsum(_numbers("fn:float:sum", values)))


def reduce_float_max(values: Any) -> Float:
    return Float(reduce_max(values))


def reduce_float_min(values: Any) -> Float:
    return Float(reduce_min(values))


def _list_reducer(reducer: Callable[[Any], Any], fn: str) -> Callable[[Any], Any]:
    def apply(lst: Any) -> Any:
        return reducer(_of_type(fn, lst, List, "a list"))

    return apply


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "fn:plus": fn_plus,
    "fn:minus": fn_minus,
    "fn:mult": fn_mult,
    "fn:div": fn_div,
    "fn:mod": fn_mod,
    "fn:float:plus": fn_float_plus,
    "fn:float:mult": fn_float_mult,
    "fn:float:div": fn_float_div,
    "fn:sqrt": fn_sqrt,
    "fn:list": fn_list,
    "fn:list:cons": fn_list_cons,
    "fn:list:append": fn_list_append,
    "fn:list:get": fn_list_get,
    "fn:list:len": fn_list_len,
    "fn:list:contains": fn_list_contains,
    "fn:pair": fn_pair,
    "fn:tuple": fn_tuple,
    "fn:map": fn_map,
    "fn:map:get": fn_map_get,
    "fn:struct": fn_struct,
    "fn:struct:get": fn_struct_get,
    "fn:name:to_string": fn_name_to_string,
    "fn:name:root": fn_name_root,
    "fn:name:tip": fn_name_tip,
    "fn:name:list": fn_name_list,
    "fn:number:to_string": fn_number_to_string,
    "fn:float64:to_string": fn_float64_to_string,
    "fn:string:concat": fn_string_concat,
    "fn:string:replace": fn_string_replace,
    "fn:sum": _list_reducer(reduce_sum, "fn:sum"),
    "fn:max": _list_reducer(reduce_max, "fn:max"),
    "fn:min": _list_reducer(reduce_min, "fn:min"),
}

for _name_of in ("fn:list", "fn:list:cons", "fn:list:append", "fn:pair", "fn:tuple", "fn:map", "fn:struct"):
    FUNCTIONS[_name_of] = _limited(_name_of, FUNCTIONS[_name_of])

# Allowed argument counts (min, max); None = unbounded.
ARITY: dict[str, tuple[int, int | None]] = {
    "fn:plus": (0, None), "fn:minus": (1, None), "fn:mult": (0, None), "fn:div": (2, None),
    "fn:mod": (2, 2), "fn:float:plus": (0, None), "fn:float:mult": (0, None), "fn:float:div": (2, None),
    "fn:sqrt": (1, 1), "fn:list": (0, None), "fn:list:cons": (2, 2), "fn:list:append": (2, 2),
    "fn:list:get": (2, 2), "fn:list:len": (1, 1), "fn:list:contains": (2, 2), "fn:pair": (2, 2),
    "fn:tuple": (1, None), "fn:map": (0, None), "fn:map:get": (2, 2), "fn:struct": (0, None),
    "fn:struct:get": (2, 2), "fn:name:to_string": (1, 1), "fn:name:root": (1, 1), "fn:name:tip": (1, 1),
    "fn:name:list": (1, 1), "fn:number:to_string": (1, 1), "fn:float64:to_string": (1, 1),
    "fn:string:concat": (0, None), "fn:string:replace": (4, 4), "fn:sum": (1, 1), "fn:max": (1, 1),
    "fn:min": (1, 1),
}  # fmt: skip


# Reducers: name -> (argument count range, function from the list of argument rows to a value)
def _collect(rows: list[tuple[Any, ...]]) -> List:
    return bounded("fn:collect", List(fn_tuple(*row) for row in rows))  # type: ignore[no-any-return]


def _collect_distinct(rows: list[tuple[Any, ...]]) -> List:
    return bounded("fn:collect_distinct", List(dict.fromkeys(fn_tuple(*row) for row in rows)))  # type: ignore[no-any-return]


def _collect_to_map(rows: list[tuple[Any, ...]]) -> Map:
    return bounded("fn:collect_to_map", Map((row[0], row[1]) for row in rows))  # type: ignore[no-any-return]


def _single(reducer: Callable[[Any], Any]) -> Callable[[list[tuple[Any, ...]]], Any]:
    return lambda rows: reducer([row[0] for row in rows])


REDUCERS: dict[str, tuple[tuple[int, int | None], Callable[[list[tuple[Any, ...]]], Any]]] = {
    "fn:count": ((0, None), len),
    "fn:sum": ((1, 1), _single(reduce_sum)),
    "fn:max": ((1, 1), _single(reduce_max)),
    "fn:min": ((1, 1), _single(reduce_min)),
    "fn:avg": ((1, 1), _single(reduce_avg)),
    "fn:float:sum": ((1, 1), _single(reduce_float_sum)),
    "fn:float:max": ((1, 1), _single(reduce_float_max)),
    "fn:float:min": ((1, 1), _single(reduce_float_min)),
    "fn:collect": ((1, None), _collect),
    "fn:collect_distinct": ((1, None), _collect_distinct),
    "fn:collect_to_map": ((2, 2), _collect_to_map),
}


# -- built-in predicates ---------------------------------------------------------------------------
def compare(op: str, a: Any, b: Any) -> bool:
    x, y = _number(op, a), _number(op, b)
    if op == ":lt":
        return x < y
    if op == ":le":
        return x <= y
    if op == ":gt":
        return x > y
    return x >= y


def _unify(arg: Any, value: Any) -> bool:
    return arg is UNBOUND or arg == value


def _test(ok: bool, args: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    if ok:
        yield args


def p_compare(op: str) -> Callable[..., Iterator[tuple[Any, ...]]]:
    return lambda a, b: _test(compare(op, a, b), (a, b))


def p_within_distance(a: Any, b: Any, d: Any) -> Iterator[tuple[Any, ...]]:
    x, y, dist = (_number(":within_distance", v) for v in (a, b, d))
    return _test(abs(x - y) <= dist, (a, b, d))


def p_match_prefix(name: Any, prefix: Any) -> Iterator[tuple[Any, ...]]:
    n, p = _name(":match_prefix", name), _name(":match_prefix", prefix)
    return _test(n.text.startswith(p.text + "/"), (name, prefix))


def _string_test(fn: str, test: Callable[[str, str], bool]) -> Callable[..., Iterator[tuple[Any, ...]]]:
    def check(s: Any, part: Any) -> Iterator[tuple[Any, ...]]:
        return _test(test(_of_type(fn, s, str, "a string"), _of_type(fn, part, str, "a string")), (s, part))

    return check


def p_filter(value: Any) -> Iterator[tuple[Any, ...]]:
    if type(value) is not Name:
        raise BuiltinError(f":filter expects /true or /false, got {display(value)}")
    return _test(value is TRUE, (value,))


def p_match_pair(p: Any, a: Any, b: Any) -> Iterator[tuple[Any, ...]]:
    if type(p) is Pair and _unify(a, p[0]) and _unify(b, p[1]):
        yield (p, p[0], p[1])


def p_match_cons(lst: Any, head: Any, tail: Any) -> Iterator[tuple[Any, ...]]:
    if type(lst) is List and lst:
        rest = List(lst[1:])
        if _unify(head, lst[0]) and _unify(tail, rest):
            yield (lst, lst[0], rest)


def p_match_nil(lst: Any) -> Iterator[tuple[Any, ...]]:
    return _test(type(lst) is List and not lst, (lst,))


def p_match_entry(m: Any, key: Any, value: Any) -> Iterator[tuple[Any, ...]]:
    if type(m) is Map:
        for k, v in m.entries:
            if _unify(key, k) and _unify(value, v):
                yield (m, k, v)


def p_match_field(s: Any, field: Any, value: Any) -> Iterator[tuple[Any, ...]]:
    if type(s) is Struct:
        for k, v in s.entries:
            if _unify(field, k) and _unify(value, v):
                yield (s, k, v)


def p_list_member(item: Any, lst: Any) -> Iterator[tuple[Any, ...]]:
    if type(lst) is List:
        for v in dict.fromkeys(lst) if item is UNBOUND else ((item,) if item in lst else ()):
            yield (v, lst)


class BuiltinPredicate:
    """A built-in predicate: which arguments must be bound, and the generator that solves it."""

    def __init__(self, arity: int, inputs: tuple[int, ...], solve: Callable[..., Iterator[tuple[Any, ...]]]):
        self.arity = arity
        self.inputs = inputs
        self.solve = solve


PREDICATES: dict[str, BuiltinPredicate] = {
    ":lt": BuiltinPredicate(2, (0, 1), p_compare(":lt")),
    ":le": BuiltinPredicate(2, (0, 1), p_compare(":le")),
    ":gt": BuiltinPredicate(2, (0, 1), p_compare(":gt")),
    ":ge": BuiltinPredicate(2, (0, 1), p_compare(":ge")),
    ":within_distance": BuiltinPredicate(3, (0, 1, 2), p_within_distance),
    ":match_prefix": BuiltinPredicate(2, (0, 1), p_match_prefix),
    ":string:starts_with": BuiltinPredicate(2, (0, 1), _string_test(":string:starts_with", str.startswith)),
    ":string:ends_with": BuiltinPredicate(2, (0, 1), _string_test(":string:ends_with", str.endswith)),
    ":string:contains": BuiltinPredicate(2, (0, 1), _string_test(":string:contains", str.__contains__)),
    ":filter": BuiltinPredicate(1, (0,), p_filter),
    ":match_pair": BuiltinPredicate(3, (0,), p_match_pair),
    ":match_cons": BuiltinPredicate(3, (0,), p_match_cons),
    ":match_nil": BuiltinPredicate(1, (0,), p_match_nil),
    ":match_entry": BuiltinPredicate(3, (0,), p_match_entry),
    ":match_field": BuiltinPredicate(3, (0,), p_match_field),
    ":list:member": BuiltinPredicate(2, (1,), p_list_member),
}
