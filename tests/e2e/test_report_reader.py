"""A Deep Research report people keep (issue 42): a 15 KB report's page under 100 KiB cold with
its chips and cards whole, the clarifying questions folded under the question, the contents list
above the pinned box marking the section being read (and on a phone a way back to it), Copy
report's text with the numbered sources its [n] refer to, Download named after the title."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.e2e.test_answer_page import DESKTOP, shoot
from tests.e2e.test_journeys import PHONE, first_run
from tests.search.test_reports import CLARIFIED

pytestmark = pytest.mark.django_db(transaction=True)


async def report_entry(name: str):
    from django.contrib.auth import get_user_model

    from search.models import Entry, Thread
    from tests.search.test_answer_page import SOURCES, long_report

    user = await get_user_model().objects.aget(username=name)
    thread = await Thread.objects.acreate(user=user, title="Deep question")
    return await Entry.objects.acreate(
        thread=thread, user=user, question="What changed in bread science?", status="completed",
        answer="A cover note: the report below has the details [1].", sources=SOURCES,
        report=long_report(15_000), clarifications=CLARIFIED,
    )  # fmt: skip


async def cold_weight(page, url: str) -> int:
    """The page's bytes as transferred, from a fresh cache (as test_the_answer_page measures)."""
    context = await page.context.browser.new_context(storage_state=await page.context.storage_state())
    cold = await context.new_page()
    finished = []
    cold.on("requestfinished", lambda request: finished.append(request))
    await cold.goto(url, wait_until="networkidle")
    weight = sum([(await r.sizes())["responseBodySize"] for r in finished])
    await context.close()
    return weight


@pytest.mark.timeout(240)
@pytest.mark.parametrize("page", [DESKTOP, PHONE], indirect=True, ids=["desktop", "phone"])
async def test_a_15_kb_report_reads_as_a_document(page, pplxweb_server):
    base = pplxweb_server
    phone = page.viewport_size["width"] < 600
    name = f"reader{page.viewport_size['width']}"
    await first_run(page, base, name)
    entry = await report_entry(name)
    url = f"{base}/thread/{entry.thread_id}/"
    weight = await cold_weight(page, url)
    print(f"report page {page.viewport_size['width']} px: {weight / 1024:.1f} KiB cold")
    assert weight < 100 * 1024, weight  # was 135 KB: a card per chip
    await page.goto(url)
    await page.wait_for_function("() => window.__wsOpen === true")
    # the clarifying questions, folded under the question
    clarified = page.locator(f"#entry-{entry.pk}-question details.clarified")
    await expect(clarified.locator("summary")).to_have_text(
        "Perplexity asked 2 questions before researching · answered"
    )
    question = await page.locator(f"#entry-{entry.pk}-q").bounding_box()
    folded = await clarified.bounding_box()
    assert question["y"] < folded["y"] < question["y"] + question["height"] + 60, (question, folded)
    await clarified.locator("summary").click()
    await expect(clarified.locator("dd").first).to_contain_text("Patagonia")
    await shoot(page, "report-clarified")
    # a report's chip: the source's link and name, its card on hover, as an answer's chip
    chip = page.locator(".report-body a.cite").first
    await chip.scroll_into_view_if_needed()
    assert await chip.get_attribute("href") == "https://en.wikipedia.org/wiki/Bread"
    assert await chip.get_attribute("aria-label") == "source 1: Bread - Wikipedia, en.wikipedia.org"
    assert await chip.get_attribute("target") == "_blank"
    assert await page.locator(".report-body .cite-card").count() == 0  # made when pointed at
    await chip.hover()
    card = chip.locator(".cite-card")
    await expect(card).to_be_visible()
    await expect(card).to_contain_text("Bread - Wikipedia")
    await expect(card).to_contain_text("Bread is a staple.")
    await shoot(page, "report-card", audit=False)
    await page.mouse.move(0, 0)
    # the contents list: each entry reachable, the section being read marked
    toc = page.locator(".report-toc")
    links = toc.locator("a")
    await page.locator("#r-part-12").evaluate("h => h.scrollIntoView({block: 'start'})")
    await expect(toc.locator("a[aria-current]")).to_have_text("Part 12")
    form = await page.locator("#search-form").bounding_box()
    if phone:  # the list is above the report, out of sight: "Contents" leads back to it
        back = page.locator(".toc-back a")
        await expect(back).to_be_visible()
        box = await back.bounding_box()
        assert 0 <= box["y"] < 60 and box["x"] + box["width"] <= PHONE["width"], box
        await shoot(page, "report-reading")
        await back.click()
        await expect(toc.locator("a[aria-current]")).to_be_in_viewport()
        await expect(back).to_be_hidden()  # the list is in sight
    else:  # beside the text, wholly above the pinned box: its last entry too
        await shoot(page, "report-reading")
        box = await toc.bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= form["y"], (box, form)
        await toc.evaluate("t => { t.scrollTop = t.scrollHeight; }")
        end = await links.last.bounding_box()
        assert end["y"] >= box["y"] and end["y"] + end["height"] <= form["y"], (end, form)
        await links.last.click()
        await expect(links.last).to_have_attribute("aria-current", "location")
        box, form = await toc.bounding_box(), await page.locator("#search-form").bounding_box()
        assert box["y"] + box["height"] <= form["y"], (box, form)  # at the report's end too
    assert page.console_errors == []


@pytest.mark.parametrize("page", [DESKTOP], indirect=True, ids=["desktop"])
async def test_copy_report_and_download_carry_the_sources(page, pplxweb_server):
    base = pplxweb_server
    await first_run(page, base, "keeper")
    entry = await report_entry("keeper")
    await page.goto(f"{base}/thread/{entry.thread_id}/")
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    copy = page.locator('button[data-url$="/report.md"]')
    await copy.click()
    await expect(copy).to_contain_text("Copied")
    text = await page.evaluate("navigator.clipboard.readText()")
    assert text.startswith("# Report\n\n## Part 1\n\nA long paragraph of findings [1].")
    assert text.endswith(
        "## Sources\n\n1. [Bread - Wikipedia](https://en.wikipedia.org/wiki/Bread)\n"
        "2. [Salt](https://www.bbc.co.uk/food/salt)\n3. [http://192.168.1.20:8080/page](http://192.168.1.20:8080/page)\n"
    )
    async with page.expect_download() as download_info:
        await page.get_by_role("link", name="Download Markdown").click()
    download = await download_info.value
    assert download.suggested_filename == "Report.md"
    assert (await download.path()).read_text() == text
    assert page.console_errors == []
