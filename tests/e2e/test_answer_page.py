"""The answer page as people see it (issue 21): screenshots at fixed moments, desktop and phone,
light and dark, into test-artifacts/ (not committed), and the layout rules checked by position:
the answer's first lines in the first screen while it streams and when done; a follow-up scrolled
into view with the box pinned below it."""

from __future__ import annotations

import asyncio

import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import expect

from tests.e2e.conftest import ARTIFACTS, control
from tests.e2e.rich_answer import FIXTURE
from tests.e2e.test_journeys import PHONE, ask, first_run, link

pytestmark = pytest.mark.django_db(transaction=True)
DESKTOP = {"width": 1280, "height": 800}
AXE = Axe()


async def shoot(page, name: str, audit: bool = True) -> None:
    """`name` in both colour schemes, each checked by axe-core: no serious or critical violation."""
    ARTIFACTS.mkdir(exist_ok=True)
    size = "phone" if page.viewport_size["width"] < 600 else "desktop"
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await page.screenshot(path=str(ARTIFACTS / f"answer-page-{size}-{name}-{scheme}.png"))
        if audit:
            results = await AXE.run(page)
            bad = [v for v in results.response["violations"] if v["impact"] in ("serious", "critical")]
            assert not bad, f"{name} ({scheme}):\n" + "\n".join(results.generate_report(v["id"]) for v in bad)
    await page.emulate_media(color_scheme="light")


async def answer_top(entry) -> float:
    """Where the answer's first line is, relative to the viewport."""
    top = await entry.evaluate(
        "e => { const p = e.querySelector('.answer :is(p, li, h3, h4, table, pre)');"
        " return p ? p.getBoundingClientRect().top : null; }"
    )
    assert top is not None
    return top


@pytest.mark.parametrize("page", [DESKTOP, PHONE], indirect=True, ids=["desktop", "phone"])
async def test_the_answer_page(page, pplxweb_server, fake_perplexity):
    base = pplxweb_server
    height = page.viewport_size["height"]
    await first_run(page, base, f"reader{page.viewport_size['width']}")
    await link(page, base)
    await page.goto(f"{base}/")
    await shoot(page, "home")
    control(fake_perplexity, ask={"fixture": FIXTURE.name, "pace": 0.15})
    await ask(page, "Why does bread rise?")
    entry = page.locator("article.entry").first
    await expect(entry.locator(".answer")).to_contain_text("Bread rises", timeout=10000)
    assert await answer_top(entry) < height - 60  # the first words, in the first screen
    await asyncio.sleep(1)
    await shoot(page, "streaming")
    assert await answer_top(entry) < height - 60
    await expect(entry.locator(".status-completed")).to_be_visible(timeout=15000)
    await page.reload()
    await page.wait_for_function("() => window.__wsOpen === true")
    entry = page.locator("article.entry").first
    assert await answer_top(entry) < height - 60
    await shoot(page, "done")
    # a follow-up: scrolled into view, the box pinned below
    control(fake_perplexity, ask={"fixture": FIXTURE.name, "pace": 0.1})
    await ask(page, "And with rye flour?")
    second = page.locator("article.entry").nth(1)
    await expect(second.locator(".answer")).to_contain_text("Bread rises", timeout=10000)
    await asyncio.sleep(0.5)
    question = await second.locator(".question").bounding_box()
    assert 0 <= question["y"] < height / 2
    await expect(second.locator(".status-completed")).to_be_visible(timeout=15000)
    box = await page.locator("#search-form").bounding_box()
    assert box["y"] + box["height"] <= height + 1
    await shoot(page, "follow-up")
    thread_path = page.url.removeprefix(base).split("#")[0]
    await page.goto(f"{base}/history/")
    await shoot(page, "history")
    await page.goto(f"{base}/settings/")
    await shoot(page, "settings")
    assert await page.evaluate("window.scrollY") == 0
    control(fake_perplexity, ask={})
    assert page.console_errors == []
    # page weight: each page, cold (a fresh cache), under 100 KiB as transferred
    state = await page.context.storage_state()
    for path in ("/", thread_path, "/history/", "/settings/"):
        context = await page.context.browser.new_context(storage_state=state)
        cold = await context.new_page()
        finished = []
        cold.on("requestfinished", lambda request, into=finished: into.append(request))
        await cold.goto(f"{base}{path}", wait_until="networkidle")
        weight = sum([(await r.sizes())["responseBodySize"] for r in finished])
        print(f"page weight {path}: {weight / 1024:.1f} KiB in {len(finished)} requests")
        assert 0 < weight < 100 * 1024, (path, weight)
        await context.close()
