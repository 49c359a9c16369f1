"""The syntax tree of a Mangle program; every node keeps its source position."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .errors import Position
from .values import display


@dataclass(eq=False, slots=True)
class Var:
    """A variable in a clause (``_`` is the wildcard)."""

    name: str  # "_" is the wildcard; each occurrence is independent
    pos: Position

    def __str__(self) -> str:
        return self.name


@dataclass(eq=False, slots=True)
class Const:
    """A constant: a name, string, number, list, map or struct."""

    value: Any
    pos: Position

    def __str__(self) -> str:
        return display(self.value)


@dataclass(eq=False, slots=True)
class Apply:
    """A function application ``fn:f(args)``; compound literals are parsed into these."""

    function: str
    args: tuple[Term, ...]
    pos: Position

    def __str__(self) -> str:
        return f"{self.function}(" + ", ".join(str(a) for a in self.args) + ")"


Term = Var | Const | Apply


@dataclass(eq=False, slots=True)
class Atom:
    """A predicate applied to terms, ``p(X, /a)``."""

    predicate: str
    args: tuple[Term, ...]
    pos: Position

    def __str__(self) -> str:
        return f"{self.predicate}(" + ", ".join(str(a) for a in self.args) + ")"


@dataclass(eq=False, slots=True)
class Negation:
    """A negated atom in a rule body, ``!p(X)``."""

    atom: Atom
    pos: Position

    def __str__(self) -> str:
        return f"!{self.atom}"


COMPARISON_BUILTINS = {"<": ":lt", "<=": ":le", ">": ":gt", ">=": ":ge"}


@dataclass(eq=False, slots=True)
class Comparison:
    """``L op R`` with op one of ``= != < <= > >=``."""

    op: str
    left: Term
    right: Term
    pos: Position

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


Literal = Atom | Negation | Comparison


@dataclass(eq=False, slots=True)
class Let:
    var: Var
    expr: Apply
    pos: Position

    def __str__(self) -> str:
        return f"let {self.var} = {self.expr}"


@dataclass(eq=False, slots=True)
class Transform:
    """``|> do fn:group_by(...), let ...`` (group_by is not None) or ``|> let ...``."""

    group_by: tuple[Var, ...] | None
    lets: tuple[Let, ...]
    pos: Position

    def __str__(self) -> str:
        parts = []
        if self.group_by is not None:
            parts.append("do fn:group_by(" + ", ".join(str(v) for v in self.group_by) + ")")
        parts.extend(str(let) for let in self.lets)
        return ", ".join(parts)


@dataclass(eq=False, slots=True)
class Clause:
    """A fact or a rule: a head, a body of literals, and an optional transform (``|> do ...``)."""

    head: Atom
    body: tuple[Literal, ...]
    transform: Transform | None
    pos: Position

    @property
    def is_fact(self) -> bool:
        """Whether the clause has no body and no transform."""
        return not self.body and self.transform is None

    def __str__(self) -> str:
        if self.is_fact:
            return f"{self.head}."
        text = f"{self.head} :- " + ", ".join(str(lit) for lit in self.body)
        if self.transform is not None:
            text += f" |> {self.transform}"
        return text + "."


@dataclass(eq=False, slots=True)
class Decl:
    atom: Atom
    descriptors: tuple[Atom, ...]
    bounds: tuple[tuple[Term, ...], ...]
    pos: Position

    def descriptor(self, name: str) -> Atom | None:
        for d in self.descriptors:
            if d.predicate == name:
                return d
        return None


class FactRow(NamedTuple):
    """A fact line of plain constants as the parser's fast path keeps it for the engine: its predicate, its values
    and where the line is (the fact starts it). A hundred thousand of these cost a fraction of the syntax trees
    they stand for (a clause, an atom, a constant and a position per argument); ``logic.ground.clause_of`` builds
    the tree, every argument's position included, when one is asked for."""

    predicate: str
    values: tuple[Any, ...]
    pos: Position


@dataclass
class SourceUnit:
    """One parsed file: its package, the packages it uses, its declarations and clauses — and, when it was loaded
    for an engine (``load_unit``), its plain fact lines as rows in ``ground``, which ``parse_unit`` turns into
    clauses."""

    source: str
    package: str | None = None
    uses: list[str] = field(default_factory=list)
    decls: list[Decl] = field(default_factory=list)
    clauses: list[Clause] = field(default_factory=list)
    ground: list[FactRow] = field(default_factory=list)
