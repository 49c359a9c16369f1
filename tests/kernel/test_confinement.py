"""Escape attempts against the workspace and the Python sandbox; outputs stay bounded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from groundstate.kernel import Action, ShardProfile, VirtualStore, Workspace, WorkspaceError


@pytest.fixture
def store(tmp_path: Path) -> VirtualStore:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "inside.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("secret")
    return VirtualStore(Workspace(root), max_output_chars=1000)


def run(store: VirtualStore, executor: str, target: str, payload: str = "", timeout: float = 20.0) -> tuple[bool, str]:
    outcome = store.run(
        executor, Action("/action/1", executor, target, payload), ShardProfile(max_execution_time_sec=timeout)
    )
    return outcome.ok, outcome.output


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("../secret.txt", "'..' is not allowed"),
        ("a/../../secret.txt", "'..' is not allowed"),
        ("/etc/passwd", "absolute paths are not allowed"),
        ("~/x", "absolute paths are not allowed"),
        ("C:\\x", "absolute paths are not allowed"),
        ("a\x00b", "NUL byte"),
        ("", "empty path"),
    ],
)
def test_paths_that_are_refused(store: VirtualStore, target: str, message: str) -> None:
    ok, output = run(store, "read_file", target)
    assert not ok and message in output
    with pytest.raises(WorkspaceError, match=message.replace("(", r"\(")):
        store.workspace.resolve(target)


def test_symlinks_that_escape_are_refused(store: VirtualStore, tmp_path: Path) -> None:
    root = store.workspace.root
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    (root / "dir").symlink_to(tmp_path)
    (root / "ok.txt").symlink_to(root / "inside.txt")
    assert not run(store, "read_file", "link.txt")[0]
    assert not run(store, "read_file", "dir/secret.txt")[0]
    assert not run(store, "write_file", "dir/new.txt", "x")[0] and not (tmp_path / "new.txt").exists()
    assert not run(store, "delete_file", "link.txt")[0] and (tmp_path / "secret.txt").exists()
    assert not run(store, "read_file", "ok.txt")[0]  # no symlink is followed, even one that stays inside
    assert store.workspace.status("dir/secret.txt") == "/outside"


def test_huge_outputs_are_bounded(store: VirtualStore) -> None:
    (store.workspace.root / "big.txt").write_text("x" * 50_000)
    ok, output = run(store, "read_file", "big.txt")
    assert ok and len(output) < 1100 and output.endswith("[output cut at 1000 of 50000 characters]")
    ok, output = run(store, "execute_python", "", "print('y' * 100000)")
    assert ok and "[output cut at 1000" in output


def test_edit_must_be_unambiguous(store: VirtualStore) -> None:
    (store.workspace.root / "twice.txt").write_text("a a")
    ok, output = run(store, "edit_file", "twice.txt", '{"old": "a", "new": "b"}')
    assert not ok and "found 2 times" in output and (store.workspace.root / "twice.txt").read_text() == "a a"


def test_sandbox_has_no_network_and_no_host_files(store: VirtualStore, tmp_path: Path) -> None:
    ok, output = run(store, "execute_python", "", "import socket\nsocket.create_connection(('127.0.0.1', 9))")
    assert not ok and ("Connection refused" in output or "Network is unreachable" in output)
    target = tmp_path / "escaped.txt"
    code = f"import subprocess\nsubprocess.run(['sh', '-c', 'echo x > {target}'])\nopen({str(target)!r}, 'a')"
    run(store, "execute_python", "", code)
    assert not target.exists()  # the sandbox sees neither the host's /tmp nor anything else outside
    ok, output = run(store, "execute_python", "", "open('made.txt', 'w').write('x'); print('made')")
    assert ok and (store.workspace.root / "made.txt").exists()


def test_sandbox_time_and_memory_limits(store: VirtualStore) -> None:
    ok, output = run(store, "execute_python", "", "while True: pass", timeout=1.0)
    assert not ok and "did not finish within 1 s" in output
    ok, output = run(store, "execute_python", "", "x = bytearray(2 * 1024 ** 3)")
    assert not ok and "MemoryError" in output


def test_executor_errors_never_escape(store: VirtualStore) -> None:
    assert run(store, "read_file", "missing.txt") == (False, "'missing.txt': does not exist in the workspace")
    assert run(store, "search_code", "(unclosed", "")[0] is False
    assert run(store, "nope", "x") == (False, "the virtual store has no executor nope")
    assert run(store, "write_file", "w.txt", '{"content": 7}') == (
        False,
        "write_file needs a string 'content' in its payload",
    )
    assert os.listdir(store.workspace.root) == ["inside.txt"]
