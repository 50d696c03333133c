"""In Chromium: forms that arrive over the socket work ("Ask again" under an answer that just
streamed in was a 403: rendered without a request, its CSRF token was empty)."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from search.models import Entry
from tests.e2e.conftest import control
from tests.e2e.test_search_journey import linked_owner, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


async def test_ask_again_on_an_answer_that_just_streamed_in(page, pplxweb_server, fake_perplexity):
    await linked_owner()
    control(fake_perplexity, ask={"answer": ["A short answer."], "pace": 0.01}, requests=[])
    await sign_in(page, pplxweb_server)
    await page.wait_for_function("() => window.__wsOpen === true")
    await page.fill("#id_q", "Ask me twice")
    await page.keyboard.press("Enter")
    entry = page.locator("article.entry").first
    await expect(entry.locator(".status-completed")).to_be_visible(timeout=15000)
    first_thread = page.url
    async with page.expect_navigation():
        await entry.get_by_role("button", name="Ask again").click()
    assert page.url != first_thread and "/thread/" in page.url
    await expect(page.locator("article.entry .answer")).to_contain_text("A short answer.", timeout=15000)
    questions = [e.question async for e in Entry.objects.order_by("pk")]
    assert questions == ["Ask me twice", "Ask me twice"]
    assert page.console_errors == []
