"""The answer page as people see it (issue 21): screenshots at fixed moments, desktop and phone,
light and dark, into test-artifacts/ (not committed), and the layout rules checked by position:
the answer's first lines in the first screen while it streams and when done; a follow-up scrolled
into view with the box pinned below it."""

from __future__ import annotations

import asyncio
import re

import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import expect

from tests.e2e.conftest import ARTIFACTS, ROOT, control
from tests.e2e.rich_answer import FIXTURE
from tests.e2e.test_journeys import PHONE, ask, first_run, link
from tests.e2e.test_search_journey import linked_owner, sign_in

pytestmark = pytest.mark.django_db(transaction=True)
DESKTOP = {"width": 1280, "height": 800}
AXE = Axe()
WIDE = """[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > 391)
  .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"""

SPLIT_WORDS = """[...document.querySelectorAll('.answer th, .answer td')].flatMap(cell => {
  const node = cell.firstChild, split = [], word = /\\S+/g;
  if (!node || node.nodeType !== Node.TEXT_NODE) return split;
  for (let m; (m = word.exec(node.data)); ) {
    const range = document.createRange();
    range.setStart(node, m.index);
    range.setEnd(node, m.index + m[0].length);
    if (m[0].length < 20 && range.getClientRects().length > 1) split.push(m[0]);
  }
  return split; })"""


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


@pytest.mark.timeout(300)
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
    if page.viewport_size["width"] < 600:  # on a phone the source chips are one row that scrolls sideways
        tops = await entry.locator(".sources-box :is(.chip, .all-sources)").evaluate_all(
            "chips => chips.map(chip => Math.round(chip.getBoundingClientRect().top))"
        )
        assert len(tops) == 5 and max(tops) - min(tops) <= 3, tops  # was three rows
    await expect(entry.locator(".entry-meta")).to_contain_text("Answered by Best in")  # a name, not pplx_pro
    # a code block's Copy button sits above its code, never on it
    code = entry.locator(".answer pre").first
    await code.scroll_into_view_if_needed()
    button = await code.locator(".copy-code").bounding_box()
    text = await code.locator("code").bounding_box()
    assert button["y"] + button["height"] <= text["y"] + 1, (button, text)
    await shoot(page, "code", audit=False)
    # the answer's actions, an icon and a word each; the rarer ones in More, which opens upwards
    # (under the last answer is the pinned box) and stays on the screen
    await entry.locator(".entry-actions").scroll_into_view_if_needed()
    await entry.locator("details.more summary").click()
    menu = await entry.locator("details.more .menu").bounding_box()
    assert menu["y"] >= 0 and menu["x"] + menu["width"] <= page.viewport_size["width"], menu
    await shoot(page, "actions")
    await page.keyboard.press("Escape")
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
    assert box["height"] <= 110, (
        box
    )  # pinned, it stays small: the screen is the answer's (was 205 on a phone)
    await shoot(page, "follow-up")
    # Options open: a panel over the answer, its fields scrolling within the screen's lower part;
    # its button stays where it was clicked, and a click elsewhere closes it
    summary = page.locator("details.options summary")
    before = await summary.bounding_box()
    await summary.click()
    after = await summary.bounding_box()
    assert (after["x"], after["y"]) == (before["x"], before["y"])  # (on a phone its word shows)
    panel = await page.locator("details.options .grid").bounding_box()
    assert panel["y"] >= height * 0.3 and panel["y"] + panel["height"] <= before["y"], panel  # was 1028 px
    await page.locator("#id_incognito").scroll_into_view_if_needed()
    await expect(page.locator("#id_incognito")).to_be_in_viewport()  # the last field is reachable
    await shoot(page, "options-open")
    await page.mouse.click(5, 5)
    assert not await page.locator("details.options").evaluate("d => d.open")
    thread_path = page.url.removeprefix(base).split("#")[0]
    await page.goto(f"{base}/history/")
    await shoot(page, "history")
    await page.goto(f"{base}/settings/")
    await shoot(page, "settings")
    assert await page.evaluate("window.scrollY") == 0
    control(fake_perplexity, ask={})
    # no CSP report either: htmx's settle no longer copies `style` (templates/base.html)
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


