"""In Chromium, through the real server and the fake's library: import with the progress bar
moving, history search finding an imported answer, a follow-up on an imported thread, and a
follow-up refused there (the thread deleted) asked in a new Perplexity thread with its context, in
the same conversation."""

from __future__ import annotations

import json
import urllib.request

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import expect

from accounts.models import PerplexityAccount
from search.models import Entry, LibraryJob
from tests.conftest import PASSWORD
from tests.e2e.conftest import control, seen
from tests.fake_perplexity.app import TOKEN

pytestmark = pytest.mark.django_db(transaction=True)


def library(base: str, **state) -> dict:
    request = urllib.request.Request(f"{base}/_library", data=json.dumps(state).encode(), method="POST")  # noqa: S310
    return json.loads(urllib.request.urlopen(request, timeout=5).read())  # noqa: S310 - loopback test server


@sync_to_async
def linked(username: str):
    from django.contrib.auth import get_user_model

    person = get_user_model().objects.create_superuser(username=username, password=PASSWORD)
    PerplexityAccount.objects.create(
        user=person,
        email="fake@example.com",
        tier="pro",
        session=json.dumps({"cookies": {"__Secure-next-auth.session-token": TOKEN}}),
    )
    return person


async def sign_in(page, base: str, username: str) -> None:
    await page.goto(f"{base}/accounts/login/")
    await page.fill("#id_username", username)
    await page.fill("#id_password", PASSWORD)
    await page.click("button[type=submit]")
    await expect(page.locator("#id_q")).to_be_visible()


THREADS = [
    {
        "title": "Zebra facts",
        "turns": [{"q": "Why do zebras have stripes?", "a": "Zebras use zebraphonic stripes [1]."}, {}],
    },
    {"title": "With a picture", "turns": [{"q": "Draw a cat", "a": "Here is a cat.", "image": True}]},
    *({"title": f"Old thread {n}", "turns": 2} for n in range(5)),
]


@pytest.mark.journey  # also on PostgreSQL + Redis (tests/run.sh)
async def test_import_search_and_follow_up(page, pplxweb_server, fake_perplexity):
    person = await linked("libby")
    library(fake_perplexity, threads=THREADS, faults={})
    control(fake_perplexity, ask={"answer": ["Followed up here."], "pace": 0.01}, requests=[])
    await sign_in(page, pplxweb_server, "libby")
    await page.goto(f"{pplxweb_server}/settings/")
    await page.wait_for_function("() => window.__wsOpen === true")
    await page.click("text=Import my Perplexity library")
    bar = page.locator("#library-progress")
    await expect(bar).to_be_visible(timeout=5000)
    # the bar moves while the page stays put (the socket replaces the section)
    await page.wait_for_function(
        "() => { const p = document.getElementById('library-progress'); return p && Number(p.value) >= 2; }",
        timeout=20000,
    )
    assert await bar.get_attribute("value") != await bar.get_attribute("max")
    summary = page.locator(".library-summary")
    await expect(summary).to_contain_text("Import finished", timeout=30000)
    await expect(summary).to_contain_text("7 threads listed, 7 fetched (13 new answers)")
    job = await LibraryJob.objects.aget(user=person)
    assert job.state == "done" and job.requests == 9  # session + one listing page + 7 threads
    picture = await Entry.objects.aget(user=person, question="Draw a cat")
    assert picture.images and picture.images[0].get("file"), picture.images  # downloaded like a live one

    # history: full-text search finds the imported answer, marked as imported
    await page.goto(f"{pplxweb_server}/history/")
    await page.fill("form.history-filters input[name=q]", "zebraphonic")
    await page.click("form.history-filters button[type=submit]")
    row = page.locator("ol.history li.row").first
    await expect(row).to_contain_text("Why do zebras have stripes?")
    await expect(row).to_contain_text("imported from Perplexity")
    await row.locator("a.q").click()
    await expect(page.locator(".imported")).to_contain_text("Imported from Perplexity")

    # a follow-up continues the Perplexity thread: the last turn's ids go upstream
    await page.wait_for_function("() => window.__wsOpen === true")
    await page.fill("#id_q", "And horses?")
    await page.keyboard.press("Enter")
    last = page.locator("article.entry").last
    await expect(last.locator(".status-completed")).to_be_visible(timeout=15000)
    await expect(last.locator(".answer")).to_contain_text("Followed up here.")
    zebra = await sync_to_async(
        lambda: list(Entry.objects.filter(user=person, thread__title="Zebra facts").order_by("created"))
    )()
    sent = json.loads(
        [r for r in seen(fake_perplexity) if r["path"] == "/rest/sse/perplexity_ask"][-1]["body"]
    )
    assert sent["params"]["last_backend_uuid"] == zebra[1].backend_uuid  # the last imported turn
    assert sent["params"]["read_write_token"].startswith("rwt-")
    assert sent["params"]["query_source"] == "followup"

    # deleted on Perplexity since: the follow-up is refused there, and asked in a new Perplexity
    # thread with the earlier turns, in the same conversation
    library(fake_perplexity, change={"delete": [0]})
    await page.fill("#id_q", "And donkeys?")
    await page.keyboard.press("Enter")
    carried = page.locator("article.entry").last
    await expect(carried.locator(".carried")).to_contain_text(
        "Perplexity’s thread was deleted", timeout=15000
    )
    await expect(carried.locator(".status-completed")).to_be_attached(timeout=15000)
    sent = json.loads(
        [r for r in seen(fake_perplexity) if r["path"] == "/rest/sse/perplexity_ask"][-1]["body"]
    )
    question = sent["query_str"]
    assert sent["params"]["query_source"] == "home" and question.startswith("Earlier in this conversation:")
    assert "Followed up here." in question and question.endswith("Now, going on from that: And donkeys?")
    donkeys = await Entry.objects.aget(user=person, question="And donkeys?")
    assert donkeys.carried == "ENTRY_DELETED" and donkeys.thread_id == zebra[0].thread_id
    assert page.console_errors == []
