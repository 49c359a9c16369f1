"""Attacks through the kernel's public surface (``groundstate kernel step`` with a hostile control packet):
model-written tests, a smuggled pytest option, a git configuration that runs commands, a symlink swapped in
while files are written. Each test asserts the effect did not happen."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from groundstate.kernel import Workspace, WorkspaceError


def step(workspace: Path, requests: list[dict[str, str]]) -> list[dict[str, Any]]:
    packet = workspace.parent / "packet.json"
    intent = {"category": "/instruction", "verb": "/do", "confidence": 0.9}
    control = {"intent_classification": intent, "mangle_updates": [], "tool_requests": requests}
    packet.write_text(json.dumps({"control_packet": control, "surface_response": "ok"}))
    done = subprocess.run([sys.executable, "-m", "groundstate", "kernel", "step", "--packet", str(packet),
                           "--workspace", str(workspace)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    actions: list[dict[str, Any]] = json.loads(done.stdout)["actions"]
    return actions


def make_workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def test_model_written_conftest_runs_only_in_the_sandbox(tmp_path: Path) -> None:
    root, outside = make_workspace(tmp_path), tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("precious")
    conftest = (f"import pathlib, shutil\np = pathlib.Path({str(outside)!r})\n"
                "shutil.rmtree(p, ignore_errors=True)\np.mkdir(parents=True, exist_ok=True)\n"
                "(p / 'pwned').write_text('x')\n")  # fmt: skip
    actions = step(root, [{"tool": "write_file", "argument": "conftest.py", "content": conftest},
                          {"tool": "write_file", "argument": "test_a.py", "content": "def test_a():\n    pass\n"},
                          {"tool": "run_tests", "argument": "test_a.py"}])  # fmt: skip
    assert [a["status"] for a in actions] == ["/success", "/success", "/success"]  # it ran, confined
    assert (outside / "keep.txt").read_text() == "precious" and not (outside / "pwned").exists()


def test_a_test_target_cannot_smuggle_a_pytest_option(tmp_path: Path) -> None:
    root, outside = make_workspace(tmp_path), tmp_path / "basetemp"
    outside.mkdir()
    (outside / "keep.txt").write_text("precious")
    (root / "--basetemp=x").mkdir()  # even a directory of that name is passed after "--", as a path
    actions = step(root, [{"tool": "run_tests", "argument": f"--basetemp={outside}"},
                          {"tool": "run_tests", "argument": "-p"}])  # fmt: skip
    assert [a["status"] for a in actions] == ["/failure", "/failure"]
    assert (outside / "keep.txt").read_text() == "precious"


def test_git_never_runs_a_command_from_the_repository_configuration(tmp_path: Path) -> None:
    root, marker = make_workspace(tmp_path), tmp_path / "fsmonitor-ran"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    config = f"[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch {marker}\n"
    actions = step(root, [{"tool": "write_file", "argument": ".git/config", "content": config},
                          {"tool": "git_status", "argument": ""},
                          {"tool": "write_file", "argument": ".git/hooks/pre-commit",
                           "content": f"#!/bin/sh\ntouch {marker}\n"}])  # fmt: skip
    assert actions[1]["status"] == "/failure" and "core.fsmonitor" in actions[1]["output"]
    assert not marker.exists()


def test_a_symlink_swapped_in_during_writes_never_lets_one_land_outside(tmp_path: Path) -> None:
    """A rename-exchange loop swaps a directory and a symlink to the outside while write_file runs: with the
    check-then-open design this won within 0.1 s; with fd-relative opens no write may land outside."""
    root, outside = make_workspace(tmp_path), tmp_path / "outside"
    outside.mkdir()
    (root / "d").mkdir()
    (root / "swap").symlink_to(outside)
    libc = ctypes.CDLL(None, use_errno=True)
    exchange, stop = 2, threading.Event()  # RENAME_EXCHANGE

    def swapper() -> None:
        fd = os.open(root, os.O_RDONLY)
        while not stop.is_set():
            libc.renameat2(fd, b"d", fd, b"swap", exchange)
        os.close(fd)

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    refused = written = 0
    try:
        for use_openat2 in (True, False):
            workspace = Workspace(root, use_openat2=use_openat2)
            for i in range(1500):
                try:
                    workspace.write_bytes(f"d/f{i}.txt", b"x")
                    written += 1
                except WorkspaceError:
                    refused += 1
    finally:
        stop.set()
        thread.join()
    assert list(outside.iterdir()) == []
    assert refused > 0 and written > 0  # the race really happened both ways


def test_a_policy_can_require_approval_before_workspace_content_runs(tmp_path: Path) -> None:
    from groundstate.kernel import Kernel, Shards, VirtualStore
    from groundstate.packets import parse_output

    root = make_workspace(tmp_path)
    (root / "test_a.py").write_text("open('ran.txt', 'w').write('x')\n")
    policy = tmp_path / "approval.mg"
    policy.write_text("code_needs_approval(T) :- executes_workspace_code(T).\n")
    kernel = Kernel(root, extra_sources=[policy])
    shards = Shards(kernel, VirtualStore(kernel.workspace))
    control = {"intent_classification": {"category": "/instruction", "verb": "/do", "confidence": 0.9},
               "tool_requests": [{"tool": "run_tests", "argument": "test_a.py"},
                                 {"tool": "execute_python", "argument": "print(1)"},
                                 {"tool": "read_file", "argument": "test_a.py"}]}  # fmt: skip
    reports = shards.step(parse_output(json.dumps({"control_packet": control}), kernel.update_validator()))
    assert [(r.type, r.decision) for r in reports] == [("/run_tests", "/deny"), ("/execute_python", "/deny"),
                                                       ("/read_file", "/permit")]  # fmt: skip
    assert reports[0].reason == "requires user approval: running workspace content (model-written code or tests)"
    assert not (root / "ran.txt").exists()
    lint = subprocess.run([sys.executable, "-m", "groundstate", "kernel", "lint", "--policy", str(policy)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "requires approval for: /build_project /execute_python /run_tests" in lint.stdout
    default = subprocess.run([sys.executable, "-m", "groundstate", "kernel", "lint"], capture_output=True, text=True,
                             timeout=120)  # fmt: skip
    assert "run workspace content (sandboxed" in default.stdout and "requires approval" not in default.stdout


def test_git_reads_the_worktree_configuration_too(tmp_path: Path) -> None:
    """``extensions.worktreeConfig`` makes git read ``.git/config.worktree``: a filter set there runs as surely as
    one in ``.git/config``, so the check reads every scope git reads."""
    root = make_workspace(tmp_path)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "config", "extensions.worktreeConfig", "true"], check=True)
    (root / ".git" / "config.worktree").write_text('[filter "x"]\n\tclean = touch /workspace/pwned\n')
    (root / ".gitattributes").write_text("* filter=x\n")
    (root / "a.txt").write_text("a")
    actions = step(root, [{"tool": "git_status", "argument": ""}, {"tool": "git_diff", "argument": ""}])
    assert all(a["status"] == "/failure" and "filter.x.clean" in a["output"] for a in actions), actions
    assert not (root / "pwned").exists()


def test_a_catastrophic_pattern_does_not_stall_search_code(tmp_path: Path) -> None:
    root = make_workspace(tmp_path)
    (root / "a.txt").write_text("a" * 30_000 + "b\n")
    started = time.monotonic()
    [found] = step(root, [{"tool": "search_code", "argument": "(a+)+$"}])
    assert found["status"] == "/success" and time.monotonic() - started < 30  # Python's re: hours
    [refused] = step(root, [{"tool": "search_code", "argument": "(a)\\1"}])  # a back-reference: RE2 says no
    assert refused["status"] == "/failure" and "regular expression" in refused["output"]


def test_a_malformed_safety_gates_asks_for_approval_instead_of_vanishing(tmp_path: Path) -> None:
    """The model's own request for approval, malformed (a string where a boolean belongs), degrades closed: the
    write waits for approval instead of running."""
    root = make_workspace(tmp_path)
    packet = tmp_path / "packet.json"
    intent = {"category": "/instruction", "verb": "/do", "confidence": 0.9}
    control = {"intent_classification": intent, "safety_gates": {"requires_user_approval": "yes"},
               "tool_requests": [{"tool": "write_file", "argument": "a.txt", "content": "x"}]}  # fmt: skip
    packet.write_text(json.dumps({"control_packet": control, "surface_response": "ok"}))
    done = subprocess.run([sys.executable, "-m", "groundstate", "kernel", "step", "--packet", str(packet),
                           "--workspace", str(root)], capture_output=True, text=True, timeout=300)  # fmt: skip
    [action] = json.loads(done.stdout)["actions"]
    assert action["decision"] != "/permit" and "approval" in action["reason"], action
    assert not (root / "a.txt").exists()
