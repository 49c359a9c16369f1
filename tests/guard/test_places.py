"""Where a call acts, as the rules see it: paths normalised (``..`` and symlinks resolved) before a rule can ask
whether they are under ``notes/``, a file outside the repository never inside it, the branch read from HEAD — and
an attacker's path argument cannot make the guard read anything but a HEAD file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.guard.places import DETACHED, UNKNOWN, place_facts


def facts(arguments: dict[str, object]) -> dict[str, set[tuple[object, ...]]]:
    found: dict[str, set[tuple[object, ...]]] = {}
    flattened = [(f"files.{n}", v) if k == "files" else (k, v) for k, vs in arguments.items()
                 for n, v in (enumerate(vs) if isinstance(vs, list) else [(0, vs)])]  # fmt: skip
    for name, args in place_facts("c", flattened):
        found.setdefault(name, set()).add(args[1:])
    return found


def test_paths_are_normalised_and_symlinks_out_of_the_repository_are_outside(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes").mkdir()
    (repo / "escape").symlink_to(tmp_path)  # a symlink inside the repository that leads out of it
    found = facts({"repo_path": str(repo), "files": ["notes/a.md", "notes/../src/b.py", "escape/x", "/etc/passwd"]})
    assert found["mcp_repo_file"] == {("files.0", "notes/a.md"), ("files.1", "src/b.py")}
    assert ("files.2", str(tmp_path / "x")) in found["mcp_path"] and ("files.3", "/etc/passwd") in found["mcp_path"]
    assert found["mcp_git_branch"] == {("main",)}


def test_a_detached_head_and_a_directory_that_is_no_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("0123456789abcdef0123456789abcdef01234567\n")
    assert facts({"repo_path": str(repo)})["mcp_git_branch"] == {(DETACHED,)}
    assert facts({"repo_path": str(tmp_path)})["mcp_git_branch"] == {(UNKNOWN,)}  # unreadable: /unknown, not none


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["notes", "..", ".", "src", "", "a.md", "/"]), min_size=1, max_size=8).map("/".join))
def test_a_file_reported_under_notes_is_under_notes(relative: str) -> None:
    repo = "/srv/no-such-repo"
    for key, file in facts({"repo_path": repo, "files": [relative]}).get("mcp_repo_file", set()):
        if str(file).startswith("notes/"):
            assert os.path.normpath(os.path.join(repo, relative)).startswith(repo + "/notes/"), (key, relative)


def test_a_symlink_and_dotdot_cannot_place_a_file_under_notes(tmp_path: Path) -> None:
    """What the attack did: ``notes/l -> deep/er/dir``, then ``notes/l/../../src/app.py`` — the disk reads
    notes/deep/src/app.py, git (lexically) src/app.py. Neither is reported as a file of the repository."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes" / "deep" / "er" / "dir").mkdir(parents=True)
    (repo / "notes" / "l").symlink_to("deep/er/dir")
    found = facts({"repo_path": str(repo), "files": ["notes/l/../../src/app.py", "notes/l/x.md"]})
    assert "mcp_repo_file" not in found  # the text and the disk disagree for both: neither is "inside"
    assert ("files.0", str(repo / "src" / "app.py")) in found["mcp_path"]  # as git reads it
    assert ("files.0", str(repo / "notes" / "deep" / "src" / "app.py")) in found["mcp_path"]  # as the disk does


def test_the_repository_is_repo_path_alone_wherever_it_points(tmp_path: Path, monkeypatch: Any) -> None:
    main, other = tmp_path / "main", tmp_path / "other"
    subprocess.run(["git", "init", "-q", "-b", "main", str(main)], check=True)
    subprocess.run(["git", "init", "-q", "-b", "work", str(other)], check=True)
    spoofed = facts({"repository": str(other), "repo_path": str(main)})  # another key first: not the repository
    assert spoofed["mcp_git_branch"] == {("main",)}
    assert facts({"repo_path": str(main / ".git")})["mcp_git_branch"] == {("main",)}  # the git directory itself
    monkeypatch.chdir(tmp_path)  # a relative repo_path: from the working directory the upstream inherits
    assert facts({"repo_path": "main"})["mcp_git_branch"] == {("main",)}
    worktree = tmp_path / "tree"
    subprocess.run(["git", "-C", str(main), "commit", "-q", "--allow-empty", "-m", "x"], check=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})  # fmt: skip
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", "-b", "feature", str(worktree)], check=True)
    assert facts({"repo_path": str(worktree)})["mcp_git_branch"] == {("feature",)}  # its .git is a pointer file
