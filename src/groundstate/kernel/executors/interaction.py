"""Actions carried out by people or by the runtime: recorded as facts, not executed here."""

from __future__ import annotations

from ...errors import ExecutorError
from ...logic import Name
from .base import Action, Context, Outcome


def ask_user(action: Action, context: Context) -> Outcome:
    question = action.fields().get("text") or action.fields().get("question") or ""
    if not isinstance(question, str) or not question.strip():
        raise ExecutorError("ask_user needs the question as its payload")
    question = context.bounded(question)
    return Outcome(True, question, [("user_question", (Name(action.action_id), question))])


def delegate(action: Action, context: Context) -> Outcome:
    """``delegate_coder`` / ``_reviewer`` / ``_researcher``: the runtime picks these up from delegation/3."""
    role = action.type.removeprefix("delegate_")
    task = action.fields().get("text") or action.fields().get("task") or action.target
    if not isinstance(task, str) or not task.strip():
        raise ExecutorError(f"{action.type} needs a task (payload) or a target")
    task = context.bounded(task)
    fact = ("delegation", (Name(action.action_id), Name.of(role), task))
    return Outcome(True, f"delegated to the {role}: {task}", [fact])
