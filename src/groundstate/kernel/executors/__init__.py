"""The virtual store's executors, by the names ``route/2`` facts use (without the leading ``/``)."""

from ... import tools
from ...errors import ExecutorError
from .base import Action, Context, Executor, Outcome
from .files import delete_file, edit_file, list_files, read_file, write_file
from .interaction import ask_user, delegate
from .processes import build_project, execute_python, run_tests
from .python_tools import run_python_tool
from .search import search_code, search_files
from .vcs import git_commit, git_diff, git_log, git_status
from .web import web_search

EXECUTORS: dict[str, Executor] = {
    "read_file": read_file,
    "write_file": write_file,
    "edit_file": edit_file,
    "delete_file": delete_file,
    "list_files": list_files,
    "search_code": search_code,
    "search_files": search_files,
    "git_status": git_status,
    "git_diff": git_diff,
    "git_log": git_log,
    "git_commit": git_commit,
    "run_tests": run_tests,
    "build_project": build_project,
    "execute_python": execute_python,
    "ask_user": ask_user,
    "delegate": delegate,
    "web_search": web_search,
    "python_tool": run_python_tool,
}

tools.RESERVED.update(EXECUTORS)  # a Python tool cannot take a built-in action's name

__all__ = ["EXECUTORS", "Action", "Context", "Executor", "ExecutorError", "Outcome"]
