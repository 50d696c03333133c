"""In Chromium, desktop and phone: Ask again, Edit question and Retry answer a turn again in its
conversation (search/live/redo.py); the earlier answer stays as a version, switched in place;
follow-ups go on from the version shown; Stop during a redo keeps both; History and the exports
keep every version; without JavaScript the same buttons work. Screenshots of each state, light and
dark, each checked by axe-core, go to test-artifacts/."""

from __future__ import annotations

import html
import json

import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import expect

from search.models import Entry
from tests.e2e.conftest import ARTIFACTS, control, seen
from tests.e2e.test_journeys import PHONE
from tests.e2e.test_search_journey import linked_owner, sign_in

pytestmark = pytest.mark.django_db(transaction=True)
DESKTOP = {"width": 1280, "height": 800}
AXE = Axe()


async def shoot(page, name: str, audit: bool = True) -> None:
    """`name` in both colour schemes, each checked by axe-core (no serious or critical violation)
    when it is one of pplxweb's pages (`audit`)."""
    ARTIFACTS.mkdir(exist_ok=True)
    size = "phone" if page.viewport_size["width"] < 600 else "desktop"
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await page.screenshot(path=str(ARTIFACTS / f"redo-{size}-{name}-{scheme}.png"))
        if not audit:
            continue
        results = await AXE.run(page)
        bad = [v for v in results.response["violations"] if v["impact"] in ("serious", "critical")]
        assert not bad, f"{name} ({scheme}):\n" + "\n".join(results.generate_report(v["id"]) for v in bad)
    await page.emulate_media(color_scheme="light")


def asks(base: str) -> list[dict]:
    return [json.loads(r["body"]) for r in seen(base) if r["path"] == "/rest/sse/perplexity_ask"]


async def ask(page, question: str) -> None:
    """Ask in the box, and wait for the new answer to end."""
    entries = page.locator("article.entry")
    before = await entries.count()
    await page.fill("#id_q", question)
    await page.keyboard.press("Enter")
    await expect(entries).to_have_count(before + 1)
    await expect(entries.last.locator(".status-completed")).to_be_attached(timeout=15000)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", [DESKTOP, PHONE], indirect=True, ids=["desktop", "phone"])
