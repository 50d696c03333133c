"""In Chromium, through the real server: a saved answer's math drawn as MathML (a deep research
answer's `$$` block with `=` and `-` lines among it, inline `\\(...\\)` and `$...$`, prices left
as text), its headings in order (axe: heading-order), and Copy putting both HTML (sources as a
list, MathML) and Markdown (the LaTeX) on the clipboard, with and without the Clipboard API.
Screenshots of the page, desktop and phone, light and dark, go to test-artifacts/."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import expect

from search.models import Entry, Thread
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_library_journey import linked, sign_in

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = r"""## Fees

The total cost is the sum of the parts [1]:

$$
\text{Total} = \text{OCIO fee}
=
\frac{0.35\%}{12} \times \text{assets} - \text{rebate}
-
\sqrt{x^2 + 1}
$$

Inline, the rate is \(r = \frac{a}{b}\) and the mean is $\bar{x} = 5$, while the plan costs $5 and $10 a month [2].

#### By size

| Assets | Fee | Note |
|:--|--:|:--|
| $1M | 0.35% | small |
| $10M | 0.30% | medium |

$$\left( \sum_{i=1}^{n} x_i \right)^2 \leq n \sum_{i=1}^{n} x_i^2$$
"""
LONG = "\n\n".join(
    f"### Part {n}\n\nParagraph {n} of a long answer, with a formula \\(e^{{{n}i\\pi}}\\) and a source [1]."
    for n in range(1, 40)
)
SOURCES = [
    {
        "title": "OCIO fees explained",
        "url": "https://fees.example/ocio",
        "snippet": "What outsourced CIOs cost.",
    },
    {"title": "Pricing", "url": "https://plans.example/pricing", "snippet": "Plans from $5."},
]


@sync_to_async
def saved_thread(person) -> int:
    thread = Thread.objects.create(user=person, title="OCIO fees")
    for question, answer in (("How are OCIO fees computed?", ANSWER), ("And over many years?", LONG)):
        Entry.objects.create(
            thread=thread, question=question, answer=answer, sources=SOURCES, status="completed", done_ms=4200
        )
    return thread.pk


async def test_math_shows_as_mathml_and_copy_gives_html_and_text(page, pplxweb_server):
    person = await linked("mathy")
    thread = await saved_thread(person)
    await sign_in(page, pplxweb_server, "mathy")
    await page.goto(f"{pplxweb_server}/thread/{thread}/")
    entry = page.locator("article.entry").first
    block = entry.locator(".answer math[display='block']").first
    await expect(block).to_be_visible()
    drawn = await block.evaluate(
        "m => ({ns: m.namespaceURI, h: m.getBoundingClientRect().height, frac: !!m.querySelector('mfrac')})"
    )
    assert drawn == {"ns": "http://www.w3.org/1998/Math/MathML", "h": drawn["h"], "frac": True}
    assert drawn["h"] > 30  # a fraction over a line: drawn as math, not a line of text
    text = await entry.locator(".answer").inner_text()
    assert "$$" not in text and "\\frac" not in text and "costs $5 and $10 a month" in text
    assert await entry.locator(".answer math[display='inline']").count() == 2
    headings = await page.evaluate(
        "[...document.querySelectorAll('main h1, main h2, main h3, main h4')].map(h => h.tagName)"
    )
    assert "H5" not in headings and headings[:4] == ["H1", "H2", "H3", "H4"]  # "####" under "##": h4
    results = await Axe().run(page)
    assert [v["id"] for v in results.response["violations"] if v["id"] == "heading-order"] == []
    await screenshots(page, "math")

    # Copy: HTML (sources as a numbered list, math as MathML) and the Markdown with its LaTeX
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    copy = entry.locator("button[data-copy][data-citations='1']")
    await copy.click()
    await expect(copy).to_have_text("Copied")
    html, plain = await clipboard(page)
    assert '<ol><li><a href="https://fees.example/ocio">OCIO fees explained</a></li>' in html
    assert "<math" in html and "<table>" in html and "cite-card" not in html and "<sup>" in html
    assert "$$\n\\text{Total} = \\text{OCIO fee}" in plain and "[^1]: [OCIO fees explained]" in plain
    # without the Clipboard API (plain http on a LAN address) both kinds still go, by the copy command
    await page.evaluate("Object.defineProperty(window, 'isSecureContext', {value: false})")
    await entry.locator("details.more summary").click()
    bare = entry.locator("button[data-copy][data-citations='0']")
    await bare.click()
    await expect(bare).to_have_text("Copied")
    html, plain = await clipboard(page)
    assert "<math" in html and "<ol>" not in html and "[1]" not in html
    assert "the plan costs $5 and $10 a month." in plain and "[^" not in plain
    assert page.console_errors == []


async def clipboard(page) -> tuple[str, str]:
    """The clipboard's text/html and text/plain."""
    return tuple(
        await page.evaluate(
            """async () => { const [item] = await navigator.clipboard.read();
                 const read = async (type) => item.types.includes(type) ? (await item.getType(type)).text() : '';
                 return [await read('text/html'), await read('text/plain')]; }"""
        )
    )


async def screenshots(page, name: str) -> None:
    """The math answer (its heading at the top) and the end of the long one, at desktop and
    phone size, light and dark; the page never scrolls sideways."""
    ARTIFACTS.mkdir(exist_ok=True)
    for size, viewport in (
        ("desktop", {"width": 1280, "height": 800}),
        ("phone", {"width": 390, "height": 844}),
    ):
        await page.set_viewport_size(viewport)
        wide = await page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
        assert not wide, f"the page scrolls sideways at {size} size"
        for scheme in ("light", "dark"):
            await page.emulate_media(color_scheme=scheme)
            await page.evaluate("document.querySelector('article.entry .answer h3').scrollIntoView()")
            await page.screenshot(path=str(ARTIFACTS / f"{name}-{size}-{scheme}.png"))
            await page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
            await page.screenshot(path=str(ARTIFACTS / f"{name}-long-{size}-{scheme}.png"))
    await page.set_viewport_size({"width": 1200, "height": 900})
    await page.emulate_media(color_scheme="light")