@pytest.mark.parametrize("page", [DESKTOP], indirect=True, ids=["desktop"])
async def test_keyboard_refusals_and_copy(page, pplxweb_server, fake_perplexity):
    base = pplxweb_server
    await first_run(page, base, "keys")
    # the model list is the same before linking (the shipped catalogue) and after (the fetched one),
    # in Options and in Settings: names, and the models above the account's tier marked
    await page.goto(f"{base}/")
    before = await page.locator("#id_model option").all_text_contents()
    await link(page, base)
    assert await page.locator("#id_model option").all_text_contents() == before  # Settings' defaults
    await page.goto(f"{base}/")
    assert await page.locator("#id_model option").all_text_contents() == before
    assert len(before) > 10 and "Claude Sonnet 5" in before and "Claude Opus 4.8 · Max" in before
    assert not [name for name in before if "_" in name or name != name.strip()]
    await page.wait_for_function("() => window.__wsOpen === true")
    # "/" focuses the box from anywhere
    await page.locator("h1").click()
    await page.keyboard.press("/")
    assert await page.evaluate("document.activeElement.id") == "id_q"
    # a refused question stays in the box, its sentence beside it; Esc closes Options
    await page.click("details.options summary")
    await page.fill("#id_include_domains", "not a site!!")
    await page.fill("#id_q", "keep me")
    await page.keyboard.press("Enter")
    await expect(page.locator("#search-error")).to_contain_text("is not a domain")
    assert await page.input_value("#id_q") == "keep me"
    assert await page.get_attribute("#id_q", "placeholder") == "Ask anything…"
    assert await page.locator("article.entry").count() == 0
    await page.focus("#id_include_domains")
    await page.keyboard.press("Escape")
    assert not await page.locator("details.options").evaluate("d => d.open")
    await page.locator("#id_include_domains").evaluate("input => { input.value = ''; }")
    # an element's style set from script (as a browser does when a textarea is resized) is not
    # copied onto its replacement by htmx's settle: that copy breaks the page's CSP (style-src 'self')
    await page.evaluate(
        """() => new MutationObserver(() => document.querySelectorAll('[id^="entry-"]').forEach(e => {
               if (!e.style.outline) e.style.outline = '0px solid transparent'; }))
             .observe(document.body, {subtree: true, childList: true})"""
    )
    # an accepted one empties the box; the end is announced
    control(fake_perplexity, ask={"pace": 0.02})
    await ask(page, "What is the capital of France?")
    entry = page.locator("article.entry").first
    await expect(entry.locator(".status-completed")).to_be_visible(timeout=15000)
    assert await page.input_value("#id_q") == ""
    await expect(page.locator("#live-status")).to_have_text("Answer finished.")
    # a citation's card on keyboard focus, closed by Esc
    cite = entry.locator("a.cite").first
    assert await cite.get_attribute("target") == "_blank"
    assert (await cite.get_attribute("aria-label")).startswith("source 1: Paris - Wikipedia")
    await cite.focus()
    await expect(cite.locator(".cite-card")).to_be_visible()
    await page.keyboard.press("Escape")
    await expect(cite.locator(".cite-card")).to_be_hidden()
    # Copy: the answer's Markdown with footnotes, "Copied" for two seconds
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    copy = entry.locator("button[data-copy][data-citations='1']")
    await copy.click()
    await expect(copy).to_have_text("Copied")
    copied = await page.evaluate("navigator.clipboard.readText()")
    assert "Paris is the **capital** of France [^1]." in copied
    assert "[^1]: [Paris - Wikipedia](https://en.wikipedia.org/wiki/Paris)" in copied
    await expect(copy).to_have_text("Copy", timeout=3000)
    # off a secure context (plain http on a LAN address) the older copy command does it
    await page.evaluate("Object.defineProperty(window, 'isSecureContext', {value: false})")
    # the rarer actions are in the More menu: it opens over the answer, Esc and a click elsewhere close it
    more = entry.locator("details.more summary")
    plain = entry.locator("button[data-copy][data-citations='0']")
    await expect(plain).to_be_hidden()
    await more.click()
    await expect(entry.get_by_role("link", name="Delete…")).to_be_visible()
    await page.keyboard.press("Escape")
    await expect(plain).to_be_hidden()
    assert await page.evaluate("document.activeElement.closest('details.more') !== null")
    await more.click()
    await page.mouse.click(5, 300)
    await expect(plain).to_be_hidden()
    await more.click()
    await plain.click()
    await expect(plain).to_have_text("Copied")
    assert (await page.evaluate("navigator.clipboard.readText()")).startswith(
        "Paris is the **capital** of France. It has about two million people."
    )
    # the suggestions: arrow keys reach them, Esc dismisses them
    await page.fill("#id_q", "capital of")
    await expect(page.locator("#suggestions a").first).to_be_visible()
    await page.focus("#id_q")
    await page.keyboard.press("ArrowDown")
    assert await page.evaluate("document.activeElement.closest('#suggestions') !== null")
    await page.keyboard.press("Escape")
    await expect(page.locator("#suggestions a")).to_have_count(0)
    assert await page.evaluate("document.activeElement.id") == "id_q"
    control(fake_perplexity, ask={})
    assert page.console_errors == []


