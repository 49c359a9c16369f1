"""The operator's flows in a real browser: the seed's recovery flow on the local model, skip and abort, escaping of
model output, and the two kinds of approval card. Screenshots of each page go to test-artifacts/console/."""

from __future__ import annotations

import json
import time

from playwright.sync_api import Page, Route, expect

from ..runtime.conftest import Script, envelope
from ..runtime.test_configuration import with_usage
from ..runtime.test_guards import FLOW as BRANCH
from .conftest import Console, shot, sign_in

# Playwright's default of 5 s per expectation judged the machine, not the console: on a loaded CI runner a page's
# reload alone took longer. Each expectation still fails, with what it saw, when the page never shows what it must.
expect.set_options(timeout=30_000)


def start(console: Console, workflow: str, model: str) -> str:
    response = console.starter().post("/api/runs", json={"workflow": workflow, "model": model})
    assert response.status_code == 201, response.text
    return str(response.json()["run_id"])


def test_recovery_flow_in_the_browser_on_the_local_model(page: Page, console: Console) -> None:
    shot(page, "runs-empty")
    page.select_option("select[name=example]", "market-brief")
    page.click("text=Start a run")
    card = page.locator(".card.approval")
    expect(card).to_be_visible(timeout=120_000)  # the page follows the run live
    expect(card).to_have_attribute("data-category", "quality")
    expect(card.locator(".reason").first).to_contain_text(
        "Protocol violation: agent 'research_market' did not execute /web_search"
    )
    expect(card.locator(".agent")).to_contain_text("research_market")
    expect(card.locator(".hint")).to_contain_text("Name web_search in the instructions")
    shot(page, "run-paused")
    run_id = page.url.rsplit("/", 1)[1]

    page.click(f"a[href='/runs/{run_id}/kernel']")
    expect(page.locator(".why").first).to_contain_text("mandatory_tool(/research_, /web_search)")
    expect(page.locator(".why").first).to_contain_text("!tool_executed(")
    expect(page.locator("code.digest")).to_contain_text("sha256:")  # the policy the run is pinned to
    expect(page.locator("#pinned-limits")).to_contain_text('"max_execution_time_sec"')  # and its limits
    shot(page, "kernel")
    page.go_back()

    sign_in(page, console, "dana", "operator")  # the decision is the signed-in account's
    page.goto(f"{console.url}/runs/{run_id}")
    page.fill(".card.approval .instructions", "Use web_search to find the 2025 market size for home battery storage.")
    page.click("button.execute")
    expect(page.locator("#run-status")).to_have_text("completed", timeout=180_000)
    expect(page.locator(".card.approval")).to_have_count(0)
    expect(page.locator(".node.succeeded")).to_have_count(3)
    expect(page.locator(".pane[data-agent=research_market] details.tool").first).to_contain_text("web_search")
    shot(page, "run-completed")

    events = console.api().get(f"/api/runs/{run_id}/events").json()
    decided = next(e for e in events if e["type"] == "ApprovalDecided")
    assert decided["actor"] == "operator:dana" and decided["payload"]["decision"] == "retry"
    assert decided["payload"]["instructions"].startswith("Use web_search")
    page.goto(f"{console.url}/")
    expect(page.locator("table.runs")).to_contain_text("completed")
    shot(page, "runs")


def test_skip_then_abort(page: Page, console: Console, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"research_a": [envelope("Nothing. [STATUS: NULL]")], "writer_b": [envelope("x")]}
    run_id = start(console, BRANCH, f"openai-chat:scripted@{url}")
    approvals = []
    for _ in range(100):
        approvals = console.api().get("/api/approvals").json()
        if approvals:
            break
        time.sleep(0.1)
    assert [(a["run_id"], a["agent"], a["category"]) for a in approvals] == [(run_id, "research_a", "quality")]
    page.goto(f"{console.url}/runs/{run_id}")
    expect(page.locator(".card.approval .reason").first).to_contain_text("agent 'research_a'", timeout=30_000)
    page.click("button.skip")
    expect(page.locator(".card.approval .reason").first).to_contain_text("Context drought: agent 'writer_b'",
                                                                  timeout=30_000)  # fmt: skip
    expect(page.locator(".node.skipped")).to_have_count(1)
    page.click("button.abort")
    expect(page.locator("#run-status")).to_have_text("aborted", timeout=30_000)
    assert not any(agent == "writer_b" for agent, _ in script.requests)


