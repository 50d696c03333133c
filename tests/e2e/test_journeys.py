"""Whole journeys in Chromium: first run, linking by e-mail code, asking, following up, stopping,
reloading mid-answer, finding it in history, exporting, unlinking; once more on a phone."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from playwright.async_api import expect

from accounts import services
from accounts.models import PerplexityAccount
from search.models import Entry
from tests.e2e.conftest import control, seen

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "a long enough passphrase"


async def first_run(page, base: str, username: str = "owner") -> None:
    code = await sync_to_async(services.issue_setup_code)()  # what `make run` prints
    await page.goto(f"{base}/")
    await expect(page).to_have_url(re.compile(r"/setup/$"))
    await page.fill("#id_setup_code", code)
    await page.fill("#id_username", username)
    await page.fill("#id_password1", PASSWORD)
    await page.fill("#id_password2", PASSWORD)
    await page.click("button[type=submit]")
    await expect(page.locator("#id_q")).to_be_visible()


async def link(page, base: str, email: str = "fake@example.com", totp: bool = False) -> None:
    await page.goto(f"{base}/settings/")
    await page.fill("#id_email", email)
    await page.click("button[name=send_code]")
    await expect(page.locator(".message")).to_contain_text("Perplexity has e-mailed you a code")
    await page.fill("#id_code", "123456")
    await page.click("button[name=verify_code]")
    if totp:
        await expect(page.locator("#perplexity")).to_contain_text("authenticator")
        await page.fill("#perplexity #id_code", "654321")
        await page.click("button[name=verify_totp]")
    await expect(page.locator(".message")).to_contain_text("Perplexity account linked.")
    await expect(page.locator("#perplexity")).to_contain_text("fake@example.com")


async def ask(page, question: str) -> None:
    await page.wait_for_function("() => window.__wsOpen === true")
    await page.fill("#id_q", question)
    await page.keyboard.press("Enter")


async def sign_out_and_in(page, base: str, username: str) -> None:
    await page.click("text=Sign out")
    await expect(page).to_have_url(re.compile(r"/accounts/login/"))
    await page.fill("#id_username", username)
    await page.fill("#id_password", PASSWORD)
    await page.click("button[type=submit]")
    await expect(page.locator("#id_q")).to_be_visible()


PHONE = {"width": 390, "height": 844}


@pytest.mark.journey  # also on PostgreSQL + Redis (tests/run.sh)
@pytest.mark.parametrize("page", [None, PHONE], indirect=True, ids=["desktop", "phone"])
async def test_the_whole_journey(page, pplxweb_server, fake_perplexity):
    base = pplxweb_server
    await first_run(page, base)
    await sign_out_and_in(page, base, "owner")
    await link(page, base)
    control(fake_perplexity, ask={"pace": 0.05})
    await page.goto(f"{base}/")
    await ask(page, "What is the capital of France?")
    first = page.locator("article.entry").nth(0)
    await expect(first.locator(".steps")).to_contain_text("capital of France")
    await expect(first.locator(".sources-box")).to_contain_text("Paris - Wikipedia")
    await expect(first.locator(".status-completed")).to_be_visible(timeout=15000)
    await expect(first.locator(".answer")).to_contain_text("It lies on the Seine.")
    # follow-up in the same conversation
    await ask(page, "And its population?")
    second = page.locator("article.entry").nth(1)
    await expect(second.locator(".status-completed")).to_be_visible(timeout=15000)
    assert await Entry.objects.filter(thread_id=(await Entry.objects.afirst()).thread_id).acount() == 2
    # stop mid-answer
    # (the test server gives up on an answer after 6 s: slow streams here stay under 4 s)
    control(fake_perplexity, ask={"answer": [f"slow part {i}. " for i in range(80)], "pace": 0.04})
    await ask(page, "Tell me everything")
    third = page.locator("article.entry").nth(2)
    await expect(third.locator(".answer")).to_contain_text("slow part 3")
    await third.locator("button.stop").click()
    await expect(third.locator(".status-stopped")).to_be_visible(timeout=10000)
    await expect(third.locator(".entry-meta")).to_contain_text("Stopped. What had arrived is kept.")
    # reload mid-answer: the page comes back live and sees it finish
    await ask(page, "One more, slowly")
    fourth = page.locator("article.entry").nth(3)
    await expect(fourth.locator(".answer")).to_contain_text("slow part 5")
    control(fake_perplexity, ask={})
    await page.reload()
    await page.wait_for_function("() => window.__wsOpen === true")
    fourth = page.locator("article.entry").nth(3)
    await expect(fourth.locator(".answer")).to_contain_text("slow part 79", timeout=15000)
    await expect(fourth.locator(".status-completed")).to_be_visible(timeout=20000)
    # a new conversation from the search page, which lists the recent ones until it starts;
    # a generated image (the capture, its link pointed at the fake) is kept and shown from pplxweb
    await page.goto(f"{base}/")
    await expect(page.locator(".recent li")).to_have_count(1)
    await expect(page.locator(".recent")).to_contain_text("What is the capital of France?")
    control(fake_perplexity, ask={"fixture": "smdex__cli-test__img-sse-fixture.txt", "pace": 0.02})
    await ask(page, "generate a small blue square icon")
    fifth = page.locator("article.entry").nth(0)
    await expect(page.locator(".recent")).to_be_hidden()
    await expect(fifth.locator(".status-completed")).to_be_visible(timeout=15000)
    picture = fifth.locator(".images img")
    await expect(picture).to_have_attribute("alt", "Small blue square icon")
    await expect(picture).to_have_attribute("src", re.compile(r"^/entry/\d+/image/0/$"))
    await picture.scroll_into_view_if_needed()
    await page.wait_for_function(
        "img => img.complete && img.naturalWidth > 0", arg=await picture.element_handle()
    )
    control(fake_perplexity, ask={})
    # history finds it; export downloads
    await page.goto(f"{base}/history/?q=seine")
    await expect(page.locator("ol.history mark").first).to_have_text(re.compile("seine", re.IGNORECASE))
    await page.locator("ol.history a.q").first.click()
    async with page.expect_download() as download_info:
        await page.click("text=Markdown")
    download = await download_info.value
    assert download.suggested_filename.endswith(".md")
    text = Path(await download.path()).read_text()  # a small local file
    assert "## What is the capital of France?" in text and "[^1]: [Paris - Wikipedia]" in text
    # and the whole history, streamed while it is written
    await page.goto(f"{base}/history/")
    async with page.expect_download() as download_info:
        await page.click("text=Download everything")
    download = await download_info.value
    assert download.suggested_filename.endswith(".zip")
    archive = zipfile.ZipFile(await download.path())
    listed = json.loads(archive.read("history.json"))["threads"]
    assert sum(len(t["entries"]) for t in listed) == await Entry.objects.acount() == 5
    [saved] = [i["file"] for t in listed for e in t["entries"] for i in e["images"]]
    assert archive.read(saved).startswith(b"\x89PNG")
    # delete the image's conversation, on Perplexity too
    drawn = await Entry.objects.select_related("thread").aget(question__contains="blue square")
    await page.goto(f"{base}/history/")
    await page.locator("ol.history li.row", has_text="blue square").locator("input[type=checkbox]").check()
    await page.click("text=Delete selected…")
    await page.check("input[name=upstream]")
    await page.click("button.danger")
    await expect(page.locator(".message")).to_contain_text(
        "Deleted 1 entry. It was deleted on Perplexity too."
    )
    [*_, deleted] = [r for r in seen(fake_perplexity) if r["path"].endswith("/delete_thread_by_entry_uuid")]
    assert json.loads(deleted["body"]) == {
        "entry_uuid": drawn.backend_uuid,
        "read_write_token": drawn.thread.read_write_token,
    }
    assert "FAKE-PERPLEXITY-SESSION" in deleted["headers"]["cookie"]
    assert await Entry.objects.acount() == 4
    # unlink
    await page.goto(f"{base}/settings/")
    await page.click("button[name=unlink]")
    await expect(page.locator(".message")).to_contain_text("Unlinked")
    assert not (await PerplexityAccount.objects.aget()).linked
    if page.viewport_size["width"] == PHONE["width"]:  # nothing wider than the phone, on any page
        thread = (await Entry.objects.afirst()).thread_id
        for path in ("/", f"/thread/{thread}/", "/history/?q=seine", "/settings/"):
            await page.goto(f"{base}{path}")
            assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], path
    assert page.console_errors == []


@pytest.mark.parametrize("page", [PHONE], indirect=True)
async def test_on_a_phone_with_an_authenticator(page, pplxweb_server, fake_perplexity):
    base = pplxweb_server
    await first_run(page, base, "phone")
    await link(page, base, email="totp@example.com", totp=True)
    control(fake_perplexity, ask={"pace": 0.02})
    await page.goto(f"{base}/")
    await ask(page, "Capital of France?")
    entry = page.locator("article.entry").first
    await expect(entry.locator(".status-completed")).to_be_visible(timeout=15000)
    await expect(entry.locator(".answer")).to_contain_text("Seine")
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390  # nothing wider than the phone
    assert page.console_errors == []


async def test_every_way_perplexity_hands_over_the_session_links(page, pplxweb_server, fake_perplexity):
    """signin-otp's deliveries (docs/protocol.md §3.1, §3.2): a Set-Cookie only, NextAuth's chunked
    cookie, a redirect to the session endpoint, an authenticator step answered by a redirect;
    each links from the Settings page and the next search uses the session."""
    from pplxweb.perplexity.cookies import session_token
    from tests.fake_perplexity.app import TOKEN

    base = pplxweb_server
    await first_run(page, base, "deliveries")
    control(fake_perplexity, ask={"pace": 0.01})
    for delivery in ("cookie", "chunked", "redirect", "totp-cookie"):
        await link(page, base, email=f"{delivery}@example.com", totp=delivery.startswith("totp"))
        handed = [r.get("delivery") for r in seen(fake_perplexity) if r["path"] == "/api/auth/signin-otp"]
        assert handed[-1] == delivery
        account = await PerplexityAccount.objects.aget(user__username="deliveries")
        assert session_token(account.session_data()["cookies"]) == TOKEN, delivery
        await page.goto(f"{base}/")
        await ask(page, f"Capital of France, linked by {delivery}?")
        entry = page.locator("article.entry").first
        await expect(entry.locator(".status-completed")).to_be_visible(timeout=15000)
        await page.goto(f"{base}/settings/")
        await page.click("button[name=unlink]")
        await expect(page.locator(".message")).to_contain_text("Unlinked")
    assert page.console_errors == []
