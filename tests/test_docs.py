"""The examples in docs/ are executed.

Each ```mangle block runs against the ```text block after it; each ```python block runs as is.
"""

from __future__ import annotations

import re
import tomllib
from itertools import pairwise
from pathlib import Path

import pytest

from groundstate.config import ProjectConfig
from groundstate.logic import Engine, Program, display_fact

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
