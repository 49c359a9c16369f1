"""The console's refusals through its API, as a client meets them: the status of the error's kind and its stable
code beside the message (``errors.HTTP_STATUSES``), never a bare 500."""

from __future__ import annotations

import httpx

from .conftest import Console


def test_each_refusal_has_its_status_and_code(console: Console) -> None:
    with httpx.Client(base_url=console.url, timeout=30) as anonymous:
        missing = anonymous.get("/api/runs")
    assert (missing.status_code, missing.json()["code"]) == (401, "unauthenticated")
    assert missing.headers["www-authenticate"] == "Bearer"
    viewer = console.account("vera", "viewer")
    with console.api(viewer) as seeing:
        refused = seeing.post("/api/runs", json={"example": "research"})
    assert (refused.status_code, refused.json()["code"]) == (403, "forbidden")
    with console.api() as admin:
        unknown = admin.get("/api/runs/run-nope")
        example = admin.post("/api/runs", json={"example": "no-such-example"})
        empty = admin.post("/api/runs", json={})
        workflow = admin.post("/api/runs", json={"workflow": "name: x\nagents: []\n"})
        decision = admin.post("/api/runs/run-nope/decision", json={"pause": 1, "decision": "maybe"})
        taken = admin.post("/api/operators", json={"name": "vera", "role": "viewer"})
        badly = admin.post("/api/operators", json={"name": "Not A Name", "role": "viewer"})
        nobody = admin.patch("/api/operators/nobody", json={"role": "viewer"})
    assert (unknown.status_code, unknown.json()["code"]) == (404, "not_found")
    assert "run-nope" in unknown.json()["detail"]
    assert (example.status_code, example.json()["code"]) == (404, "not_found")
    assert (empty.status_code, empty.json()["code"]) == (400, "bad_input")
    assert (workflow.status_code, workflow.json()["code"]) == (422, "unusable")
    assert (decision.status_code, decision.json()["code"]) == (400, "bad_input")
    assert (taken.status_code, taken.json()["code"]) == (409, "state_conflict")
    assert (badly.status_code, badly.json()["code"]) == (400, "bad_input")
    assert (nobody.status_code, nobody.json()["code"]) == (404, "not_found")


def test_what_the_framework_refuses_has_a_code_too_and_numbers_out_of_range_are_no_500(console: Console) -> None:
    """Found by an attack: ``after`` or a call id of 2**63 were bare 500s (an overflow in SQLite), a negative
    ``after`` a 500 saying the store was damaged, an unknown call a 409, and the framework's own refusals (an unknown
    path, a method a route does not take, a malformed body) carried no ``code``."""
    with console.api() as admin:
        run = "run-nope"  # the numbers are refused before any run is looked up
        answers = {
            "huge after": admin.get(f"/api/runs/{run}/events", params={"after": 2**63}),
            "negative after": admin.get(f"/api/runs/{run}/events", params={"after": -5}),
            "huge call": admin.post(f"/api/mcp/calls/{2**63}/decision", json={"decision": "approve"}),
            "unknown call": admin.post("/api/mcp/calls/12345/decision", json={"decision": "approve"}),
            "unknown path": admin.get("/api/no-such-thing"),
            "wrong method": admin.put("/api/runs"),
            "malformed body": admin.post("/api/runs", content=b"{not json",
                                         headers={"content-type": "application/json"}),
        }
    codes = {name: (reply.status_code, reply.json().get("code")) for name, reply in answers.items()}
    assert codes == {
        "huge after": (422, "unusable"),
        "negative after": (422, "unusable"),
        "huge call": (422, "unusable"),
        "unknown call": (404, "not_found"),
        "unknown path": (404, "not_found"),
        "wrong method": (405, "method_not_allowed"),
        "malformed body": (422, "unusable"),
    }
    assert answers["huge after"].json()["detail"][0]["loc"] == ["query", "after"]  # FastAPI's list, as documented


def test_a_pause_number_that_is_no_ascii_number_or_too_long_is_bad_input_not_a_500(console: Console) -> None:
    """Found by an attack: the run page's form took '²' for a digit (str.isdigit) and 5000 digits for a number
    (past Python's 4300-digit limit): both were bare 500s with a traceback. The API's pause had no bound."""
    with console.api() as admin:
        form = {f"superscript {i}": admin.post("/runs/run-nope/decide", data={"pause": pause, "decision": "retry"})
                for i, pause in enumerate(["²", "٣", "9" * 5000])}  # fmt: skip
        huge = admin.post("/api/runs/run-nope/decision", json={"pause": 2**64, "decision": "retry"})
    assert {name: (reply.status_code, reply.json()["code"]) for name, reply in form.items()} == {
        name: (400, "bad_input") for name in form}
    assert (huge.status_code, huge.json()["code"]) == (422, "unusable")
