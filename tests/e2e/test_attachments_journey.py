"""In Chromium, on a desktop and a phone: an image pasted and a PDF chosen with the button go up
as chips, the question asks about both, the answer's file hits mark them "your file", the saved
page shows the thumbnail, one downloads, and the history zip carries them."""

from __future__ import annotations

import base64
import io
import os
import zipfile
from pathlib import Path

import pytest
from playwright.async_api import expect

from search.models import Attachment, Entry
from tests.e2e.conftest import control, seen
from tests.e2e.test_search_journey import linked_owner, sign_in

pytestmark = pytest.mark.django_db(transaction=True)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEklEQVR4nGNgYPiPhJA5DAwMAP/rB/mzYBJqAAAAAElFTkSuQmCC"
)
PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
SHOTS = os.environ.get("PPLXWEB_SHOTS", "")  # a folder: the pages are saved there to look at


async def shoot(page, name: str) -> None:
    if not SHOTS:
        return
    Path(SHOTS).mkdir(parents=True, exist_ok=True)
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await page.screenshot(path=f"{SHOTS}/{name}-{scheme}.png", full_page=True)
    await page.emulate_media(color_scheme="light")


@pytest.mark.parametrize(
    "page",
    [{"width": 1280, "height": 800}, {"width": 390, "height": 844}],
    indirect=True,
    ids=["desktop", "phone"],
)
async def test_attach_by_paste_and_button_ask_and_keep(page, pplxweb_server, fake_perplexity, tmp_path):
    await linked_owner()
    control(
        fake_perplexity, ask={"answer": ["Your statement shows two payments [1]."], "pace": 0.03}, requests=[]
    )
    await sign_in(page, pplxweb_server)
    await page.wait_for_function("() => window.__wsOpen === true")
    wide = page.viewport_size["width"] > 600
    # an image pasted into the box
    await page.evaluate(
        """(b64) => {
            const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
            const data = new DataTransfer();
            data.items.add(new File([bytes], "pasted.png", { type: "image/png" }));
            document.getElementById("id_q").dispatchEvent(
                new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
        }""",
        base64.b64encode(PNG).decode(),
    )
    # a PDF with the button
    await page.set_input_files(
        ".attachments input[type=file]", files=[{"name": "statement.pdf", "mimeType": "", "buffer": PDF}]
    )
    chips = page.locator(".attachments .chip")
    await expect(chips).to_have_count(2)
    await expect(page.locator(".attachments .chip.ready")).to_have_count(2, timeout=10000)
    await expect(chips.nth(0)).to_contain_text("pasted.png")
    await expect(chips.nth(1)).to_contain_text("statement.pdf")
    await shoot(page, f"attach-chips-{'desktop' if wide else 'phone'}")
    await page.fill("#id_q", "What is in my files?")
    await page.evaluate("window.__samePage = true")  # gone if the page reloads
    await page.keyboard.press("Enter")
    entry = page.locator("article.entry").first
    await expect(entry.locator(".status-completed")).to_be_visible(timeout=15000)
    await expect(entry.locator(".answer")).to_contain_text("two payments")
    await expect(page.locator(".attachments .chip")).to_have_count(0)  # they went with the question
    # the answer's file hits are marked "your file" on the live page, before any reload
    live = entry.locator(".entry-files")
    await expect(live.locator(".badge", has_text="your file")).to_have_count(2)
    await expect(live.locator("li", has_text="statement.pdf").locator(".badge")).to_have_text(
        "your file, cited"
    )
    assert await page.evaluate("window.__samePage === true")
    await shoot(page, f"attach-live-{'desktop' if wide else 'phone'}")
    saved = await Entry.objects.aget()
    files = [a async for a in saved.attachments.all()]  # as attached, whichever upload finished first
    assert [a.name for a in files] == ["pasted.png", "statement.pdf"] and all(a.remote_url for a in files)
    asked = [r for r in seen(fake_perplexity) if r["path"] == "/rest/sse/perplexity_ask"][-1]
    assert all(a.remote_url in asked["body"] for a in files)
    batch = [r for r in seen(fake_perplexity) if r["path"] == "/rest/uploads/batch_create_upload_urls"]
    assert '"content_type":"application/pdf"' in "".join(
        r["body"] for r in batch
    )  # judged, not the browser's ""
    # the saved page: the thumbnail, both files, the answer's file hits as "your file"
    await page.goto(f"{pplxweb_server}/thread/{saved.thread_id}/")
    listing = page.locator(".entry-files")
    await expect(listing.locator("img")).to_have_count(1)
    assert await listing.locator("img").evaluate("(img) => img.naturalWidth") == 4
    await expect(listing).to_contain_text("statement.pdf")
    await expect(listing.locator(".badge")).to_have_count(2)
    await shoot(page, f"attach-saved-{'desktop' if wide else 'phone'}")
    async with page.expect_download() as download_info:
        await listing.locator("a[download]", has_text="statement.pdf").click()
    download = await download_info.value
    assert download.suggested_filename == "statement.pdf"
    assert Path(await download.path()).read_bytes() == PDF
    # the history zip carries both files
    response = await page.request.get(f"{pplxweb_server}/history/export.zip")
    archive = zipfile.ZipFile(io.BytesIO(await response.body()))
    kept = sorted(archive.read(n) for n in archive.namelist() if n.startswith("attachments/"))
    assert kept == sorted([PNG, PDF])
    assert page.console_errors == []


