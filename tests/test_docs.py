"""The examples in docs/ are executed.

Each ```mangle block runs against the ```text block after it; each ```python and ```sh block runs as is; each
```toml block is a valid configuration.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from groundstate.config import ProjectConfig
from groundstate.logic import Engine, Program, display_fact

from .schema_keys import leaves

DOCS = Path(__file__).parents[1] / "docs"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(page: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer((DOCS / page).read_text(encoding="utf-8"))]


def mangle_examples(page: str) -> list[tuple[str, str]]:
    found = []
    items = blocks(page)
    for (lang, code), (next_lang, expected) in pairwise(items):
        if lang == "mangle" and next_lang == "text":
            found.append((code, expected))
    return found


def test_every_mangle_example_has_its_output() -> None:
    mangles = [code for lang, code in blocks("logic.md") if lang == "mangle"]
    assert len(mangles) == len(mangle_examples("logic.md")) >= 6


@pytest.mark.parametrize(("code", "expected"), mangle_examples("logic.md"))
def test_mangle_example(code: str, expected: str) -> None:
    engine = Engine(Program.parse(code, source="docs/logic.md"))
    engine.evaluate()
    lines = [display_fact(p, f) for p, facts in engine.all_facts().items() for f in facts]
    assert lines == expected.splitlines()


PYTHON_EXAMPLES = [
    (page.name, code) for page in sorted(DOCS.glob("*.md")) for lang, code in blocks(page.name) if lang == "python"
]


@pytest.mark.parametrize(("page", "code"), PYTHON_EXAMPLES)
def test_python_example(page: str, code: str) -> None:
    exec(compile(code, f"docs/{page}", "exec"), {})


TOML_EXAMPLES = [
    (page.name, code) for page in sorted(DOCS.glob("*.md")) for lang, code in blocks(page.name) if lang == "toml"
]


@pytest.mark.parametrize(("page", "code"), TOML_EXAMPLES)
def test_toml_example_is_a_valid_configuration(page: str, code: str) -> None:
    """Every groundstate.toml shown in the docs passes the configuration's schema (its files need not exist)."""
    ProjectConfig.model_validate(tomllib.loads(code))


SH_EXAMPLES = [
    (page.name, code) for page in sorted(DOCS.glob("*.md")) for lang, code in blocks(page.name) if lang == "sh"
]
CONSOLE = "127.0.0.1:8765"  # the port the docs' examples talk to


@contextlib.contextmanager
def console_on_8765(home: Path, env: dict[str, str]) -> Iterator[None]:
    """``groundstate serve`` on the docs' port, for the blocks that talk to a console — one at a time on this
    machine (a file lock): the tests run two at a time, and a second console on the port failed to start while the
    first answered its readiness check, so the block ran against another home's console."""
    with open(Path(tempfile.gettempdir()) / "groundstate-docs-8765.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with _console(home, env):
            yield


@contextlib.contextmanager
def _console(home: Path, env: dict[str, str]) -> Iterator[None]:
    server = subprocess.Popen([sys.executable, "-m", "groundstate", "serve", "--port", "8765"], env=env, cwd=home,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        for _ in range(300):
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://{CONSOLE}/login", timeout=1).status_code == 200:
                    break
            if server.poll() is not None:
                pytest.fail(f"the console did not start on port 8765: {server.stdout.read() if server.stdout else ''}")
            time.sleep(0.1)
        yield
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.parametrize(("page", "code"), SH_EXAMPLES)
def test_sh_example_runs(page: str, code: str, tmp_path: Path) -> None:
    """Every ```sh block runs as written, in a fresh home and an empty directory beside the repository's examples;
    the blocks that talk to a console get one (blocks that take too long are shown as ```text, and say so)."""
    (tmp_path / "examples").symlink_to(DOCS.parent / "examples")
    env = {key: value for key, value in os.environ.items() if not key.startswith("GROUNDSTATE_")}
    env |= {"HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}"}
    with console_on_8765(tmp_path, env) if CONSOLE in code else contextlib.nullcontext():
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, f"docs/{page}:\n{code}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stdout + done.stderr


def test_the_configuration_page_shows_every_key() -> None:
    """docs/configuration.md's example sets every key of the schema (tables of models by their fields)."""
    [example] = [code for lang, code in blocks("configuration.md") if lang == "toml"][:1]
    shown: set[str] = set()

    def walk(value: object, key: str) -> None:
        if isinstance(value, dict):
            for name, inner in value.items():
                walk(inner, f"{key}.{name}" if key else name)
        else:
            shown.add(key)

    walk(tomllib.loads(example), "")
    names = {part for key in shown for part in key.split(".")}
    missing = [key for key in leaves(ProjectConfig) if key.rsplit(".", 1)[-1] not in names]
    assert missing == [], f"keys the example does not show: {missing}"
