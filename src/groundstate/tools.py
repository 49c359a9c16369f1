"""Your own Python functions as tools: ``@groundstate.tool`` registers a function under its name with a JSON schema
built from its type hints; workflows give it to agents (``tools: [word_count]``) and ``groundstate mcp serve``
exposes it to MCP clients. A call takes the same path as every other tool: requested, decided by the policy,
journaled, run (in the OS sandbox unless the tool says ``sandboxed=False``), journaled, logged.

What an attacker controls: the arguments (a model chose them). They are validated against the signature before the
function runs (a missing, extra or mistyped argument is refused with the reason, nothing runs); the result is
bounded by the caller. A sandboxed tool runs in a fresh interpreter in the sandbox — its module read-only, the
workspace its only writable place, no network — so a function tricked by its arguments cannot reach the host.

    import groundstate

    @groundstate.tool(read_only=True)
    def word_count(text: str) -> int:
        \"\"\"Count the words of a text.\"\"\"
        return len(text.split())

List modules in ``groundstate.toml`` (``[tools] modules = ["my_tools"]``) to load them for every entry point.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, overload

from .errors import ConfigurationError, InputError

F = TypeVar("F", bound=Callable[..., Any])
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
MAX_RESULT_CHARS = 65_536


class ToolDefinitionError(ConfigurationError):
    """A function cannot be a tool as written: a bad or taken name, a parameter without a type, a module that does
    not import."""


class ToolArgumentsError(InputError, ValueError):
    """The arguments of a call do not fit the tool's signature; the function did not run."""


@dataclass(frozen=True)
class PythonTool:
    """A registered function: its name, description, JSON schema and how it runs."""

    name: str
    function: Callable[..., Any]
    description: str
    schema: dict[str, Any]
    sandboxed: bool  # run in the OS sandbox (a fresh interpreter), else in the calling process
    read_only: bool  # changes nothing (MCP clients see readOnlyHint; the guard's shipped policy permits it)
    module: str  # where a sandboxed run imports it from
    search_path: str  # the directory that module is found in

    def arguments(self, given: Any) -> dict[str, Any]:
        """``given`` checked against the signature (converted where the schema allows, e.g. "3" for an int is
        refused: strict), or ToolArgumentsError saying what is wrong."""
        from pydantic import ValidationError

        if not isinstance(given, dict):
            raise ToolArgumentsError(f"{self.name} takes a JSON object of arguments, not {type(given).__name__}")
        try:
            checked = _model(self).model_validate(given, strict=True)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                                 for e in exc.errors())  # fmt: skip
            raise ToolArgumentsError(f"{self.name}: {problems}") from None
        return {key: getattr(checked, key) for key in type(checked).model_fields}

    def call(self, given: Any) -> str:
        """Run the function here with checked arguments; its result as text (JSON unless it returned a string)."""
        result = self.function(**self.arguments(given))
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
        return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + "\n[result cut]"


REGISTRY: dict[str, PythonTool] = {}
RESERVED: set[str] = set()  # the built-in tools' names (the kernel's actions), which a Python tool cannot take


@overload
def tool(function: F, /) -> F: ...
@overload
def tool(*, name: str | None = None, sandboxed: bool = True, read_only: bool = False) -> Callable[[F], F]: ...


def tool(function: Any = None, /, *, name: str | None = None, sandboxed: bool = True, read_only: bool = False) -> Any:
    """Register ``function`` as a tool (``@tool`` or ``@tool(name=..., sandboxed=..., read_only=...)``); the
    function itself is returned unchanged. Sandboxed by default: ``sandboxed=False`` runs it in the calling process
    (for functions that need it, e.g. a client held in memory — they run unconfined, so they must not trust their
    arguments)."""

    def register(target: F) -> F:
        registered = _describe(target, name or target.__name__, sandboxed, read_only)
        existing = REGISTRY.get(registered.name)
        if existing is not None and (existing.module, existing.function.__qualname__) != (
            registered.module, target.__qualname__):  # fmt: skip
            raise ToolDefinitionError(f"two tools are called {registered.name!r}: {existing.module} and "
                                      f"{registered.module}")  # fmt: skip
        REGISTRY[registered.name] = registered
        return target

    return register(function) if function is not None else register


def load_modules(modules: list[str], search_path: list[Path]) -> list[PythonTool]:
    """Import the configured tool modules (found in ``search_path`` — ``[tools] path``, by default the
    configuration's directory — then on Python's path); the tools they register, in registration order."""
    before = set(REGISTRY)
    for base in reversed(search_path or [Path.cwd()]):
        if str(base) not in sys.path:
            sys.path.insert(0, str(base))
    for module in modules:
        try:
            importlib.import_module(module)
        except ToolDefinitionError:
            raise
        except Exception as exc:  # the user's module: any failure is theirs to fix, named
            where = ", ".join(str(p) for p in search_path) or str(Path.cwd())
            raise ToolDefinitionError(f"the tool module {module!r} (looked for in {where}) does not import: "
                                      f"{type(exc).__name__}: {exc}") from None  # fmt: skip
    taken = sorted(n for n in REGISTRY if n in RESERVED)
    if taken:
        raise ToolDefinitionError(f"{', '.join(taken)}: the name of a built-in tool; give yours another name "
                                  "(@tool(name=...))")  # fmt: skip
    return [t for n, t in REGISTRY.items() if n not in before or t.module in modules]


def _describe(function: Callable[..., Any], name: str, sandboxed: bool, read_only: bool) -> PythonTool:
    if not NAME.fullmatch(name):
        raise ToolDefinitionError(f"tool name {name!r}: use 1-64 lowercase letters, digits and '_', starting with a "
                                  "letter")  # fmt: skip
    if name in RESERVED:
        raise ToolDefinitionError(f"{name!r} is a built-in tool; give yours another name (@tool(name=...))")
    try:
        hints = inspect.get_annotations(function, eval_str=True)
    except Exception as exc:
        raise ToolDefinitionError(f"{name}: its type hints cannot be read: {exc}") from None
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
            raise ToolDefinitionError(f"{name}: parameter {parameter.name!r} must be a plain named parameter")
        if parameter.name not in hints:
            raise ToolDefinitionError(f"{name}: parameter {parameter.name!r} needs a type hint (the schema comes "
                                      "from them)")  # fmt: skip
    module = inspect.getmodule(function)
    source = Path(inspect.getfile(function)).resolve().parent if module is not None else Path.cwd()
    description = inspect.getdoc(function) or f"The Python function {function.__qualname__}."
    draft = PythonTool(name, function, description, {}, sandboxed, read_only, function.__module__, str(source))
    schema = _model(draft).model_json_schema()
    schema.pop("title", None)
    for field in schema.get("properties", {}).values():
        field.pop("title", None)
    return PythonTool(name, function, description, schema, sandboxed, read_only, function.__module__, str(source))


_MODELS: dict[int, Any] = {}


def _model(tool: PythonTool) -> Any:
    """The pydantic model of the function's parameters (built once per function)."""
    from pydantic import ConfigDict, create_model

    key = id(tool.function)
    if key not in _MODELS:
        hints = inspect.get_annotations(tool.function, eval_str=True)
        fields: dict[str, Any] = {}
        for parameter in inspect.signature(tool.function).parameters.values():
            default = ... if parameter.default is parameter.empty else parameter.default
            fields[parameter.name] = (hints[parameter.name], default)
        _MODELS[key] = create_model(f"{tool.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    return _MODELS[key]