@pytest.mark.parametrize("page", [PHONE], indirect=True, ids=["phone"])
async def test_bad_input_stays_readable_on_a_phone(page, pplxweb_server):
    from django.contrib.auth import get_user_model

    from search.models import Entry, Thread
    from tests.search.test_answer_page import long_report

    base = pplxweb_server
    await first_run(page, base, "bad")
    user = await get_user_model().objects.aget(username="bad")
    sources = [
        {"title": "", "url": "https://xn--bcher-kva.example/"},
        {"title": "T" * 2000, "url": "http://192.168.1.20:8080/page"},
        *(
            {"title": f"Source {n}", "url": f"https://s{n}.example/{'x' * 300}", "snippet": "s" * 600}
            for n in range(58)
        ),
    ]
    table = "| a | b |\n|---|---|\n" + "".join(f"| {'w' * 40} {n} | {'v' * 60} |\n" for n in range(200))
    recipe = (
        "| Ingredient | Grams | Percentage | Temperature | Hydration | Fermentation |\n|---|---|---|---|---|---|\n"
        "| Strong white bread flour | 500 | 100% | Room temperature | Absorbs water | Overnight |\n"
        "| Water | 350 | 70% | Lukewarm | Seventy percent | Together |\n"
    )
    answer = f"Cited [1][2] and [99].\n\n{recipe}\n\n{'x' * 10_000}\n\n{table}"
    thread = await Thread.objects.acreate(user=user, title="bad input")
    await Entry.objects.acreate(
        thread=thread, user=user, question="Q" * 5000, status="completed", answer=answer, sources=sources,
        report=long_report(200_000),
    )  # fmt: skip
    await page.goto(f"{base}/thread/{thread.pk}/")
    assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], await page.evaluate(
        WIDE
    )
    question = await page.locator(".question").bounding_box()
    assert question["height"] < 200  # folded to a few lines
    # a table's words stay whole ("Grams", not "Gram" / "s"): only a word too long for any screen breaks
    split = await page.evaluate(SPLIT_WORDS)
    assert split == [], split
    await page.click(".all-sources summary")
    await expect(page.locator(".all-sources ol.sources li")).to_have_count(60)
    assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], await page.evaluate(
        WIDE
    )
    await shoot(page, "bad-input", audit=False)
    # a long paste in the box: the counter says so, no lookup of past questions is sent for it
    lookups = []
    page.on("request", lambda r: lookups.append(r.url) if "/history/suggest/" in r.url else None)
    await page.fill("#id_q", "bread " * 4000)
    await expect(page.locator("#q-counter")).to_contain_text("a question can be at most")
    await page.wait_for_timeout(600)  # past the lookup's 300 ms wait
    await page.fill("#id_q", "bread " * 50)
    await expect(page.locator("#suggestions")).to_be_attached()
    await page.wait_for_timeout(600)
    assert lookups and all(len(url) < 2000 for url in lookups), [len(url) for url in lookups]
    assert page.console_errors == [], page.console_errors


