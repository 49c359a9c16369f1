"""What one sandboxed program may write: every file is capped by RLIMIT_FSIZE, and all of them together by a watch
on the workspace — a program writing many files is killed once past ``Limits.written_mb``; one does not start in a
workspace past ``Limits.workspace_mb``; ``/tmp`` is a tmpfs of ``Limits.tmp_mb``."""

from __future__ import annotations

from pathlib import Path

from groundstate.sandbox import Limits, default_sandbox

MANY_FILES = """
for number in range(40):
    with open(f"part{number}.bin", "wb") as out:
        out.write(b"x" * (4 << 20))
print("wrote everything")
"""


def written(workspace: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in workspace.rglob("*") if f.is_file())


def test_many_files_past_the_bound_kill_the_program(tmp_path: Path) -> None:
    limits = Limits(timeout_s=60, written_mb=16)
    done = default_sandbox().run(["python3", "-c", MANY_FILES], tmp_path, limits)
    assert not done.ok and done.stopped is not None and "wrote more than the workspace allows" in done.stopped
    assert "wrote everything" not in done.stdout
    assert written(tmp_path) < (16 + 64) << 20  # the bound plus at most what one watch interval lets through


def test_a_full_workspace_starts_nothing(tmp_path: Path) -> None:
    (tmp_path / "big.bin").write_bytes(b"x" * (3 << 20))
    done = default_sandbox().run(["python3", "-c", "open('more', 'w').write('x')"], tmp_path,
                                 Limits(workspace_mb=2))  # fmt: skip
    assert done.stopped is not None and done.stopped.startswith("not started") and not (tmp_path / "more").exists()


def test_tmp_is_a_bounded_tmpfs(tmp_path: Path) -> None:
    code = "open('/tmp/fill', 'wb').write(b'x' * (32 << 20))"
    done = default_sandbox().run(["python3", "-c", code], tmp_path, Limits(tmp_mb=8))
    assert done.returncode != 0 and "No space left" in done.stderr


def test_writes_within_the_bound_run_to_their_end(tmp_path: Path) -> None:
    done = default_sandbox().run(["python3", "-c", MANY_FILES.replace("range(40)", "range(2)")], tmp_path,
                                 Limits(written_mb=64))  # fmt: skip
    assert done.ok and "wrote everything" in done.stdout


INODES_AND_LINKS = """
import os
os.mkdir("l")
for i in range(20000):
    os.symlink("/" + "a" * 4000, f"l/{i}")
os.mkdir("d")
for i in range(20000):
    open(f"d/{i:0200d}", "w").close()
print("wrote everything")
"""


def test_links_directories_and_empty_files_count_toward_the_bound(tmp_path: Path) -> None:
    """The review's disk filler: long symbolic links and many empty files with long names take blocks and inodes
    that counting regular files' blocks never saw."""
    done = default_sandbox().run(["python3", "-c", INODES_AND_LINKS], tmp_path, Limits(timeout_s=60, written_mb=32))
    assert done.stopped is not None and "wrote everything" not in done.stdout
    assert sum(1 for _ in tmp_path.rglob("*")) < 20000  # killed well before the second half


def test_open_files_are_bounded(tmp_path: Path) -> None:
    code = "import tempfile\nfiles = [open(f'f{i}', 'w') for i in range(1000)]\nprint('opened all')"
    done = default_sandbox().run(["python3", "-c", code], tmp_path, Limits(open_files=64))
    assert "opened all" not in done.stdout and "Too many open files" in done.stderr
