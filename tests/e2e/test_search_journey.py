"""In Chromium: a question's progress, sources and answer arrive over the websocket."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import expect

from accounts.models import PerplexityAccount
from search.models import Entry
from tests.conftest import PASSWORD
from tests.e2e.conftest import control, seen
from tests.fake_perplexity.app import TOKEN

pytestmark = pytest.mark.django_db(transaction=True)


@sync_to_async
def linked_owner():
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.create_superuser(username="alice", password=PASSWORD)
    PerplexityAccount.objects.create(
        user=owner,
        email="fake@example.com",
        tier="pro",
        session=json.dumps({"cookies": {"__Secure-next-auth.session-token": TOKEN}}),
    )
    return owner


async def sign_in(page, base: str) -> None:
    await page.goto(f"{base}/accounts/login/")
    await page.fill("#id_username", "alice")
    await page.fill("#id_password", PASSWORD)
    await page.click("button[type=submit]")
    await expect(page.locator("#id_q")).to_be_visible()


@pytest.mark.journey  # also on PostgreSQL + Redis (tests/run.sh)
async def test_a_question_streams_into_the_page(page, pplxweb_server, fake_perplexity):
    await linked_owner()
    answer = [f"Sentence {i} about Paris [1]. " + ("\n\n" if i % 4 == 3 else "") for i in range(24)]
    control(fake_perplexity, ask={"answer": answer, "pace": 0.04}, requests=[])
    await sign_in(page, pplxweb_server)
    await page.wait_for_function("() => window.__wsOpen === true")
    await page.fill("#id_q", "Tell me about Paris")
    await page.keyboard.press("Enter")
    entry = page.locator("article.entry").first
    await expect(entry.locator(".status-running")).to_be_visible(timeout=2000)  # started at once
    await expect(entry.locator(".steps")).to_contain_text("capital of France")  # progress
    await expect(entry.locator(".sources-box")).to_contain_text("Paris - Wikipedia")  # sources
    await expect(entry.locator(".answer")).to_contain_text("Sentence 3 about Paris")  # text arriving
    assert await entry.locator(".status-running").count() == 1  # still streaming
    await expect(entry.locator(".status-completed")).to_be_visible(timeout=15000)
    await expect(entry.locator(".answer")).to_contain_text("Sentence 23 about Paris")
    await expect(entry.locator(".answer a.cite").first).to_have_attribute(
        "href", "https://en.wikipedia.org/wiki/Paris"
    )
    await expect(entry.locator(".related")).to_contain_text("What is the population of Paris?")
    assert "/thread/" in page.url
    saved = await Entry.objects.aget()
    assert saved.status == "completed" and saved.answer == "".join(answer)
    sent = [r for r in seen(fake_perplexity) if r["path"] == "/rest/sse/perplexity_ask"][-1]
    assert "authorization" not in sent["headers"] and TOKEN in sent["headers"]["cookie"]
    assert page.console_errors == []
