"""In Chromium: forms that arrive over the socket work ("Ask again" under an answer that just
streamed in was a 403 when it posted: rendered without a request, its CSRF token was empty; it now
goes over the socket, its plain form kept for pages without JavaScript)."""

from __future__ import annotations

import os

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
    await entry.get_by_role("button", name="Ask again").click()  # over the socket, in place
    again = page.locator("article.entry").first
    await expect(again.locator(".versions .count")).to_have_text("2 of 2", timeout=15000)
    await expect(again.locator(".answer")).to_contain_text("A short answer.")
    assert page.url == first_thread and await page.locator("article.entry").count() == 1
    questions = [(e.question, e.thread_id) async for e in Entry.objects.order_by("pk")]
    assert [q for q, _ in questions] == ["Ask me twice", "Ask me twice"] and questions[0][1] == questions[1][
        1
    ]
    # and its Edit question, fetched into the answer's place
    await again.get_by_role("link", name="Edit question").click()
    await expect(again.locator("form.edit-question textarea")).to_have_value("Ask me twice")
    assert page.console_errors == []


async def test_signing_out_in_another_tab_tells_this_page_to_sign_in_again(page, pplxweb_server):
    await linked_owner()
    await sign_in(page, pplxweb_server)
    await page.wait_for_function("() => window.__wsOpen === true")
    other = await page.context.new_page()  # same browser, same session
    await other.goto(f"{pplxweb_server}/")
    await other.get_by_role("button", name="Sign out").click()
    await expect(other.locator("#id_username")).to_be_visible()
    error = page.locator("#search-error")
    await expect(error).to_contain_text("You were signed out", timeout=5000)
    await expect(error.get_by_role("link", name="Sign in again")).to_have_attribute(
        "href", "/accounts/login/"
    )
    if os.environ.get("PPLXWEB_SHOTS"):  # the screenshots looked at for the report
        for name, size in (("desktop", (1280, 800)), ("phone", (390, 844))):
            for scheme in ("light", "dark"):
                await page.set_viewport_size({"width": size[0], "height": size[1]})
                await page.emulate_media(color_scheme=scheme)
                await page.screenshot(path=f"{os.environ['PPLXWEB_SHOTS']}/signed-out-{name}-{scheme}.png")
    assert page.console_errors == []
