"""Workflow files are validated with errors that say what is wrong and where."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundstate.runtime import WorkflowError, load_workflow, parse_workflow

GOOD = """
name: brief
agents:
  - id: research_a
    instructions: find it
    tools: [web_search]
  - id: writer_b
    instructions: write it
    depends_on: [research_a]
"""


def test_a_valid_workflow_and_its_order() -> None:
    workflow = parse_workflow(GOOD)
    role = workflow.role("research_a")
    assert workflow.order() == ["research_a", "writer_b"] and role is not None and role.prefix == "research_"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\nagents: [\n", "line 3, column 1: not valid YAML"),
        ("- a\n- b\n", "a workflow is a mapping"),
        ("name: x\nagents: []\n", "agents: List should have at least 1 item"),
        (GOOD.replace("depends_on: [research_a]", "depends_on: [research_z]"),
         "agent 'writer_b': depends_on 'research_z', which is not an agent of the workflow"),
        (GOOD.replace("tools: [web_search]", "tools: [web_search, teleport]"), "unknown tool 'teleport'"),
        (GOOD.replace("tools: [web_search]", "tools: []"), "the research_ role needs the tool 'web_search'"),
        (GOOD.replace("id: writer_b", "id: poet_b"), "agent 'poet_b': its id must start with a role prefix"),
        (GOOD.replace("id: writer_b", "id: research_a"), "agent 'research_a' is defined more than once"),
        (GOOD.replace("instructions: find it", "instructions: find it\n    depends_on: [writer_b]"),
         "cycle: research_a -> writer_b -> research_a"),
        (GOOD.replace("instructions: write it", "instruction: write it"), "agent 'writer_b'"),
    ],
)  # fmt: skip
def test_problems_are_reported_clearly(text: str, message: str) -> None:
    with pytest.raises(WorkflowError) as info:
        parse_workflow(text, "flow.yaml")
    assert message in str(info.value) and str(info.value).startswith("flow.yaml: ")


def test_the_bundled_examples_are_valid() -> None:
    root = Path(__file__).parents[2]
    found = [*root.glob("examples/*.yaml"), *root.glob("src/groundstate/runtime/examples/*.yaml")]
    assert len(found) >= 2
    for path in found:
        load_workflow(path)
