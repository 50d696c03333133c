"""Markdown exports write only http, https and mailto links, and no raw HTML
(search/markdown_links.py), checked with a CommonMark parser of the test's own that accepts
every scheme and raw HTML, on hostile cases, on the export endpoints, and on generated text."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from search.markdown_links import safe_links
from search.models import Entry, Thread

VIEWER = MarkdownIt("commonmark", {"html": True, "linkify": True}).enable(["table", "strikethrough"])
VIEWER.validateLink = lambda url: True


def links_and_html(text: str) -> list[str]:
    """What a permissive viewer would make a link, an image or raw HTML of."""
    found = []

    def walk(tokens):
        for token in tokens:
            if token.type in ("html_inline", "html_block"):
                found.append(f"html:{token.content.strip()}")
            for name in ("href", "src"):
                if token.attrGet(name) is not None:
                    found.append(str(token.attrGet(name)))
            walk(token.children or [])

    walk(VIEWER.parse(text))
    return found


def bad(text: str) -> list[str]:
    def scheme(url: str) -> str:
        cleaned = re.sub(r"[\t\n\r]", "", url).lstrip("".join(map(chr, range(0x21))))
        match = re.match(r"([A-Za-z][A-Za-z0-9+.\-]*):", cleaned)
        return match.group(1).lower() if match else ""

    return [
        u
        for u in links_and_html(text)
        if u.startswith("html:") or scheme(u) not in ("", "http", "https", "mailto")
    ]


HOSTILE = [
    "[x](javascript:alert(1))",
    "![i](javascript:alert(1))",
    "[x]( <javascript:alert(1)> )",
    "[x](jav&#97;script:alert(1))",
    "[x](javascript\\:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x][r]\n\n[r]: data:text/html,<script>alert(1)</script>",
    "[r]:\n  vbscript:msgbox\n\n[r]",
    "> [r]:\n> javascript:alert(1)\n\n[r]",
    "- [r]:\n  javascript:alert(1)\n\n[r]",
    "<javascript:alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    "<img src=x onerror=alert(1)>",
    "<div>\n<script>alert(1)</script>\n</div>",
    "<!-- hidden -->",
    "*[x](javascript:1)*",
    "| a | [x](javascript:1) |\n|---|---|\n| 1 | <b>2</b> |",
    "[a [b] c](javascript:x)",
    "`` ` ``[x](javascript:1)",
    "`unclosed [x](javascript:1)",
    "[x](file:///etc/passwd) [y](data:,hi) [z](blob:x)",
    "[" * 3000 + "x](javascript:1)",
]
BENIGN = [
    "Paris is the capital [^1].\n\n[^1]: [Paris - Wikipedia](https://en.wikipedia.org/wiki/Paris)",
    "| City | Link |\n|---|---|\n| Paris | [wiki](https://x.example/p) |",
    "Use `<div>` and `a[i](x)`; 3 < 4 and a<b.\n\n```html\n<script>alert(1)</script>\n```",
    "Mail <me@example.com> or [me](mailto:me@example.com), see <https://example.com> or www.example.com.",
    "    indented <b>code</b> [x](javascript:1)",
    "[relative](docs/page.md) and [anchor](#top) and ![img](../images/1-0.png)",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_links_and_html_are_text_in_the_export(text):
    out = safe_links(text)
    assert bad(out) == [], out
    assert bad(text)  # each case is one a permissive viewer would follow
    words = re.findall(r"[a-z]{4,}", text)
    assert all(word in out for word in words)  # nothing said is lost


@pytest.mark.parametrize("text", BENIGN)
def test_benign_markdown_is_left_as_it_is(text):
    assert safe_links(text) == text


FRAGMENTS = st.sampled_from(
    ["[", "]", "(", ")", "<", ">", "`", "``", "\\", "\n", "\n\n", "> ", "- ", "    ", ":", " ", "!",
     "javascript:", "JAVA&#83;cript:", "data:", "vbscript:", "http://a.b", "mailto:a@b.c", "&#58;",
     "<a href=", "<img src=x onerror=", "<!--", "x", "alert(1)", "[r]: ", "```\n", "|", "&Tab;"]
)  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(FRAGMENTS, max_size=40).map("".join))
def test_no_generated_text_gets_a_bad_link_through(text):
    assert bad(safe_links(text)) == []


@pytest.mark.django_db
def test_the_export_endpoints_write_no_bad_link(owner, owner_client):
    thread = Thread.objects.create(user=owner, title="[t](javascript:alert(1)) title")
    entry = Entry.objects.create(
        thread=thread,
        user=owner,
        question="q <img src=x onerror=alert(1)>",
        status=Entry.Status.COMPLETED,
        answer="See [here](javascript:alert(1)) [1].",
        report="# Report\n\n<script>alert(1)</script> [r](vbscript:x)",
        sources=[
            {"title": "evil", "url": "javascript:alert(2)"},
            {"title": "ok", "url": "https://ok.example"},
        ],
        related=["<a href=javascript:1>more</a>"],
    )
    for name, args in [
        ("search:export_thread", [thread.pk, "md"]),
        ("search:entry_markdown", [entry.pk]),
        ("search:entry_report", [entry.pk]),
    ]:
        text = owner_client.get(reverse(name, args=args)).content.decode()
        assert bad(text) == [], (name, text)
        assert "https://ok.example" in text or name == "search:entry_report"
    text = owner_client.get(
        reverse("search:entry_markdown", args=[entry.pk]) + "?citations=0"
    ).content.decode()
    assert bad(text) == [] and "here" in text
