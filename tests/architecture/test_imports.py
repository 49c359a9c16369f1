"""Dependencies point down and go through public faces (docs/architecture.md): read from the source, every import.

A package may import the foundation modules (``groundstate.errors``, ``groundstate.safejson``) and packages of a
lower layer, and those only through their ``__init__`` — never a module inside them. The ``groundstate`` command
(``groundstate/cli.py``) mounts each package's own CLI module; it is the one importer allowed to name them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import groundstate

ROOT = Path(groundstate.__file__).parent
FOUNDATION = {"errors", "safejson", "tools", "tracing"}
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
TOP = {"cli": 6, "__main__": 7, "__init__": 0, "errors": 0, "safejson": 0, "tools": 0, "tracing": 0}


BUILTIN_ERRORS = {"Exception", "ValueError", "RuntimeError", "TypeError", "KeyError", "LookupError", "OSError"}


@dataclass(frozen=True)
class Import:
    source: str  # path relative to the package root
    line: int
    module: str  # absolute: groundstate.kernel.kernel
    names: tuple[str, ...]


def imports_of(path: Path) -> list[Import]:
    """Every groundstate import in a module, at any depth (lazy imports inside functions too)."""
    relative = path.relative_to(ROOT)
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


def problems() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for imp in imports_of(path):
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
    """The rules above really fire: an upward import and an import into another package's internals."""
    upward = ROOT / "logic" / "_probe_upward.py"
    internal = ROOT / "runtime" / "_probe_internal.py"
    upward.write_text("from ..kernel import Kernel\n", encoding="utf-8")
    internal.write_text("def f():\n    from ..kernel.kernel import Kernel\n", encoding="utf-8")
    try:
        found = problems()
    finally:
        upward.unlink()
        internal.unlink()
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
