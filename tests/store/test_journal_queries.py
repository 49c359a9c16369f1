"""The tool journal's statements, built once with bound parameters: a call's row is found by its exact scope,
position and digest; "in doubt" means an intent without a result under a scope prefix taken literally (an agent's
``_`` or a ``%`` in a scope is not a wildcard); a finished call is no longer in doubt and returns its result; a
call resumed after an operator resolved it is journaled again — in the caller's transaction when it gives one."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundstate.store import CallInDoubt, ToolJournal


def test_in_doubt_is_an_unfinished_intent_under_a_literal_prefix(tmp_path: Path) -> None:
    journal = ToolJournal(f"sqlite:///{tmp_path / 'j.db'}")
    assert journal.begin("run:r1/research_a/1", 1, "web_search", {"q": "x"}) is None
    assert journal.doubts("run:r1/research_a/", "web_search", {"q": "x"})
    assert not journal.doubts("run:r1/research_a/", "web_search", {"q": "y"})  # another call
    journal.begin("run:r1/researchXb/1", 2, "web_search", {"q": "z"})
    assert not journal.doubts("run:r1/research_b/", "web_search", {"q": "z"})  # '_' is not a wildcard
    assert not journal.doubts("run:r%/", "web_search", {"q": "x"})  # nor is '%'
    journal.finish("run:r1/research_a/1", 1, "web_search", {"q": "x"}, {"ok": True, "output": "found"})
    assert not journal.doubts("run:r1/research_a/", "web_search", {"q": "x"})
    assert journal.begin("run:r1/research_a/1", 1, "web_search", {"q": "x"}) == {"ok": True, "output": "found"}


def test_a_resolved_call_is_journaled_again_in_the_callers_transaction(tmp_path: Path) -> None:
    journal = ToolJournal(f"sqlite:///{tmp_path / 'j.db'}")
    journal.begin("mcp:git/", 7, "git_commit", {"message": "m"})
    with pytest.raises(CallInDoubt):
        journal.begin("mcp:git/", 7, "git_commit", {"message": "m"})
    assert journal.resolve("mcp:git/", "operator:ana", "approved", "git_commit", {"message": "m"}) == 1
    with journal.engine.begin() as db:
        assert journal.doubts("mcp:git/", "git_commit", {"message": "m"}, db=db) is False
        assert journal.begin("mcp:git/", 7, "git_commit", {"message": "m"}, db=db) is None
    assert journal.doubts("mcp:git/", "git_commit", {"message": "m"})  # running again: an intent once more
