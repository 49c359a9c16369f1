"""Incremental aggregation: one aggregating rule's distinct body rows kept by group, so that a change touches only
the groups it reaches.

Re-running an aggregating rule after every change costs the whole body (a count per node over a 500,000-fact
closure is re-counted for one new edge). Here the rows of each group are kept; the engine hands over the rows a
change added and removed (found by seeding the rule from the changed facts), and only those groups get a new head.
``fn:count`` and ``fn:sum`` are carried along from the row changes alone; any other reducer recomputes the groups
touched, from their kept rows, in the order a full evaluation uses — so the heads are always those a from-scratch
evaluation derives. While a supposition is open, every group's previous state is journaled so it can be put back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

from .aggregation import evaluate_term
from .analysis import Rule
from .ast import Var
from .builtins import REDUCERS, reduce_sum
from .values import List, Map, Struct, sort_facts

Row = tuple[Any, ...]
Journal = list[tuple["GroupedRows", Row, "set[Row] | None", "Row | None", "list[Any] | None"]]

CARRIED = ("fn:count", "fn:sum")  # reducers kept up to date from the changed rows alone


class GroupedRows:
    """The distinct body rows of ``rule`` by group key, and each group's head fact."""

    def __init__(self, rule: Rule, row_vars: tuple[str, ...]) -> None:
        transform = rule.transform
        assert transform is not None and transform.group_by is not None
        self.rule = rule
        self.position = {name: i for i, name in enumerate(row_vars)}
        self._key = _key_of(tuple(self.position[v.name] for v in transform.group_by))
        self._lets = transform.lets
        reducers = [let.expr.function for let in self._lets if let.expr.function in REDUCERS]
        self.carried = all(function in CARRIED for function in reducers)  # no group is ever recomputed
        self.groups: dict[Row, set[Row]] = {}
        self.heads: dict[Row, Row] = {}
        self.totals: dict[Row, list[Any]] = {}  # per group, each carried reducer's running value (count: unused)
        self.journal: Journal | None = None
        self._shape = self._head_shape()
        # per let, read once here instead of per group: its function, its reducer (None: not a reducer) and the
        # row columns of its arguments when they are all variables (None: evaluated per row)
        self._plan = [(let.expr.function, REDUCERS[let.expr.function][1] if let.expr.function in REDUCERS else None,
                       tuple(self.position[a.name] for a in let.expr.args)  # type: ignore[union-attr]
                       if all(isinstance(a, Var) for a in let.expr.args) else None)
                      for let in self._lets]  # fmt: skip
        self._summed = any(function == "fn:sum" for function, _, _ in self._plan)
        # every let collects one variable (a verdict's reasons): the row column each collects, for a group of one row
        collected = [columns[0] for function, _, columns in self._plan
                     if function == "fn:collect" and columns is not None and len(columns) == 1]  # fmt: skip
        self._collected = tuple(collected) if self._shape is not None and len(collected) == len(self._plan) else None

    def _head_shape(self) -> list[tuple[bool, int]] | None:
        """Where each head argument comes from when every let is a reducer and every head argument a variable:
        (True, i) the group key's i-th value, (False, i) the i-th let's — a head built without an environment."""
        transform = self.rule.transform
        assert transform is not None and transform.group_by is not None
        if any(let.expr.function not in REDUCERS for let in self._lets):
            return None
        keys = {v.name: i for i, v in enumerate(transform.group_by)}
        lets = {let.var.name: i for i, let in enumerate(self._lets)}
        shape = []
        for arg in self.rule.head.args:
            if not isinstance(arg, Var) or (arg.name not in keys and arg.name not in lets):
                return None
            shape.append((True, keys[arg.name]) if arg.name in keys else (False, lets[arg.name]))
        return shape

    @staticmethod
    def eligible(rule: Rule, single_rule_heads: set[str]) -> bool:
        """Whether the rule's groups can be kept: its head predicate has no other rule, and every group variable
        appears in the head (so two groups never share a head fact)."""
        transform = rule.transform
        if transform is None or transform.group_by is None or rule.head.predicate not in single_rule_heads:
            return False
        in_head = {arg.name for arg in rule.head.args if isinstance(arg, Var)}
        return all(v.name in in_head for v in transform.group_by)

    def key(self, row: Row) -> Row:
        """The row's group: the values of the group_by variables."""
        return self._key(row)

    def rebuild(self, rows: Iterable[Row]) -> set[Row]:
        """From every row of the body (a full evaluation): the head facts."""
        self.groups, self.heads, self.totals = {}, {}, {}
        for row in rows:
            key = self._key(row)
            group = self.groups.get(key)
            if group is None:
                self.groups[key] = {row}
            else:
                group.add(row)
        for key, group in self.groups.items():
            self.totals[key] = self._totals(group)
            self.heads[key] = self._head(key, group, self.totals[key])
        return set(self.heads.values())

    def change(self, added: Iterable[Row], removed: Iterable[Row]) -> tuple[set[Row], set[Row]]:
        """Rows that began and ceased to hold (``removed`` checked gone, ``added`` new): the head facts inserted and
        deleted."""
        inserted: set[Row] = set()
        deleted: set[Row] = set()
        for key, (came, went) in self._move_rows(added, removed).items():
            old, new = self.heads.get(key), self._regroup(key, came, went)
            if new != old:
                if old is not None:
                    deleted.add(old)
                if new is not None:
                    inserted.add(new)
        return inserted, deleted

    def gained(self, added: Iterable[Row]) -> tuple[set[Row], set[Row]]:
        """``change(added, ())``: rows that began to hold, none that ceased. A row of a group that did not exist (every
        row of a supposed call's verdict: the call is new) opens it with its head at once, without the bookkeeping
        of moving rows between groups that exist."""
        groups, key_of = self.groups, self._key
        fresh: dict[Row, list[Row]] = {}
        rest: list[Row] = []
        for row in added:
            key = key_of(row)
            if key in groups:
                rest.append(row)
                continue
            members = fresh.get(key)
            if members is None:
                fresh[key] = [row]
            elif row not in members:
                members.append(row)
        inserted, deleted = self.change(rest, ()) if rest else (set(), set())
        journal = self.journal
        for key, members in fresh.items():
            if journal is not None:
                journal.append((self, key, None, None, None))
            group = groups[key] = set(members)
            totals = self.totals[key] = self._totals(group)
            head = self._lone_head(key, members[0]) if len(members) == 1 else None
            if head is None:
                head = self._head(key, group, totals)
            self.heads[key] = head
            inserted.add(head)
        return inserted, deleted

    def _lone_head(self, key: Row, row: Row) -> Row | None:
        """The head of a group of one row whose lets all collect one variable: each a one-item list, as
        ``fn:collect`` builds it (None: not that shape, or a collected value is itself nested, so its bounds are
        checked the long way)."""
        if self._collected is None or self._shape is None:
            return None
        values = []
        for column in self._collected:
            value = row[column]
            if isinstance(value, tuple | Map | Struct):
                return None
            values.append(List((value,)))
        return tuple([key[i] if from_key else values[i] for from_key, i in self._shape])

    def _move_rows(self, added: Iterable[Row], removed: Iterable[Row]) -> dict[Row, tuple[list[Row], list[Row]]]:
        """Take the removed rows out of their groups and put the added ones in: per group touched, the rows that
        came and went."""
        touched: dict[Row, tuple[list[Row], list[Row]]] = {}
        groups, journal = self.groups, self.journal
        for row in removed:
            key = self._key(row)
            group = groups.get(key)
            if group is not None and row in group:
                self._remember(key)
                group.discard(row)
                touched.setdefault(key, ([], []))[1].append(row)
        for row in added:
            key = self._key(row)
            group = groups.get(key)
            if group is None:  # a new group (the decision path's every call): nothing to look up or copy
                if journal is not None:
                    journal.append((self, key, None, None, None))
                groups[key] = {row}
                touched[key] = ([row], [])
                continue
            if row in group:
                continue
            self._remember(key)
            group.add(row)
            touched.setdefault(key, ([], []))[0].append(row)
        return touched

    def _regroup(self, key: Row, came: list[Row], went: list[Row]) -> Row | None:
        """The group's new head after rows came and went (None: the group is empty now and gone)."""
        group = self.groups[key]
        if not group:
            del self.groups[key]
            self.heads.pop(key, None)
            self.totals.pop(key, None)
            return None
        if self.carried and key in self.totals:
            totals = self._carry(self.totals[key], came, went)
        else:
            totals = self._totals(group)
        self.totals[key] = totals
        head = self.heads[key] = self._head(key, group, totals)
        return head

    def restore(self, key: Row, rows: set[Row] | None, head: Row | None, totals: list[Any] | None) -> None:
        """Put one group back as the journal recorded it (``rows`` None: the group did not exist)."""
        if rows is None or head is None or totals is None:
            self.groups.pop(key, None)
            self.heads.pop(key, None)
            self.totals.pop(key, None)
        else:
            self.groups[key], self.heads[key], self.totals[key] = rows, head, totals

    # -- inside ------------------------------------------------------------------------------------
    def _remember(self, key: Row) -> None:
        if self.journal is not None:
            group = self.groups.get(key)
            self.journal.append((self, key, None if group is None else set(group), self.heads.get(key),
                                 None if group is None else list(self.totals.get(key, []))))  # fmt: skip

    def _arguments(self, let_index: int, rows: list[Row]) -> list[Row]:
        """A reducer's argument tuple for each row (read straight from the row where they are variables)."""
        columns = self._plan[let_index][2]
        if columns is not None:
            if len(columns) == 1:
                column = columns[0]
                return [(row[column],) for row in rows]
            return [tuple([row[c] for c in columns]) for row in rows]
        args = self._lets[let_index].expr.args
        names = self.position.items()
        return [tuple(evaluate_term(a, {n: row[j] for n, j in names}) for a in args) for row in rows]

    def _values(self, expr_index: int, rows: Iterable[Row]) -> list[Any]:
        """One reducer's argument for each row."""
        expr = self._lets[expr_index].expr
        names = self.position.items()
        return [evaluate_term(expr.args[0], {n: row[i] for n, i in names}) for row in rows]

    def _totals(self, group: set[Row]) -> list[Any]:
        """Each carried reducer's value over the whole group (fn:sum's sum; count needs none)."""
        if not self._summed:
            return [None] * len(self._plan)
        return [reduce_sum(self._values(i, group)) if function == "fn:sum" else None
                for i, (function, _, _) in enumerate(self._plan)]  # fmt: skip

    def _carry(self, totals: list[Any], came: list[Row], went: list[Row]) -> list[Any]:
        """The running values moved by the rows that came and went."""
        out = list(totals)
        for i, let in enumerate(self._lets):
            if let.expr.function == "fn:sum":
                out[i] = reduce_sum([totals[i], *self._values(i, came), *(-v for v in self._values(i, went))])
        return out

    def _reduced(self, group: set[Row], totals: list[Any]) -> list[Any]:
        """Each let's value for a group whose lets are all reducers."""
        values: list[Any] = []
        members: list[Row] | None = None
        for i, (function, reducer, _) in enumerate(self._plan):
            if function == "fn:count":
                values.append(len(group))
            elif function == "fn:sum" and totals[i] is not None:
                values.append(totals[i])
            else:
                assert reducer is not None  # _shape is None unless every let is a reducer
                members = members if members is not None else (list(group) if len(group) == 1 else sort_facts(group))
                values.append(reducer(self._arguments(i, members)))
        return values

    def _head(self, key: Row, group: set[Row], totals: list[Any]) -> Row:
        """The group's head fact, as ``aggregate`` builds it (rows in sorted order for order-sensitive reducers)."""
        if self._shape is not None:
            values = self._reduced(group, totals)
            return tuple(key[i] if from_key else values[i] for from_key, i in self._shape)
        transform = self.rule.transform
        assert transform is not None and transform.group_by is not None
        env: dict[str, Any] = {v.name: value for v, value in zip(transform.group_by, key, strict=True)}
        members: list[Row] | None = None
        for i, let in enumerate(self._lets):
            function = let.expr.function
            if function == "fn:count":
                env[let.var.name] = len(group)
            elif function == "fn:sum" and totals[i] is not None:
                env[let.var.name] = totals[i]
            elif function in REDUCERS:
                members = members if members is not None else (list(group) if len(group) == 1 else sort_facts(group))
                env[let.var.name] = REDUCERS[function][1](self._arguments(i, members))
            else:
                env[let.var.name] = evaluate_term(let.expr, env)
        return tuple(evaluate_term(a, env) for a in self.rule.head.args)


def _key_of(positions: tuple[int, ...]) -> Callable[[Row], Row]:
    """A function from a row to the tuple of its values at ``positions`` (its group), built once per rule."""
    if not positions:
        return lambda row: ()
    if len(positions) == 1:
        position = positions[0]
        return lambda row: (row[position],)
    return itemgetter(*positions)
