"""Where a call acts, as the rules see it: paths normalised (``..`` and symlinks resolved) before a rule can ask
whether they are under ``notes/``, a file outside the repository never inside it, the branch read from HEAD — and
an attacker's path argument cannot make the guard read anything but a HEAD file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from groundstate.guard.places import DETACHED, place_facts


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
    assert "mcp_git_branch" not in facts({"repo_path": str(tmp_path)})  # no .git/HEAD: no branch, no error


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["notes", "..", ".", "src", "", "a.md", "/"]), min_size=1, max_size=8).map("/".join))
def test_a_file_reported_under_notes_is_under_notes(relative: str) -> None:
    repo = "/srv/no-such-repo"
    for key, file in facts({"repo_path": repo, "files": [relative]}).get("mcp_repo_file", set()):
        if str(file).startswith("notes/"):
            assert os.path.normpath(os.path.join(repo, relative)).startswith(repo + "/notes/"), (key, relative)