async def test_a_refused_file_says_why_and_the_question_waits(page, pplxweb_server, fake_perplexity):
    await linked_owner()
    control(
        fake_perplexity,
        ask={"answer": ["Fine."], "pace": 0.01},
        uploads={"fault": "storage_403"},
        requests=[],
    )
    await sign_in(page, pplxweb_server)
    await page.wait_for_function("() => window.__wsOpen === true")
    await page.set_input_files(
        ".attachments input[type=file]",
        files=[{"name": "statement.pdf", "mimeType": "application/pdf", "buffer": PDF}],
    )
    chip = page.locator(".attachments .chip.failed")
    await expect(chip).to_contain_text("Policy Condition failed")
    await page.set_input_files(
        ".attachments input[type=file]",
        files=[{"name": "fake.png", "mimeType": "image/png", "buffer": b"<html>"}],
    )
    await expect(page.locator(".attachments .chip.failed")).to_have_count(2)
    await expect(page.locator(".attachments .chip.failed").nth(1)).to_contain_text("is not a PNG image")
    await page.fill("#id_q", "What is in my files?")
    await page.keyboard.press("Enter")
    await expect(page.locator("#search-error")).to_contain_text("Some files could not be attached")
    await shoot(page, "attach-failed-desktop")
    assert (
        await Entry.objects.acount() == 0
        and await page.locator("#id_q").input_value() == "What is in my files?"
    )
    for _ in range(2):
        await page.locator(".attachments .chip button.remove").first.click()
    control(fake_perplexity, uploads={})
    await page.locator("#id_q").press("Enter")
    await expect(page.locator("article.entry .status-completed")).to_be_visible(timeout=15000)
    assert not await Attachment.objects.aexists()  # the failed ones were never kept
    assert page.console_errors == [] or all("400" in e for e in page.console_errors)


@pytest.mark.journey  # also on PostgreSQL + Redis (tests/run.sh)
async def test_without_javascript_the_plain_form_takes_the_files(pplxweb_server, fake_perplexity):
    from playwright.async_api import async_playwright

    from tests.e2e.conftest import CHROMIUM_ARGS

    await linked_owner()
    control(fake_perplexity, ask={"answer": ["It is a statement."], "pace": 0.01}, uploads={}, requests=[])
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        context = await browser.new_context(
            java_script_enabled=False, viewport={"width": 1280, "height": 800}
        )
        page = await context.new_page()
        await sign_in(page, pplxweb_server)
        await page.fill("#id_q", "What is in it?")
        files = [
            {"name": "statement.pdf", "mimeType": "application/pdf", "buffer": PDF},
            {"name": "photo.png", "mimeType": "image/png", "buffer": b"<html>not an image</html>"},
        ]
        await page.set_input_files(".attachments input[type=file]", files=files)
        await page.click("#search-form button[type=submit]")
        # the disguised PNG is refused; the question and the good file stay
        await expect(page.locator(".errors")).to_contain_text("is not a PNG image")
        assert await page.locator("#id_q").input_value() == "What is in it?"
        await expect(page.locator('.attachments input[name="attachment"]:checked')).to_have_count(1)
        await shoot(page, "attach-nojs-kept-desktop")
        await page.click("#search-form button[type=submit]")
        await expect(page.locator(".entry-files")).to_contain_text("statement.pdf")
        for _ in range(50):  # as its <noscript> refresh does (not run by this headless browser)
            if await page.locator(".status-completed").count():
                break
            await page.wait_for_timeout(300)
            await page.reload()
        await expect(page.locator("article.entry .answer")).to_contain_text(
            "It is a statement.", timeout=10000
        )
        await browser.close()
    saved = await Entry.objects.aget()
    assert [a.name async for a in Attachment.objects.filter(entry=saved)] == ["statement.pdf"]
