"""A Deep Research run in Chromium (docs/protocol.md §8.4): Perplexity asks a clarifying question,
which is answered in the page; the report is shown while it grows and on the saved page, goes
into the Markdown export, and history search finds words that are only in the report."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from playwright.async_api import expect

from search.models import Entry
from tests.e2e.conftest import ARTIFACTS, control, seen
from tests.e2e.test_journeys import ask, first_run, link
from tests.fake_perplexity import streams_2026 as s26

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.journey  # also on PostgreSQL + Redis (tests/run.sh)
async def test_a_deep_research_run_with_a_clarifying_question(page, pplxweb_server, fake_perplexity):
    base = pplxweb_server
    await first_run(page, base, "researcher")
    await link(page, base)
    control(
        fake_perplexity,
        ask={
            "stream": "research",
            "report_kb": 15,
            "replaces": 150,
            "pace": 0.02,
            "question": True,
            "question_wait": 20,
        },
    )
    await page.goto(f"{base}/")
    await page.click("details.options summary")
    await page.select_option("#id_mode", "research")
    await ask(page, "Compare weather nowcasting APIs")
    entry = page.locator("article.entry").first
    # the question, answered in the page
    form = entry.locator(".clarify-form")
    await expect(entry.locator(".clarify")).to_contain_text(
        "Which region matters most to you?", timeout=15000
    )
    await expect(entry.locator(".countdown")).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / "research-clarify.png"))
    await form.locator("label", has_text="Europe").click()
    await form.locator("button[type=submit]").click()
    await expect(entry.locator(".clarify-form")).to_have_count(0, timeout=10000)
    # the page says it answered at once; the answers reach Perplexity a moment later
    for _ in range(50):
        answered = [r for r in seen(fake_perplexity) if r["path"].endswith("clarifying_answers")]
        if answered:
            break
        await asyncio.sleep(0.1)
    assert json.loads(answered[-1]["body"])["result"]["answers"][0]["answer"] == "Europe"
    # what was asked and answered stays, folded under the question
    await expect(entry.locator("details.clarified summary")).to_contain_text("before researching · answered")
    # the report grows in the page before the run is done
    report = entry.locator("[id$='-report']")
    await expect(report).to_contain_text("Executive Summary", timeout=15000)
    assert await entry.locator(".status-completed").count() == 0
    await expect(entry.locator(".status-completed")).to_be_visible(timeout=30000)
    await expect(entry.locator("[id$='-answer']")).to_contain_text("compiled a report")
    await expect(entry.locator("[id$='-answer']")).not_to_contain_text(
        "Open-Meteo offers free nowcasts"
    )  # Insights
    saved = await Entry.objects.aget(question="Compare weather nowcasting APIs")
    assert saved.report == s26.report_text(15_000)
    # the saved page
    await page.goto(f"{base}/thread/{saved.thread_id}/")
    report = page.locator(f"#entry-{saved.pk}-report")
    await expect(report).to_contain_text("Weather nowcasting APIs compared")
    await expect(report).to_contain_text("Section 3: findings")
    await page.locator("details.clarified summary").click()
    await expect(page.locator("details.clarified dd").first).to_contain_text("Europe")
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / "research-saved.png"), full_page=False)
    # the Markdown export has it
    async with page.expect_download() as download_info:
        await page.click("text=Markdown")
    text = Path(await (await download_info.value).path()).read_text()
    assert "### Research report" in text and "#### Weather nowcasting APIs compared" in text
    assert "Radar-based nowcasts extrapolate echoes" in text
    # history search finds words that are only in the report
    await page.goto(f"{base}/history/?q=extrapolate+echoes")
    await expect(page.locator("ol.history")).to_contain_text("Compare weather nowcasting APIs")
    assert re.search(r"\d", await page.locator("ol.history").inner_text())
    control(fake_perplexity, ask={})
    assert page.console_errors == []
