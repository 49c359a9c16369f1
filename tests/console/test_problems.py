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
