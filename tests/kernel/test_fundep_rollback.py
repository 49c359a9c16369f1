"""A policy of yours that breaks a decision the shipped policy declares single (``current_ooda_phase``'s
``fundep([], [Phase])``) is refused by the engine at the transaction that would break it; the kernel rolls the
transaction back and keeps answering as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundstate.kernel import Kernel
from groundstate.logic import FunctionalDependencyError, Name


def test_a_second_phase_is_refused_and_the_transaction_rolled_back(tmp_path: Path) -> None:
    policy = tmp_path / "second_phase.mg"
    policy.write_text("current_ooda_phase(/act) :- task_status(/urgent, _).\n")
    kernel = Kernel(tmp_path, extra_sources=[policy])
    assert kernel.phase() == "/observe"
    with pytest.raises(FunctionalDependencyError) as refused:
        kernel.assert_facts("task_status", (Name("/urgent"), Name("/pending")))
    assert "current_ooda_phase breaks its fundep([], [Phase])" in str(refused.value)
    assert "policy.mg:" in str(refused.value)  # positioned at the shipped Decl that declares it
    assert kernel.phase() == "/observe" and kernel.query("task_status(T, S)") == []
