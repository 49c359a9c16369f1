"""Your own Python tools in runs: registered with ``@groundstate.tool`` in a module the configuration names
(``[tools] modules`` and ``path``), given to an agent in its workflow, called by the model like any tool — the
arguments checked against the signature before anything runs, a sandboxed tool unable to touch the host, an
in-process one running in the driver, each call journaled and logged."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundstate import tools
from groundstate.config import ConfigFileError, load_config
from groundstate.runtime import TOOL_RESULT, EventStore, Runtime, make_backend
from groundstate.store import ToolJournal

from .conftest import Script, envelope

MODULE = '''
import os
import groundstate


@groundstate.tool(read_only=True)
def count_words(text: str, minimum: int = 1) -> dict:
    """Count the words of a text (those of at least `minimum` letters)."""
    return {"words": len([w for w in text.split() if len(w) >= minimum])}


@groundstate.tool
def append_to(path: str) -> str:
    """Append a line to a file."""
    with open(path, "a") as file:
        file.write("touched\\n")
    return "appended to " + path


@groundstate.tool(sandboxed=False)
def driver_pid() -> int:
    """The process id this tool runs in."""
    return os.getpid()
'''
FLOW = """
name: tools
agents:
  - id: writer_x
    instructions: use your tools
    tools: [count_words, append_to, driver_pid]
"""


@pytest.fixture(autouse=True)
def registry() -> Iterator[None]:
    """Each test registers its own tools; the process-wide registry is restored after it."""
    saved = dict(tools.REGISTRY)
    yield
    tools.REGISTRY.clear()
    tools.REGISTRY.update(saved)


def call(tool: str, argument: str) -> dict[str, str]:
    return {"tool": tool, "argument": argument}


def test_an_agent_calls_python_tools_through_the_audited_path(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "tools_run_a.py").write_text(MODULE)
    (tmp_path / "groundstate.toml").write_text('[tools]\nmodules = ["tools_run_a"]\npath = ["lib"]\n')
    outside = Path.home() / f"groundstate-outside-{tmp_path.name}.txt"  # a host place the sandbox does not show
    script.by_round = True
    script.answers = {"writer_x": [envelope("working", [
        call("count_words", '{"text": "a bb ccc dddd", "minimum": 2}'),
        call("count_words", '{"text": 5}'),  # the wrong type: refused before the function runs
        call("append_to", f'{{"path": "{outside}"}}'),  # a host path: the sandbox shows a private, empty view
        call("append_to", '{"path": "inside.txt"}'),  # the workspace: the one writable place
        call("driver_pid", "{}"),
    ]), envelope("done [STATUS: SUCCESS]")]}  # fmt: skip
    settings = load_config(tmp_path / "groundstate.toml").config
    store = EventStore(f"sqlite:///{tmp_path / 'tools.db'}")
    runtime = Runtime(store, tmp_path / "home", backend=make_backend(f"openai-chat:scripted@{url}"), settings=settings)
    run_id = runtime.create(FLOW, "flow.yaml", "scripted")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"

    results = [e.payload for e in store.events(run_id) if e.type == TOOL_RESULT]
    assert [(r["tool"], r["status"]) for r in results] == [
        ("count_words", "/success"), ("count_words", "/failure"), ("append_to", "/success"),
        ("append_to", "/success"), ("driver_pid", "/success")]  # fmt: skip
    assert results[0]["output"] == '{"words": 3}'
    assert "text: Input should be a valid string" in results[1]["output"]
    assert not outside.exists()  # it wrote into the sandbox's own throwaway filesystem: the host file never existed
    assert (tmp_path / "home" / "runs" / run_id / "workspace" / "inside.txt").read_text() == "touched\n"
    assert results[4]["output"] == str(os.getpid())  # in-process: the driver's own process
    prompt = script.requests[0][1]["messages"][0]["content"]
    assert "- count_words: Count the words of a text" in prompt and '"minimum": {"default": 1' in prompt
    journaled = ToolJournal(store.url).entries(f"run:{run_id}/")
    assert [e.tool for e in journaled] == ["count_words", "count_words", "append_to", "append_to", "driver_pid"]


def test_tools_that_cannot_be_registered_say_why(tmp_path: Path) -> None:
    with pytest.raises(tools.ToolDefinitionError, match="parameter 'text' needs a type hint"):
        tools.tool(name="untyped")(lambda text: text)
    with pytest.raises(tools.ToolDefinitionError, match="tool name 'Bad'"):
        tools.tool(name="Bad")(lambda: 1)
    (tmp_path / "tools_taken.py").write_text("import groundstate\n\n@groundstate.tool\ndef read_file(p: str) -> str:"
                                             "\n    return p\n")  # fmt: skip
    with pytest.raises(tools.ToolDefinitionError, match=r"read_file.* a built-in tool"):
        tools.load_modules(["tools_taken"], [tmp_path])
    (tmp_path / "tools_broken.py").write_text("import nothing_here\n")
    with pytest.raises(tools.ToolDefinitionError, match=r"'tools_broken' .* does not import: ModuleNotFoundError"):
        tools.load_modules(["tools_broken"], [tmp_path])
    (tmp_path / "groundstate.toml").write_text('[tools]\nmodules = ["x"]\npath = ["missing"]\n')
    with pytest.raises(ConfigFileError, match=r"groundstate.toml:3: tools.path: no such directory"):
        load_config(tmp_path / "groundstate.toml")


READER = '''
import groundstate

@groundstate.tool(read_only=True)
def read_path(path: str) -> str:
    """Read a file."""
    with open(path) as file:
        return file.read()
'''


def test_a_sandboxed_tool_sees_its_module_not_the_folder_around_it(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    """The docs' layout: the tool module beside groundstate.toml and the state directory. A tool taking a path could
    read all of that when the whole folder was mounted; now only its own module file is there to read."""
    url, script = model
    (tmp_path / "tools_reader.py").write_text(READER)
    (tmp_path / "groundstate.toml").write_text('[tools]\nmodules = ["tools_reader"]\n')
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "console.token").write_text("the-admin-token")
    (tmp_path / "secret.txt").write_text("a secret beside the module")
    script.by_round = True
    script.answers = {"writer_x": [envelope("reading", [
        call("read_path", f'{{"path": "{tmp_path / "home" / "console.token"}"}}'),
        call("read_path", f'{{"path": "{tmp_path / "secret.txt"}"}}'),
        call("read_path", f'{{"path": "{tmp_path / "tools_reader.py"}"}}'),
    ]), envelope("done [STATUS: SUCCESS]")]}  # fmt: skip
    settings = load_config(tmp_path / "groundstate.toml").config
    store = EventStore(f"sqlite:///{tmp_path / 'tools.db'}")
    runtime = Runtime(store, tmp_path / "home", backend=make_backend(f"openai-chat:scripted@{url}"), settings=settings)
    flow = FLOW.replace("tools: [count_words, append_to, driver_pid]", "tools: [read_path]")
    run_id = runtime.create(flow, "flow.yaml", "scripted")
    assert asyncio.run(runtime.drive(run_id)).status == "completed"
    token, secret, module = [e.payload for e in store.events(run_id) if e.type == TOOL_RESULT]
    assert token["status"] == "/failure" and "the-admin-token" not in token["output"]
    assert secret["status"] == "/failure" and "a secret" not in secret["output"]
    assert module["status"] == "/success" and "def read_path" in module["output"]  # its own file: shown
