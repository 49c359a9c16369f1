"""The kernel: one logic engine loaded with the shipped schemas and policy, changed only by transactions.

A transaction is a batch of retracts and asserts followed by exactly one evaluation; if the evaluation fails
(the derived-fact limit, an external error) every change of the batch is undone. Context frames assert facts
for a query and retract exactly the facts they added, so scoring or "what if" queries leave no trace.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, LimitError, PolicyError
from ..logic import AnalyzedProgram, Engine, LogicError, Name, Program, Stats, sort_facts, to_value
from ..packets import UpdateValidator
from .config import KernelConfig
from .workspace import Workspace

DEFAULT_FILES = ("schemas.mg", "routes.mg", "policy.mg")
Row = tuple[Any, ...]
External = Callable[..., Iterable[Row]]


class PolicyInvariantError(PolicyError):
    """The policy broke an invariant the kernel relies on (exactly one OODA phase); the message names it."""


class KernelLimitError(LimitError, RuntimeError):
    """A configured limit would be exceeded; nothing was changed."""


_PROGRAMS: dict[tuple[tuple[str, int], ...], Program] = {}


def model_writable(analyzed: AnalyzedProgram) -> set[str]:
    """The default allowlist: predicates whose Decl carries the ``model_writable()`` descriptor."""
    return {
        predicate
        for predicate, info in analyzed.predicates.items()
        if info.decl is not None and any(d.predicate == "model_writable" for d in info.decl.descriptors)
    }


def update_validator(analyzed: AnalyzedProgram, allowlist: Collection[str] | None = None) -> UpdateValidator:
    """A validator for control packets against a program's schemas (default allowlist: model_writable)."""
    derived = {rule.head.predicate for rule in analyzed.rules}
    allowed = model_writable(analyzed) if allowlist is None else allowlist
    return UpdateValidator(analyzed.predicates, allowed, derived=derived)


def load_program(sources: Iterable[str | Path]) -> Program:
    """The shipped defaults followed by ``sources``, parsed once (see ``_load``)."""
    return _load(tuple([*default_sources(), *(Path(p) for p in sources)]))


def _load(sources: tuple[Path, ...]) -> Program:
    """Parsed and analysed once per set of files (and again when one of them changes); a file that is not there is a
    ConfigurationError naming it (a rule file is the user's: ``--policy``, ``[policy] guards``, ``[mcp] shadow``)."""
    missing = [str(path) for path in sources if not path.is_file()]
    if missing:
        raise ConfigurationError(f"{', '.join(missing)}: no such rule file")
    key = tuple((str(path), path.stat().st_mtime_ns) for path in sources)
    program = _PROGRAMS.get(key)
    if program is None:
        program = _PROGRAMS[key] = Program.load(*sources)
    return program


def default_sources() -> list[Path]:
    """The shipped schemas, routes and policy, in load order."""
    folder = resources.files("groundstate.kernel") / "defaults"
    return [Path(str(folder / name)) for name in DEFAULT_FILES]


def name(text: str) -> Name:
    """A name constant from ``/foo`` or ``foo``."""
    return Name(text if text.startswith("/") else "/" + text)


class Transaction:
    """Collects changes; the kernel applies them together when the ``with`` block ends."""

    def __init__(self) -> None:
        self.changes: list[tuple[bool, str, Row]] = []  # (assert?, predicate, row)

    def assert_(self, predicate: str, *rows: Iterable[Any]) -> None:
        """Add ``rows`` of ``predicate`` when the transaction is applied."""
        self.changes += [(True, predicate, tuple(map(to_value, row))) for row in rows]

    def retract(self, predicate: str, *rows: Iterable[Any]) -> None:
        """Remove ``rows`` of ``predicate`` when the transaction is applied."""
        self.changes += [(False, predicate, tuple(map(to_value, row))) for row in rows]