@pytest.mark.parametrize("page", [DESKTOP, PHONE], indirect=True, ids=["desktop", "phone"])
async def test_a_report_and_a_cut_short_answer(page, pplxweb_server):
    from django.contrib.auth import get_user_model

    from search.models import Entry, Thread
    from tests.search.test_answer_page import SOURCES, long_report

    base = pplxweb_server
    name = f"report{page.viewport_size['width']}"
    await first_run(page, base, name)
    user = await get_user_model().objects.aget(username=name)
    thread = await Thread.objects.acreate(user=user, title="Deep question")
    await Entry.objects.acreate(
        thread=thread, user=user, question="What changed in bread science?", status="completed",
        answer="A cover note: the report below has the details [1].", sources=SOURCES, report=long_report(15_000),
    )  # fmt: skip
    cut = await Entry.objects.acreate(
        thread=thread, user=user, question="And then?", status="truncated", answer="The dough rises and the Co",
        error="Perplexity's stream ended before the answer was complete.", first_text_ms=900, sources=SOURCES,
    )  # fmt: skip
    await page.goto(f"{base}/thread/{thread.pk}/")
    report = page.locator(".report")
    await report.locator("h3").scroll_into_view_if_needed()
    await shoot(page, "report")
    if page.viewport_size["width"] > 1000:  # the contents stay beside the text while it scrolls
        await page.locator("#r-part-12").scroll_into_view_if_needed()
        toc = await page.locator(".report-toc").bounding_box()
        assert 0 <= toc["y"] < 100
        await shoot(page, "report-scrolled")
    line = page.locator(f"#entry-{cut.pk}-meta .cut")
    await expect(line).to_contain_text("The answer stopped here: Perplexity's stream ended")
    await expect(line.locator("button")).to_have_text("Retry")
    await line.scroll_into_view_if_needed()
    await shoot(page, "cut-short")
    await report.locator("summary").click()  # it folds
    await expect(page.locator(".report-body")).to_be_hidden()


