"""The executor of your own Python tools (``@groundstate.tool``): the arguments — a JSON object the model wrote —
are checked against the function's signature first; a sandboxed tool then runs in a fresh interpreter in the OS
sandbox (its module's own file — or its top-level package — and the groundstate package readable, the workspace
its only writable place), an in-process one
in this process. The result comes back as text."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

from ... import tools
from ...config import home
from ...errors import ExecutorError
from ...sandbox import Limits, SandboxError
from .base import Action, Context, Outcome

RESULT_MARK = "\x1egroundstate-tool-result:"  # the last line the sandboxed runner prints: the JSON result
# Runs inside the sandbox: import the tool's module, call the tool with the JSON arguments from stdin, print the
# result after the mark (the function's own prints come before it).
_RUNNER = """
import json, sys, importlib
sys.path.insert(0, sys.argv[1])
from groundstate import tools
importlib.import_module(sys.argv[2])
tool = tools.REGISTRY[sys.argv[3]]
try:
    result = {"ok": True, "output": tool.call(json.loads(sys.stdin.read()))}
except Exception as exc:
    result = {"ok": False, "output": f"{type(exc).__name__}: {exc}"}
sys.stdout.write("\\n" + sys.argv[4] + json.dumps(result) + "\\n")
"""
_PACKAGE_ROOT = Path(tools.__file__).resolve().parent.parent  # where `import groundstate` is found


def run_python_tool(action: Action, context: Context) -> Outcome:
    """Run the registered tool named by the action's type."""
    found = tools.REGISTRY.get(action.type)
    if found is None:
        raise ExecutorError(f"no Python tool {action.type!r} is registered (is its module in [tools] modules?)")
    text = action.payload if action.payload.strip().startswith("{") else action.target
    try:
        given = json.loads(text or "{}")
    except ValueError as exc:
        raise ExecutorError(f"{found.name} takes its arguments as a JSON object: {exc}") from None
    arguments = found.arguments(given)  # refused here, before anything runs, when they do not fit
    if not found.sandboxed:
        try:
            return Outcome(True, context.bounded(found.call(arguments)))
        except Exception as exc:  # the user's function failed: that call's result
            return Outcome(False, context.bounded(f"{type(exc).__name__}: {exc}"))
    return _sandboxed(found, arguments, context)


def module_source(found: tools.PythonTool) -> tuple[Path, Path]:
    """(what the sandbox shows, the directory to import from): a plain module's own file, or a package module's
    top-level package directory — never the whole folder the module lies in, which may hold the configuration, the
    run database or ``$GROUNDSTATE_HOME``. A package directory that holds the state directory is refused."""
    file = Path(inspect.getfile(found.function)).resolve()
    depth = found.module.count(".")
    if depth == 0 and file.name != "__init__.py":
        return file, file.parent
    top = file.parents[depth] if file.name == "__init__.py" else file.parents[depth - 1]
    state = home().resolve()
    if state == top or top in state.parents:
        raise ExecutorError(f"{found.name}: its package {top} contains the state directory {state}; a sandboxed "
                            "tool may not read that — move the package or $GROUNDSTATE_HOME")  # fmt: skip
    return top, top.parent


def _sandboxed(found: tools.PythonTool, arguments: dict[str, object], context: Context) -> Outcome:
    limits = Limits(timeout_s=context.timeout_s, memory_mb=context.memory_mb, total_memory_mb=context.total_memory_mb,
                    output_chars=context.max_output_chars + 4096)  # fmt: skip
    shown, search = module_source(found)
    argv = [sys.executable, "-I", "-c", _RUNNER, str(search), found.module, found.name, RESULT_MARK]
    try:
        done = context.sandbox().run(argv, context.workspace.root, limits, stdin=json.dumps(arguments),
                                     read_only=[shown, _PACKAGE_ROOT])  # fmt: skip
    except SandboxError as exc:
        raise ExecutorError(str(exc)) from None
    if done.timed_out:
        return Outcome(False, f"{found.name} did not finish within {context.timeout_s:g} s; it was killed")
    if done.stopped is not None:
        return Outcome(False, f"{found.name}: {done.stopped}")
    printed, mark, last = done.stdout.rpartition(RESULT_MARK)
    if not mark:
        problem = (done.stderr or printed).strip()[-2000:]
        return Outcome(False, context.bounded(f"{found.name} ended without a result (exit {done.returncode}): "
                                              f"{problem}"))  # fmt: skip
    result = json.loads(last)
    return Outcome(bool(result["ok"]), context.bounded(str(result["output"])))
