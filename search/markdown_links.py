"""Markdown exports hold only http, https and mailto links, and no raw HTML.

An export carries upstream text (answers, reports, titles, sources), which may be written to run
script in whatever Markdown viewer opens the file: `[x](javascript:...)`, a reference definition
`[x]: data:...`, an autolink `<vbscript:...>`, raw HTML `<a href=...>` or `<img onerror=...>`.
pplxweb's own pages never make these links (search/render.py); an export must not either.

safe_links() rewrites the text so that, read as CommonMark, none of those is a link:

1. outside code (fenced and indented blocks, and code spans, which show text as it is), a `]`
   that opens an inline destination (`](`) or a reference definition (`]:`) whose destination,
   read as CommonMark reads it (backslash escapes and character references undone, the tabs and
   line ends a browser drops removed), has a scheme other than http, https and mailto is escaped
   (`\\]`), so the brackets stay text; a `<` that would open an autolink of such a scheme, or any
   raw HTML (a tag, a comment, a declaration), is escaped (`\\<`), as pplxweb's own pages show
   HTML: as text;
2. the result is parsed again with markdown-it (CommonMark, with raw HTML on and every scheme
   accepted, so that nothing is hidden from the check); if it still finds such a link or any raw
   HTML (a case step 1 reads differently from the parser), the whole text goes into a code block,
   where nothing is a link. The check, not step 1, is what the guarantee rests on.
"""

from __future__ import annotations

import bisect
import html
import re
from functools import cache

from markdown_it import MarkdownIt
from markdown_it.token import Token

SAFE_SCHEMES = {"http", "https", "mailto"}
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.\-]{1,31}):[^\s<>]*>")
EMAIL_AUTOLINK = re.compile(
    r"<[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*>"
)
# what CommonMark may read as raw HTML: a tag, a closing tag, a comment, <? ?> or a declaration
HTML_START = re.compile(r"<(?:/?[A-Za-z][A-Za-z0-9-]*(?=[\s/>]|$)|!--|\?|![A-Za-z\[])")
ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
DESTINATION = re.compile(r"[ \t]*(?:\r\n|\n|\r)?[ \t]*(<[^<>\n]*|[^\s]*)")
BACKTICKS = re.compile(r"`+")
SPECIAL = re.compile(r"[\\`\]<]")
BLANK_LINE = re.compile(r"\n[ \t]*(?:\n|$)")
DROPPED = re.compile(r"[\t\n\r]")
LEADING = "".join(map(chr, range(0x21)))  # C0 controls and space, which a browser strips first
# markdown-it's link parsing costs (brackets or angle brackets) x (their block's length): past
# this budget the check is not run and the text goes into a code block (a page of 40,000 "["
# costs 0.8e9 and parses in about 2 s)
CHECK_BUDGET = 200_000_000


def safe_links(text: str) -> str:
    """`text` with no link of another scheme than http, https or mailto, and no raw HTML."""
    fixed = _neutralized(text)
    if _check_cost(fixed) <= CHECK_BUDGET and not _unsafe(fixed):
        return fixed
    return _as_code(text)


def scheme_of(url: str) -> str:
    """The scheme a browser would see in `url` ("" for a relative one)."""
    found = SCHEME.match(DROPPED.sub("", url).lstrip(LEADING))
    return found.group(0)[:-1].lower() if found else ""


def _unsafe_scheme(url: str) -> bool:
    return scheme_of(url) not in SAFE_SCHEMES | {""}


def _destination_scheme_unsafe(raw: str) -> bool:
    return _unsafe_scheme(html.unescape(ESCAPED.sub(r"\1", raw.removeprefix("<"))))


# --- step 1: escape what would open such a link, outside code ---------------------------------


def _neutralized(text: str) -> str:
    return "".join(chunk if is_code else _Scanner(chunk).escaped() for chunk, is_code in _code_blocks(text))