@pytest.mark.journey  # also on PostgreSQL + Redis (tests/run.sh)
@pytest.mark.parametrize("page", [DESKTOP, PHONE], indirect=True, ids=["desktop", "phone"])
async def test_the_history_page(page, pplxweb_server):
    """History as a household's: the header on one line, entries in the first screen (the filters
    folded on a phone), the filter fields as tall as the search field, model names in the list."""
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from search.models import Entry, Thread
    from tests.search.test_answer_page import SOURCES

    base = pplxweb_server
    phone = page.viewport_size["width"] < 600
    name = f"historian{page.viewport_size['width']}"
    await first_run(page, base, name)
    user = await get_user_model().objects.aget(username=name)
    models = ["pplx_pro", "turbo", "gemini38flash", "gpt52", "claude48opusthinking"]
    for n in range(12):
        thread = await Thread.objects.acreate(user=user, title=f"Question {n}")
        entry = await Entry.objects.acreate(
            thread=thread, user=user, question=f"How long does dough number {n} need to rise in a cold kitchen?",
            status="failed" if n == 3 else "completed", answer="It needs **two hours** at 18 °C [1].",
            sources=SOURCES, model=models[n % len(models)],
        )  # fmt: skip
        await Entry.objects.filter(pk=entry.pk).aupdate(created=timezone.now() - timedelta(hours=9 * n))
    await page.goto(f"{base}/history/")
    await shoot(page, "history-list")
    width, height = page.viewport_size["width"], page.viewport_size["height"]
    # the header is one line: the brand and every link of the menu on the same row
    header = await page.locator("header.site").bounding_box()
    tops = await page.evaluate(
        "[...document.querySelectorAll('header.site .brand, header.site nav a, header.site nav button')]"
        ".map(e => Math.round(e.getBoundingClientRect().top + e.getBoundingClientRect().height / 2))"
    )
    print(f"history {width}x{height}: header {header['height']:.0f} px, middles {tops}")
    assert header["height"] < 64 and max(tops) - min(tops) <= 3, (header, tops)
    assert await page.evaluate("document.documentElement.scrollWidth") <= width, await page.evaluate(WIDE)
    # entries in the first screen; on a phone the filters folded behind one "Filters" button
    filters = page.locator("details.filters")
    assert await filters.evaluate("d => d.open") is False
    rows = page.locator("ol.history li.row")
    first = await rows.first.bounding_box()
    print(f"history {width}x{height}: first entry at {first['y']:.0f} px")
    assert first["y"] + first["height"] <= height, first
    await expect(rows.first).to_contain_text("Best")
    await expect(page.locator("ol.history")).to_contain_text("Gemini 3.8 Flash")
    await expect(page.locator("ol.history")).not_to_contain_text("gemini38flash")
    if phone:
        await filters.locator("summary").click()
    # the filter fields line up with the search field: the same height
    heights = await page.evaluate(
        "[...document.querySelectorAll('.history-filters input:not([type=checkbox]), .history-filters select')]"
        ".map(e => [e.id, Math.round(e.getBoundingClientRect().height * 10) / 10])"
    )
    print(f"history {width}x{height}: field heights {heights}")
    assert len(heights) == 6 and max(h for _, h in heights) - min(h for _, h in heights) <= 1, heights
    options = await page.locator("#id_model option").all_text_contents()
    assert options == ["Any model", "Best", "Claude Opus 4.8 Thinking", "Gemini 3.8 Flash", "GPT-5.2"]
    if width >= 960:  # the five filters on one row
        tops = await page.locator(".history-filters .grid .field").evaluate_all(
            "fields => fields.map(f => Math.round(f.getBoundingClientRect().top))"
        )
        assert len(tops) == 5 and len(set(tops)) == 1, tops
    await shoot(page, "history-filters")
    # a search: every match, the words marked, each row with its date, model and sources
    await page.goto(f"{base}/history/?q=dough+hours")
    await expect(rows).to_have_count(12)
    await expect(rows.first.locator("mark").first).to_have_text(re.compile("dough|hours", re.I))
    await expect(rows.first).to_contain_text("3 sources")
    assert await page.evaluate("document.documentElement.scrollWidth") <= width, await page.evaluate(WIDE)
    await shoot(page, "history-search")
    assert page.console_errors == []


LONE_PUNCTUATION = """() => [...document.querySelectorAll('.answer a.cite')].filter(chip => {
  const after = chip.parentElement.classList.contains('cite-run') ? chip.nextSibling : null;
  if (!after || after.nodeType !== Node.TEXT_NODE) return false;
  const range = document.createRange();
  range.setStart(after, 0);
  range.setEnd(after, 1);
  return Math.abs(range.getBoundingClientRect().top - chip.getBoundingClientRect().top) > 8; }).length"""


