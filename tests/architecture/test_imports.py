"""Dependencies point down and go through public faces (docs/architecture.md): read from the source, every import.

A package may import the foundation modules (``groundstate.errors``, ``groundstate.safejson``) and packages of a
lower layer, and those only through their ``__init__`` — never a module inside them. The ``groundstate`` command
(``groundstate/cli.py``) mounts each package's own CLI module; it is the one importer allowed to name them.
"""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import groundstate

ROOT = Path(groundstate.__file__).parent
FOUNDATION = {"errors", "safejson", "terminal_console", "terminal_text", "tools", "tracing"}
LAYERS = {
    "logic": 1,
    "wire": 1,
    "sandbox": 1,
    "config": 1,
    "packets": 2,
    "providers": 2,
    "store": 2,
    "provenance": 2,
    "kernel": 3,
    "runtime": 4,
    "guard": 4,
    "console": 5,
    "policies": 5,
}
TOP = {"cli": 6, "__main__": 7, "__init__": 0, "errors": 0, "safejson": 0, "terminal_console": 0, "terminal_text": 0,
       "tools": 0, "tracing": 0}


BUILTIN_ERRORS = {"Exception", "ValueError", "RuntimeError", "TypeError", "KeyError", "LookupError", "OSError"}


@dataclass(frozen=True)
class Import:
    source: str  # path relative to the package root
    line: int
    module: str  # absolute: groundstate.kernel.kernel
    names: tuple[str, ...]