def test_model_output_is_shown_as_text(page: Page, console: Console, model: tuple[str, Script]) -> None:
    url, script = model
    hostile = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"><b>bold</b> [STATUS: NULL]'
    script.answers = {"research_a": [envelope(hostile, reasoning_trace="<i>thinking</i> hard")]}
    run_id = start(console, BRANCH, f"openai-chat:scripted@{url}")
    page.goto(f"{console.url}/runs/{run_id}")
    surface = page.locator(".pane[data-agent=research_a] pre.surface")
    expect(surface).to_have_text(hostile, timeout=30_000)
    assert page.evaluate("window.pwned") is None
    assert page.locator(".pane b").count() == 0 and page.locator(".pane img").count() == 0
    thinking = page.locator(".pane[data-agent=research_a] details.thinking")
    expect(thinking).not_to_have_attribute("open", "")  # collapsed
    expect(thinking.locator("pre")).to_contain_text("<i>thinking</i> hard")  # as text, though collapsed
    page.reload()  # the server-rendered page escapes too, not only the live updates
    expect(surface).to_have_text(hostile)
    assert page.evaluate("window.pwned") is None and page.locator(".pane i").count() == 0


DANGER = """
name: dangerous
agents:
  - id: coder_x
    instructions: Clean up.
    tools: [execute_python, delete_file]
"""


def test_safety_and_quality_cards_look_different(page: Page, console: Console, model: tuple[str, Script]) -> None:
    url, script = model
    script.answers = {"coder_x": [envelope("x", [{"tool": "delete_file", "argument": "keep.txt"}])],
                      "research_a": [envelope("From memory. [STATUS: SUCCESS]")]}  # fmt: skip
    safety_run = start(console, DANGER, f"openai-chat:scripted@{url}")
    page.goto(f"{console.url}/runs/{safety_run}")
    card = page.locator(".card.approval")
    expect(card).to_have_attribute("data-category", "safety", timeout=30_000)
    expect(card.locator("h2")).to_contain_text("Safety pause")
    expect(card.locator(".reason").first).to_have_text("The agent asked to delete a file.")
    safety_border = card.evaluate("e => getComputedStyle(e).borderColor")
    shot(page, "run-safety-pause")

    quality_run = start(console, BRANCH, f"openai-chat:scripted@{url}")
    page.goto(f"{console.url}/runs/{quality_run}")
    expect(card).to_have_attribute("data-category", "quality", timeout=30_000)
    expect(card.locator("h2")).to_contain_text("Quality pause")
    assert card.evaluate("e => getComputedStyle(e).borderColor") != safety_border
    why = console.api().get(f"/api/runs/{safety_run}/why").json()
    assert json.dumps(why).count("tool_call(") >= 1


def test_the_run_page_and_the_api_show_what_the_run_spent(
    page: Page, console: Console, model: tuple[str, Script]
) -> None:
    url, script = model
    script.answers = {"research_a": [with_usage(envelope("Nothing. [STATUS: NULL]"), 300, 200)],
                      "writer_b": [envelope("x")]}  # fmt: skip
    run_id = start(console, BRANCH, f"openai-chat:scripted@{url}")
    page.goto(f"{console.url}/runs/{run_id}")
    expect(page.locator("#run-usage")).to_contain_text("usage: 300 tokens in, 200 out", timeout=30_000)
    usage = console.api().get(f"/api/runs/{run_id}").json()["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (300, 200) and usage["running_seconds"] >= 0


def test_a_refresh_that_read_the_run_before_its_last_events_is_followed_by_another(
    page: Page, console: Console, model: tuple[str, Script]
) -> None:
    """The race CI met: the page's refresh was in flight when the run's last events came, those events' refreshes
    were dropped, and the page kept what the refresh had read before them. Here the first refresh is answered with
    the run as it was at the start, only once the run has ended; the page must still come to show the end."""
    url, script = model
    script.answers = {"research_a": [with_usage(envelope("Nothing. [STATUS: NULL]"), 300, 200)],
                      "writer_b": [envelope("x")]}  # fmt: skip
    script.delays = {"research_a": 1.5}
    run_id = start(console, BRANCH, f"openai-chat:scripted@{url}")
    page.goto(f"{console.url}/runs/{run_id}")
    early = page.request.get(f"{console.url}/runs/{run_id}?fragment=1").text()
    assert "300 tokens in" not in early
    held: list[str] = []

    def hold_the_first(route: Route) -> None:
        if held:
            route.continue_()
            return
        held.append(route.request.url)
        deadline = time.monotonic() + 30
        while console.api().get(f"/api/runs/{run_id}").json()["status"] in {"pending", "running"}:
            assert time.monotonic() < deadline, "the run did not end"
            time.sleep(0.1)
        route.fulfill(status=200, content_type="text/html", body=early)

    page.route(f"**/runs/{run_id}?fragment=1", hold_the_first)
    expect(page.locator("#run-usage")).to_contain_text("usage: 300 tokens in, 200 out", timeout=30_000)
    assert held, "no refresh was made while the run went on"
