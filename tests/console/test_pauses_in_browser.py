"""Two pauses at once, in a real browser: both cards are shown and each is decided on its own; the DAG is a graph
with the paused nodes marked; a decision on a pause that was decided meanwhile is refused with the reason; each
attempt has its own pane (attempt 2 running never shows attempt 1's text). Screenshots go to
test-artifacts/console/ (the docs and the README show them)."""

from __future__ import annotations

from playwright.sync_api import Browser, Page, expect

from ..runtime.conftest import Script, envelope
from .conftest import Console, shot

FAN_OUT = """
name: fan-out
agents:
  - id: writer_brief
    instructions: Write the brief.
  - id: writer_summary
    instructions: Summarise the brief in one line.
    depends_on: [writer_brief]
  - id: writer_slides
    instructions: Turn the brief into three slide titles.
    depends_on: [writer_brief]
"""
NULL = envelope("Nothing to write from. [STATUS: NULL]")


def test_two_pauses_are_both_visible_and_each_is_decided_on_its_own(
    page: Page, browser: Browser, console: Console, model: tuple[str, Script]
) -> None:
    url, script = model
    script.answers = {"writer_brief": [envelope("Storage grows 18% a year. [STATUS: SUCCESS]")],
                      "writer_summary": [NULL, envelope("Storage grows fast. [STATUS: SUCCESS]")],
                      "writer_slides": [NULL]}  # fmt: skip
    script.delays = {"writer_summary": [0, 4]}  # its second attempt takes a while: the page shows it running
    created = console.starter().post("/api/runs", json={"workflow": FAN_OUT, "model": f"openai-chat:m@{url}"})
    run_id = created.json()["run_id"]
    page.goto(f"{console.url}/runs/{run_id}")
    cards = page.locator(".card.approval")
    expect(cards).to_have_count(2, timeout=30_000)
    expect(page.locator("#open-pauses")).to_contain_text("2 open pauses")
    graph = page.locator("svg.graph")
    # the graph is redrawn from the run's events as they arrive, apart from the cards: on a loaded machine (CI's,
    # two test processes and a browser) it came after the cards by more than the default 5 s
    expect(graph.locator("a.node.paused")).to_have_count(2, timeout=30_000)
    expect(graph.locator("a.node.succeeded[data-agent=writer_brief]")).to_have_count(1)
    expect(graph.locator("path.edge")).to_have_count(2)
    expect(cards.first.locator("h2 svg.icon")).to_have_count(1)  # drawn, not a font glyph
    expect(page.locator(".pane[data-agent=writer_slides] .paused-because")).to_contain_text("Semantic null")
    shot(page, "run-two-pauses")

    page.goto(f"{console.url}/")  # the inbox lists both
    expect(page.locator("#inbox tbody tr")).to_have_count(2)
    shot(page, "inbox")
    page.goto(f"{console.url}/runs/{run_id}")

    stale = browser.new_context(java_script_enabled=False).new_page()  # a second operator's page, not refreshed
    stale.goto(f"{console.url}/login?token={console.token}&next=/runs/{run_id}")
    expect(stale.locator(".card.approval")).to_have_count(2)

    page.locator(".card.approval[data-agent=writer_slides] button.skip").click()
    expect(cards).to_have_count(1, timeout=30_000)
    expect(cards.first).to_have_attribute("data-agent", "writer_summary")  # the other pause is untouched
    expect(graph.locator("a.node.skipped[data-agent=writer_slides]")).to_have_count(1)

    stale.locator(".card.approval[data-agent=writer_slides] button.execute").click()
    expect(stale.locator("#notice")).to_contain_text("is no longer open: skip by operator:admin")

    page.locator(".card.approval[data-agent=writer_summary] button.execute").click()
    pane = page.locator(".pane[data-agent=writer_summary]")
    running = pane.locator("li.attempt[data-attempt='2']")
    expect(running.locator("p.in-progress")).to_be_visible(timeout=30_000)
    expect(running.locator("pre.surface")).to_have_count(0)  # never attempt 1's text under attempt 2
    expect(page.locator("#run-status")).to_have_text("completed", timeout=60_000)
    expect(running.locator("pre.surface")).to_have_text("Storage grows fast. [STATUS: SUCCESS]")
    first = pane.locator("li.attempt[data-attempt='1']")
    expect(first.locator("pre.surface")).to_have_text("Nothing to write from. [STATUS: NULL]")  # its own, collapsed
    expect(first.locator(".ended-by")).to_contain_text("decided: retry by operator:admin")
    first.locator("summary").first.click()
    shot(page, "run-attempts")
