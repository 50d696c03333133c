"""In Chromium: "You asked this before" shows a question asked three times once, and goes away
when the question is asked (a lookup still on its way does not bring it back)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone
from playwright.async_api import expect

from search.models import Entry, Thread
from tests.e2e.conftest import control
from tests.e2e.test_search_journey import linked_owner, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@sync_to_async
def asked_before(owner) -> None:
    for days in (1, 2, 3):
        thread = Thread.objects.create(user=owner, title="How do I feed a sourdough starter?")
        entry = Entry.objects.create(
            thread=thread, question="How do I feed a sourdough starter?", answer="Daily.", status="completed"
        )
        Entry.objects.filter(pk=entry.pk).update(created=timezone.now() - timedelta(days=days))


async def test_suggestions_are_labelled_once_each_and_gone_after_asking(
    page, pplxweb_server, fake_perplexity
):
    await asked_before(await linked_owner())
    control(fake_perplexity, ask={"answer": ["A starter wants flour and water daily."], "pace": 0.02})
    await sign_in(page, pplxweb_server)
    await page.wait_for_function("() => window.__wsOpen === true")
    suggestions = page.locator("#suggestions")
    await page.type("#id_q", "sourdough starter")
    await expect(suggestions.get_by_role("heading", name="You asked this before")).to_be_visible()
    await expect(suggestions.locator("li")).to_have_count(1)
    await expect(suggestions).to_contain_text("1\xa0day ago")  # the newest time it was asked
    await page.keyboard.press("Enter")
    await expect(suggestions).to_be_empty()
    await expect(page.locator("article.entry .answer")).to_contain_text("flour and water", timeout=15000)
    await page.wait_for_timeout(700)  # longer than the lookup's 300 ms delay
    await expect(suggestions).to_be_empty()
    # typing and asking at once: the lookup the typing set off does not come back after the asking
    await page.type("#id_q", "sourdough feeding", delay=20)
    await page.keyboard.press("Enter")
    await expect(page.locator("article.entry")).to_have_count(2, timeout=15000)
    await page.wait_for_timeout(700)
    await expect(suggestions).to_be_empty()
    assert page.console_errors == []