async def test_ask_again_edit_and_retry_answer_in_place(page, pplxweb_server, fake_perplexity):
    base = fake_perplexity
    await linked_owner()
    control(
        base,
        ask={"answer": ["Sourdough is bread from a wild starter [1]. ", "It rises slowly."], "pace": 0.02},
        requests=[],
    )
    await sign_in(page, pplxweb_server)
    await page.wait_for_function("() => window.__wsOpen === true")
    await ask(page, "What is sourdough?")
    control(base, ask={"answer": ["Rye sourdough is dense [1]. ", "It keeps well."], "pace": 0.02})
    await ask(page, "And what about rye?")
    first, second = [e async for e in Entry.objects.order_by("pk")]
    entries = page.locator("article.entry")

    # Ask again under the follow-up: in place, in the same thread, from the turn before
    control(base, ask={"answer": ["Rye bread is dark and moist [2]. "] * 6, "pace": 0.05})
    await entries.nth(1).get_by_role("button", name="Ask again").click()
    await expect(entries).to_have_count(2)
    await expect(entries.nth(1).locator(".status-running")).to_be_attached()
    await expect(entries.nth(1).locator(".entry-status")).to_contain_text("version 2 of 2")
    await expect(entries.nth(1).locator(".status-completed")).to_be_attached(timeout=15000)
    await expect(entries.nth(1).locator(".versions .count")).to_have_text("2 of 2")
    sent = asks(base)[-1]
    assert sent["query_str"] == "And what about rye?" and sent["params"]["query_source"] == "followup"
    assert sent["params"]["last_backend_uuid"] == first.backend_uuid
    assert "/thread/" in page.url and await Entry.objects.acount() == 3
    again = await Entry.objects.aget(shown=True, turn=second.pk)
    await expect(entries.nth(1)).to_have_id(f"entry-{again.pk}")
    await shoot(page, "versions")
    await entries.nth(1).locator("details.more summary").click()
    await expect(entries.nth(1).get_by_role("link", name="Delete this version…")).to_be_visible()
    assert await page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    await shoot(page, "more-menu")
    await page.keyboard.press("Escape")

    # the earlier version, in place; a follow-up goes on from it
    await entries.nth(1).get_by_role("button", name="Previous version").click()
    await expect(entries.nth(1).locator(".versions .count")).to_have_text("1 of 2")
    await expect(entries.nth(1).locator(".answer")).to_contain_text("Rye sourdough is dense")
    await shoot(page, "version-1")
    control(base, ask={"answer": ["Spelt is milder."], "pace": 0.02})
    await ask(page, "Which is milder?")
    assert asks(base)[-1]["params"]["last_backend_uuid"] == second.backend_uuid

    # Edit question on the first turn: in its place, a new thread (no turn before it)
    control(base, ask={"answer": ["Sourdough in short: flour, water, time."], "pace": 0.02})
    await entries.first.get_by_role("link", name="Edit question").click()
    box = entries.first.locator("form.edit-question textarea")
    await expect(box).to_be_focused()
    await shoot(page, "edit")
    await box.fill("What is sourdough, in one line? It costs $5.")
    await box.press("Enter")
    await expect(entries.first.locator(".versions .count")).to_have_text("2 of 2", timeout=15000)
    await expect(entries.first.locator("h2.question")).to_have_text(
        "What is sourdough, in one line? It costs $5."
    )
    sent = asks(base)[-1]
    assert sent["params"]["query_source"] == "home" and sent["query_str"].endswith("It costs $5.")

    # Stop during a redo: both versions stay, the stopped one shown
    control(base, ask={"answer": ["Slowly, word by word. "] * 80, "pace": 0.1})
    third = entries.nth(2)
    await third.get_by_role("button", name="Ask again").click()
    await expect(third.locator(".answer")).to_contain_text("Slowly", timeout=10000)
    await expect(third.locator(".entry-status")).to_contain_text("version 2 of 2")
    await shoot(page, "running")
    await third.get_by_role("button", name="Stop").click()
    await expect(third.locator(".status-stopped")).to_be_attached(timeout=10000)
    await expect(third.locator(".versions .count")).to_have_text("2 of 2")
    assert await Entry.objects.filter(question="Which is milder?").acount() == 2

    # History: every version (version 1 shows since the switch), the other linking to it in place
    await page.goto(f"{pplxweb_server}/history/")
    await expect(page.locator("li.row", has_text="Rye sourdough is dense")).to_contain_text(
        "version 1 of 2 ·"
    )
    row = page.locator("li.row", has_text="Rye bread is dark")
    await expect(row).to_contain_text("version 2 of 2, not the one shown")
    await shoot(page, "history")
    await row.locator("a.q").click()
    await expect(page.locator(f"#entry-{again.pk} .versions .count")).to_have_text("2 of 2")
    await expect(page.locator(f"#entry-{second.pk}")).to_have_count(0)

    # the export: every version, marked
    markdown = await (await page.request.get(f"{pplxweb_server}/thread/{first.thread_id}/export.md")).text()
    assert markdown.count("## And what about rye?") == 2 and "version 1 of 2, not the one shown" in markdown
    shown = html.escape(markdown[:3000])
    await page.goto("about:blank")  # out of pplxweb's page (and its content policy)
    await page.set_content(f"<pre style='white-space: pre-wrap; font: 13px/1.4 monospace'>{shown}</pre>")
    await shoot(page, "export", audit=False)  # the file as it reads, not a page
    assert page.console_errors == [], page.console_errors


@pytest.mark.timeout(120)
@pytest.mark.parametrize("page", [DESKTOP, PHONE], indirect=True, ids=["desktop", "phone"])
async def test_without_javascript_ask_again_and_versions_work(page, pplxweb_server, fake_perplexity):
    base = fake_perplexity
    await linked_owner()
    control(base, ask={"answer": ["Plain answer."], "pace": 0.01}, requests=[])
    context = await page.context.browser.new_context(java_script_enabled=False, viewport=page.viewport_size)
    plain = await context.new_page()
    await sign_in(plain, pplxweb_server)
    await plain.fill("#id_q", "Without scripts?")
    await plain.get_by_role("button", name="Ask", exact=True).click()
    await expect(plain.locator(".status-completed")).to_be_attached(timeout=15000)  # the page refreshes
    control(base, ask={"answer": ["Plain answer, again."], "pace": 0.01})
    await plain.get_by_role("button", name="Ask again").click()
    await expect(plain.locator(".versions .count")).to_have_text("2 of 2", timeout=15000)
    await expect(plain.locator(".status-completed")).to_be_attached(timeout=15000)
    await expect(plain.locator(".answer")).to_contain_text("Plain answer, again.")
    await plain.get_by_role("button", name="Previous version").click()
    await expect(plain.locator(".versions .count")).to_have_text("1 of 2")
    await plain.get_by_role("link", name="Edit question").click()
    await expect(plain.locator("h1")).to_have_text("Edit the question")
    await shoot(plain, "edit-page", audit=False)  # axe needs JavaScript
    await plain.fill("form.edit-question textarea", "Without scripts, edited?")
    control(base, ask={"answer": ["Edited, plainly."], "pace": 0.01})
    await plain.get_by_role("button", name="Ask again").click()
    await expect(plain.locator(".answer")).to_contain_text("Edited, plainly.", timeout=15000)
    await expect(plain.locator(".versions .count")).to_have_text("3 of 3")
    assert await Entry.objects.acount() == 3
    await context.close()
