"""The box knows what is running (static/live.js), in Chromium at desktop and phone size.

While an answer arrives the box's button is Stop and a question typed meanwhile is not asked (a
sentence says so, the text stays); with a deep research run's clarifying question waiting, Enter
answers it instead of asking a new research question; a countdown that ends while the person
types leaves the text in the box, unsent, with a sentence. Scrolled up from an answer that is
still arriving, "Answer still arriving ↓" jumps back to it and follows it again.
"""

from __future__ import annotations

import json

import pytest
from playwright.async_api import expect

from search.models import Entry
from tests.e2e.conftest import control, seen
from tests.e2e.test_outage_journey import SIZES, Server
from tests.e2e.test_search_journey import linked_owner, sign_in
from tests.fake_perplexity import streams_2026 as s26

pytestmark = pytest.mark.django_db(transaction=True)
BUSY = "An answer is still arriving"


async def signed_in(page, base: str) -> None:
    await linked_owner()
    await sign_in(page, base)
    await page.wait_for_function("() => window.__wsOpen === true")


async def ask(page, question: str) -> None:
    await page.fill("#id_q", question)
    await page.keyboard.press("Enter")


def answers_sent(fake: str) -> list[dict]:
    return [json.loads(r["body"]) for r in seen(fake) if r["path"].endswith("clarifying_answers")]


def research(question: dict, wait: float) -> dict:
    return {"stream": "research", "report_kb": 2, "replaces": 20, "pace": 0.05,
            "question": [question], "question_wait": wait}  # fmt: skip


@SIZES
async def test_while_an_answer_runs_the_box_is_stop_and_a_new_question_waits(
    page, pplxweb_server, fake_perplexity
):
    await signed_in(page, pplxweb_server)
    control(fake_perplexity, ask={"answer": [f"part{i} " for i in range(300)], "pace": 0.05}, requests=[])
    await ask(page, "the first question")
    entry = page.locator("article.entry").first
    await expect(entry.locator(".answer")).to_contain_text("part2", timeout=15000)
    stop, ask_button = (
        page.locator("#search-form button.stop-answer"),
        page.locator("#search-form button.ask"),
    )
    await expect(stop).to_be_visible()
    await expect(ask_button).to_be_hidden()

    for _ in range(3):
        await ask(page, "asked while it runs")
    await expect(page.locator("#search-error")).to_contain_text(BUSY)
    await expect(page.locator("#id_q")).to_have_value("asked while it runs")
    assert await Entry.objects.acount() == 1

    await stop.click()
    await expect(entry.locator(".status-stopped")).to_be_visible(timeout=10000)
    await expect(ask_button).to_be_visible()
    await expect(stop).to_be_hidden()
    await expect(page.locator("#search-error")).to_be_empty()  # what it said no longer holds
    control(fake_perplexity, ask={"answer": ["Asked once."], "pace": 0.01})
    await page.keyboard.press("Enter")
    await expect(page.locator("article.entry").nth(1).locator(".status-completed")).to_be_visible(
        timeout=15000
    )
    assert await Entry.objects.filter(question="asked while it runs").acount() == 1
    assert page.console_errors == []


@SIZES
async def test_enter_answers_a_waiting_clarifying_question(page, pplxweb_server, fake_perplexity):
    await signed_in(page, pplxweb_server)
    control(fake_perplexity, ask=research(s26.QUESTION, wait=30), requests=[])
    await page.select_option("#id_mode", "research")
    await ask(page, "Compare weather nowcasting APIs")
    entry = page.locator("article.entry").first
    await expect(entry.locator(".clarify-form")).to_be_visible(timeout=15000)
    answer_button = page.locator("#search-form button.ask")
    await expect(answer_button).to_have_text("Answer")
    await expect(page.locator("#id_q")).to_have_attribute(
        "placeholder", "Answer Perplexity's question above…"
    )

    await ask(page, "Europe, mostly the Alps")
    await expect(entry.locator(".clarify-form")).to_have_count(0, timeout=10000)
    await expect(page.locator("#id_q")).to_have_value("")
    sent = answers_sent(fake_perplexity)
    assert [a["answer"] for a in sent[-1]["result"]["answers"]] == ["Europe, mostly the Alps"]
    assert await Entry.objects.acount() == 1  # no second research run
    await expect(page.locator("#search-form button.stop-answer")).to_be_visible()
    await expect(entry.locator(".status-completed")).to_be_visible(timeout=30000)
    await expect(answer_button).to_have_text("Ask")
    assert page.console_errors == []


@SIZES
async def test_a_countdown_that_ends_while_typing_sends_nothing(page, pplxweb_server, fake_perplexity):
    await signed_in(page, pplxweb_server)
    question = {**s26.QUESTION, "auto_skip_seconds": 3}
    control(fake_perplexity, ask=research(question, wait=3), requests=[])
    await page.select_option("#id_mode", "research")
    await ask(page, "Compare weather nowcasting APIs")
    entry = page.locator("article.entry").first
    await expect(entry.locator(".countdown")).to_be_visible(timeout=15000)
    await page.locator("#id_q").type("Asia and")  # not finished when the countdown ends
    await expect(entry.locator(".clarify-ended")).to_be_visible(timeout=10000)
    await expect(page.locator("#search-error")).to_contain_text("went on without an answer")
    await page.locator("#id_q").type(" Oceania")
    await page.keyboard.press("Enter")
    await expect(page.locator("#search-error")).to_contain_text(BUSY)
    await expect(page.locator("#id_q")).to_have_value("Asia and Oceania")
    await expect(entry.locator(".status-completed")).to_be_visible(timeout=30000)
    assert answers_sent(fake_perplexity) == [] and await Entry.objects.acount() == 1
    assert page.console_errors == []


@SIZES
async def test_answer_still_arriving_below_jumps_back_and_follows(page, fake_perplexity, tmp_path):
    server = Server(fake_perplexity, tmp_path)
    server.start()  # a long answer may take a minute there
    try:
        await still_arriving(page, server.base, fake_perplexity)
    finally:
        server.stop()
    assert "Traceback" not in server.logs()


async def still_arriving(page, base: str, fake_perplexity: str) -> None:
    await signed_in(page, base)
    answer = [f"Sentence {i} of a long answer.\n\n" for i in range(200)]
    control(fake_perplexity, ask={"answer": answer, "pace": 0.03}, requests=[])
    await ask(page, "a long answer")
    entry = page.locator("article.entry").first
    await expect(entry.locator(".answer")).to_contain_text("Sentence 40", timeout=20000)
    await page.mouse.wheel(0, -5000)  # the person scrolls up
    pill = page.locator("#still-arriving")
    await expect(pill).to_be_visible()
    await pill.click()
    await expect(pill).to_be_hidden()
    # following again: the newest text stays in view as it arrives
    await expect(entry.locator(".answer")).to_contain_text("Sentence 100", timeout=20000)
    newest = entry.locator(".answer p").last
    await expect(newest).to_be_in_viewport()
    await expect(pill).to_be_hidden()
    await expect(entry.locator(".status-completed")).to_be_visible(timeout=30000)
    await expect(pill).to_be_hidden()
    assert page.console_errors == []