def _code_blocks(text: str):
    """(chunk, whether it is fenced or indented code), in order: runs of whole lines."""
    lines = text.splitlines(keepends=True)
    code = set()
    for token in (
        _parser().parse(text) if "`" in text or "~" in text or "    " in text or "\t" in text else ()
    ):
        if token.type in ("fence", "code_block") and token.map:
            code.update(range(*token.map))
    run: list[str] = []
    for n, line in enumerate(lines):
        if run and (n in code) != (n - 1 in code):
            yield "".join(run), n - 1 in code
            run = []
        run.append(line)
    if run:
        yield "".join(run), len(lines) - 1 in code


class _Scanner:
    """One stretch of text outside code blocks; code spans in it are left as they are."""

    def __init__(self, chunk: str) -> None:
        self.chunk = chunk
        self.runs: dict[int, list[int]] = {}  # backtick run length -> where such runs start
        for found in BACKTICKS.finditer(chunk):
            self.runs.setdefault(len(found.group(0)), []).append(found.start())

    def escaped(self) -> str:
        chunk, out, i = self.chunk, [], 0
        while (found := SPECIAL.search(chunk, i)) is not None:
            j = found.start()
            out.append(chunk[i:j])
            char = chunk[j]
            if char == "\\":
                out.append(chunk[j : j + 2])
                i = j + 2
            elif char == "`":
                i = self.code_span_end(j)
                out.append(chunk[j:i])
            else:
                if self.opens_unsafe(j):
                    out.append("\\")
                out.append(char)
                i = j + 1
        out.append(chunk[i:])
        return "".join(out)

    def code_span_end(self, start: int) -> int:
        """Past the code span opened at `start`, or past its backticks when none closes it."""
        chunk = self.chunk
        run = len(BACKTICKS.match(chunk, start).group(0))
        starts = self.runs.get(run, [])  # runs are whole: one of this length closes it
        blank = BLANK_LINE.search(chunk, start)  # a code span does not cross a paragraph
        close = bisect.bisect_right(starts, start)
        if close < len(starts) and starts[close] < (blank.start() if blank else len(chunk)):
            return starts[close] + run
        return start + run

    def opens_unsafe(self, at: int) -> bool:
        chunk = self.chunk
        if chunk[at] == "]":
            if chunk[at + 1 : at + 2] not in ("(", ":"):
                return False
            found = DESTINATION.match(chunk, at + 2)
            return bool(found) and _destination_scheme_unsafe(found.group(1))
        autolink = AUTOLINK.match(chunk, at)
        if autolink:
            return autolink.group(1).lower() not in SAFE_SCHEMES
        return not EMAIL_AUTOLINK.match(chunk, at) and bool(HTML_START.match(chunk, at))


# --- step 2: the check ------------------------------------------------------------------------


@cache
def _parser() -> MarkdownIt:
    """CommonMark with tables, raw HTML and every scheme allowed: it shows what a viewer could."""
    md = MarkdownIt("commonmark", {"html": True, "linkify": True}).enable(["table", "strikethrough"])
    md.validateLink = lambda url: True
    return md


def _check_cost(text: str) -> int:
    return sum((block.count("[") + block.count("<")) * len(block) for block in re.split(r"\n\s*\n", text))


def _unsafe(text: str) -> bool:
    return any(_unsafe_token(token) for token in _walk(_parser().parse(text)))


def _walk(tokens: list[Token]):
    for token in tokens:
        yield token
        if token.children:
            yield from _walk(token.children)


def _unsafe_token(token: Token) -> bool:
    if token.type in ("html_inline", "html_block"):
        return True
    urls = (token.attrGet(name) for name in ("href", "src"))
    return any(isinstance(url, str) and _unsafe_scheme(url) for url in urls)


def _as_code(text: str) -> str:
    fence = "`" * max([3, *(len(run) + 1 for run in re.findall(r"`+", text))])
    return f"{fence}text\n{text.rstrip()}\n{fence}\n"
