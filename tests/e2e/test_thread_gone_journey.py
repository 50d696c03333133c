"""In Chromium, desktop and phone: a conversation outlives Perplexity's thread (search/live/upstream.py).
A follow-up the fake refuses because the thread is gone (expired, in each form the fake answers),
and one after the thread's expiry_time, are answered in the same conversation from a new
Perplexity thread carrying the earlier turns, with one quiet line; the next follow-up goes on from
the new thread. Screenshots of the quiet line, light and dark, go to test-artifacts/."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from accounts.models import PerplexityAccount
from search.models import Entry, Thread
from tests.e2e.conftest import control
from tests.e2e.test_journeys import PHONE
from tests.e2e.test_redo_journey import DESKTOP, ask, asks, shoot
from tests.e2e.test_search_journey import linked_owner, sign_in

pytestmark = pytest.mark.django_db(transaction=True)
QUIET = "asked in a new one with the earlier questions."


@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", [DESKTOP, PHONE], indirect=True, ids=["desktop", "phone"])
async def test_follow_ups_outlive_a_gone_thread(page, pplxweb_server, fake_perplexity):
    base = fake_perplexity
    await linked_owner()
    control(base, ask={"answer": ["Sourdough is bread from a wild starter [1]. "], "pace": 0.02}, requests=[])
    await sign_in(page, pplxweb_server)
    await page.wait_for_function("() => window.__wsOpen === true")
    await ask(page, "What is sourdough?")
    first = await Entry.objects.aget()
    assert first.upstream_expires is not None  # the incognito thread's expiry_time, kept
    entries = page.locator("article.entry")

    # Perplexity refuses the follow-up: its thread expired (ENTRY_EXPIRED before the stream)
    control(
        base,
        ask={
            "answer": ["Rye sourdough is dense."],
            "pace": 0.02,
            "thread_gone": "expired",
            "gone": [first.backend_uuid],
        },
    )
    await ask(page, "And what about rye?")
    await expect(entries).to_have_count(2)
    await expect(entries.nth(1).locator(".carried")).to_contain_text(QUIET)
    await expect(entries.nth(1).locator(".carried")).to_contain_text("had expired")
    await expect(entries.nth(1).locator(".answer")).to_contain_text("Rye sourdough is dense.")
    refused, carried = asks(base)[-2:]
    assert refused["params"]["last_backend_uuid"] == first.backend_uuid
    assert carried["params"]["query_source"] == "home" and "last_backend_uuid" not in carried["params"]
    assert carried["query_str"].startswith("Earlier in this conversation:\n\nQ: What is sourdough?")
    assert carried["query_str"].endswith("Now, going on from that: And what about rye?")
    second = await Entry.objects.aget(question="And what about rye?")
    assert second.carried == "ENTRY_EXPIRED" and await Thread.objects.acount() == 1
    await shoot(page, "quiet-line")

    # the next follow-up goes on from the new thread; refused there as a 403 {} (session fine)
    control(
        base,
        ask={"answer": ["Spelt is milder."], "pace": 0.02, "thread_gone": "deleted", "gone_as": "empty_403",
             "gone": [second.backend_uuid], "incognito_lifetime": 30},
    )  # fmt: skip
    await ask(page, "Which is milder?")
    await expect(entries.nth(2).locator(".carried")).to_contain_text("refused to go on in its thread")
    assert asks(base)[-2]["params"]["last_backend_uuid"] == second.backend_uuid
    assert (await PerplexityAccount.objects.aget()).status == "ok"  # not a session problem

    # a thread past its expiry_time is not asked: a new one at once (that new thread lives 30 s,
    # within the minute pplxweb allows for clocks)
    control(base, ask={"answer": ["In a cloth bag."], "pace": 0.02}, requests=[])
    await ask(page, "Where do I keep it?")
    await expect(entries.nth(3).locator(".carried")).to_contain_text(
        "had expired (incognito threads last a day)"
    )
    assert len(asks(base)) == 1 and asks(base)[0]["params"]["query_source"] == "home"
    assert await Entry.objects.acount() == 4 and await Thread.objects.acount() == 1

    # a redo of a turn whose thread is gone is carried too
    third = await Entry.objects.aget(question="Which is milder?")
    control(
        base, ask={"answer": ["Spelt, again."], "pace": 0.02, "thread_gone": "deleted", "gone_as": "frame"}
    )
    await entries.nth(2).get_by_role("button", name="Ask again").click()
    await expect(entries.nth(2).locator(".versions .count")).to_have_text("2 of 2", timeout=15000)
    await expect(entries.nth(2).locator(".carried")).to_contain_text("was deleted")
    assert (await Entry.objects.aget(turn=third.pk, shown=True)).carried == "ENTRY_DELETED"
    question = asks(base)[-1]["query_str"]  # the turns before it, not those after
    assert "And what about rye?" in question and "Where do I keep it?" not in question
    assert question.endswith("Now, going on from that: Which is milder?")
    assert page.console_errors == []
