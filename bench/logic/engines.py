"""Each engine runs a Workload in its own syntax: load, evaluate, count the query's facts.

Every runner returns (count, load_seconds, eval_seconds); load is parsing (or asserting facts),
eval is evaluation plus bringing the answer into Python.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from workloads import Atom, Literal, Workload

Runner = Callable[[Workload], dict[str, float]]


def _args(args: tuple[object, ...], wildcard: str = "_") -> str:
    return ", ".join(wildcard if isinstance(a, str) and a.startswith("_") else str(a) for a in args)


def _atom(atom: Atom, empty: str = "") -> str:
    pred, args = atom
    return f"{pred}({_args(args)})" if args else pred + empty


def mangle_text(w: Workload, facts: dict[str, list[tuple[int, ...]]] | None = None, show: bool = False) -> str:
    lines = []
    for pred, rows in (facts or w.facts).items():
        lines.extend(f"{pred}({', '.join(map(str, row))})." for row in rows)
    for h, body in w.rules:
        lits = [("!" if negated else "") + _atom(atom, "()") for negated, atom in body]
        lines.append(f"{_atom(h, '()')} :- {', '.join(lits)}.")
    return "\n".join(lines) + "\n"


def _declare_edb(w: Workload) -> str:
    """groundstate wants every predicate declared or defined; EDB predicates without facts get a Decl."""
    defined = {h[0] for h, _ in w.rules} | set(w.facts)
    out = []
    for _, body in w.rules:
        for _, (pred, args) in body:
            if pred not in defined:
                defined.add(pred)
                out.append(f"Decl {pred}({', '.join(f'A{i}' for i in range(len(args)))}).")
    return "\n".join(out) + "\n"


def _facts_with(w: Workload, updates: list[tuple[str, tuple[int, ...]]]) -> dict[str, list[tuple[int, ...]]]:
    facts = {p: list(rows) for p, rows in w.facts.items()}
    for pred, row in updates:
        facts.setdefault(pred, []).append(row)
    return facts


# -- groundstate ---------------------------------------------------------------------------------------------------
def run_groundstate(w: Workload) -> dict[str, float]:
    from groundstate.logic import Engine, Program

    t0 = time.perf_counter()
    program = Program.parse(_declare_edb(w) + mangle_text(w))
    t1 = time.perf_counter()
    engine = Engine(program)
    engine.evaluate()
    count = len(engine.facts(w.query, sort=False))  # already Python objects; sorting is a display concern
    t2 = time.perf_counter()
    result = {"count": count, "load": t1 - t0, "eval": t2 - t1}
    if w.updates:
        incremental = []
        for pred, row in w.updates:
            s = time.perf_counter()
            engine.assert_facts(pred, [row])
            engine.evaluate()
            n = len(engine.facts(w.update_query, sort=False))
            incremental.append(time.perf_counter() - s)
            if "first_update_count" not in result:
                result["first_update_count"] = n
        final_incremental = engine.facts(w.update_query)
        engine.evaluate(full=True)
        if engine.facts(w.update_query) != final_incremental:
            raise AssertionError("incremental result differs from evaluating from scratch")
        result["per_update"] = statistics.median(incremental)
    return result


def run_groundstate_scratch(w: Workload) -> dict[str, float]:
    """Each update followed by a full re-evaluation: what the incremental path is compared with."""
    from groundstate.logic import Engine, Program

    engine = Engine(Program.parse(_declare_edb(w) + mangle_text(w)))
    t0 = time.perf_counter()
    engine.evaluate()
    result = {"count": len(engine.facts(w.query, sort=False)), "load": 0.0, "eval": time.perf_counter() - t0}
    times = []
    for pred, row in w.updates[:3]:
        s = time.perf_counter()
        engine.assert_facts(pred, [row])
        engine.evaluate(full=True)
        n = len(engine.facts(w.update_query, sort=False))
        times.append(time.perf_counter() - s)
        result.setdefault("first_update_count", n)
    result["per_update"] = statistics.median(times)
    return result


# -- clingo --------------------------------------------------------------------------------------------------------
def clingo_text(w: Workload, facts: dict[str, list[tuple[int, ...]]]) -> str:
    lines = []
    for pred, rows in facts.items():
        lines.extend(f"{pred}({','.join(map(str, row))})." for row in rows)
    for h, body in w.rules:
        lits = [("not " if negated else "") + _atom(atom) for negated, atom in body]
        lines.append(f"{_atom(h)} :- {', '.join(lits)}.")
    return "\n".join(lines) + "\n"


def _clingo_count(w: Workload, facts: dict[str, list[tuple[int, ...]]], query: str) -> tuple[int, float, float]:
    import clingo

    t0 = time.perf_counter()
    ctl = clingo.Control(["--warn=none"])
    ctl.add("base", [], clingo_text(w, facts))
    t1 = time.perf_counter()
    ctl.ground([("base", [])])
    shown: list[object] = []
    ctl.solve(on_model=lambda m: shown.extend(s for s in m.symbols(atoms=True) if s.name == query))
    return len(shown), t1 - t0, time.perf_counter() - t1


def _run_rebuilding(
    w: Workload, count: Callable[[Workload, dict[str, list[tuple[int, ...]]], str], tuple[int, float, float]]
) -> dict[str, float]:
    """Engines without incremental updates: every update re-runs the whole program with the new facts."""
    n, load, evaluation = count(w, w.facts, w.query)
    result: dict[str, float] = {"count": n, "load": load, "eval": evaluation}
    if w.updates:
        times = []
        for k in range(1, 4):
            s = time.perf_counter()
            n, _, _ = count(w, _facts_with(w, w.updates[:k]), w.update_query)
            times.append(time.perf_counter() - s)
            result.setdefault("first_update_count", n)
        result["per_update"] = statistics.median(times)
    return result


def run_clingo(w: Workload) -> dict[str, float]:
    return _run_rebuilding(w, _clingo_count)


# -- mangle-py -----------------------------------------------------------------------------------------------------
def _mangle_count(w: Workload, facts: dict[str, list[tuple[int, ...]]], query: str) -> tuple[int, float, float]:
    import mangle

    text = mangle_text(w, facts)
    t0 = time.perf_counter()
    program = mangle.Program(text)  # parses and evaluates in one call: all of it counts as evaluation
    count = len(program.query(query))
    return count, 0.0, time.perf_counter() - t0


def run_mangle(w: Workload) -> dict[str, float]:
    return _run_rebuilding(w, _mangle_count)


# -- pyDatalog -----------------------------------------------------------------------------------------------------
def _py_atom(atom: Atom, fresh: list[int]) -> str:
    """pyDatalog has no zero-arity predicates, and all its ``_`` in a clause are one variable: name each."""
    pred, args = atom
    if not args:
        return f"{pred}(0)"
    out = []
    for a in args:
        if isinstance(a, str) and a.startswith("_"):
            fresh[0] += 1
            out.append(f"Anon{fresh[0]}")
        else:
            out.append(str(a))
    return f"{pred}({', '.join(out)})"


def _py_rule(h: Atom, body: list[Literal]) -> str:
    fresh = [0]
    lits = " & ".join(("~" if negated else "") + _py_atom(a, fresh) for negated, a in body)
    return f"{_py_atom(h, fresh)} <= {lits}"


def run_pydatalog(w: Workload) -> dict[str, float]:
    from pyDatalog import pyDatalog

    t0 = time.perf_counter()
    for pred, rows in w.facts.items():
        for row in rows:
            pyDatalog.assert_fact(pred, *row)
    text = "\n".join(_py_rule(h, body) for h, body in w.rules)
    pyDatalog.load(text)
    t1 = time.perf_counter()
    variables = ", ".join(f"V{i}" for i in range(w.query_arity))
    answer = pyDatalog.ask(f"{w.query}({variables})")
    count = len(answer.answers) if answer else 0
    result: dict[str, float] = {"count": count, "load": t1 - t0, "eval": time.perf_counter() - t1}
    if w.updates:
        times = []
        for pred, row in w.updates[:3]:
            s = time.perf_counter()
            pyDatalog.assert_fact(pred, *row)
            answer = pyDatalog.ask(f"{w.update_query}(V0)")
            times.append(time.perf_counter() - s)
            result.setdefault("first_update_count", len(answer.answers) if answer else 0)
        result["per_update"] = statistics.median(times)
    return result


RUNNERS: dict[str, Runner] = {
    "groundstate": run_groundstate,
    "groundstate (full re-eval per update)": run_groundstate_scratch,
    "clingo": run_clingo,
    "mangle-py": run_mangle,
    "pyDatalog": run_pydatalog,
}
