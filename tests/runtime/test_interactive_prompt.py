"""The interactive prompt of ``groundstate run``, on a real pseudo-terminal: once a pause is asked about, nothing
redraws over the question (the live view is stopped); ``edit`` starts from the agent's current instructions — in
``$EDITOR`` when one is set, else printed above the prompt — and the retry carries the edited text."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from .conftest import Script, envelope
from .test_cli_decisions import FLOW, groundstate

NULL = envelope("Nothing found. [STATUS: NULL]")
DONE = envelope("Written. [STATUS: SUCCESS]")
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """A command on a pseudo-terminal: what it printed so far (escape codes removed), and typing into it."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(args, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave)
        os.close(slave)
        self.raw = b""

    def read(self, seconds: float) -> bytes:
        """Whatever arrives within ``seconds``."""
        got, deadline = b"", time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.master], [], [], left)
            if not ready:
                break
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the command ended
                break
            got += chunk
        self.raw += got
        return got

    def wait_for(self, pattern: str, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while pattern not in self.text() and time.monotonic() < deadline:
            self.read(0.2)
        assert pattern in self.text(), self.text()[-3000:]

    def text(self) -> str:
        return ANSI.sub(b"", self.raw).decode(errors="replace")

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")


def start(tmp_path: Path, url: str, editor: str | None) -> Terminal:
    (tmp_path / "flow.yaml").write_text(FLOW)
    env = {**os.environ, "GROUNDSTATE_HOME": str(tmp_path / "home"), "COLUMNS": "120", "TERM": "xterm"}
    for name in ("GROUNDSTATE_CONFIG", "GROUNDSTATE_TOKEN", "VISUAL", "EDITOR"):
        env.pop(name, None)
    if editor is not None:
        env["EDITOR"] = editor
    return Terminal([sys.executable, "-m", "groundstate", "run", "flow.yaml", "--model", f"openai-chat:m@{url}"],
                    tmp_path, env)  # fmt: skip


def decided_instructions(tmp_path: Path, run_id: str) -> str:
    log = [json.loads(line) for line in groundstate(tmp_path, "runs", "show", run_id, "--events").stdout.splitlines()]
    return str(next(e for e in log if e["type"] == "ApprovalDecided")["payload"].get("instructions"))


def test_nothing_redraws_over_the_prompt_and_edit_starts_from_the_current_instructions(
    tmp_path: Path, model: tuple[str, Script]
) -> None:
    url, script = model
    script.answers = {"writer_a": [NULL, DONE]}
    terminal = start(tmp_path, url, editor=None)
    terminal.wait_for("decision [retry/edit/skip/abort/later] (retry):")
    assert terminal.read(1.5) == b""  # a live view still running would redraw several times a second
    terminal.type("edit")
    terminal.wait_for("new instructions (Enter keeps them):")
    shown = terminal.text().split("current instructions:")[-1]
    assert "Write it." in shown  # the workflow's instructions, since nobody edited them yet
    terminal.type("Write it, and cite the source.")
    terminal.wait_for(": completed")
    assert terminal.process.wait(timeout=30) == 0
    run_id = re.search(r"run (run-\S+) \(state in", terminal.text()).group(1)  # type: ignore[union-attr]
    assert decided_instructions(tmp_path, run_id) == "Write it, and cite the source."


def test_edit_opens_the_editor_on_the_current_instructions(tmp_path: Path, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"writer_a": [NULL, DONE]}
    terminal = start(tmp_path, url, editor="sed -i s/Write/Rewrite/")  # an "editor" that changes the text it is given
    terminal.wait_for("decision [retry/edit/skip/abort/later] (retry):")
    terminal.type("edit")
    terminal.wait_for(": completed")
    assert terminal.process.wait(timeout=30) == 0
    run_id = re.search(r"run (run-\S+) \(state in", terminal.text()).group(1)  # type: ignore[union-attr]
    assert decided_instructions(tmp_path, run_id) == "Rewrite it."  # edited from the current text, not from empty