async def test_a_citations_punctuation_never_starts_a_line(page):
    """At every width from a small phone to a narrow desktop, the "." or "," after a chip stays on
    the chip's line (the page's own stylesheet; without its `cite-run` rule, several of these
    widths put one alone at a line's start)."""
    from search.render import render_answer

    sources = [{"url": f"https://site{n}.example/page", "title": f"Source {n}"} for n in range(1, 4)]
    html = render_answer(
        "Paris is the capital and most populous city of France [1]. With an estimated population "
        "of 2.1 million residents in an area of more than 105 km² [2][3], Paris is the fourth-most "
        "populous city in the European Union [1]. It is a centre of finance, diplomacy, commerce, "
        "culture [2], fashion, and gastronomy [3].\n\n- Area: 105 km² [1]; metro much larger [2].",
        sources,
    )
    css = (ROOT / "static" / "pplxweb.css").read_text()
    lone = {}
    for width in range(280, 700, 3):
        await page.set_viewport_size({"width": width, "height": 700})
        await page.set_content(f"<style>{css}</style><article class='answer'>{html}</article>")
        if count := await page.evaluate(LONE_PUNCTUATION):
            lone[width] = count
    assert lone == {}, f"a lone punctuation mark starts a line at these widths: {lone}"


async def test_a_citations_card_stays_on_the_screen(page):
    """A chip's card opens under it, moved left as far as it must: at every width from a small
    phone to a desktop, every card is whole on the screen (8 px from each edge). Before, a card
    too wide for the right edge was anchored to its chip's right edge and could leave by the left."""
    from search.render import render_answer

    sources = [
        {"url": f"https://site{n}.example/page", "title": f"A long title of source {n} " * 3}
        for n in (1, 2, 3)
    ]
    html = render_answer(
        "Bread rises [1] because yeast eats sugars and gives off carbon dioxide [2], which the "
        "gluten network traps [3]; steam does the rest in the oven [1][2]. A longer proof in the "
        "fridge gives more flavour [3], and a hotter oven a better crust [2].",
        sources,
    )
    outside = {}
    for width in (280, 320, 360, 390, 414, 480, 600, 768, 1024, 1280):
        await page.set_viewport_size({"width": width, "height": 800})
        await answer_page(page, html)
        cards = await page.evaluate(
            """() => [...document.querySelectorAll('a.cite')].map((cite) => {
                 cite.focus();
                 const r = (cite.closest('.cite-group') || cite).querySelector('.cite-card').getBoundingClientRect();
                 cite.blur();
                 return [Math.round(r.left), Math.round(r.right), Math.round(r.width)]; })"""
        )
        assert len(cards) == 6 and all(w > 100 for _, _, w in cards), (width, cards)  # "[1][2]" is one
        off = [(left, right) for left, right, _ in cards if left < 7 or right > width - 7]
        if off:
            outside[width] = off
    assert outside == {}, f"cards off the screen (left, right) by width: {outside}"


CITED_TOGETHER = "Steam does the rest in the oven [1][2][3]."


async def answer_page(page, html: str) -> None:
    """`html` as an answer on a page of its own, with pplxweb's style and script."""
    css, js = ((ROOT / "static" / name).read_text() for name in ("pplxweb.css", "pplxweb.js"))
    await page.goto("about:blank")  # a new window: the script's top-level names are declared again
    await page.set_content(
        f"<style>{css}</style><main><article class='answer'>{html}</article></main><script>{js}</script>"
    )


async def sources_served(context) -> None:
    await context.route("https://*.example/**", lambda route: route.fulfill(body="a source"))


