"""Upstream text to safe HTML. Every page, fragment and command renders answers through here.

Perplexity's text is hostile input: markdown-it's `js-default` preset (no raw HTML), no link
reference definitions (the model cannot redefine `[1]`), images shown as links (no tracking
pixels), citations `[n]` linked to the n-th source only when that source is http(s), code
highlighted by Pygments with classes, and nh3 as the last word with a tight allowlist.
"""

from __future__ import annotations

import contextlib
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

from pplxweb.perplexity.values import scrub  # lone surrogates out (also for forms, fragments)

MAX_MARKDOWN = 1024 * 1024  # a longer answer is cut (with a note) rather than hang a page
BIDI = dict.fromkeys([*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F])
CITATION = re.compile(r"\[(\d{1,3})\]")
TAGS = {
    "p", "br", "strong", "em", "s", "del", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td",
    "hr", "span", "sup",
}  # fmt: skip
ATTRIBUTES = {
    "a": {"href", "title", "aria-label"},
    "ol": {"start"},
    "span": {"class"},
    "pre": {"class"},
    "code": {"class"},
    **{f"h{n}": {"id"} for n in range(1, 7)},  # a report's headings, for its contents list
}
PUNCTUATION = re.compile(r"[.,;:!?)\]\u2019\u201d\u00bb]+")  # what follows a citation on its line
HEADING_SHIFT = 2  # the question is an h2: an answer's `#` is an h3


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


def _shift_headings(state: StateCore) -> None:
    """Headings sit below the question's level (`#` -> h3 in an answer), h6 at most."""
    shift = state.env.get("shift", HEADING_SHIFT)
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1]) + shift)}"


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
            children += _split_citations(token, sources, state.env.get("cards", True))
        block.children = children


def _split_citations(token: Token, sources: Sequence[Any], cards: bool = True) -> list[Token]:
    """Each `[n]` with an http(s) source becomes a chip: the site's name, and a card with the
    title, site and snippet shown on hover or focus. Several standing together ("[1][2]") are
    one chip, as on Perplexity: the first site's name and "+1", linking the first, its card
    listing each. The link's own name is what a screen reader says: "source 3: title, site".
    Chips followed by punctuation ("Paris[1].") are held together with it (`cite-run`), so a
    line never starts with the lone "."."""
    out: list[Token] = []
    last = 0
    matches = [m for m in CITATION.finditer(token.content) if _cited(sources, int(m.group(1)))]
    runs: list[list[re.Match]] = []  # chips standing together, "[1][2]"
    for match in matches:
        if runs and runs[-1][-1].end() == match.start():
            runs[-1].append(match)
        else:
            runs.append([match])
    for run in runs:
        if run[0].start() > last:
            out.append(_text(token.content[last : run[0].start()]))
        numbers = list(dict.fromkeys(int(m.group(1)) for m in run))  # "[1][1]" is one
        chips = _chip([source_info(n, sources[n - 1]) for n in numbers], cards)
        last = run[-1].end()
        punctuation = PUNCTUATION.match(token.content, last)
        if punctuation:
            chips = [_html('<span class="cite-run">'), *chips, _text(punctuation.group()), _html("</span>")]
            last = punctuation.end()
        out += chips
    if last == 0:
        return [token]
    if last < len(token.content):
        out.append(_text(token.content[last:]))
    return out


def _cited(sources: Sequence[Any], n: int) -> bool:
    return 1 <= n <= len(sources) and bool(_source_url(sources[n - 1]))


def _chip(infos: list[dict], cards: bool = True) -> list[Token]:
    """One chip for the sources `infos` cited together (source_info each). A lone source's card
    is part of its link; sources cited together are a group (`cite-group`): the chip links the
    first, and its card, beside the chip rather than in it, links each."""
    first, more = infos[0], len(infos) - 1
    link = Token("link_open", "a", 1)
    named = "; ".join(f"{i['title']}, {i['host']}" if i["titled"] else i["title"] for i in infos)
    label = (
        f"source {first['n']}: {named}"
        if not more
        else f"sources {', '.join(str(i['n']) for i in infos)}: {named}"
    )
    link.attrs = {"href": first["url"], "class": "cite", "aria-label": label[:400]}
    plus = f'<span class="cite-more">+{more}</span>' if more else ""
    site = f'<span class="cite-site">{escape(first["site"])}</span>{plus}'
    close = Token("link_close", "a", -1)
    if not more:
        card = f'<span class="cite-item">{_card_item(first, 220)}</span>'
        return [link, _html(site + (f'<span class="cite-card">{card}</span>' if cards else "")), close]
    card = "".join(f'<a href="{escape(i["url"])}" class="cite-item">{_card_item(i, 120)}</a>' for i in infos)
    card = f'<span class="cite-card">{card}</span>' if cards else ""
    return [_html('<span class="cite-group">'), link, _html(site), close, _html(f"{card}</span>")]


def _card_item(info: dict, snippet: int) -> str:
    """A source in a citation's card: its title, host and the start of its snippet."""
    text = f'<span class="cite-title">{escape(info["title"][:160])}</span>' + (
        f'<span class="cite-host">{escape(info["host"])}</span>' if info["titled"] else ""
    )
    if info["snippet"]:
        text += f'<span class="cite-snippet">{escape(info["snippet"][:snippet])}</span>'
    return text