def imports_of(path: Path, root: Path = ROOT) -> list[Import]:
    """Every groundstate import in a module, at any depth (lazy imports inside functions too)."""
    relative = path.relative_to(root)
    parts = ["groundstate", *relative.with_suffix("").parts]
    package = parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names = tuple(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            module, names = next((a.name for a in node.names if a.name.startswith("groundstate")), ""), ()
        else:
            continue
        if module == "groundstate" or module.startswith("groundstate."):
            found.append(Import(str(relative), node.lineno, module, names))
    return found


def owner(relative: str) -> str:
    first = Path(relative).parts[0]
    return first if first in LAYERS else Path(first).stem


def rank(name: str) -> int:
    return LAYERS[name] if name in LAYERS else TOP[name]


def problems(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for imp in imports_of(path, root):
            source = owner(imp.source)
            parts = imp.module.split(".")
            if len(parts) == 1:  # from groundstate import safejson / __version__
                targets = [name for name in imp.names if name in LAYERS or name in FOUNDATION]
                if any(t in LAYERS for t in targets):
                    found.append(f"{imp.source}:{imp.line}: imports a package as a name from groundstate")
                continue
            target = parts[1]
            if target == source or target in FOUNDATION:
                continue
            if target not in LAYERS and target in TOP and rank(target) < rank(source):
                continue  # python -m groundstate runs the command
            if target not in LAYERS:
                found.append(f"{imp.source}:{imp.line}: imports {imp.module}, which is above every package")
                continue
            if rank(target) >= rank(source):
                found.append(f"{imp.source}:{imp.line}: {source} (layer {rank(source)}) imports {target} "
                             f"(layer {rank(target)}): dependencies point down")  # fmt: skip
            inside = len(parts) > 2
            mounts_cli = source == "cli" and parts[2:] == ["cli"]
            if inside and not mounts_cli:
                found.append(f"{imp.source}:{imp.line}: imports {imp.module}: use groundstate.{target} "
                             "(its public face)")  # fmt: skip
    return found


def test_dependencies_point_down_through_public_faces() -> None:
    assert problems() == []


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    """The rules above really fire: an upward import and an import into another package's internals — probes added
    to a copy of the package (added to the package itself, they were seen by the tests that read every module while
    this one ran beside them: a test of the error tree failed on a probe being removed)."""
    copy = tmp_path / "groundstate"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.mg", "static"))
    (copy / "logic" / "_probe_upward.py").write_text("from ..kernel import Kernel\n", encoding="utf-8")
    (copy / "runtime" / "_probe_internal.py").write_text("def f():\n    from ..kernel.kernel import Kernel\n",
                                                         encoding="utf-8")  # fmt: skip
    found = problems(copy)
    assert any("_probe_upward.py:1: logic (layer 1) imports kernel (layer 3)" in p for p in found)
    assert any("_probe_internal.py:2: imports groundstate.kernel.kernel: use groundstate.kernel" in p for p in found)


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_every_package_has_a_public_face(package: str) -> None:
    """Each package's ``__init__`` declares ``__all__``, sorted, every name resolvable, and a docstring."""
    module = __import__(f"groundstate.{package}", fromlist=["__all__"])
    assert module.__doc__, f"groundstate.{package} has no docstring"
    exported = getattr(module, "__all__", None)
    assert exported, f"groundstate.{package} declares no __all__"
    assert len(set(exported)) == len(exported), f"groundstate.{package}.__all__ lists a name twice"
    missing = [name for name in exported if not hasattr(module, name)]
    assert missing == []


def test_names_other_packages_import_are_exported() -> None:
    """A package imports from another only what that package's ``__all__`` exports."""
    unexported = []
    for path in sorted(ROOT.rglob("*.py")):
        for imp in imports_of(path):
            parts = imp.module.split(".")
            if len(parts) != 2 or parts[1] not in LAYERS or parts[1] == owner(imp.source):
                continue
            face = __import__(imp.module, fromlist=["__all__"])
            unexported += [f"{imp.source}:{imp.line}: {imp.module}.{n}" for n in imp.names if n not in face.__all__]
    assert unexported == []


def test_every_error_derives_from_groundstate_error() -> None:
    """Every exception class defined in the package is part of the tree (groundstate.errors)."""
    outside = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
            if node.name == "GroundstateError":
                continue
            if bases & BUILTIN_ERRORS and not bases - BUILTIN_ERRORS:
                outside.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}")
    assert outside == []


# Tests import a package through its face too, so a refactor of its insides breaks no test. The few that test a
# module below the face stay here, each with why; the list is checked both ways (an entry that no longer occurs
# fails), so it only shrinks.
TESTS_ROOT = Path(__file__).resolve().parents[2]  # the repository: keys below are relative to it
INTERNALS_TESTS_MAY_IMPORT: dict[tuple[str, str], str] = {
    ("tests/wire/test_crc.py", "groundstate.wire._frameloop"):
        "the compiled loop's own CRC (SSE 4.2's instruction where present) checked against its table and the package",
    ("tests/cli/test_options.py", "groundstate.wire.zmq_transport"):
        "publishes raw frames under a stream's ZMQ topic(), as a foreign publisher",
    ("tests/guard/test_keeper.py", "groundstate.providers.mcp_stdio"):
        "turns the keeper off (mcp_stdio.KEEPING), as a system without a child subreaper has it, to test that path",
    ("tests/guard/test_history.py", "groundstate.provenance.history"):
        "sets the slice a text is read in (history.SLICE_CHARS) to a few characters, to test the cuts between slices",
    ("tests/guard/test_places.py", "groundstate.guard.places"):
        "unit test of the place facts a call's arguments become (place_facts)",
    ("tests/logic/reference.py", "groundstate.logic.builtins"):
        "the brute-force reference evaluator shares the engine's builtin tables",
    ("tests/logic/reference.py", "groundstate.logic.values"):
        "the reference evaluator orders facts by the engine's fact_sort_key",
    ("tests/logic/test_ground_fast_path.py", "groundstate.logic.analysis"):
        "feeds analyze() straight to the ground-fact fast path",
    ("tests/logic/test_ground_fast_path.py", "groundstate.logic.ground"):
        "unit test of the ground-fact fast path (split_ground_facts)",
    ("tests/logic/test_ground_fast_path.py", "groundstate.logic.parser"): "compares the fast path with the full Parser",
    ("tests/logic/test_parser.py", "groundstate.logic.parser"): "checks the parser's nesting limit (MAX_NESTING)",
    ("tests/logic/test_plans.py", "groundstate.logic.codegen"): "unit test of compiled join plans",
    ("tests/logic/test_plans.py", "groundstate.logic.planner"): "unit test of the body order and seeds a plan joins by",
    ("tests/logic/test_plans.py", "groundstate.logic.storage"): "runs compiled plans on a bare Relation",
    ("tests/logic/test_relation_upkeep.py", "groundstate.logic.storage"):
        "unit test of a bare Relation's compiled upkeep (_relations.c) against filing from scratch",
    ("tests/logic/test_type_bounds.py", "groundstate.logic.type_bounds"):
        "unit test of matching values against declared bounds",
    ("tests/logic/test_values.py", "groundstate.logic.values"):
        "unit test of the ordering keys behind sort_facts (sort_key, fact_sort_key)",
    ("tests/packets/test_gate.py", "groundstate.packets.gate"):
        "white-box test of the streaming gate's scanner (Where, its private states)",
    ("tests/packets/test_hostile.py", "groundstate.packets.extract"):
        "unit test of finding the envelope in hostile text (find_envelope)",
    ("tests/providers/test_bridge.py", "groundstate.providers.bridge"):
        "patches FRAME_TOKENS where the bridge reads it",
    ("tests/providers/test_client.py", "groundstate.providers.client"):
        "clears the module's cached TLS context (tls_context)",
    ("tests/providers/test_errors.py", "groundstate.providers.errors"):
        "unit test of Retry-After parsing (retry_after, parse_duration)",
    ("tests/providers/test_gateway_metrics_relay.py", "groundstate.providers.gateway"):
        "patches HELD_FOR_METRICS where the gateway reads it",
    ("tests/providers/test_tag_split.py", "groundstate.providers.tag_split"):
        "unit test of the tag splitter under ThinkTags and TextToolCalls",
    ("tests/runtime/test_attempt_lifetimes.py", "groundstate.runtime.guards"):
        "checks which guard facts live per attempt (attempt_facts)",
    ("tests/runtime/test_audit_chain.py", "groundstate.runtime.chain"):
        "recomputes the chain's links, as an attacker editing the database",
    ("tests/runtime/test_context_window.py", "groundstate.runtime.context"):
        "unit test of fitting a prompt to the upstream's context window",
    ("tests/runtime/test_deferred_starts.py", "groundstate.runtime.deferred_starts"):
        "times its checks by the deferral window (WRITTEN_WITHIN)",
    ("tests/runtime/test_pinned_policy_files.py", "groundstate.runtime.guards"):
        "unit test of pinned policy files (pinned_file)",
    ("tests/runtime/test_readiness.py", "groundstate.runtime.readiness"):
        "unit test of the scheduler's readiness index (Readiness)",
    ("tests/runtime/test_turn_batch.py", "groundstate.runtime.turn_batch"):
        "unit test of batching agents' turns (TurnBatch)",
    ("tests/store/test_in_store.py", "groundstate.store.database"):
        "sets the private _NOW_OR_NEVER context variable to force a refused wait",
    ("tests/wire/test_compiled_loop.py", "groundstate.wire.constants"): "builds frames by hand: frame kinds (Kind)",
    ("tests/wire/test_compiled_loop.py", "groundstate.wire.frames"): "unit test of the frame scanner's compiled loop",
    ("tests/wire/test_crc.py", "groundstate.wire.crc"): "unit test of CRC-32C, a wire-format primitive",
    ("tests/wire/test_hostile.py", "groundstate.wire.constants"):
        "builds hostile frames by hand: frame kinds and ops (Kind, Op)",
    ("tests/wire/test_hostile.py", "groundstate.wire.frames"): "builds hostile frames by hand (encode_frame)",
    ("tests/wire/test_properties.py", "groundstate.wire.constants"):
        "property tests of wire-format primitives: frame kinds and ops",
    ("tests/wire/test_properties.py", "groundstate.wire.encoder"):
        "property tests of wire-format primitives: token encoding",
    ("tests/wire/test_properties.py", "groundstate.wire.frames"): "property tests of wire-format primitives: frames",
    ("tests/wire/test_properties.py", "groundstate.wire.hello"):
        "property tests of wire-format primitives: the hello frame",
    ("tests/wire/test_properties.py", "groundstate.wire.varint"): "property tests of wire-format primitives: varints",
    ("tests/wire/test_real_model.py", "groundstate.wire.profile"):
        "builds the encoder's hot table with the profiler (hot_table)",
    ("tests/wire/test_transports.py", "groundstate.wire.framing"): "unit test of splitting a byte stream into frames",
    ("tests/wire/test_transports.py", "groundstate.wire.streams"):
        "unit test of the stream transport (send, decode_stream)",
    ("tests/wire/test_transports.py", "groundstate.wire.zmq_transport"): "subscribes by a stream's ZMQ topic()",
    ("tests/wire/test_vocab.py", "groundstate.wire.encoder_input"):
        "unit test of the encoder's event input (parse_events, MultiEncoder)",
    ("tests/wire/test_vocab.py", "groundstate.wire.profile"): "builds a hot table with the profiler (hot_table)",
}  # fmt: skip

PATCHERS = {"import_module", "setattr", "delattr", "patch"}  # calls that name a module by a string


def is_module(dotted: str) -> bool:
    """Whether ``groundstate.<package>.<name>...`` names a module (a file, a compiled one by its stub, or a package)
    inside the source tree."""
    inside = ROOT.joinpath(*dotted.split(".")[1:])
    return any(inside.with_suffix(suffix).is_file() for suffix in (".py", ".pyi")) or (inside / "__init__.py").is_file()


def internal_module(dotted: str) -> str | None:
    """The module inside a package that a dotted name reaches into (None: a face, a foundation module, or none)."""
    parts = dotted.split(".")
    if len(parts) < 3 or parts[0] != "groundstate" or parts[1] not in LAYERS:
        return None
    for end in range(len(parts), 2, -1):  # groundstate.providers.bridge.FRAME_TOKENS -> groundstate.providers.bridge
        if is_module(".".join(parts[:end])):
            return ".".join(parts[:end])
    return None


def internals_imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every module inside a groundstate package that a test file imports or names for
    patching: ``import groundstate.x.y``, ``from groundstate.x.y import …``, ``from groundstate.x import y`` with
    ``y`` a submodule the face does not export, ``import_module("groundstate.x.y")`` and
    ``monkeypatch.setattr("groundstate.x.y.NAME", …)``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        modules: list[str | None] = []
        if isinstance(node, ast.Import):
            modules = [internal_module(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            parts = node.module.split(".")
            if len(parts) == 2 and parts[0] == "groundstate" and parts[1] in LAYERS:
                exported = __import__(node.module, fromlist=["__all__"]).__all__
                named = [f"{node.module}.{alias.name}" for alias in node.names if alias.name not in exported]
                modules = [internal_module(dotted) for dotted in named]
            else:
                modules = [internal_module(node.module)]
        elif isinstance(node, ast.Call) and node.args:
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            first = node.args[0]
            if called in PATCHERS and isinstance(first, ast.Constant) and isinstance(first.value, str):
                modules = [internal_module(first.value)]
        found += [(getattr(node, "lineno", 0), module) for module in modules if module]  # stmt or expr
    return sorted(found)


def reaching_in(root: Path, allowed: dict[tuple[str, str], str]) -> list[str]:
    """Every import of a package's internals under ``root/tests`` that ``allowed`` does not list, then every
    entry of ``allowed`` that no longer occurs."""
    found, seen = [], set()
    for path in sorted((root / "tests").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        for line, module in internals_imported(path):
            seen.add((relative, module))
            if (relative, module) not in allowed:
                package = module.split(".")[1]
                found.append(f"{relative}:{line}: imports {module}: use groundstate.{package} (its public face), "
                             "or allow it with a reason in INTERNALS_TESTS_MAY_IMPORT")  # fmt: skip
    found += [f"{file}: no longer imports {module}: drop it from INTERNALS_TESTS_MAY_IMPORT"
              for file, module in sorted(allowed.keys() - seen)]  # fmt: skip
    return found


def test_tests_import_packages_through_their_faces() -> None:
    assert reaching_in(TESTS_ROOT, INTERNALS_TESTS_MAY_IMPORT) == []


def test_the_tests_check_sees_a_violation(tmp_path: Path) -> None:
    """Every way of reaching in is caught, with file and line; a name a face exports is not (even one spelled like
    its module, ``groundstate.config.trust``); an allowed pair passes, and an allowed pair that is gone fails."""
    (tmp_path / "tests" / "runtime").mkdir(parents=True)
    (tmp_path / "tests" / "runtime" / "test_probe.py").write_text(
        "import groundstate.runtime.runner\n"
        "from groundstate.runtime.store import EventStore\n"
        "from groundstate.runtime import Runtime, runner\n"
        "from groundstate.config import trust\n"
        "from groundstate import errors, runtime\n"
        "def f(monkeypatch):\n"
        "    from groundstate.wire.constants import Kind\n"
        "    monkeypatch.setattr('groundstate.providers.bridge.FRAME_TOKENS', 5)\n"
        "    importlib.import_module('groundstate.providers.client')\n",
        encoding="utf-8",
    )
    allowed = {
        ("tests/runtime/test_probe.py", "groundstate.wire.constants"): "allowed",
        ("tests/runtime/test_gone.py", "groundstate.wire.crc"): "gone",
    }
    found = reaching_in(tmp_path, allowed)
    assert [problem.split(": use")[0] for problem in found] == [
        "tests/runtime/test_probe.py:1: imports groundstate.runtime.runner",
        "tests/runtime/test_probe.py:2: imports groundstate.runtime.store",
        "tests/runtime/test_probe.py:3: imports groundstate.runtime.runner",
        "tests/runtime/test_probe.py:8: imports groundstate.providers.bridge",
        "tests/runtime/test_probe.py:9: imports groundstate.providers.client",
        "tests/runtime/test_gone.py: no longer imports groundstate.wire.crc: drop it from INTERNALS_TESTS_MAY_IMPORT",
    ]