class Kernel:
    """The agent's executive: the policy program, its facts and the engine that keeps derived facts current.

    Python reports facts (``apply``, ``assert_facts``) and reads what the rules derive (``query``,
    ``final_decision``, ``phase``); it never decides a policy outcome itself."""

    def __init__(
        self,
        workspace: Workspace | str | Path,
        *,
        config: KernelConfig | None = None,
        extra_sources: Iterable[str | Path] = (),
        externals: dict[str, External] | None = None,
        clock: Callable[[], float] = time.time,
        shipped: bool = True,
        time_limit: float | None = None,
    ) -> None:
        """``time_limit``: seconds one evaluation may take (``Engine``): for rules decided beside the real ones."""
        self.time_limit = time_limit
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        self.config = config or KernelConfig()
        self.clock = clock
        # shipped=False: only ``extra_sources`` — a kernel for another policy (the MCP guard's), without the agent's
        self.sources = [*(default_sources() if shipped else []), *(Path(p) for p in extra_sources)]
        shipped_externals: dict[str, External] = {
            "workspace_path": lambda target: [(name(self.workspace.status(target or ".")),)],
            "file_age": self._file_age,
            "recall_similar": lambda query: [],
            "query_learned": lambda key: [],
        }
        self._externals = {**(shipped_externals if shipped else {}), **(externals or {})}
        self.program = _load(tuple(self.sources))
        self.engine = self._engine(self.program)
        self.last_stats: Stats = self.engine.evaluate()
        self._externals_changed = False
        self.after_evaluation: list[Callable[[], None]] = []  # called after each transaction's evaluation

    # -- building ----------------------------------------------------------------------------------
    def _engine(self, program: Program) -> Engine:
        return Engine(
            program,
            created_fact_limit=self.config.core_limits.max_derived_facts_limit,
            externals=self._externals,
            time_limit=self.time_limit,
        )

    def replace_program(self, program: Program) -> None:
        """Swap in a new program (e.g. with learned rules), keeping every asserted fact."""
        engine = self._engine(program)
        for predicate, facts in self.engine.base.items():
            if predicate in engine.base and facts:
                engine.assert_facts(predicate, [f for f in facts if f not in engine.base[predicate]])
        self.last_stats = engine.evaluate()
        self.engine, self.program = engine, program

    def set_external(self, predicate: str, function: External) -> None:
        """Answer the external predicate ``predicate`` with ``function`` (the next evaluation is a full one)."""
        self._externals[predicate] = function
        self.engine.register_external(predicate, function)
        self.externals_changed()

    def externals_changed(self) -> None:
        """What an external predicate answers has changed (memory written): the next evaluation is a full one,
        so rules that consulted it are not left with the old answer."""
        self._externals_changed = True

    def _file_age(self, target: str) -> list[Row]:
        try:
            path = self.workspace.resolve(target)
            modified = path.lstat().st_mtime
        except (ValueError, OSError):
            return []
        return [(max(0, int(self.clock() - modified)),)]

    # -- time --------------------------------------------------------------------------------------
    def now_ms(self) -> int:
        """The kernel clock in milliseconds (the clock is injectable, so tests and replays are deterministic)."""
        return int(self.clock() * 1000)

    # -- changes -----------------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """``with kernel.transaction() as tx: tx.assert_(...); tx.retract(...)`` — one evaluation at the end."""
        tx = Transaction()
        yield tx
        self.apply(tx)

    def apply(self, tx: Transaction) -> Stats:
        """Apply a transaction's changes at once and bring derived facts up to date."""
        adds = sum(1 for is_assert, pred, row in tx.changes if is_assert and row not in self.engine.base.get(pred, ()))
        self._check_room(adds, "the transaction")
        done: list[tuple[bool, str, Row]] = []
        try:
            for is_assert, predicate, row in tx.changes:
                change = self.engine.assert_facts if is_assert else self.engine.retract_facts
                if change(predicate, [row]):
                    done.append((is_assert, predicate, row))
            self.last_stats = self.engine.evaluate(full=self._externals_changed)
            self._externals_changed = False
        except LogicError:
            for is_assert, predicate, row in reversed(done):
                (self.engine.retract_facts if is_assert else self.engine.assert_facts)(predicate, [row])
            self.engine.evaluate(full=True)
            raise
        for callback in self.after_evaluation:
            callback()
        return self.last_stats

    def supposing(self, facts: Iterable[tuple[str, Iterable[Any]]]) -> Supposing:
        """The kernel as if ``facts`` (predicate, row) held, for one question — a tools/call's permission, a reply's
        refusal — and exactly as before once the ``with`` block ends. This is the decision path: no transaction, no
        OODA turn, one incremental evaluation from the supposed facts and its changes undone after (see
        ``Engine.supposing``). Bounded like a transaction by ``max_facts_in_kernel``."""
        return Supposing(self, facts)

    def _check_room(self, adds: int, what: str) -> None:
        """KernelLimitError, naming ``what``, if ``adds`` more asserted facts would exceed ``max_facts_in_kernel``."""
        limit, total = self.config.core_limits.max_facts_in_kernel, self.fact_count() + adds
        if total > limit:
            raise KernelLimitError(
                f"{what} would bring the kernel to {total} facts; the limit (core_limits.max_facts_in_kernel) is "
                f"{limit}"
            )

    def assert_facts(self, predicate: str, *rows: Iterable[Any]) -> Stats:
        """Assert ``rows`` of ``predicate`` and bring derived facts up to date."""
        with self.transaction() as tx:
            tx.assert_(predicate, *rows)
        return self.last_stats

    def retract_matching(self, tx: Transaction, pattern: str) -> None:
        """Add to ``tx`` the retraction of every base fact matching ``pattern`` (``current_time(_)``)."""
        predicate = pattern.split("(", 1)[0].strip()
        base = self.engine.base.get(predicate, set())
        tx.changes += [(False, predicate, row) for row in self.engine.query(pattern, sort=False) if row in base]

    @contextmanager
    def frame(self) -> Iterator[Frame]:
        """Facts asserted in the frame are retracted when it ends — exactly those, not facts that were there."""
        frame = Frame(self)
        try:
            yield frame
        finally:
            frame.close()

    # -- reading -----------------------------------------------------------------------------------
    def query(self, pattern: str) -> list[Row]:
        """The rows matching ``pattern`` (an atom such as ``permitted(A)``), derived facts included."""
        return self.engine.query(pattern)

    def match(self, predicate: str, *leading: Any, at: dict[int, Any] | None = None, sort: bool = False) -> list[Row]:
        """The rows of ``predicate`` whose first columns are ``leading`` (and whose column N is ``at[N]``), derived
        facts included — ``query`` without parsing a pattern; in the engine's order with ``sort``."""
        if at is None and len(leading) == 1:  # the first column alone (the decision path's verdict by its call)
            rows = self.engine.lookup_one(predicate, 0, leading[0])
        else:
            rows = self.engine.lookup(predicate, {**dict(enumerate(leading)), **(at or {})})
        return sort_facts(rows) if sort else rows

    def holds(self, pattern: str) -> bool:
        """Whether at least one row matches ``pattern``."""
        return bool(self.engine.query(pattern, sort=False))

    def fact_count(self) -> int:
        """Asserted (base) facts, what ``max_facts_in_kernel`` bounds."""
        return self.engine.base_count  # kept by the engine: every transaction and supposition asks

    def derived_count(self) -> int:
        """How many facts the rules derived (all facts minus the asserted ones)."""
        return sum(len(rel) for rel in self.engine.relations.values()) - self.fact_count()

    def model_writable(self) -> set[str]:
        """The predicates a model's control packet may update (declared ``model_writable``)."""
        return model_writable(self.engine.analyzed)

    def update_validator(self, allowlist: Collection[str] | None = None) -> UpdateValidator:
        """A validator for model-written updates against this program's declarations (``allowlist``: the
        predicates it may write; by default the model-writable ones)."""
        return update_validator(self.engine.analyzed, allowlist)

    def final_decision(self, action_id: Any) -> tuple[str, str]:
        """``final_decision/3`` for one action: its decision and every reason the policy gives for it (several
        denials are all reported, in the engine's order)."""
        key = action_id if isinstance(action_id, Name) else Name(str(action_id))
        rows = self.match("final_decision", key, sort=True)
        if not rows:  # (never two decisions: the Decl's fundep([ActionID], [Decision]), held by the engine)
            raise PolicyInvariantError(f"final_decision/3: {action_id} must have a decision, derived none")
        return str(rows[0][1]), "; ".join(r for _, _, r in rows)

    def phase(self) -> str:
        """The one OODA phase the policy derives (PolicyInvariantError if it derives none; never several: the
        Decl's ``fundep([], [Phase])``, held by the engine)."""
        phases = self.query("current_ooda_phase(P)")
        if not phases:
            raise PolicyInvariantError("current_ooda_phase/1: the policy must derive an OODA phase, derived none")
        return str(phases[0][0])