def _html(content: str) -> Token:
    token = Token("html_inline", "", 0)
    token.content = content
    return token


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
    md.core.ruler.push("shift_headings", _shift_headings)
    md.core.ruler.push("table_alignment", _table_alignment)
    return md


def clean(html: str) -> str:
    return nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        allowed_classes={"a": {"cite", "cite-item"}, "th": ALIGNED, "td": ALIGNED},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},  # never leave pplxweb mid-answer
        strip_comments=True,
    )


def render_answer(markdown: str, sources: Sequence[Any] = (), cards: bool = True) -> SafeString:
    """An answer's markdown as safe HTML, with `[n]` linked to `sources[n-1]`; `cards`: each
    citation carries its source's card (a live answer's growing tail leaves them out: it is
    re-sent at each update, and its blocks bring them once finished)."""
    text = scrub(markdown or "").translate(BIDI)
    note = ""
    if len(text) > MAX_MARKDOWN:
        text, note = (
            text[:MAX_MARKDOWN],
            "<p><em>(The answer is too long to show in full.)</em></p>",
        )
    html = _markdown().render(text, {"sources": list(sources), "cards": cards})
    return mark_safe(clean(html) + note)  # noqa: S308 - nh3 output with our allowlist


SECOND_LEVEL = {"co", "com", "org", "net", "gov", "ac", "edu", "ne", "or", "go"}  # bbc.co.uk
CHIPS = 4  # sources shown as chips above the answer; the rest behind "+N more"


def _host(url: str) -> str:
    """The URL's host for people: IDN decoded, without "www."."""
    host = urlsplit(url).hostname or "" if url else ""
    if "xn--" in host:
        with contextlib.suppress(UnicodeError):
            host = host.encode("ascii").decode("idna")
    return host.removeprefix("www.")


def _site(host: str) -> str:
    """A short site name: "en.wikipedia.org" -> "wikipedia", "bbc.co.uk" -> "bbc"; an address
    stays whole."""
    labels = host.split(".")
    if len(labels) < 2 or host.replace(".", "").isdigit() or ":" in host:
        return host
    if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in SECOND_LEVEL:
        return labels[-3]
    return labels[-2]


def source_info(n: int, source: Any) -> dict:
    """What the page shows of source `n` (1-based): cleaned, cut to size, only http(s) links."""
    get = source.get if isinstance(source, dict) else lambda k, s=source: getattr(s, k, "")
    url = safe_url(get("url"))
    host = _host(url)
    titled = " ".join(scrub(str(get("title") or "")).translate(BIDI).split())
    title = titled or host or f"Source {n}"  # an untitled source is named by its host, once
    site = _site(host)[:40] or f"source {n}"
    return {
        "n": n, "url": url, "title": title[:300], "titled": bool(titled), "host": host, "site": site,
        "letter": site[:1].upper() or str(n),
        "snippet": " ".join(scrub(str(get("snippet") or "")).translate(BIDI).split())[:600],
    }  # fmt: skip


def render_sources(sources: Sequence[Any]) -> SafeString:
    """The first sources as chips, then every source with its snippet behind "+N more" (or
    "Snippets" when all are chips). Titles and snippets escaped, only http(s) links."""
    items = [source_info(n, source) for n, source in enumerate(sources, start=1)]
    return render_to_string(
        "search/sources.html", {"sources": items, "chips": items[:CHIPS], "more": len(items) - CHIPS}
    )


# --- Deep Research reports ------------------------------------------------------------------------

REPORT_SHIFT = 3  # below the question (h2) and the report's own title (h3): `#` -> h4
MAX_REPORT = 2 * 1024 * 1024


def _slug(text: str, taken: set[str]) -> str:
    base = "-".join(re.findall(r"\w+", text.lower()))[:60].strip("-_") or "section"
    slug, k = f"r-{base}", 2
    while slug in taken:
        slug, k = f"r-{base}-{k}", k + 1
    taken.add(slug)
    return slug


def render_report(markdown: str, sources: Sequence[Any] = ()) -> tuple[str, list[dict]]:
    """A Deep Research report's HTML (the answers' dialect and sanitizer, headings given stable
    ids and shifted below the question's) and its contents: `[{"level", "text", "id"}]`, level 1
    for the report's top headings."""
    text = scrub(markdown or "").translate(BIDI)
    note = ""
    if len(text) > MAX_REPORT:
        text, note = text[:MAX_REPORT], "<p><em>(The report is too long to show in full.)</em></p>"
    md = _markdown()
    env = {"sources": list(sources), "shift": REPORT_SHIFT}
    tokens = md.parse(text, env)
    toc: list[dict] = []
    taken: set[str] = set()
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            inline = tokens[i + 1]
            title = "".join(c.content for c in inline.children or [] if c.type in ("text", "code_inline"))
            title = " ".join(title.split())[:200] or "Section"
            token.attrSet("id", _slug(title, taken))
            toc.append({"level": int(token.tag[1]) - REPORT_SHIFT, "text": title, "id": token.attrGet("id")})
    html = md.renderer.render(tokens, md.options, env)
    return mark_safe(clean(html) + note), toc  # noqa: S308 - nh3 output with our allowlist
