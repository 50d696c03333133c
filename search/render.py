"""Upstream text to safe HTML. Every page, fragment and command renders answers through here.

Perplexity's text is hostile input: markdown-it's `js-default` preset (no raw HTML), no link
reference definitions (the model cannot redefine `[1]`), images shown as links (no tracking
pixels), citations `[n]` linked to the n-th source only when that source is http(s), code
highlighted by Pygments with classes, and nh3 as the last word with a tight allowlist.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import nh3
from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from linkify_it import LinkifyIt
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

MAX_MARKDOWN = 1024 * 1024  # a longer answer is cut (with a note) rather than hang a page
BIDI = dict.fromkeys([*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F])
CITATION = re.compile(r"\[(\d{1,3})\]")
TAGS = {
    "p", "br", "strong", "em", "s", "del", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td",
    "hr", "span", "sup",
}  # fmt: skip
ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "span": {"class"},
    "pre": {"class"},
    "code": {"class"},
}


def scrub(text: str) -> str:
    """Replace lone surrogates (JSON can carry them; UTF-8 cannot) with "?"."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def safe_url(url: Any) -> str:
    """The URL when it is http(s) with a host, else ""."""
    if not isinstance(url, str):
        return ""
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    return url if parts.scheme.lower() in ("http", "https") and parts.netloc else ""


def _source_url(source: Any) -> str:
    url = source.get("url") if isinstance(source, dict) else getattr(source, "url", "")
    return safe_url(url)


def _highlight(code: str, lang: str, attrs: str) -> str:
    try:
        lexer = get_lexer_by_name((lang or "").strip().split()[0]) if lang.strip() else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return ""  # markdown-it escapes and wraps it itself
    body = highlight(code, lexer, HtmlFormatter(nowrap=True))
    return f'<pre class="highlight"><code>{body}</code></pre>\n'


def _image_as_link(self, tokens: list[Token], idx: int, options, env) -> str:
    token = tokens[idx]
    src = safe_url(token.attrGet("src"))
    alt = "".join(child.content for child in token.children or []) or "image"
    label = escape(f"[image: {alt}]")
    return f'<a href="{escape(src)}">{label}</a>' if src else label


ALIGN = re.compile(r"^text-align:(left|center|right)$")
ALIGNED = {"align-left", "align-center", "align-right"}


def _table_alignment(state: StateCore) -> None:
    """A table column's `style="text-align:..."` -> `class="align-..."`: the page's CSP allows no
    inline styles, so the attribute would be dropped by the browser and the alignment lost."""
    for token in state.tokens:
        if token.type in ("th_open", "td_open") and (style := token.attrGet("style")):
            token.attrs.pop("style", None)
            if match := ALIGN.match(str(style).replace(" ", "")):
                token.attrSet("class", f"align-{match.group(1)}")


def _citations(state: StateCore) -> None:
    """Text `[n]` -> a link to the n-th source (1-based), at the token level, never in code."""
    sources: Sequence[Any] = state.env.get("sources") or ()
    if not sources:
        return
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        in_link = 0
        for token in block.children:
            in_link += token.type == "link_open"
            in_link -= token.type == "link_close"
            if token.type != "text" or in_link or "[" not in token.content:
                children.append(token)
                continue
            children += _split_citations(token, sources)
        block.children = children


def _split_citations(token: Token, sources: Sequence[Any]) -> list[Token]:
    out: list[Token] = []
    last = 0
    for match in CITATION.finditer(token.content):
        n = int(match.group(1))
        url = _source_url(sources[n - 1]) if 1 <= n <= len(sources) else ""
        if not url:
            continue
        if match.start() > last:
            out.append(_text(token.content[last : match.start()]))
        link = Token("link_open", "a", 1)
        link.attrs = {"href": url, "class": "cite", "title": f"Source {n}"}
        out += [link, _text(str(n)), Token("link_close", "a", -1)]
        last = match.end()
    if last == 0:
        return [token]
    if last < len(token.content):
        out.append(_text(token.content[last:]))
    return out


def _text(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token


class _Linkify(LinkifyIt):
    """linkify-it with a quick check before its own pretest. That pretest is one large regex and
    was over half the time of rendering an answer; it cannot match text that has no ':', '/',
    '@', 'www.', 'localhost', nor a '.' followed by a letter or digit, which most sentences lack."""

    MAYBE = re.compile(r"[:/@]|\.\w|www\.|localhost", re.IGNORECASE)

    def pretest(self, text: str) -> bool:
        return bool(self.MAYBE.search(text)) and super().pretest(text)


@cache
def _markdown() -> MarkdownIt:
    md = MarkdownIt("js-default", {"linkify": True, "typographer": False, "highlight": _highlight})
    md.linkify = _Linkify()
    md.disable(["reference"])
    md.enable(["table", "strikethrough"])
    md.add_render_rule("image", _image_as_link)
    md.core.ruler.push("citations", _citations)
    md.core.ruler.push("table_alignment", _table_alignment)
    return md


def clean(html: str) -> str:
    return nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        allowed_classes={"a": {"cite"}, "th": ALIGNED, "td": ALIGNED},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def render_answer(markdown: str, sources: Sequence[Any] = ()) -> SafeString:
    """An answer's markdown as safe HTML, with `[n]` linked to `sources[n-1]`."""
    text = scrub(markdown or "").translate(BIDI)
    note = ""
    if len(text) > MAX_MARKDOWN:
        text, note = (
            text[:MAX_MARKDOWN],
            "<p><em>(The answer is too long to show in full.)</em></p>",
        )
    html = _markdown().render(text, {"sources": list(sources)})
    return mark_safe(clean(html) + note)  # noqa: S308 - nh3 output with our allowlist


def render_sources(sources: Sequence[Any]) -> SafeString:
    """The numbered sources list; titles and snippets escaped, only http(s) links."""
    items = []
    for n, source in enumerate(sources, start=1):
        get = source.get if isinstance(source, dict) else lambda k, s=source: getattr(s, k, "")
        url = safe_url(get("url"))
        title = scrub(str(get("title") or "")).translate(BIDI).strip() or url or f"Source {n}"
        items.append({
            "n": n, "url": url, "title": title[:300],
            "snippet": scrub(str(get("snippet") or "")).translate(BIDI)[:600],
            "host": urlsplit(url).hostname or "" if url else "",
        })  # fmt: skip
    return render_to_string("search/sources.html", {"sources": items})


def render_report(markdown: str) -> tuple[SafeString, list[dict]]:
    """A Deep Research report as safe HTML and its contents list ([{level, text, id}])."""
    if not markdown:
        return mark_safe(""), []
    toc = [
        {"level": len(m.group(1)), "text": m.group(2).strip()[:200], "id": f"h{n}"}
        for n, m in enumerate(re.finditer(r"^(#{1,3})[ \t]+(.+)$", scrub(markdown), re.M))
    ]
    return render_answer(markdown), toc
