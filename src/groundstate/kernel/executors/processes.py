"""Executors that run programs: tests, the build, git, and model-written Python — all in the OS sandbox.

Nothing here isolates anything itself: every program goes through ``groundstate.sandbox`` (bubblewrap namespaces,
rlimits, a pids cgroup, the process tree killed at the deadline). Where no sandbox works the executor refuses with
the sandbox's message. Test targets are validated workspace paths passed after ``--``, so a target can never be
read as an option (``--basetemp=/elsewhere``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...errors import ExecutorError
from ...sandbox import Completed, Limits, SandboxError
from .base import Action, Context, Outcome

MAX_CODE_CHARS = 100_000
# Every key git reads from the repository's own configuration must be on this list: the others (filters,
# textconv, fsmonitor, hooks, pagers, editors, credential helpers, aliases, includes, …) can run commands.
_SAFE_GIT_KEYS = re.compile(
    r"(core\.(repositoryformatversion|filemode|bare|logallrefupdates|ignorecase|precomposeunicode|autocrlf"
    r"|safecrlf|eol|symlinks|quotepath|compression|abbrev)"
    r"|user\.(name|email)|init\.defaultbranch|extensions\.[a-z0-9]+|gc\.[a-z]+|i18n\.[a-z]+"
    r"|branch\.[^=]+\.(remote|merge)|remote\.[^=]+\.(url|fetch))"
)
_GIT_OVERRIDES = ("core.hooksPath=/dev/null", "core.fsmonitor=false", "core.pager=cat", "core.editor=false",
                  "core.askPass=", "core.sshCommand=false", "diff.external=", "commit.gpgSign=false",
                  "tag.gpgSign=false", "protocol.allow=never", "user.name=groundstate",
                  "user.email=groundstate@localhost")  # fmt: skip
_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat", "GIT_EDITOR": "false"}  # fmt: skip


def run_tests(action: Action, context: Context) -> Outcome:
    targets: list[str] = []
    if action.target and action.target != "codebase":
        kind = context.workspace.kind(action.target)
        if kind not in ("file", "directory"):
            raise ExecutorError(f"the test target {action.target!r} is not a file or directory in the workspace")
        targets = ["--", "/".join(context.workspace.parts(action.target))]
    return _outcome(_run([*context.test_command, *targets], context), context)


def build_project(action: Action, context: Context) -> Outcome:
    return _outcome(_run(list(context.build_command), context), context)


def execute_python(action: Action, context: Context) -> Outcome:
    code = action.text_field("code") if action.payload.strip().startswith("{") else action.payload
    if not code.strip():
        raise ExecutorError("execute_python needs code in its payload")
    if len(code) > MAX_CODE_CHARS:
        raise ExecutorError(f"the code has {len(code)} characters; at most {MAX_CODE_CHARS} are run")
    return _outcome(_run(["python", "-I", "-"], context, stdin=code), context)


def git(arguments: Sequence[str], context: Context) -> Outcome:
    """git in the sandbox, with every command-running configuration refused or overridden."""
    # every scope git itself will read (system and global are off): .git/config and, with
    # extensions.worktreeConfig, .git/config.worktree — a filter set there runs as surely as one in .git/config
    listed = _run(["git", "config", "--list", "--name-only"], context, git=True)
    if listed.ok:
        unsafe = sorted({k for k in listed.stdout.lower().split() if not _SAFE_GIT_KEYS.fullmatch(k)})
        if unsafe:
            raise ExecutorError(
                "the repository's configuration (.git/config) sets " + ", ".join(unsafe[:5])
                + "; groundstate does not run git on a repository whose configuration can run commands"
            )  # fmt: skip
    overrides = [part for item in _GIT_OVERRIDES for part in ("-c", item)]
    return _outcome(_run(["git", "--no-pager", *overrides, *arguments], context, git=True), context)


def _run(command: list[str], context: Context, *, stdin: str | None = None, git: bool = False) -> Completed:
    limits = Limits(timeout_s=context.timeout_s, memory_mb=context.memory_mb, total_memory_mb=context.total_memory_mb,
                    output_chars=context.max_output_chars)  # fmt: skip
    try:
        return context.sandbox().run(command, context.workspace.root, limits, stdin=stdin, writable_git=git,
                                     env=_GIT_ENV if git else None)  # fmt: skip
    except SandboxError as exc:
        raise ExecutorError(str(exc)) from None


def _outcome(done: Completed, context: Context) -> Outcome:
    if done.timed_out:
        killed = f"\n[did not finish within {context.timeout_s:g} s; every process it started was killed]"
        return Outcome(False, context.bounded(f"{done.stdout}{done.stderr}{killed}"))
    output = done.stdout + (("\n" if done.stdout else "") + done.stderr if done.stderr else "")
    if done.stopped is not None:
        return Outcome(False, context.bounded(f"{output}\n[{done.stopped}]"))
    status = "" if done.returncode == 0 else f"\n[exit status {done.returncode}]"
    return Outcome(done.returncode == 0, context.bounded(output + status))