async def test_sources_cited_together_each_open_from_their_card(page):
    """ "[1][2][3]" is one chip linking the first source; its card lists each source as a link of
    its own (it was text inside the first one's link, so clicking the second opened the first):
    reached with the mouse (the card stays open on the way from chip to card), the keyboard
    (Tab goes through the card's links, Esc closes it) and, on a touch screen, a first tap."""
    from search.render import render_answer

    sources = [{"url": f"https://site{n}.example/page", "title": f"Source number {n}"} for n in (1, 2, 3)]
    await sources_served(page.context)
    await answer_page(page, render_answer(CITED_TOGETHER, sources))
    chip, card = page.locator("a.cite"), page.locator(".cite-card")
    assert await chip.count() == 1 and await chip.get_attribute("href") == "https://site1.example/page"
    items = card.locator("a.cite-item")
    assert await items.evaluate_all("links => links.map(a => a.href)") == [s["url"] for s in sources]
    # the mouse: over the chip, down to the card's second source, a click opens that source
    await chip.hover()
    await expect(card).to_be_visible()
    box = await chip.bounding_box()
    second = await items.nth(1).bounding_box()
    await page.mouse.move(box["x"] + 5, box["y"] + box["height"] + 2)  # between chip and card
    await expect(card).to_be_visible()
    await page.mouse.move(second["x"] + 10, second["y"] + 5, steps=5)
    await expect(card).to_be_visible()
    async with page.expect_popup() as opened:
        await page.mouse.click(second["x"] + 10, second["y"] + 5)
    assert (await opened.value).url == "https://site2.example/page"
    await page.mouse.move(0, 0)
    await expect(card).to_be_hidden()
    # the keyboard: Tab to the chip shows the card, Tab goes through its sources, Esc closes it
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.className") == "cite"
    await expect(card).to_be_visible()
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.href") == "https://site2.example/page"
    await expect(card).to_be_visible()
    await page.keyboard.press("Escape")
    await expect(card).to_be_hidden()
    assert await page.evaluate("document.activeElement.className") == "cite"  # back on the chip
    # a touch screen: the first tap opens the card (no source yet), a tap on a source opens it
    phone = await page.context.browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    await sources_served(phone)
    touch = await phone.new_page()
    await answer_page(touch, render_answer(CITED_TOGETHER, sources))
    popups = []
    touch.on("popup", lambda popup: popups.append(popup))
    await touch.locator("a.cite").tap()
    await expect(touch.locator(".cite-card")).to_be_visible()
    await asyncio.sleep(0.3)
    assert popups == [] and touch.url == "about:blank"
    async with touch.expect_popup() as opened:
        await touch.locator("a.cite-item").nth(2).tap()
    assert (await opened.value).url == "https://site3.example/page"
    await touch.locator("main").tap(position={"x": 5, "y": 5})
    await expect(touch.locator(".cite-card")).to_be_hidden()
    await phone.close()


@pytest.mark.parametrize("page", [DESKTOP, PHONE], indirect=True, ids=["desktop", "phone"])
async def test_scrolling_up_while_it_streams_lets_go_of_the_answer(page, pplxweb_server, fake_perplexity):
    """While the answer grows the page scrolls with it; a person scrolling up (here the wheel)
    stops that at once, even right after one of the page's own scrolls (it scrolls at every
    update while the answer is shorter than the screen): the page is never pulled back."""
    await linked_owner()
    words = [f"Paragraph {n}: the dough rises as the yeast works through the sugars.\n\n" for n in range(60)]
    control(fake_perplexity, ask={"answer": words, "pace": 0.06}, requests=[])
    await sign_in(page, pplxweb_server)
    await ask(page, "How does dough rise?")
    entry = page.locator("article.entry").first
    await expect(entry.locator(".answer")).to_contain_text("Paragraph 12", timeout=10000)
    await page.wait_for_function("() => window.scrollY > 30")  # it follows the answer down
    await page.mouse.move(195, 300)
    await page.mouse.wheel(0, -120)
    await asyncio.sleep(0.05)
    left = await page.evaluate("window.scrollY")
    await asyncio.sleep(0.8)  # ten updates
    assert await page.evaluate("window.scrollY") <= left + 2
    await expect(entry.locator(".status-completed")).to_be_visible(timeout=15000)
    assert await page.evaluate("window.scrollY") <= left + 2
