"""Redis stopped and started while an answer streams into an open page (pplxweb/redis_layer.py).

pplxweb runs under daphne with REDIS_URL pointing at a Redis server of the test's own (the set-up's
shared one cannot be stopped): the page says the live connection was lost, a socket opened while
Redis is away gets the same sentence (not a failed handshake), and once Redis is back the page
reopens its socket by itself, rejoins the answer and shows it completed, whole. Nothing stuck.
"""

from __future__ import annotations

import asyncio

import pytest
from playwright.async_api import expect
from websockets.asyncio.client import connect

from search.models import Entry
from tests.e2e.conftest import control, server_env, start_pplxweb, stop
from tests.e2e.test_search_journey import linked_owner, sign_in
from tests.e2e.test_two_processes import session_cookie
from tests.redis_server import redis_server  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)
LOST_TEXT = "lost its connection to Redis"


@pytest.fixture
def redis_pplxweb(redis_server, fake_perplexity, tmp_path):  # noqa: F811
    """pplxweb under daphne on the test database, with the test's own Redis."""

    env = server_env(fake_perplexity, REDIS_URL=redis_server.url, PPLXWEB_PERPLEXITY_ANSWER_TIMEOUT="60")
    log = tmp_path / "server.log"
    proc, port = start_pplxweb(env, log)
    yield f"http://127.0.0.1:{port}", redis_server, log
    stop(proc)


async def streaming(page, base: str, fake: str, question: str, parts: int):
    """Signed in and `question` asked; its answer ("part0 part1 ...", 80 ms apart) is arriving."""
    control(fake, ask={"answer": [f"part{i} " for i in range(parts)], "pace": 0.08}, requests=[])
    await sign_in(page, base)
    await page.wait_for_function("() => window.__wsOpen === true")
    await page.fill("#id_q", question)
    await page.keyboard.press("Enter")
    entry = page.locator("article.entry").first
    await expect(entry.locator(".answer")).to_contain_text("part3", timeout=20000)
    return entry


@pytest.mark.journey  # also on PostgreSQL + Redis (tests/run.sh)
async def test_redis_stopped_mid_answer_the_page_says_so_reopens_and_shows_the_whole_answer(
    page, redis_pplxweb, fake_perplexity
):
    base, redis, log = redis_pplxweb
    owner = await linked_owner()
    entry = await streaming(page, base, fake_perplexity, "through an outage", parts=100)

    redis.stop()
    notice = page.locator("#live-notice")
    await expect(notice).to_contain_text(LOST_TEXT, timeout=10000)
    # a socket opened while Redis is away: accepted, told, closed with 4012 (no failed handshake)
    cookie = await session_cookie(owner)
    async with connect(base.replace("http", "ws") + "/ws/search/", origin=base,
                       additional_headers={"Cookie": cookie}) as ws:  # fmt: skip
        assert LOST_TEXT in await asyncio.wait_for(ws.recv(), 10)
        await asyncio.wait_for(ws.wait_closed(), 5)
        assert ws.close_code == 4012
    await asyncio.sleep(1.5)  # the page retries meanwhile
    redis.start()

    await expect(entry.locator(".status-completed")).to_be_visible(timeout=30000)  # rejoined
    await expect(entry.locator(".answer")).to_contain_text("part99")
    await expect(notice).to_be_empty(timeout=10000)  # found again
    saved = await Entry.objects.aget()
    assert saved.status == "completed" and "part99" in saved.answer
    # and the page follows the next answer as usual
    control(fake_perplexity, ask={"answer": ["second answer"], "pace": 0.01})
    await page.fill("#id_q", "after the outage")
    await page.keyboard.press("Enter")
    await expect(page.locator("article.entry").nth(1).locator(".status-completed")).to_be_visible(
        timeout=15000
    )
    assert page.console_errors == [], page.console_errors
    text = log.read_text()
    assert "Traceback" not in text, text[-4000:]
    assert "the connection to Redis is lost" in text and "the connection to Redis is back" in text


async def test_an_answer_that_ended_long_before_redis_came_back_is_shown_ended(
    page, redis_pplxweb, fake_perplexity
):
    """The answer ends while Redis is away, and Redis stays away longer than a rejoin looks back
    (its row is backdated here instead of waiting minutes): the reopened page asks about the
    answers it shows running and gets this one whole."""
    from datetime import timedelta

    from django.utils import timezone

    base, redis, _log = redis_pplxweb
    await linked_owner()
    entry = await streaming(page, base, fake_perplexity, "ended while away", parts=30)

    redis.stop()
    await expect(page.locator("#live-notice")).to_contain_text(LOST_TEXT, timeout=10000)
    async with asyncio.timeout(20):
        while (await Entry.objects.aget()).status == "running":
            await asyncio.sleep(0.2)
    await Entry.objects.aupdate(heartbeat=timezone.now() - timedelta(minutes=10))
    await expect(entry.locator(".elapsed")).to_be_visible()  # the page still shows it running
    redis.start()

    await expect(entry.locator(".status-completed")).to_be_visible(timeout=30000)
    await expect(entry.locator(".answer")).to_contain_text("part29")
    await expect(entry.locator(".elapsed")).to_have_count(0)
    assert page.console_errors == [], page.console_errors


async def test_settings_follows_a_library_import_through_an_outage(page, redis_pplxweb, fake_perplexity):
    """The library section of Settings has a socket of its own: it says the connection was lost,
    reopens once Redis is back, and shows the import going on to its end."""
    from tests.e2e.test_library_journey import library, linked
    from tests.e2e.test_library_journey import sign_in as sign_in_as

    base, redis, log = redis_pplxweb
    await linked("libby")
    library(fake_perplexity, generate={"threads": 8, "turns": 2}, faults={})
    await sign_in_as(page, base, "libby")
    await page.goto(f"{base}/settings/")
    await page.wait_for_function("() => window.__wsOpen === true")
    await page.click("text=Import my Perplexity library")
    await page.wait_for_function(
        "() => { const p = document.getElementById('library-progress'); return p && Number(p.value) >= 2; }",
        timeout=20000,
    )
    redis.stop()
    notice = page.locator("#live-notice")
    await expect(notice).to_contain_text(LOST_TEXT, timeout=10000)
    await asyncio.sleep(1.5)
    redis.start()

    await expect(notice).to_be_empty(timeout=20000)
    summary = page.locator(".library-summary")
    await expect(summary).to_contain_text("Import finished", timeout=40000)
    await expect(summary).to_contain_text("8 threads listed, 8 fetched")
    assert page.console_errors == [], page.console_errors
    assert "Traceback" not in log.read_text()
