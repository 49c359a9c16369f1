"""No string becomes logic: queries and rules are built as terms; text from anyone (a model, a provider, a tool, an
upstream, a file's content) reaches the engine only as a value.

Two checks over every module of the source: a call that hands text to the engine's parser (``query``, ``holds``,
``why``, ``explain``, ``parse_atom``, ``parse_unit``, ``load_unit``, ``parse_ground_fact``, ``Program.parse``,
``retract_matching``) never gets text built on the spot (an f-string, ``+``, ``%``, ``.format``, ``.join``); and no
f-string anywhere writes a rule (``:-``). The exceptions are listed with why each is safe; a new one fails here until
someone decides it belongs on the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).parents[2] / "src" / "groundstate"
PARSING_CALLS = {"query", "holds", "why", "explain", "parse_atom", "parse_unit", "load_unit", "parse_ground_fact",
                 "parse", "retract_matching"}  # fmt: skip
# (module, function) -> why text is built there
ALLOWED = {
    ("logic/ast.py", "__str__"): "the engine's own printer of a clause already built as terms (values through "
    "display(), which quotes them)",
    ("logic/parser.py", "clause"): "an error message naming what the parser expected",
    ("runtime/cortex.py", "compile_patterns"): "writes the operator's own pattern conditions (policy, like a .mg "
    "file) with validated tokens only: an id matching [a-z][a-z0-9_]*, a category of two, a known event type; "
    "reasons and names are cortex_reason facts",
}


def built(node: ast.expr) -> bool:
    """Whether ``node`` builds text on the spot."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return True
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("format", "join"))  # fmt: skip


def findings(tree: ast.AST, module: str) -> list[str]:
    found: list[str] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        allowed = (module, function) in ALLOWED
        if isinstance(node, ast.Call) and node.args and not allowed:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            text = node.args[1:2] if name in ("why", "explain") else node.args[:1]  # where the logic text goes
            if name in PARSING_CALLS and any(built(argument) for argument in text):
                found.append(f"{module}:{node.lineno}: {name}(...) is given text built on the spot")
        if isinstance(node, ast.JoinedStr) and not allowed:
            literal = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            if ":-" in literal:
                found.append(f"{module}:{node.lineno}: an f-string writes a rule")
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "")
    return found


def test_no_query_or_rule_text_is_built_by_formatting() -> None:
    problems = []
    for path in sorted(SOURCE.rglob("*.py")):
        module = path.relative_to(SOURCE).as_posix()
        problems += findings(ast.parse(path.read_text(encoding="utf-8")), module)
    assert problems == []


def test_the_check_would_catch_the_spliced_queries_it_replaced() -> None:
    """The shapes this check exists for, as they were in the code: each is a finding."""
    spliced = [
        'why(self.kernel, f\'needs_approval("{self.run_id}", "{agent}", /{c}, "{reason}")\')',
        'kernel.query(f"execution_result({action_id}, T, S, O, M)")',
        'self.kernel.query("pending_action(" + action_id + ", T, G, P, M)")',
        'lines.append(f"interrupt(Run, Agent, {reason}) :- {body} .")',
    ]
    for code in spliced:
        assert findings(ast.parse(code), "x.py"), code
    assert not findings(ast.parse('kernel.match("execution_result", action_id)'), "x.py")
