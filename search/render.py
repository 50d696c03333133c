"""Upstream text to safe HTML. Every page, fragment and command renders answers through here.

Perplexity's text is hostile input: markdown-it's `js-default` preset (no raw HTML), no link
reference definitions (the model cannot redefine `[1]`), images shown as links (no tracking
pixels), citations `[n]` linked to the n-th source only when that source is http(s), code
highlighted by Pygments with classes (common languages, blocks up to HIGHLIGHT_MAX), math as
MathML (search/latex.py), and nh3 as the last word with a tight allowlist. Rendering takes time
linear in the text (search/bounded.py says how); RENDERER is the version stored with saved HTML
(search/rendered.py): raise it whenever what this module makes for a given text changes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

import nh3
from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from linkify_it import LinkifyIt
from markdown_it import MarkdownIt
from markdown_it.rules_block import table
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import image, link
from markdown_it.token import Token
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from search.bounded import bounded_link, bounded_table, flatten_quotes, linkify_inline, plain_run
from search.chips import BIDI, citations, safe_url, scrub, source_info
from search.latex import MATH_ATTRIBUTES, MATH_TAGS, math_plugin

# 1: before math, bounded rules and headings that never skip a level; 2: before light report chips
RENDERER = 3
MAX_MARKDOWN = 1024 * 1024  # a longer answer is cut (with a note) rather than hang a page
TAGS = {
    "p", "br", "strong", "em", "s", "del", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td",
    "hr", "span", "sup",
}  # fmt: skip
ATTRIBUTES = {
    "a": {"href", "title", "aria-label", "data-cite"},
    "ol": {"start"},
    "span": {"class"},
    "pre": {"class"},
    "code": {"class"},
    **{f"h{n}": {"id"} for n in range(1, 7)},  # a report's headings, for its contents list
    **MATH_ATTRIBUTES,
}
TAGS |= MATH_TAGS
ANSWER_LEVEL = 3  # the question is an h2: an answer's first heading is an h3
# Pygments' lexers are regular expressions, some slow on hostile text: only these, on blocks up
# to HIGHLIGHT_MAX characters; other code is shown plain.
HIGHLIGHT_MAX = 20_000
LEXERS = {
    "python", "py", "javascript", "js", "typescript", "ts", "json", "bash", "sh", "shell", "zsh",
    "console", "html", "xml", "css", "sql", "c", "cpp", "c++", "java", "kotlin", "go", "rust", "ruby",
    "php", "csharp", "c#", "swift", "yaml", "yml", "toml", "ini", "diff", "r", "matlab", "latex",
    "tex", "markdown", "md", "dockerfile", "makefile", "powershell", "scala", "haskell", "lua",
}  # fmt: skip


@cache
def _formatter() -> HtmlFormatter:
    return HtmlFormatter(nowrap=True)  # made once: its style sheet took 1 ms a code block


@cache
def _lexer(name: str):
    try:
        return get_lexer_by_name(name) if name in LEXERS else None
    except ClassNotFound:
        return None


def _highlight(code: str, lang: str, attrs: str) -> str:
    lexer = _lexer((lang or "").strip().split()[0].lower()) if (lang or "").strip() else None
    if lexer is None or len(code) > HIGHLIGHT_MAX:
        return ""  # markdown-it escapes and wraps it itself
    body = highlight(code, lexer, _formatter())
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


def _outline_headings(state: StateCore) -> None:
    """Headings placed under the page's own (axe: heading-order): the first at `level` (h3 in an
    answer), each deeper one a single level below the heading it falls under, whatever the
    Markdown skipped ("## a" then "#### b": h3, h4), h6 at most. `outline` carries the headings
    still open ([(Markdown level, page level)]) from one render to the next (the live path's
    blocks)."""
    base = state.env.get("level", ANSWER_LEVEL)
    stack = state.env.setdefault("outline", [])
    tag = ""
    for token in state.tokens:
        if token.type == "heading_open":
            level = int(token.tag[1])
            while stack and stack[-1][0] >= level:
                stack.pop()
            page = min(6, stack[-1][1] + 1 if stack else base)
            stack.append((level, page))
            token.tag = tag = f"h{page}"
        elif token.type == "heading_close":
            token.tag = tag


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
    md.inline.ruler.at("link", bounded_link(link, 0))
    md.inline.ruler.at("image", bounded_link(image, 1))
    md.inline.ruler.at("linkify", linkify_inline)
    md.inline.ruler.after("text", "plain_run", plain_run)
    md.block.ruler.at("table", bounded_table(table))
    md.use(math_plugin)
    md.add_render_rule("image", _image_as_link)
    md.core.ruler.push("citations", citations)
    md.core.ruler.push("outline_headings", _outline_headings)
    md.core.ruler.push("table_alignment", _table_alignment)
    return md


# The one sanitizer: its configuration is built once (nh3's Cleaner); nh3.clean() builds it at
# every call, which was 280 of its 300 us on a short paragraph (most of an update's rendering).
CLEANER = nh3.Cleaner(
    tags=TAGS,
    attributes=ATTRIBUTES,
    allowed_classes={"a": {"cite", "cite-item"}, "th": ALIGNED, "td": ALIGNED},
    url_schemes={"http", "https", "mailto"},
    link_rel="noopener noreferrer nofollow",
    set_tag_attribute_values={"a": {"target": "_blank"}},  # never leave pplxweb mid-answer
    strip_comments=True,
)


def clean(html: str) -> str:
    return CLEANER.clean(html)


def _text_of(markdown: str, limit: int) -> tuple[str, bool]:
    """The text to render: cleaned, at most `limit` characters (True: it was cut)."""
    text = flatten_quotes(scrub(markdown or "").translate(BIDI))
    return (text[:limit], True) if len(text) > limit else (text, False)


def render_answer(
    markdown: str,
    sources: Sequence[Any] = (),
    cards: bool = True,
    outline: list | None = None,
    copy: bool = False,
) -> SafeString:
    """An answer's markdown as safe HTML, with `[n]` linked to `sources[n-1]`; `cards`: each
    citation carries its source's card (a live answer's growing tail leaves them out: it is
    re-sent at each update, and its blocks bring them once finished); `outline`: the headings
    still open before this text, updated (see _outline_headings); `copy`: for the clipboard,
    citations as numbers."""
    text, cut = _text_of(markdown, MAX_MARKDOWN)
    env = {
        "sources": list(sources),
        "cards": cards,
        "outline": [] if outline is None else outline,
        "copy": copy,
    }
    html = _markdown().render(text, env)
    note = "<p><em>(The answer is too long to show in full.)</em></p>" if cut else ""
    return mark_safe(clean(html) + note)  # noqa: S308 - nh3 output with our allowlist


CHIPS = 4  # sources shown as chips above the answer; the rest behind "+N more"


def render_sources(sources: Sequence[Any], refs: str = "") -> SafeString:
    """The first sources as chips, then every source with its snippet behind "+N more" (or
    "Snippets" when all are chips), each with the id `<refs><n>` a report's chips link to.
    Titles and snippets escaped, only http(s) links."""
    items = [source_info(n, source) for n, source in enumerate(sources, start=1)]
    return render_to_string(
        "search/sources.html",
        {"sources": items, "chips": items[:CHIPS], "more": len(items) - CHIPS, "refs": refs},
    )


# --- Deep Research reports ------------------------------------------------------------------------

REPORT_SHIFT = 3  # below the question (h2) and the report's own title (h3): the first is an h4
MAX_REPORT = 2 * 1024 * 1024


def _slug(text: str, taken: set[str]) -> str:
    base = "-".join(re.findall(r"\w+", text.lower()))[:60].strip("-_") or "section"
    slug, k = f"r-{base}", 2
    while slug in taken:
        slug, k = f"r-{base}-{k}", k + 1
    taken.add(slug)
    return slug


IN_PAGE = re.compile(r'(<a href="#[^"]*"[^>]*?) target="_blank" rel="noopener noreferrer nofollow">')


def render_report(markdown: str, sources: Sequence[Any] = (), refs: str = "") -> tuple[str, list[dict]]:
    """A Deep Research report's HTML (the answers' dialect and sanitizer, headings given stable
    ids and shifted below the question's) and its contents: `[{"level", "text", "id"}]`, level 1
    for the report's top headings. `refs`: its citations are light chips (_ref_chip) linking the
    entry's source list, whose items render_sources gave the ids `<refs><n>`; a link within the
    page opens there, not in a new tab."""
    text, cut = _text_of(markdown, MAX_REPORT)
    note = "<p><em>(The report is too long to show in full.)</em></p>" if cut else ""
    md = _markdown()
    env = {"sources": list(sources), "level": REPORT_SHIFT + 1, "refs": refs}
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
    html = IN_PAGE.sub(r"\1>", clean(md.renderer.render(tokens, md.options, env)))
    return mark_safe(html + note), toc  # noqa: S308 - nh3 output with our allowlist