class Frame:
    """Facts asserted for the length of one question and retracted after it (``Kernel.frame``)."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.added: list[tuple[str, Row]] = []

    def assert_(self, predicate: str, *rows: Iterable[Any]) -> None:
        """Assert ``rows`` of ``predicate``; the new ones are retracted when the frame closes."""
        tx = Transaction()
        tx.assert_(predicate, *rows)
        fresh = [(p, r) for _, p, r in tx.changes if r not in self.kernel.engine.base.get(p, ())]
        self.kernel.apply(tx)
        self.added += fresh

    def query(self, pattern: str) -> list[Row]:
        """The rows matching ``pattern`` while the frame's facts hold."""
        return self.kernel.query(pattern)

    def close(self) -> None:
        """Retract what the frame added (facts that were already there stay)."""
        if self.added:
            tx = Transaction()
            for predicate, row in self.added:
                tx.retract(predicate, row)
            self.added = []
            self.kernel.apply(tx)


class Supposing:
    """``Kernel.supposing``'s block (a class, not a generator: the decision path enters one per call)."""

    __slots__ = ("_facts", "_inner", "_kernel")

    def __init__(self, kernel: Kernel, facts: Iterable[tuple[str, Iterable[Any]]]) -> None:
        self._kernel, self._facts = kernel, facts

    def __enter__(self) -> Kernel:
        kernel = self._kernel
        rows: dict[str, list[Iterable[Any]]] = {}  # each row converted once, by the engine
        count = 0
        for predicate, row in self._facts:
            found = rows.get(predicate)
            if found is None:
                rows[predicate] = [row]
            else:
                found.append(row)
            count += 1
        kernel._check_room(count, "the supposed facts")
        if kernel._externals_changed:
            kernel.last_stats = kernel.engine.evaluate(full=True)
            kernel._externals_changed = False
        self._inner = kernel.engine.supposing(rows)
        kernel.last_stats = self._inner.__enter__()
        return kernel

    def __exit__(self, *exc: object) -> None:
        self._inner.__exit__(*exc)
